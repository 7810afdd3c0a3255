"""Raw-text exports of extract_features.py (both signatures), run_ner.py and, with an ALBERT
model and SentencePiece, run_classifier.py and extract_features.py: each reproduced, from the
raw text, by one process where bert_tf cannot be imported; only ops TensorFlow Serving registers."""

import dataclasses
import io
import json
import os

import numpy as np
import pytest
import sentencepiece
import tensorflow as tf

from bert_tf.model.albert.config import AlbertConfig
from bert_tf.model.config import BertConfig
from bert_tf.serving import ops
from bert_tf.tasks.classifier import task as classifier_task
from bert_tf.tasks.features.export import PAIR_SIGNATURE_KEY
from bert_tf.tasks.features.extraction import ExtractionOptions, extract_features, parse_line
from bert_tf.tasks.ner import data as tagging
from bert_tf.tasks.ner import task as ner_task
from bert_tf.text import testing_text
from bert_tf.training import loop as training
from conftest import TESTDATA
from support.pretraining_records import TINY_CONFIG
from support.saved_model_graphs import functions_with_op
from support.serving_client import run_client
from support.tiny_models import (train_tiny_sentencepiece, write_initial_checkpoint,
                         write_random_encoder, write_tiny_model)

pytestmark = pytest.mark.heavy  # scheduled first: see conftest.py

NER = os.path.join(TESTDATA, "ner")
# The NER and ALBERT classifier runs predict and export from their model as initialised (no
# training step: what they check is the export against the run's own predictions), drawn with
# weights larger than the usual 0.02 so that their outputs depend on the pieces.
INITIALIZER_RANGE = 0.2

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "dog", "ran",
         "##s", "##ing", ".", "?", "who", "was", "jim", "henson", "puppet", "##eer", "é", "中"]
FEATURE_LINES = ["The cat sat on the mat.", "Who was Jim Henson ? ||| Jim Henson was a puppeteer",
                 "", "the dog ran " * 10, "  Café zebra ||| dogs\u3000", "a ||| b ||| c",
                 "中文 ||| ", *testing_text.varied_lines(6, seed=5)]
LAYERS = (-1, 0)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """Each script run on its test input with --export_dir; then one isolated process runs every
    export on the same raw text."""
    directory = tmp_path_factory.mktemp("exports")
    model_dir = directory / "model"
    model_dir.mkdir()
    write_random_encoder(model_dir, VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=37, max_position_embeddings=20, type_vocab_size=2)
    lines = [" ".join(line.split("\n")) for line in FEATURE_LINES]  # one example per line
    (directory / "input.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    model = dict(bert_config_file=str(model_dir / "bert_config.json"),
                 init_checkpoint=str(model_dir / "bert_model.ckpt"),
                 vocab_file=str(model_dir / "vocab.txt"))
    features = _extract(directory, "features", **model)
    # Export only (no --input_file): the bfloat16 model is checked through its export.
    extract_features(ExtractionOptions(
        input_file=None, output_file=None, max_seq_length=16, layers=LAYERS,
        export_dir=str(directory / "features_bf16"), export_dtype="bfloat16", **model))
    # extract_features' own split of each line gives the pair signature's two inputs.
    split = [parse_line(line) for line in lines]
    pair_inputs = {"text_a": [a for a, _ in split], "text_b": [b or "" for _, b in split]}
    jobs = {"features": _job(directory / "features", {"text": lines}),
            "features_pair": _job(directory / "features", pair_inputs, PAIR_SIGNATURE_KEY),
            "features_bf16": _job(directory / "features_bf16", {"text": lines})}
    ner = {fmt: _ner_run(directory / fmt, fmt) for fmt in ("conll", "char")}
    joiner = {"conll": " ", "char": ""}
    jobs.update({fmt: _job(directory / fmt / "export",
                           {"text": [joiner[fmt].join(s.words) for s in sentences]})
                 for fmt, sentences in ner.items()})
    jobs["conll_bf16"] = {**jobs["conll"], "export_dir": str(directory / "conll" / "export_bf16")}
    albert = _albert_sentencepiece_runs(directory / "albert")
    jobs["albert_classifier"] = _job(directory / "albert" / "export", {
        "text_a": [a for a, _ in albert["pairs"]], "text_b": [b for _, b in albert["pairs"]]})
    jobs["albert_classifier_bf16"] = {**jobs["albert_classifier"],
                                      "export_dir": str(directory / "albert" / "export_bf16")}
    jobs["albert_features"] = _job(directory / "albert" / "features", {"text": lines})
    # The same exports on an empty request list (every input []).
    jobs.update({f"{name}_empty": {**job, "inputs": {key: [] for key in job["inputs"]}}
                 for name, job in list(jobs.items())})
    outputs = dict(zip(jobs, run_client(directory, list(jobs.values()))))
    return {"features": (features, outputs["features"]), "features_pair": outputs["features_pair"],
            "ner": {fmt: (ner[fmt], outputs[fmt]) for fmt in ner},
            "albert": albert, "albert_classifier": outputs["albert_classifier"],
            "albert_features": (albert["features"], outputs["albert_features"]),
            "pair_inputs": pair_inputs,
            "bfloat16": {name: outputs[f"{name}_bf16"] for name in
                         ("features", "conll", "albert_classifier")},
            "empty": {name[:-len("_empty")]: outputs[name] for name in jobs
                      if name.endswith("_empty")},
            "dirs": {name: job["export_dir"] for name, job in jobs.items()}}


