"""Classifier SavedModel export: raw text in (`serving_default`) and ids in (`serve_ids`); only
ops TensorFlow Serving registers; a process without bert_tf reproduces run_classifier's
test_results.tsv from the raw sentences; bad input gives a clear error or a defined output."""

import io
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.model import models
from bert_tf.model.config import BertConfig
from bert_tf.serving import ops, predict
from bert_tf.serving.saved_model import IDS_SIGNATURE_KEY, SIGNATURE_KEY, in_graph_tokenizer
from bert_tf.tasks.classifier import export as serving
from bert_tf.tasks.classifier import processors as classification, features as classifier_features
from bert_tf.tasks.classifier import task as classifier_task
from bert_tf.text import testing_text
from bert_tf.text.tokenizers import FullTokenizer
from bert_tf.training import loop as training
from conftest import TESTDATA
from support.saved_model_graphs import functions_with_op
from support.serving_client import run_client
from support.tiny_models import REPO, write_initial_checkpoint, write_tiny_model, words_of

pytestmark = pytest.mark.heavy  # scheduled first: see conftest.py

DEMO = os.path.join(REPO, "demo", "data", "classification")


def _demo_pairs() -> list[tuple[str, str]]:
    """Pairs of demo sentences, then pairs with awkward multilingual text (one line each)."""
    with open(os.path.join(DEMO, "test.tsv"), encoding="utf-8") as f:
        sentences = [line.rstrip("\n").split("\t")[1] for line in f][1:]
    odd = [" ".join(line.split()) for line in testing_text.varied_lines(24, seed=3)]
    texts = sentences[:40] + odd
    return [(texts[i], texts[-1 - i]) for i in range(len(texts))]


def _write_pair_task(directory, pairs) -> None:
    """An MRPC-format task: the given test pairs."""
    os.makedirs(directory)
    with open(os.path.join(directory, "test.tsv"), "w", encoding="utf-8") as f:
        f.write("index\t#1 ID\t#2 ID\t#1 String\t#2 String\n")
        f.writelines(f"{i}\t{i}\t{i}\t{a}\t{b}\n" for i, (a, b) in enumerate(pairs))


@pytest.fixture(scope="module")
def classifier_run(tmp_path_factory):
    """run_classifier (in process) on a tiny model: test predictions and the export, from the
    classifier as initialised (no training step: the tests check the export against the run's
    own predictions), with weights drawn larger than the usual 0.02 so that its probabilities
    depend on the pieces."""
    directory = tmp_path_factory.mktemp("classifier")
    pairs = _demo_pairs()
    _write_pair_task(str(directory / "data"), pairs)
    # Not every word is in the vocabulary, so [UNK] and pieces appear too.
    words = sorted(words_of(a + " " + b for a, b in pairs))[::2] + ["##s", "##ing", "##ed"]
    vocab_file, config_file = write_tiny_model(directory, words, initializer_range=0.2)
    options = classifier_task.ClassifierOptions(
        task_name="mrpc", data_dir=str(directory / "data"), bert_config_file=config_file,
        vocab_file=vocab_file, max_seq_length=20, do_predict=True,
        export_dir=str(directory / "export"))
    run_config = training.RunConfig(output_dir=str(directory / "run"), predict_batch_size=16)
    init_checkpoint = write_initial_checkpoint(
        classifier_task.prepare(options, run_config).loop_task, directory / "init")
    classifier_task.run_classifier(options, run_config.replace(init_checkpoint=init_checkpoint))
    return {"pairs": pairs, "export": str(directory / "export"), "vocab_file": vocab_file,
            "config_file": config_file,
            "results": np.loadtxt(directory / "run" / "test_results.tsv", delimiter="\t", ndmin=2)}


