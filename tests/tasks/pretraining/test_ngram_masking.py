"""ALBERT n-gram masking, static (numpy) and dynamic (tf.data): spans, length distribution, budget."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.records import features
from bert_tf.tasks.pretraining import dynamic_masking
from bert_tf.tasks.pretraining.instances import (InstanceOptions, SpecialIds,
                                                 create_masked_lm_predictions)
from bert_tf.tasks.pretraining.ngram_masking import ngram_probabilities

SPECIAL = SpecialIds(cls=1, sep=2, mask=3, vocab_size=100)
ROWS, SEQ, NGRAM = 400, 256, 3


def _sequences(word_start_share=1.0, seed=0):
    """[CLS] A [SEP] B [SEP] rows of equal halves, and word starts (all tokens, or a share)."""
    rng = np.random.default_rng(seed)
    ids = np.full((ROWS, SEQ), 10, np.int32)
    ids[:, 0], ids[:, SEQ // 2], ids[:, -1] = SPECIAL.cls, SPECIAL.sep, SPECIAL.sep
    word_starts = rng.random((ROWS, SEQ)) < word_start_share
    word_starts[:, 1] = word_starts[:, SEQ // 2 + 1] = True
    return ids, np.ones((ROWS, SEQ), np.int32), word_starts


def _static(options, word_start_share=1.0):
    ids, mask, word_starts = _sequences(word_start_share)
    out = create_masked_lm_predictions(ids, mask, word_starts, options, SPECIAL, np.random.default_rng(1))
    return ids, word_starts, out["masked_lm_positions"], out["masked_lm_weights"]


def _dynamic(options, word_start_share=1.0):
    ids, _, word_starts = _sequences(word_start_share)
    kinds = np.where(word_starts, features.TOKEN_WORD_START, features.TOKEN_WORD_CONTINUATION)
    kinds[np.isin(ids, [SPECIAL.cls, SPECIAL.sep])] = features.TOKEN_SPECIAL
    batch = {"input_ids": tf.constant(ids), "token_kinds": tf.constant(kinds, tf.int32),
             "segment_ids": tf.zeros_like(ids), "next_sentence_labels": tf.zeros([ROWS, 1], tf.int32)}
    masking = dynamic_masking.MaskingOptions(options.max_predictions_per_seq, options.masked_lm_prob,
                                             options.do_whole_word_mask, options.ngram, SPECIAL.mask,
                                             SPECIAL.vocab_size)
    # a graph, as in the tf.data pipeline (eager runs the span loop step by step)
    out = tf.function(dynamic_masking.mask_batch)(batch, tf.constant([5, 6], tf.int64), masking)
    return ids, word_starts, out["masked_lm_positions"].numpy(), out["masked_lm_weights"].numpy()


def _runs(positions, weights):
    """Lengths of the runs of consecutive masked positions."""
    runs = []
    for row, weight in zip(positions, weights):
        p = row[:int(weight.sum())]
        breaks = np.flatnonzero(np.diff(p) != 1)
        runs += np.diff(np.concatenate([[-1], breaks, [len(p) - 1]])).tolist()
    return np.asarray(runs)


@pytest.mark.parametrize("draw", [_static, _dynamic], ids=["static", "dynamic"])
def test_span_lengths_follow_one_over_n(draw):
    # sparse spans (6% of 256 tokens), so that neighbouring spans rarely touch and merge
    options = InstanceOptions(max_seq_length=SEQ, max_predictions_per_seq=40, masked_lm_prob=0.06, ngram=NGRAM)
    ids, _, positions, weights = draw(options)
    budget = np.round(SEQ * 0.06)
    assert np.all(weights.sum(axis=1) <= budget) and weights.sum(axis=1).mean() > budget - 1
    shares = np.bincount(_runs(positions, weights), minlength=NGRAM + 2)[1:NGRAM + 1] / len(_runs(positions, weights))
    np.testing.assert_allclose(shares, ngram_probabilities(NGRAM), atol=0.03)
    np.testing.assert_allclose(ngram_probabilities(3), [6 / 11, 3 / 11, 2 / 11])
    # spans never cover [CLS]/[SEP], so none crosses from A into B
    real = weights == 1
    assert not np.isin(ids[np.nonzero(real)[0], positions[real]], [SPECIAL.cls, SPECIAL.sep]).any()


@pytest.mark.parametrize("draw", [_static, _dynamic], ids=["static", "dynamic"])
def test_ngrams_of_whole_words_respect_the_budget_and_keep_words_whole(draw):
    options = InstanceOptions(max_seq_length=SEQ, max_predictions_per_seq=20, masked_lm_prob=0.15,
                              do_whole_word_mask=True, ngram=NGRAM)
    ids, word_starts, positions, weights = draw(options, word_start_share=0.5)
    counts = weights.sum(axis=1)
    assert counts.max() <= 20 and counts.mean() > 18  # the budget is min(20, 38), nearly filled
    text = ~np.isin(ids, [SPECIAL.cls, SPECIAL.sep])
    for r in range(50):
        chosen = set(positions[r][:int(counts[r])].tolist())
        word = np.cumsum(word_starts[r] & text[r]) * text[r]
        for w in set(word[sorted(chosen)]):
            assert set(np.flatnonzero(word == w)) <= chosen, "a word was split"


def test_ngram_one_is_the_default_and_ngram_zero_is_refused():
    assert InstanceOptions().ngram == 1
    with pytest.raises(ValueError, match="--ngram must be at least 1"):
        InstanceOptions(ngram=0).validate()
