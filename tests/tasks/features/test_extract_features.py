"""extract_features: the original's JSON-lines format, its rounding, its trimming, and values equal
to the encoder run one example at a time padded to max_seq_length (as the original did)."""

import collections
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import name_map as checkpoints
from bert_tf.model.config import BertConfig
from bert_tf.model.encoder import BertEncoder
from bert_tf.tasks.features.extraction import (Example, ExtractionOptions, extract_features,
                                               json_line, pack)
from bert_tf.text.tokenizers import FullTokenizer
from conftest import REPO
from tiny_models import write_random_encoder

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
    subprocess.run([sys.executable, os.path.join(REPO, "extract_features.py"),
                    f"--input_file={options.input_file}", f"--output_file={script_output}",
                    f"--vocab_file={options.vocab_file}",
                    f"--bert_config_file={options.bert_config_file}",
                    f"--init_checkpoint={model_dir}", f"--max_seq_length={MAX_SEQ_LENGTH}",
                    "--batch_size=2", "--use_tpu=false", "--use_one_hot_embeddings"],
                   check=True, capture_output=True)
    got = script_output.read_text()
    assert got.count("\n") == len(LINES)
    for a, b in zip(got.splitlines(), expected.splitlines()):  # another batching: same up to rounding
        np.testing.assert_allclose(_values(a), _values(b), atol=2e-6, rtol=0)


def _values(line):
    return [v for f in json.loads(line)["features"] for layer in f["layers"] for v in layer["values"]]