def _job(export_dir, inputs: dict, signature: str = "serving_default") -> dict:
    return {"export_dir": str(export_dir), "signature": signature, "inputs": inputs}


def _extract(directory, name: str, **model) -> list[dict]:
    """extract_features (in process) on `directory`/input.txt with --export_dir=`directory`/name;
    returns its JSON lines."""
    extract_features(ExtractionOptions(
        input_file=str(directory / "input.txt"), output_file=str(directory / f"{name}.jsonl"),
        max_seq_length=16, layers=LAYERS, batch_size=4, export_dir=str(directory / name), **model))
    with open(directory / f"{name}.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _albert_sentencepiece_runs(directory) -> dict:
    """A tiny ALBERT over a tiny SentencePiece model trained as ALBERT's 30k-clean.model was
    (<pad>, <unk>, user-defined punctuation pieces; lower-cased text): run_classifier (in process)
    predicts the test pairs of a pair task and exports, from the classifier as initialised
    (`write_initial_checkpoint`); then extract_features exports its encoder from that
    checkpoint's directory (the fixture's input lines)."""
    (directory / "data").mkdir(parents=True)
    spm_model = train_tiny_sentencepiece(str(directory / "spm"), 800, 200, pad_piece="<pad>",
                                         unk_piece="<unk>", user_defined_symbols="(,),-,.,£,€")
    config_file = str(directory / "albert_config.json")
    AlbertConfig(**{**TINY_CONFIG, "vocab_size": sentencepiece.SentencePieceProcessor(
        model_file=spm_model).get_piece_size(), "embedding_size": 16, "num_hidden_layers": 3,
        "num_hidden_groups": 1, "initializer_range": INITIALIZER_RANGE}).to_json_file(config_file)
    # Upper case (the model lower-cases), literal [CLS]/[SEP], user-defined and unknown pieces,
    # empty and over-long texts.
    texts = [" ".join(line.split()) for line in testing_text.varied_lines(14, seed=3)]
    texts += ["[CLS] The CAT [SEP] sat", "", "Kalomira TENsul 中 " * 12, "ΟΔΟΣ İstanbul (£5) - x."]
    pairs = [(texts[i], texts[-1 - i]) for i in range(len(texts))]
    with open(directory / "data" / "test.tsv", "w", encoding="utf-8") as f:
        f.write("index\t#1 ID\t#2 ID\t#1 String\t#2 String\n")
        f.writelines(f"{i}\t{i}\t{i}\t{a}\t{b}\n" for i, (a, b) in enumerate(pairs))
    options = classifier_task.ClassifierOptions(
        task_name="mrpc", data_dir=str(directory / "data"), bert_config_file=config_file,
        spm_model_file=spm_model, do_lower_case=True, max_seq_length=20, do_predict=True,
        export_dir=str(directory / "export"))
    run_config = training.RunConfig(output_dir=str(directory / "run"),
                                    predict_batch_size=len(pairs))
    init_checkpoint = write_initial_checkpoint(
        classifier_task.prepare(options, run_config).loop_task, directory / "init")
    run_config = run_config.replace(init_checkpoint=init_checkpoint)
    classifier_task.run_classifier(options, run_config)
    classifier_task.run_classifier(dataclasses.replace(  # the same checkpoint, in bfloat16
        options, do_predict=False, export_dir=str(directory / "export_bf16"),
        export_dtype="bfloat16"), run_config)
    (directory / "input.txt").write_bytes((directory.parent / "input.txt").read_bytes())
    features = _extract(directory, "features", bert_config_file=config_file,
                        init_checkpoint=str(directory / "init"), spm_model_file=spm_model)
    return {"pairs": pairs, "features": features, "results": np.loadtxt(
        directory / "run" / "test_results.tsv", delimiter="\t", ndmin=2)}


def _ner_run(directory, data_format: str) -> list[tagging.Sentence]:
    """run_ner (in process) on the tagging test files: windows of 4 pieces sharing 2, test
    predictions and the export, from the tagger as initialised (`write_initial_checkpoint`).
    Returns the predicted sentences."""
    directory.mkdir()
    if data_format == "char":
        vocab_file, config_file = write_tiny_model(directory, "张三李四王五在去北京上海工作开会",
                                                   initializer_range=INITIALIZER_RANGE)
        files = dict(train_file="char_train.txt", test_file="char_test.txt")
    else:  # pieces (quell ##in) and unknown words ([UNK]) too
        vocab_file = os.path.join(NER, "vocab.txt")
        config_file = str(directory / "bert_config.json")
        BertConfig(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                   intermediate_size=37, max_position_embeddings=64,
                   initializer_range=INITIALIZER_RANGE).to_json_file(config_file)
        files = dict(train_file="conll_multicolumn.txt", test_file="conll_multicolumn.txt")
    options = ner_task.NerOptions(
        data_dir=NER, bert_config_file=config_file, vocab_file=vocab_file, max_seq_length=6,
        do_predict=True, data_format=data_format, window_overlap=2,
        export_dir=str(directory / "export"), **files)
    run_config = training.RunConfig(output_dir=str(directory / "run"), predict_batch_size=4)
    # The labels come from the training file, as a training run's would.
    run_config = run_config.replace(init_checkpoint=write_initial_checkpoint(
        ner_task.prepare(options, run_config).task, directory / "init"))
    ner_task.run_ner(options, run_config)
    if data_format == "conll":  # the same checkpoint, in bfloat16
        ner_task.run_ner(dataclasses.replace(
            options, do_predict=False, export_dir=str(directory / "export_bf16"),
            export_dtype="bfloat16"), run_config)
    return tagging.read_sentences(str(directory / "run" / "test_predictions.txt"), data_format)


def _assert_features_equal(expected: list[dict], got: dict, hidden_size: int) -> None:
    """The export's outputs on extract_features' lines equal its JSON lines (1e-5)."""
    assert len(got["tokens"]) == len(expected)
    for row, line in enumerate(expected):
        tokens = [f["token"] for f in line["features"]]
        n = got["length"][row]
        assert got["tokens"][row][:n] == tokens and set(got["tokens"][row][n:]) <= {""}
        layers = np.array(got["layers"][row])  # [S, L, H]
        for k, layer in enumerate(LAYERS):
            values = np.array([f["layers"][k]["values"] for f in line["features"]])
            assert line["features"][0]["layers"][k]["index"] == layer
            np.testing.assert_allclose(layers[:n, k], values, atol=1e-5)
        last = np.array([f["layers"][0]["values"] for f in line["features"]])  # layer -1
        np.testing.assert_allclose(got["cls"][row], last[0], atol=1e-5)
        np.testing.assert_allclose(got["mean"][row], last.mean(axis=0), atol=1e-5)
        assert np.all(layers[n:] == 0)
    assert np.array(got["pooled"]).shape == (len(expected), hidden_size)


def test_features_export_reproduces_extract_features(exports):
    _assert_features_equal(*exports["features"], hidden_size=32)


def test_pair_signature_equals_the_text_signature(exports):
    expected, by_text = exports["features"]
    by_pair = exports["features_pair"]
    _assert_features_equal(expected, by_pair, hidden_size=32)
    assert by_pair["tokens"] == by_text["tokens"] and by_pair["length"] == by_text["length"]
    for name in ("cls", "pooled", "mean", "layers"):
        np.testing.assert_allclose(by_pair[name], by_text[name], atol=1e-5, err_msg=name)
    # Pairs and single texts (empty text_b) were mixed in the batch.
    text_b = exports["pair_inputs"]["text_b"]
    assert "" in text_b and any(text_b)


def test_bert_predict_runs_the_pair_signature_and_checks_its_sizes(exports, tmp_path):
    from bert_tf.serving import predict

    export_dir = exports["dirs"]["features"]
    inputs = exports["pair_inputs"]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps({"text_a": a, "text_b": b}) + "\n"
                            for a, b in zip(inputs["text_a"], inputs["text_b"])), encoding="utf-8")
    output = io.StringIO()
    assert predict.predict_file(export_dir, str(path), output, signature=PAIR_SIGNATURE_KEY,
                                batch_size=5, progress=None) == len(inputs["text_a"])
    rows = [json.loads(line) for line in output.getvalue().splitlines()]
    expected = exports["features_pair"]
    # Batches of 5 are padded to their own longest row: compare each row's real tokens.
    for row, got in enumerate(rows):
        n = got["length"]
        assert n == expected["length"][row] and got["tokens"][:n] == expected["tokens"][row][:n]
        np.testing.assert_allclose(got["mean"], expected["mean"][row], atol=1e-5)
        np.testing.assert_allclose(np.array(got["layers"])[:n],
                                   np.array(expected["layers"][row])[:n], atol=1e-5)
    # The two inputs must hold as many texts (the model loaded above, cached by bert-predict).
    _, serve_pair, names = predict.load_signature(export_dir, PAIR_SIGNATURE_KEY)
    assert names == ["text_a", "text_b"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="as many texts"):
        serve_pair(text_a=tf.constant(["a", "b"]), text_b=tf.constant(["c"]))


