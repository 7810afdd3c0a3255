"""OpenVINO exports (--export_runtime=openvino): a tiny classifier trained on the demo task and
exported in int8 answers as its float32 TensorFlow export does, with FullTokenizer's tokens;
bert-predict and a process without bert_tf run it and name what they ran; a missing extra and a
loss past the threshold are one line each."""

import io
import json
import os
import re
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.errors import UserError
from bert_tf.serving import openvino, predict
from bert_tf.tasks.classifier import task as classifier_task
from bert_tf.tasks.features.export import PAIR_SIGNATURE_KEY, vector_agreement
from bert_tf.tasks.features.extraction import ExtractionOptions, extract_features
from bert_tf.text import testing_text
from bert_tf.text.tokenizers import FullTokenizer
from bert_tf.training import loop as training
from conftest import require_extra
from support.serving_client import run_client
from support.tiny_models import REPO, words_of_files, write_tiny_model

pytestmark = pytest.mark.heavy  # scheduled first: see conftest.py

DEMO = os.path.join(REPO, "demo", "data", "classification")
MAX_SEQ_LENGTH = 16
FFN_OUTPUT = r".*/output_dense[^/]*/MatMul"  # the feed-forward output products


def _sentences(split: str) -> list[str]:
    with open(os.path.join(DEMO, f"{split}.tsv"), encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t")[-1 if split == "test" else 0] for line in f][1:]


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """The demo task (SST-2 layout) learnt by a one-layer tiny model (eval accuracy 1.0, as in
    test_run_classifier), exported by TensorFlow in float32 and by OpenVINO in int8 (calibrated
    on 100 training sentences)."""
    require_extra("openvino", "openvino")
    directory = tmp_path_factory.mktemp("openvino")
    vocab_file, config_file = write_tiny_model(directory, words_of_files(
        os.path.join(DEMO, name) for name in ("train.tsv", "dev.tsv", "test.tsv")),
        num_hidden_layers=1)
    common = dict(task_name="SST-2", data_dir=DEMO, bert_config_file=config_file,
                  vocab_file=vocab_file, max_seq_length=MAX_SEQ_LENGTH)
    run_config = training.RunConfig(output_dir=str(directory / "run"), train_batch_size=16,
                                    learning_rate=5e-4)
    classifier_task.run_classifier(classifier_task.ClassifierOptions(
        **common, do_train=True, num_train_epochs=3.0, export_dir=str(directory / "float32")),
        run_config)
    classifier_task.run_classifier(classifier_task.ClassifierOptions(
        **common, export_dir=str(directory / "int8"), export_runtime="openvino",
        export_dtype="int8", int8_calibration_examples=100, int8_float_nodes=(FFN_OUTPUT,)),
        run_config)
    return {"float32": str(directory / "float32"), "int8": str(directory / "int8"),
            "vocab_file": vocab_file, "config_file": config_file,
            "run_dir": run_config.output_dir}


def _predict(export_dir: str, texts: list[str], tmp_path) -> tuple[list[dict], list[str]]:
    """bert-predict's JSON lines for `texts` and its stderr's first two lines."""
    path = tmp_path / f"{os.path.basename(export_dir)}.txt"
    path.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    out, progress = io.StringIO(), io.StringIO()
    predict.predict_file(export_dir, str(path), out, batch_size=32, progress=progress)
    return [json.loads(line) for line in out.getvalue().splitlines()], \
        progress.getvalue().splitlines()[:2]


def test_int8_export_is_quantized_and_reports_dev_figures(exports):
    with open(os.path.join(exports["int8"], "model.xml"), encoding="utf-8") as f:
        assert f.read().count('type="FakeQuantize"') >= 6  # the products' inputs, int8
    with open(os.path.join(exports["int8"], openvino.MANIFEST), encoding="utf-8") as f:
        manifest = json.load(f)
    assert manifest["precision"] == "int8" and manifest["inference_precision"] == "f32"
    # What a process without bert_tf compiles the model with (threads not pinned to cores).
    assert manifest["compile_properties"] == {"INFERENCE_PRECISION_HINT": "f32",
                                              "ENABLE_CPU_PINNING": False}
    assert manifest["dev"]["metric"] == "accuracy" and manifest["dev"]["examples"] == 200
    assert manifest["dev"]["float32"] == 1.0 and manifest["dev"]["int8"] == 1.0
    assert manifest["dev"]["answers_unchanged"] == 1.0


def _int8_products(model_xml: str) -> dict[str, bool]:
    """{MatMul node name: whether an input comes through a FakeQuantize (an int8 product)}."""
    ov_model = openvino.require_openvino().Core().read_model(model_xml)
    return {op.get_friendly_name(): any(
        port.get_source_output().get_node().get_type_name() == "FakeQuantize"
        for port in op.inputs()) for op in ov_model.get_ordered_ops()
        if op.get_type_name() == "MatMul"}


def test_int8_float_nodes_keep_their_products_float32(exports):
    products = _int8_products(os.path.join(exports["int8"], "model.xml"))
    ffn_output = [name for name in products if re.match(FFN_OUTPUT, name)]
    assert len(ffn_output) == 1 and not products[ffn_output[0]]  # the one layer's
    assert sum(products.values()) == len(products) - 1 >= 6  # every other product in int8


def test_int8_float_nodes_that_name_nothing_are_one_line():
    ov = openvino.require_openvino()
    x = ov.opset13.parameter([1, 4], np.float32, name="x")
    product = ov.opset13.matmul(x, ov.opset13.constant(np.ones((4, 2), np.float32)), False,
                                False, name="layer_0/output_dense/MatMul")
    ov_model = ov.Model([product], [x])
    with pytest.raises(UserError, match=r"^--int8_float_nodes: 'pooler/\.\*' matches no node of "
                                        r"the model \(its products are named as "
                                        r"'layer_0/output_dense/MatMul'\)$"):
        openvino.quantize(ov_model, [{"x": np.ones((1, 4), np.float32)}],
                          openvino.quantization(["pooler/.*"]))
    with pytest.raises(UserError, match=r"^--int8_float_nodes: 'layer_\(0' is not a regular "
                                        r"expression \(missing \), unterminated subpattern"):
        openvino.check_export("int8", "openvino", True, float_nodes=["layer_(0"])


def test_models_compile_with_threads_not_pinned_to_cores():
    ov = openvino.require_openvino()
    x = ov.opset13.parameter([-1, 4], np.float32, name="x")
    ov_model = ov.Model([ov.opset13.relu(x)], [x])
    compiled = openvino.compile_model(ov_model, "bfloat16")
    assert compiled.get_property("ENABLE_CPU_PINNING") is False
    assert openvino.compile_model(ov_model, "int8", {"ENABLE_CPU_PINNING": True}).get_property(
        "ENABLE_CPU_PINNING") is True  # an export's manifest's properties, as written


def test_int8_answers_as_float32_on_the_test_sentences(exports, tmp_path):
    texts = _sentences("test")
    float32, _ = _predict(exports["float32"], texts, tmp_path)
    int8, _ = _predict(exports["int8"], texts, tmp_path)
    assert len(int8) == len(texts) == 200
    # The agreement the int8 export promises: at least 99% of the labels unchanged (here all),
    # probabilities within 0.05.
    same = np.mean([a["label"] == b["label"] for a, b in zip(float32, int8)])
    assert same >= 0.99, same
    np.testing.assert_allclose([r["probabilities"] for r in int8],
                               [r["probabilities"] for r in float32], atol=0.05)


def test_int8_export_tokens_are_full_tokenizers(exports):
    tokenizer = FullTokenizer(exports["vocab_file"], do_lower_case=True)
    texts = _sentences("dev") + [" ".join(line.split()[:40]) for line in
                                 testing_text.varied_lines(300, seed=5)]
    prepare = tf.saved_model.load(exports["int8"]).signatures["prepare_serving_default"]
    prepared = prepare(text_a=tf.constant(texts))
    cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    for row, text in enumerate(texts):
        ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))[:MAX_SEQ_LENGTH - 2]
        expected = [cls_id, *ids, sep_id]
        length = int(prepared["input_mask"][row].numpy().sum())
        assert prepared["input_ids"][row, :length].numpy().tolist() == expected, text