@pytest.fixture(scope="module")
def long_text_runs(classifier_run, tmp_path_factory):
    """The tiny model's vocabulary and sizes on single texts of 1 to 50 pieces (rows of 20):
    trained one step on windows, then --do_predict and an export with windows (max of the
    logits, overlapping) and, from the same checkpoint, with head+tail truncation."""
    directory = tmp_path_factory.mktemp("long_text")
    sentences = [a for a, _ in classifier_run["pairs"][:40]]
    texts = [" ".join(sentences[i:i + 1 + i % 5]) for i in range(24)] + [""]
    (directory / "data").mkdir()
    for split, rows in (("train", texts[:8]), ("test", texts)):
        (directory / "data" / f"{split}.tsv").write_text(
            "sentence\tlabel\n" + "".join(f"{t}\t{i % 2}\n" for i, t in enumerate(rows)),
            encoding="utf-8")
    # The tiny model's sizes with large initial weights: its outputs then depend on the pieces
    # (with 0.02 every text gets nearly the same probabilities).
    config_file = str(directory / "bert_config.json")
    BertConfig.from_json_file(classifier_run["config_file"]).replace(
        initializer_range=0.5).to_json_file(config_file)
    run_config = training.RunConfig(output_dir=str(directory / "run"), train_batch_size=8,
                                    predict_batch_size=16, learning_rate=1e-4)
    common = dict(task_name="custom", custom_spec={"text_a": "sentence", "label": "label"},
                  data_dir=str(directory / "data"), bert_config_file=config_file,
                  vocab_file=classifier_run["vocab_file"], max_seq_length=20, do_predict=True)
    runs = {}
    for name, options in (("chunks", dict(do_train=True, num_train_epochs=1.0, long_text="chunks",
                                          chunk_stride=7, chunk_pooling="max")),
                          ("head+tail", dict(truncation="head+tail", truncation_head_tokens=5))):
        export_dir = str(directory / f"export_{name}")
        classifier_task.run_classifier(classifier_task.ClassifierOptions(
            **common, **options, export_dir=export_dir), run_config)
        runs[name] = {"export": export_dir, "results": np.loadtxt(
            directory / "run" / "test_results.tsv", delimiter="\t", ndmin=2)}
    return {"texts": texts, **runs}


@pytest.mark.parametrize("name", ["chunks", "head+tail"])
def test_long_text_export_equals_do_predict(long_text_runs, name):
    texts, run = long_text_runs["texts"], long_text_runs[name]
    serve = tf.saved_model.load(run["export"]).signatures[SIGNATURE_KEY]
    got = np.concatenate([serve(text_a=tf.constant(texts[i:i + 7]))["probabilities"].numpy()
                          for i in range(0, len(texts), 7)])
    assert run["results"].shape == (len(texts), 2)
    np.testing.assert_allclose(got, run["results"], atol=1e-5)


def test_long_text_options_rebuild_the_records(long_text_runs):
    # Same checkpoint, other pieces: the test records were rebuilt for head+tail.
    short = [i for i, t in enumerate(long_text_runs["texts"]) if len(t.split()) < 12]
    long = [i for i, t in enumerate(long_text_runs["texts"]) if len(t.split()) > 30]
    assert short and long
    chunks, head_tail = long_text_runs["chunks"]["results"], long_text_runs["head+tail"]["results"]
    np.testing.assert_allclose(chunks[short], head_tail[short], atol=1e-5)
    assert np.abs(chunks[long] - head_tail[long]).max() > 1e-2


def test_fresh_process_reproduces_test_results_from_raw_text(classifier_run, tmp_path):
    pairs = classifier_run["pairs"]
    jobs = [{"export_dir": classifier_run["export"], "signature": SIGNATURE_KEY,
             "inputs": {"text_a": [a for a, _ in pairs[i:i + 16]],
                        "text_b": [b for _, b in pairs[i:i + 16]]}}
            for i in range(0, len(pairs), 16)]
    outputs = run_client(tmp_path, jobs)
    probabilities = np.concatenate([out["probabilities"] for out in outputs])
    np.testing.assert_allclose(probabilities, classifier_run["results"], atol=1e-5)
    labels = [label for out in outputs for label in out["label"]]
    assert labels == [("0", "1")[i] for i in probabilities.argmax(axis=1)]


def test_export_uses_only_ops_tensorflow_serving_registers(classifier_run):
    used = ops.saved_model_ops(classifier_run["export"])
    assert {"WordpieceTokenizeWithOffsets", "NormalizeUTF8", "StringLower"} <= used
    assert ops.unservable_ops(classifier_run["export"]) == []