def test_albert_sentencepiece_classifier_export_reproduces_test_results(exports):
    albert, got = exports["albert"], exports["albert_classifier"]
    probabilities = np.array(got["probabilities"])
    np.testing.assert_allclose(probabilities, albert["results"], atol=1e-5)
    assert got["label"] == [("0", "1")[i] for i in probabilities.argmax(axis=1)]
    assert len(albert["pairs"]) == len(albert["results"])


def test_albert_sentencepiece_features_export_reproduces_extract_features(exports):
    expected, got = exports["albert_features"]
    _assert_features_equal(expected, got, hidden_size=32)
    tokens = {token for row in got["tokens"] for token in row}
    assert {"[CLS]", "[SEP]", "<unk>", "\u2581"} <= tokens


def test_every_export_answers_an_empty_request_with_no_rows(exports):
    """[] in every input: each output has no rows (the encoder runs on a batch of none)."""
    assert set(exports["empty"]) == {"features", "features_pair", "conll", "char",
                                     "albert_classifier", "albert_features", "features_bf16",
                                     "conll_bf16", "albert_classifier_bf16"}
    for name, outputs in exports["empty"].items():
        assert outputs and all(value == [] for value in outputs.values()), (name, outputs)


def test_task_exports_use_only_servable_ops(exports):
    # Every function of each SavedModel is walked: the features export's pair signature too.
    for export_dir in set(exports["dirs"].values()):
        assert ops.unservable_ops(export_dir) == []
    for name in ("albert_classifier", "albert_features"):
        assert {"SentencepieceOp", "SentencepieceTokenizeOp"} <= ops.saved_model_ops(
            exports["dirs"][name])