def test_predict_names_runtime_and_precision(exports, tmp_path):
    _, lines = _predict(exports["int8"], ["a fine film"], tmp_path)
    version = openvino.require_openvino().get_version().split("-")[0]
    runs_on = f"runs on OpenVINO {version} (CPU, inference precision f32)"
    assert lines == [f"{exports['int8']}: int8 weights and compute", f"{exports['int8']}: {runs_on}"]
    _, lines = _predict(exports["float32"], ["a fine film"], tmp_path)
    assert lines == [f"{exports['float32']}: float32 weights and compute",
                     f"{exports['float32']}: runs on TensorFlow {tf.__version__}"]


def test_fresh_process_reproduces_bert_predict(exports, tmp_path):
    texts = _sentences("test")[:40]
    expected, _ = _predict(exports["int8"], texts, tmp_path)
    (out,) = run_client(tmp_path, [{"export_dir": exports["int8"], "signature": "serving_default",
                                    "inputs": {"text_a": texts}}])
    assert out["label"] == [r["label"] for r in expected]
    np.testing.assert_allclose(out["probabilities"], [r["probabilities"] for r in expected],
                               atol=1e-6)


def test_missing_extra_is_one_line_naming_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "openvino", None)  # import openvino raises ImportError
    with pytest.raises(UserError, match=r"^the OpenVINO export needs the openvino extra: pip "
                                        r"install 'bert_tf\[openvino\]'"):
        openvino.require_openvino()