def test_op_check_names_what_the_stock_server_lacks(tmp_path):
    class Module(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve(self, text):
            import tensorflow_text as tf_text
            return {"tokens": tf_text.FastBertNormalizer().normalize(text),
                    "out": tf_text.utf8_binarize(text)}

    module = Module()
    tf.saved_model.save(module, str(tmp_path / "m"), signatures={"s": module.serve})
    assert "FastBertNormalize" in ops.saved_model_ops(str(tmp_path / "m"))
    assert ops.unservable_ops(str(tmp_path / "m")) == []  # both linked in 2.20.0
    assert "Foo" not in ops.core_ops() and "MatMul" in ops.core_ops()


def test_bfloat16_kernel_check_names_ops_the_cpu_cannot_run(tmp_path):
    class Module(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.bfloat16)])
        def serve(self, x):
            # IdentityN: one kernel for every device (DEFAULT); Lgamma: no bfloat16 CPU kernel.
            return {"same": tf.identity_n([x, x])[0], "lgamma": tf.math.lgamma(x),
                    "sum": tf.reduce_sum(x)}

    module = Module()
    tf.saved_model.save(module, str(tmp_path / "m"), signatures={"s": module.serve})
    assert {"IdentityN", "Lgamma", "Sum"} <= ops.saved_model_ops(str(tmp_path / "m"))
    assert ops.bfloat16_ops_without_cpu_kernel(str(tmp_path / "m")) == ["Lgamma"]


@pytest.fixture(scope="module")
def loaded_export(classifier_run):
    """The classifier export loaded once, by bert-predict's loader (whose cache the predict
    tests below reuse)."""
    return predict.load_signature(classifier_run["export"], SIGNATURE_KEY)[0]


def test_raw_text_equals_ids_in_and_keras(classifier_run, loaded_export):
    pairs = classifier_run["pairs"][:12]
    text_out = loaded_export.signatures[SIGNATURE_KEY](
        text_a=tf.constant([a for a, _ in pairs]), text_b=tf.constant([b for _, b in pairs]))
    examples = [classification.InputExample(str(i), a, b, None) for i, (a, b) in enumerate(pairs)]
    features = classifier_features.convert_examples(
        examples, classification.get_task("mrpc"), 20, FullTokenizer(classifier_run["vocab_file"]))
    ids_out = loaded_export.signatures[IDS_SIGNATURE_KEY](
        **{k: tf.constant(features[k]) for k in ("input_ids", "input_mask", "segment_ids")})
    np.testing.assert_allclose(text_out["probabilities"].numpy(), ids_out["probabilities"].numpy(),
                               atol=1e-6)
    assert [label.decode() for label in loaded_export.labels.numpy()] == ["0", "1"]
    # The export holds the functions of its two signatures only (each one it holds is traced).
    assert [name for name in dir(loaded_export) if name.startswith("serve")] == [
        "serve_ids", "serve_text"]