def test_every_export_stores_the_model_and_the_tokenizer_once(exports):
    """One stored function holds the attention's products: the signatures (the features
    export's two, the classifier's raw-text and ids-in) all call it. One holds the tokenizer's
    op, called for every text input (two per signature of the features export, text_a and
    text_b of the pair classifier)."""
    for name, export_dir in exports["dirs"].items():
        assert len(functions_with_op(export_dir, "BatchMatMulV2")) == 1, name
        tokenizer_op = ("SentencepieceTokenizeOp" if name.startswith("albert")
                        else "WordpieceTokenizeWithOffsets")
        assert len(functions_with_op(export_dir, tokenizer_op)) == 1, name


@pytest.mark.parametrize("data_format", ["conll", "char"])
def test_ner_export_reproduces_run_ner_tags(exports, data_format):
    sentences, got = exports["ner"][data_format]
    assert got["num_words"] == [len(s.words) for s in sentences]
    for sentence, words, tags, n in zip(sentences, got["words"], got["tags"], got["num_words"]):
        assert words[:n] == list(sentence.words)
        assert tags[:n] == list(sentence.tags)  # the predicted column run_ner.py wrote
        assert set(tags[n:]) <= {""}
    # Sentences longer than one window (4 pieces) are windowed; the tags are not all alike.
    assert max(len(s.words) for s in sentences) > 4
    assert len({t for s in sentences for t in s.tags}) > 1


