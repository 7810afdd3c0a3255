"""Losses on hand-made batches against numpy."""

import numpy as np
import tensorflow as tf

from bert_tf.model import losses


def numpy_ce(logits, labels):
    logits = np.asarray(logits, np.float64)
    top = logits.max(-1, keepdims=True)
    log_z = np.log(np.exp(logits - top).sum(-1)) + top[..., 0]
    return log_z - np.take_along_axis(logits, np.asarray(labels)[..., None], -1)[..., 0]


MLM_LOGITS = np.array([[[2.0, 0.5, -1.0], [0.0, 0.0, 3.0], [9.0, -9.0, 0.0]],
                       [[1.0, 1.0, 1.0], [5.0, -2.0, 0.3], [0.2, 0.1, 0.0]]], np.float32)
MLM_IDS = np.array([[0, 1, 0], [2, 0, 0]], np.int32)
MLM_WEIGHTS = np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]], np.float32)


def test_masked_lm_loss_divides_by_real_predictions():
    parts = losses.masked_lm_loss(MLM_LOGITS, MLM_IDS, MLM_WEIGHTS)
    ce = numpy_ce(MLM_LOGITS, MLM_IDS)
    expected = (ce[0, 0] + ce[0, 1] + ce[1, 0]) / (3.0 + 1e-5)
    np.testing.assert_allclose(parts.value().numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(parts.per_example.numpy(), ce, rtol=1e-6, atol=1e-6)
    assert parts.per_example.shape == (2, 3)
    np.testing.assert_allclose(parts.normalizer.numpy(), 3.0)
    # Not Keras' default reduction (mean over all 6 slots).
    assert abs(parts.value().numpy() - (ce * MLM_WEIGHTS).sum() / 6) > 0.1


def test_low_precision_logits_give_float32_losses():
    parts = losses.masked_lm_loss(tf.constant(MLM_LOGITS, tf.bfloat16), MLM_IDS, MLM_WEIGHTS)
    assert parts.value().dtype == tf.float32 and parts.per_example.dtype == tf.float32
    exact = losses.masked_lm_loss(MLM_LOGITS, MLM_IDS, MLM_WEIGHTS).value().numpy()
    np.testing.assert_allclose(parts.value().numpy(), exact, rtol=2e-2)  # bf16 inputs, f32 math.


def test_mean_losses():
    nsp_logits = np.array([[3.0, -1.0], [0.5, 0.7], [-2.0, 2.0]], np.float32)
    nsp_labels = np.array([[0], [1], [0]], np.int32)  # [B, 1] as read from the records.
    np.testing.assert_allclose(losses.next_sentence_loss(nsp_logits, nsp_labels).value().numpy(),
                               numpy_ce(nsp_logits, nsp_labels[:, 0]).mean(), rtol=1e-6)
    predictions = np.array([[1.5], [0.0], [4.0]], np.float32)
    np.testing.assert_allclose(losses.regression_loss(predictions, [1.0, 1.0, 2.0]).value().numpy(),
                               (0.25 + 1.0 + 4.0) / 3, rtol=1e-6)


def test_span_loss_is_mean_of_start_and_end():
    start = np.array([[1.0, 2.0, 0.0, -1.0], [0.0, 0.0, 5.0, 1.0]], np.float32)
    end = np.array([[0.3, 0.0, 2.0, 1.0], [4.0, 0.0, 0.0, 0.0]], np.float32)
    parts = losses.span_loss(start, end, [1, 2], [3, 0])
    expected = 0.5 * (numpy_ce(start, [1, 2]).mean() + numpy_ce(end, [3, 0]).mean())
    np.testing.assert_allclose(parts.value().numpy(), expected, rtol=1e-6)
    assert parts.per_example.shape == (2,)


def test_token_classification_ignores_weight_zero_positions():
    rng = np.random.RandomState(0)
    logits = rng.randn(2, 5, 4).astype(np.float32)
    labels = rng.randint(0, 4, (2, 5))
    weights = np.array([[1, 1, 0, 1, 0], [0, 1, 0, 0, 0]], np.int32)
    loss = losses.token_classification_loss(logits, labels, weights).value().numpy()
    ce = numpy_ce(logits, labels)
    np.testing.assert_allclose(loss, (ce * weights).sum() / 4, rtol=1e-6)
    changed = logits.copy()
    changed[weights == 0] = 100.0 * rng.randn(int((weights == 0).sum()), 4)
    np.testing.assert_allclose(
        losses.token_classification_loss(changed, labels, weights).value().numpy(), loss, rtol=1e-6)
    assert losses.token_classification_loss(logits, labels, 0 * weights).value().numpy() == 0.0