def test_bad_input_is_named_or_defined(loaded_export):
    serve = loaded_export.signatures[SIGNATURE_KEY]
    with pytest.raises(TypeError, match="text_b"):
        serve(text_a=tf.constant(["a pair model needs both"]))
    with pytest.raises(TypeError, match="text"):
        serve(text=tf.constant(["x"]), text_b=tf.constant(["y"]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="input #0.*expected to be a string"):
        serve(text_a=tf.constant([1]), text_b=tf.constant(["y"]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="as many texts"):
        serve(text_a=tf.constant(["a", "b"]), text_b=tf.constant(["c"]))
    # Empty text is the empty sequence [CLS] [SEP] [SEP]; text longer than max_seq_length is
    # truncated as in training: both give probabilities.
    long_text = " ".join(["the film was lovely"] * 500)
    out = serve(text_a=tf.constant(["", long_text, ""]), text_b=tf.constant(["", "", long_text]))
    probabilities = out["probabilities"].numpy()
    assert probabilities.shape == (3, 2) and np.isfinite(probabilities).all()
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)


def test_single_sentence_regression_signature(tmp_path, tiny_config):
    # The pair task above covers probabilities and labels; this covers the other two branches.
    vocab_file = os.path.join(TESTDATA, "glue", "vocab.txt")
    model = models.classifier_model(tiny_config, 1)
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "stale.txt").write_text("from an earlier export")
    export_dir = serving.export_classifier(model, str(tmp_path / "export"), None, True,
                                           in_graph_tokenizer(vocab_file, None, True), 7, pair=False)
    # The old export is replaced as a whole, and no temporary directory is left behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]
    # Loaded by bert-predict's loader: predict_file below reuses this load.
    loaded = predict.load_signature(export_dir, SIGNATURE_KEY)[0]
    serve = loaded.signatures[SIGNATURE_KEY]
    assert sorted(serve.structured_input_signature[1]) == ["text_a"]
    assert [name for name in dir(loaded) if name.startswith("serve")] == ["serve_ids", "serve_text"]
    # Both call one traced model function: its graph (the attention's products) is stored once.
    assert len(functions_with_op(export_dir, "BatchMatMulV2")) == 1
    sentences = ["She sang.", "she was singing . she sang . she was singing", ""]
    got = serve(text_a=tf.constant(sentences))
    examples = [classification.InputExample(str(i), s, None, None) for i, s in enumerate(sentences)]
    features = classifier_features.convert_examples(
        examples, classification.get_task("sts-b"), 7, FullTokenizer(vocab_file))
    expected = serving.predict_outputs(
        model, {k: features[k] for k in ("input_ids", "input_mask", "segment_ids")}, True).numpy()
    assert sorted(got) == ["predictions"]
    np.testing.assert_allclose(got["predictions"].numpy(), expected, rtol=1e-5, atol=1e-6)
    assert loaded.labels.numpy().tolist() == []
    # bert-predict feeds a single-input signature plain lines (an empty line: an empty text).
    (tmp_path / "lines.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    output = io.StringIO()
    assert predict.predict_file(export_dir, str(tmp_path / "lines.txt"), output, progress=None) == 3
    rows = [json.loads(line) for line in output.getvalue().splitlines()]
    np.testing.assert_allclose([r["predictions"] for r in rows], expected, rtol=1e-5, atol=1e-6)


def test_predict_script_end_to_end(classifier_run, script_runner, tmp_path):
    pairs = classifier_run["pairs"]
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("id\ttext_a\ttext_b\n" + "".join(f"{i}\t{a}\t{b}\n" for i, (a, b) in enumerate(pairs)),
                   encoding="utf-8")
    out = tmp_path / "predictions.jsonl"
    # predict.py as `python predict.py ...` runs it: a process of its own (forked by the tests'
    # script server), its exit status and stderr.
    [done] = script_runner.start([([os.path.join(REPO, "predict.py"),
                                     f"--export_dir={classifier_run['export']}",
                                     f"--input_file={tsv}", f"--output_file={out}",
                                     "--batch_size=7"], REPO)]).wait(timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"{len(pairs)} examples, " in done.stderr  # the progress line
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert sorted(rows[0]) == ["label", "probabilities"]
    np.testing.assert_allclose([r["probabilities"] for r in rows], classifier_run["results"], atol=1e-5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pairs.tsv", "predictions.jsonl"]


def test_predict_bad_input_names_the_line(classifier_run, tmp_path):
    from bert_tf.errors import UserError

    export = classifier_run["export"]
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text('{"text_a": "x", "text_b": "y"}\n\n{"text_a": "only one"}\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    with pytest.raises(UserError, match=r"in.jsonl, line 3: no text_b"):
        predict.predict_to_file(export, str(jsonl), str(out), progress=None)
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]
    lines = tmp_path / "in.txt"
    lines.write_text("one text\n", encoding="utf-8")
    with pytest.raises(UserError, match="takes text_a, text_b; plain lines give one text"):
        predict.predict_to_file(export, str(lines), str(out), progress=None)
    tsv = tmp_path / "in.tsv"
    tsv.write_text("text_a\tsecond\nx\ty\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"in.tsv, line 1: the header names no column text_b"):
        predict.predict_to_file(export, str(tsv), str(out), progress=None)
    with pytest.raises(UserError, match="--signature=serve_ids takes input_ids"):
        predict.predict_to_file(export, str(jsonl), str(out), signature=IDS_SIGNATURE_KEY, progress=None)
    # An empty text is an example like any other (the empty sequence's prediction).
    jsonl.write_text('{"text_a": "", "text_b": ""}\n', encoding="utf-8")
    assert predict.predict_to_file(export, str(jsonl), str(out), progress=None) == 1
    assert len(json.loads(out.read_text())["probabilities"]) == 2
