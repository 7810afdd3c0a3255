"""Small pretraining record files and a tiny bert_config.json for the training tests."""

from __future__ import annotations

import json
import os

import numpy as np
import tensorflow as tf

from bert_tf.records import features

# Sizes that never coincide (see conftest.py); the records use SEQ and PRED.
TINY_CONFIG = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                   intermediate_size=37, max_position_embeddings=64, type_vocab_size=2)
SEQ, PRED = 13, 5


def pretraining_arrays(count: int, seed: int, seq: int = SEQ, pred: int = PRED) -> dict:
    """`count` records with a learnable pattern: each masked id is a function of its position,
    and the next-sentence label is whether the first token is even."""
    rng = np.random.RandomState(seed)
    input_ids = rng.randint(5, 99, (count, seq))
    lengths = rng.randint(seq // 2, seq + 1, count)
    input_mask = (np.arange(seq)[None] < lengths[:, None]).astype(np.int64)
    positions = np.sort(np.stack([rng.choice(np.arange(1, seq // 2), pred, replace=False)
                                  for _ in range(count)]), axis=1)
    weights = (rng.rand(count, pred) < 0.8).astype(np.float32)
    weights[:, 0] = 1.0
    masked_ids = (positions * 7) % 99
    return {
        "input_ids": input_ids * input_mask, "input_mask": input_mask,
        "segment_ids": (np.arange(seq)[None] >= lengths[:, None] // 2) * input_mask,
        "masked_lm_positions": positions * (weights > 0), "masked_lm_ids": masked_ids * (weights > 0),
        "masked_lm_weights": weights,
        "next_sentence_labels": (input_ids[:, :1] % 2).astype(np.int64),
    }


def write_records(path: str | os.PathLike, arrays: dict, seq: int = SEQ, pred: int = PRED) -> str:
    """Writes the rows of `arrays` as pretraining tf.Examples; returns the path."""
    schema = features.pretraining_schema(seq, pred)
    count = len(arrays["input_ids"])
    with tf.io.TFRecordWriter(os.fspath(path)) as writer:
        for i in range(count):
            writer.write(schema.encode({name: values[i] for name, values in arrays.items()}))
    return os.fspath(path)


def write_tiny_config(directory: str | os.PathLike, **changes) -> str:
    path = os.path.join(os.fspath(directory), "bert_config.json")
    with open(path, "w") as f:
        json.dump({**TINY_CONFIG, **changes}, f)
    return path


def write_unmasked_records(path: str | os.PathLike, count: int, seed: int, seq: int = SEQ,
                           ngram: int = 2) -> str:
    """`count` unmasked records (`--dynamic_masking`) over the tiny vocabulary: [CLS]=1, [SEP]=2,
    [MASK]=3, words of 1-2 tokens, whole-word masking of n-grams up to `ngram`."""
    rng = np.random.RandomState(seed)
    lengths = rng.randint(seq // 2, seq + 1, count)
    j = np.arange(seq)[None]
    separator = lengths[:, None] // 2
    text = (j > 0) & (j < lengths[:, None] - 1) & (j != separator)
    kinds = np.where(text, np.where(rng.rand(count, seq) < 0.6, features.TOKEN_WORD_START,
                                    features.TOKEN_WORD_CONTINUATION), features.TOKEN_SPECIAL)
    kinds[:, 1] = features.TOKEN_WORD_START
    kinds[np.arange(count), separator[:, 0] + 1] = features.TOKEN_WORD_START
    kinds = np.where(j < lengths[:, None], kinds, features.TOKEN_PADDING)
    input_ids = np.where(text, rng.randint(5, 99, (count, seq)), 2)
    input_ids[:, 0] = 1
    input_ids = input_ids * (j < lengths[:, None])
    column = np.ones((count, 1), np.int64)
    arrays = {"input_ids": input_ids, "segment_ids": ((j > separator) & (j < lengths[:, None])).astype(np.int64),
              "token_kinds": kinds, "next_sentence_labels": input_ids[:, 1:2] % 2,
              "mask_token_id": column * 3, "vocab_size": column * 99, "do_whole_word_mask": column,
              "ngram": column * ngram, "masked_lm_prob": np.full((count, 1), 0.15, np.float32)}
    schema = features.unmasked_pretraining_schema(seq)
    with tf.io.TFRecordWriter(os.fspath(path)) as writer:
        for i in range(count):
            writer.write(schema.encode({name: values[i] for name, values in arrays.items()}))
    return os.fspath(path)
