"""Raw-text exports of extract_features.py and run_ner.py: each reproduced, from the raw text, by
one process where bert_tf cannot be imported; only ops TensorFlow Serving registers."""

import json
import os

import numpy as np
import pytest

from bert_tf import checkpoints, testing_text
from bert_tf.config import BertConfig
from bert_tf.features_extraction import ExtractionOptions, extract_features
from bert_tf.modeling import BertEncoder
from bert_tf.serving import ops
from test_serving import run_client

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "a", "dog",
         "ran", "##s", "##ing", ".", ",", "?", "who", "was", "jim", "henson", "puppet", "##eer", "é",
         "中", "文"]
FEATURE_LINES = ["The cat sat on the mat.", "Who was Jim Henson ? ||| Jim Henson was a puppeteer",
                 "", "the dog ran " * 10, "  Café zebra ||| dogs\u3000", "a ||| b ||| c",
                 "中文 ||| ", *testing_text.varied_lines(6, seed=5)]
LAYERS = (-1, 0)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """Each script run on its test input with --export_dir; then one isolated process runs every
    export on the same raw text."""
    directory = tmp_path_factory.mktemp("exports")
    (directory / "vocab.txt").write_text("".join(t + "\n" for t in VOCAB), encoding="utf-8")
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=37, max_position_embeddings=20,
                        type_vocab_size=2)
    encoder = BertEncoder(config)
    rng = np.random.default_rng(0)
    for v in encoder.weights:  # larger than the initialisation, so layers differ visibly
        v.assign(rng.normal(0, 0.3, v.shape).astype(np.float32))
    checkpoints.export_google_checkpoint(encoder, str(directory / "bert_model.ckpt"))
    lines = [" ".join(line.split("\n")) for line in FEATURE_LINES]  # one example per line
    (directory / "input.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    extract_features(ExtractionOptions(
        input_file=str(directory / "input.txt"), output_file=str(directory / "features.jsonl"),
        bert_config_file=str(directory / "bert_config.json"),
        init_checkpoint=str(directory / "bert_model.ckpt"), vocab_file=str(directory / "vocab.txt"),
        max_seq_length=16, layers=LAYERS, batch_size=4, export_dir=str(directory / "features")))
    with open(directory / "features.jsonl", encoding="utf-8") as f:
        features = [json.loads(line) for line in f]
    jobs = [{"export_dir": str(directory / "features"), "signature": "serving_default",
             "inputs": {"text": lines}}]
    outputs = run_client(directory, jobs)
    return {"features": (features, outputs[0]), "dirs": [str(directory / "features")]}


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
