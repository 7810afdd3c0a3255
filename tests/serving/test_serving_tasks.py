"""Raw-text exports of extract_features.py and run_ner.py: each reproduced, from the raw text, by
one process where bert_tf cannot be imported; only ops TensorFlow Serving registers."""

import json
import os

import numpy as np
import pytest

from bert_tf.model.config import BertConfig
from bert_tf.serving import ops
from bert_tf.tasks.features.extraction import ExtractionOptions, extract_features
from bert_tf.tasks.ner import data as tagging
from bert_tf.tasks.ner import task as ner_task
from bert_tf.text import testing_text
from bert_tf.training import loop as training
from conftest import TESTDATA
from serving_client import run_client
from tiny_models import write_random_encoder, write_tiny_model

NER = os.path.join(TESTDATA, "ner")

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
    extract_features(ExtractionOptions(
        input_file=str(directory / "input.txt"), output_file=str(directory / "features.jsonl"),
        bert_config_file=str(model_dir / "bert_config.json"),
        init_checkpoint=str(model_dir / "bert_model.ckpt"), vocab_file=str(model_dir / "vocab.txt"),
        max_seq_length=16, layers=LAYERS, batch_size=4, export_dir=str(directory / "features")))
    with open(directory / "features.jsonl", encoding="utf-8") as f:
        features = [json.loads(line) for line in f]
    jobs = [{"export_dir": str(directory / "features"), "signature": "serving_default",
             "inputs": {"text": lines}}]
    ner = {fmt: _ner_run(directory / fmt, fmt) for fmt in ("conll", "char")}
    joiner = {"conll": " ", "char": ""}
    jobs += [{"export_dir": str(directory / fmt / "export"), "signature": "serving_default",
              "inputs": {"text": [joiner[fmt].join(s.words) for s in sentences]}}
             for fmt, sentences in ner.items()]
    outputs = run_client(directory, jobs)
    return {"features": (features, outputs[0]),
            "ner": {fmt: (ner[fmt], out) for fmt, out in zip(ner, outputs[1:])},
            "dirs": [str(directory / "features"), *(str(directory / fmt / "export") for fmt in ner)]}


def _ner_run(directory, data_format: str) -> list[tagging.Sentence]:
    """run_ner (in process) on the tagging test files: windows of 4 pieces sharing 2, a few
    training steps, test predictions and the export. Returns the predicted sentences."""
    directory.mkdir()
    if data_format == "char":
        vocab_file, config_file = write_tiny_model(directory, "张三李四王五在去北京上海工作开会")
        files = dict(train_file="char_train.txt", test_file="char_test.txt")
    else:  # pieces (quell ##in) and unknown words ([UNK]) too
        vocab_file = os.path.join(NER, "vocab.txt")
        config_file = str(directory / "bert_config.json")
        BertConfig(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                   intermediate_size=37, max_position_embeddings=64).to_json_file(config_file)
        files = dict(train_file="conll_multicolumn.txt", test_file="conll_multicolumn.txt")
    options = ner_task.NerOptions(
        data_dir=NER, bert_config_file=config_file, vocab_file=vocab_file, max_seq_length=6,
        do_train=True, do_predict=True, num_train_epochs=2.0, data_format=data_format,
        window_overlap=2, export_dir=str(directory / "export"), **files)
    run_config = training.RunConfig(output_dir=str(directory / "run"), train_batch_size=2,
                                    predict_batch_size=4, learning_rate=1e-2)
    ner_task.run_ner(options, run_config)
    return tagging.read_sentences(str(directory / "run" / "test_predictions.txt"), data_format)


def test_features_export_reproduces_extract_features(exports):
    expected, got = exports["features"]
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
    assert np.array(got["pooled"]).shape == (len(expected), 32)


def test_task_exports_use_only_servable_ops(exports):
    for export_dir in exports["dirs"]:
        assert ops.unservable_ops(export_dir) == []


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