def test_int8_on_tensorflow_is_refused_with_the_flag_to_add():
    with pytest.raises(UserError, match=r"^--export_dtype=int8 runs on OpenVINO: add "
                                        r"--export_runtime=openvino"):
        classifier_task.run_classifier(classifier_task.ClassifierOptions(
            task_name="SST-2", data_dir=DEMO, export_dir="unused", export_dtype="int8"),
            training.RunConfig(output_dir="unused"))


def test_loss_past_the_threshold_is_refused_with_the_figures():
    assert openvino.check_loss("accuracy", "int8", 0.8, 0.796, 0.99, 0.01) == (
        "dev accuracy float32 0.8000, int8 0.7960 (-0.50% relative), 99.0% of answers unchanged")
    with pytest.raises(UserError) as refused:
        openvino.check_loss("accuracy", "int8", 0.8, 0.78, 0.97, 0.01)
    assert str(refused.value) == (
        "the int8 export loses more than --export_max_relative_loss=0.01: dev accuracy float32 "
        "0.8000, int8 0.7800 (-2.50% relative), 97.0% of answers unchanged; not written (raise "
        "the flag, or give more --int8_calibration_examples)")
    assert "\n" not in str(refused.value)


def test_int8_features_export_keeps_the_vectors(exports, tmp_path):
    """extract_features' export of the trained encoder: int8 calibrated on 64 lines of the input
    file, compared with float32 on 128 others; both signatures give float32's tokens and
    vectors within the cosine reported; past a known threshold an export is refused."""
    lines = _sentences("dev") + ["a fine film ||| a dull one"] * 10
    (tmp_path / "lines.txt").write_text("".join(t + "\n" for t in lines), encoding="utf-8")
    common = dict(input_file=str(tmp_path / "lines.txt"), output_file=None, layers=(-1, 0),
                  bert_config_file=exports["config_file"], init_checkpoint=exports["run_dir"],
                  vocab_file=exports["vocab_file"], max_seq_length=MAX_SEQ_LENGTH)
    int8_dir, float32_dir = str(tmp_path / "int8"), str(tmp_path / "float32")
    extract_features(ExtractionOptions(**common, export_dir=int8_dir, export_runtime="openvino",
                                       export_dtype="int8", int8_calibration_examples=64))
    extract_features(ExtractionOptions(**common, export_dir=float32_dir))
    with open(os.path.join(int8_dir, openvino.MANIFEST), encoding="utf-8") as f:
        dev = json.load(f)["dev"]
    assert (dev["metric"], dev["examples"], dev["answers_unchanged"]) == ("cosine", 128, 1.0)
    assert dev["float32"] == pytest.approx(1.0, abs=1e-12) and 0.99 <= dev["int8"] < 1.0
    inputs = {"serving_default": {"text": lines[-12:]},
              PAIR_SIGNATURE_KEY: {"text_a": ["the film", "a fine film"],
                                   "text_b": ["", "a dull one"]}}
    for key, texts in inputs.items():
        want = predict.load_signature(float32_dir, key)[1](**texts)
        got = predict.load_signature(int8_dir, key)[1](**texts)
        assert got["tokens"].tolist() == want["tokens"].numpy().tolist()
        assert got["length"].tolist() == want["length"].numpy().tolist()
        agreement = vector_agreement(got, {k: np.asarray(v) for k, v in want.items()})
        assert dev["int8"] - 0.01 <= agreement < 1.0, key
    # OpenVINO's float32 loses next to nothing; refused when nothing may be lost.
    with pytest.raises(UserError, match=r"^the float32 export loses more than "
                                        r"--export_max_relative_loss=-1e-09: dev cosine float32 "
                                        r"1\.0000, float32 1\.0000 \([+-]0\.00% relative\)"):
        extract_features(ExtractionOptions(
            **common, export_dir=str(tmp_path / "refused"), export_runtime="openvino",
            export_max_relative_loss=-1e-9))
    assert not os.path.exists(tmp_path / "refused")