def test_bfloat16_exports_reproduce_float32_within_bfloat16s_precision(exports):
    """--export_dtype=bfloat16 (run in the isolated process): the same tokens, tags and labels as
    the float32 run, the numbers within what 8 bits of mantissa keep."""
    bf16 = exports["bfloat16"]
    expected, features = exports["features"]
    got = bf16["features"]
    assert got["tokens"] == features["tokens"] and got["length"] == features["length"]
    for name in ("cls", "pooled", "mean", "layers"):
        want = np.array(features[name])
        error = np.abs(np.array(got[name]) - want)
        assert error.max() <= 0.05 * max(1.0, np.abs(want).max()), name
    _, ner = exports["ner"]["conll"]
    assert bf16["conll"]["words"] == ner["words"] and bf16["conll"]["tags"] == ner["tags"]
    float32 = np.array(exports["albert_classifier"]["probabilities"])
    probabilities = np.array(bf16["albert_classifier"]["probabilities"])
    np.testing.assert_allclose(probabilities, float32, atol=1e-2)
    assert bf16["albert_classifier"]["label"] == exports["albert_classifier"]["label"]


def test_bfloat16_exports_are_bfloat16_and_run_on_a_cpu_model_server(exports, tmp_path):
    from bert_tf.serving import predict

    for name in ("features_bf16", "conll_bf16", "albert_classifier_bf16"):
        export_dir = exports["dirs"][name]
        assert ops.unservable_ops(export_dir) == []
        assert ops.bfloat16_ops_without_cpu_kernel(export_dir) == []
        assert {"BatchMatMulV2", "MatMul"} & ops.saved_model_ops(export_dir)
    (tmp_path / "lines.txt").write_text("the cat sat\n", encoding="utf-8")
    for name, dtype in (("features_bf16", "bfloat16"), ("features", "float32")):
        progress = io.StringIO()
        predict.predict_file(exports["dirs"][name], str(tmp_path / "lines.txt"), io.StringIO(),
                             progress=progress)
        assert progress.getvalue().splitlines()[0] == (
            f"{exports['dirs'][name]}: {dtype} weights and compute")
