"""Long single texts in the classifier: the pieces --truncation keeps (exact ids), the windows of
--long_text=chunks, the pooling of their logits against a numpy reduction, the ops of the
export against the Python of the records, the cache key and the flag errors."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.errors import UserError
from bert_tf.serving import long_text as long_text_ops, packing
from bert_tf.tasks.classifier import features as classifier_features
from bert_tf.tasks.classifier import processors as classification
from bert_tf.tasks.classifier import task as classifier_task
from bert_tf.text.long_text import LongText, num_windows, truncate, window_spans
from bert_tf.text.tokenizers import FullTokenizer
from support.tiny_models import write_tiny_model

WORDS = [f"w{i:03d}" for i in range(100)]
FIRST_WORD_ID = 5  # after [PAD] [UNK] [CLS] [SEP] [MASK]
CLS, SEP = 2, 3


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    vocab_file, _ = write_tiny_model(tmp_path_factory.mktemp("vocab"), WORDS)
    return FullTokenizer(vocab_file)


def _text(first: int, count: int) -> str:
    return " ".join(WORDS[first:first + count])


def _ids(first: int, count: int) -> list[int]:
    return list(range(FIRST_WORD_ID + first, FIRST_WORD_ID + first + count))


def _single_task():
    return classification.custom_task({"text_a": 0, "label": 1, "labels": ["a", "b"]})


def _convert(texts, tokenizer, max_seq_length, long_text, labels=None):
    examples = [classification.InputExample(str(i), text, None, (labels or ["a"] * len(texts))[i])
                for i, text in enumerate(texts)]
    return classifier_features.convert_examples(examples, _single_task(), max_seq_length,
                                                tokenizer, long_text)


def _row(features, i):
    return features["input_ids"][i][features["input_mask"][i] > 0].tolist()


@pytest.mark.parametrize("truncation, head, expected", [
    ("head", 0, _ids(0, 10)),
    ("tail", 0, _ids(40, 10)),
    ("head+tail", 3, _ids(0, 3) + _ids(43, 7)),
    ("head+tail", 0, _ids(40, 10)),
    ("head+tail", 10, _ids(0, 10)),
])
def test_truncation_keeps_the_head_and_tail_pieces(tokenizer, truncation, head, expected):
    long_text = LongText(truncation=truncation, head_tokens=head)
    features = _convert([_text(0, 50), _text(60, 7)], tokenizer, 12, long_text)
    assert _row(features, 0) == [CLS, *expected, SEP]
    assert _row(features, 1) == [CLS, *_ids(60, 7), SEP]  # a text that fits is whole
    assert features["segment_ids"].sum() == 0 and "text_index" not in features


def test_sun_et_al_head_and_tail_at_512():
    pieces = list(range(2000))
    kept = truncate(pieces, 510, LongText(truncation="head+tail"))
    assert kept == pieces[:128] + pieces[-382:]


def test_chunks_label_every_window(tokenizer):
    features = _convert([_text(0, 25), _text(50, 4), ""], tokenizer, 12,
                        LongText(mode="chunks", stride=7), labels=["b", "a", "b"])
    # Windows of 10 pieces at starts 0, 7, 14, 21 (the last ends with the text); the short
    # text and the empty one are one window each.
    assert [_row(features, i) for i in range(len(features["input_ids"]))] == [
        [CLS, *_ids(0, 10), SEP], [CLS, *_ids(7, 10), SEP], [CLS, *_ids(14, 10), SEP],
        [CLS, *_ids(21, 4), SEP], [CLS, *_ids(50, 4), SEP], [CLS, SEP]]
    assert features["text_index"].tolist() == [0, 0, 0, 0, 1, 2]
    assert features["label_ids"].tolist() == [1, 1, 1, 1, 0, 1]
    assert window_spans(25, 10, 10) == [(0, 10), (10, 20), (20, 25)]


def test_pairs_keep_longest_first(tokenizer):
    examples = [classification.InputExample("0", _text(0, 30), _text(50, 4), "0")]
    features = classifier_features.convert_examples(
        examples, classification.get_task("mrpc"), 12, tokenizer)
    assert _row(features, 0) == [CLS, *_ids(0, 5), SEP, *_ids(50, 4), SEP]


def test_ops_keep_the_pieces_of_the_records():
    rng = np.random.default_rng(0)
    lengths = [0, 1, 9, 10, 11, 17, 23, 40, 41]
    rows = [rng.integers(5, 100, n).tolist() for n in lengths]
    ragged = tf.ragged.constant(rows, dtype=tf.int64, row_splits_dtype=tf.int64)
    for long_text in (LongText(), LongText(truncation="tail"),
                      LongText(truncation="head+tail", head_tokens=4)):
        got = long_text_ops.truncate(ragged, 10, long_text).to_list()
        assert got == [truncate(row, 10, long_text) for row in rows]
        packed = packing.pack(long_text_ops.truncate(ragged, 10, long_text), None, CLS, SEP, 12)
        assert packed["input_ids"].shape[1] == 12
    for stride in (1, 3, 10):
        windows, text_of_window = long_text_ops.split_windows(ragged, 10, stride)
        expected = [(i, row[start:end]) for i, row in enumerate(rows)
                    for start, end in window_spans(len(row), 10, stride)]
        assert windows.to_list() == [w for _, w in expected]
        assert text_of_window.numpy().tolist() == [i for i, _ in expected]
        assert len(expected) == sum(num_windows(n, 10, stride) for n in lengths)


@pytest.mark.parametrize("pooling", ["mean", "max"])
def test_pooling_equals_a_numpy_reduction_of_the_windows(pooling):
    rng = np.random.default_rng(1)
    counts = [1, 4, 2, 7, 1]
    text_index = np.repeat(np.arange(len(counts)), counts)
    logits = rng.normal(size=(len(text_index), 3)).astype(np.float32)
    rows = [{"logits": logit, "text_index": np.int32(t), "label_ids": np.int32(t % 3),
             "is_real_example": np.int32(1)} for logit, t in zip(logits, text_index)]
    rows.append({"logits": np.full(3, 50.0, np.float32), "text_index": np.int32(0),
                 "label_ids": np.int32(0), "is_real_example": np.int32(0)})  # batch padding
    task = classification.custom_task({"text_a": 0, "label": 1, "labels": ["x", "y", "z"]})
    reduce = {"mean": np.mean, "max": np.max}[pooling]
    expected = np.stack([reduce(logits[text_index == t], axis=0) for t in range(len(counts))])
    softmax = np.exp(expected) / np.exp(expected).sum(axis=1, keepdims=True)
    got = classifier_task.pool_windows(rows, len(counts), pooling, task)
    np.testing.assert_allclose([r["probabilities"] for r in got], softmax, rtol=1e-6)
    assert [int(r["label_ids"]) for r in got] == [t % 3 for t in range(len(counts))]
    in_graph = long_text_ops.pool(tf.constant(logits), tf.constant(text_index), len(counts), pooling)
    np.testing.assert_allclose(in_graph.numpy(), expected, rtol=1e-6)
    regression = classification.custom_task({"text_a": 0, "label": 1, "regression": True})
    got = classifier_task.pool_windows(rows, len(counts), pooling, regression)
    np.testing.assert_allclose([r["predictions"] for r in got], expected[:, 0], rtol=1e-6)
    with pytest.raises(UserError, match="windows come from 5 texts, not 6"):
        classifier_task.pool_windows(rows, 6, pooling, task)


def test_cache_key_follows_the_options(tmp_path, tokenizer):
    (tmp_path / "train.tsv").write_text("text\tlabel\nw001\ta\n", encoding="utf-8")
    task = _single_task()

    def key(long_text):
        return classifier_features.fingerprint(task, "train", str(tmp_path), 12, [], True,
                                               long_text=long_text)

    keys = [key(LongText()), key(LongText(truncation="tail")),
            key(LongText(truncation="head+tail", head_tokens=3)),
            key(LongText(truncation="head+tail", head_tokens=4)),
            key(LongText(mode="chunks")), key(LongText(mode="chunks", stride=5))]
    assert len(set(keys)) == len(keys)
    # The default keeps the key of earlier runs; the pooling is applied to logits, not records.
    assert keys[0] == classifier_features.fingerprint(task, "train", str(tmp_path), 12, [], True)
    assert key(LongText(mode="chunks", pooling="max")) == keys[4]


@pytest.mark.parametrize("long_text, pair, message", [
    (LongText(truncation="tail"), True, "sentence pairs, which are cut longest first"),
    (LongText(mode="chunks"), True, "sentence pairs"),
    (LongText(truncation="head+tail", head_tokens=11), False, "--truncation_head_tokens=11: must be in 0..10"),
    (LongText(mode="chunks", stride=11), False, "--chunk_stride=11: must be in 1..10"),
    (LongText(mode="chunks", stride=0), False, "--chunk_stride=0"),
    (LongText(mode="chunks", truncation="tail"), False, "drop --truncation=tail"),
])
def test_options_that_cannot_apply_are_named(long_text, pair, message):
    with pytest.raises(UserError, match=message):
        long_text.check(12, pair)
    LongText().check(12, pair)


def test_eval_accuracy_is_per_text_with_windows():
    # Text 0: two windows, one right and one wrong, the right one more confident (mean picks
    # it); text 1: one wrong window. Per window 1/3 right, per text 1/2.
    logits = [[3.0, 0.0], [0.0, 1.0], [2.0, 0.0]]
    rows = [{"logits": np.float32(l), "text_index": np.int32(t), "label_ids": np.int32(lab),
             "is_real_example": np.int32(1)} for l, t, lab in zip(logits, (0, 0, 1), (0, 0, 1))]
    task = _single_task()
    texts = classifier_task.pool_windows(rows, 2, "mean", task)
    loop_results = {"classifier_loss": 0.7, "loss": 0.8, "global_step": 5.0, "accuracy": 1 / 3}
    results = classifier_task.eval_metrics(task, loop_results, texts, None, True)
    assert results["eval_accuracy"] == 0.5 and results["eval_loss"] == 0.7
    assert classifier_task.eval_metrics(task, loop_results, texts)["eval_accuracy"] == 1 / 3