@pytest.fixture(scope="module")
def tagger_exports(tmp_path_factory):
    """A one-layer tiny tagger trained one epoch on the demo NER set, exported by TensorFlow and
    by OpenVINO in int8 (windows of 12 pieces: long sentences span several)."""
    require_extra("openvino", "openvino")
    from bert_tf.tasks.ner import task as ner_task

    directory = tmp_path_factory.mktemp("openvino_ner")
    demo = os.path.join(REPO, "demo", "data", "ner")
    vocab_file, config_file = write_tiny_model(directory, words_of_files(
        os.path.join(demo, name) for name in ("train.txt", "dev.txt", "test.txt")),
        num_hidden_layers=1)
    common = dict(data_dir=demo, bert_config_file=config_file, vocab_file=vocab_file,
                  max_seq_length=12, window_overlap=4)
    run_config = training.RunConfig(output_dir=str(directory / "run"), train_batch_size=16,
                                    learning_rate=5e-3)
    ner_task.run_ner(ner_task.NerOptions(**common, do_train=True, num_train_epochs=1.0,
                                         export_dir=str(directory / "float32")), run_config)
    ner_task.run_ner(ner_task.NerOptions(
        **common, export_dir=str(directory / "int8"), export_runtime="openvino",
        export_dtype="int8", int8_calibration_examples=50), run_config)
    with open(os.path.join(demo, "test.txt"), encoding="utf-8") as f:
        sentences = [" ".join(line.split()[0] for line in block.splitlines())
                     for block in f.read().split("\n\n") if block.strip()]
    return {"float32": str(directory / "float32"), "int8": str(directory / "int8"),
            "sentences": sentences}


def test_int8_tagger_tags_as_float32(tagger_exports, tmp_path):
    sentences = tagger_exports["sentences"]
    float32, _ = _predict(tagger_exports["float32"], sentences, tmp_path)
    int8, lines = _predict(tagger_exports["int8"], sentences, tmp_path)
    assert lines[0] == f"{tagger_exports['int8']}: int8 weights and compute"
    assert [r["words"] for r in int8] == [r["words"] for r in float32]
    assert max(r["num_words"] for r in int8) > 12  # sentences of several windows
    tags = [(a, b) for x, y in zip(float32, int8) for a, b in zip(x["tags"], y["tags"])]
    assert len(tags) > 1000
    assert np.mean([a == b for a, b in tags]) >= 0.99
    with open(os.path.join(tagger_exports["int8"], openvino.MANIFEST), encoding="utf-8") as f:
        dev = json.load(f)["dev"]
    assert dev["metric"] == "f1" and dev["examples"] == 120 and dev["float32"] > 0.5
    assert dev["answers_unchanged"] >= 0.95  # whole sentences
