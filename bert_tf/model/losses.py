"""Losses of the original BERT, as pure functions returning a weighted sum and its normaliser.

Every loss here is `Σ w·ℓ / (Σ w + ε)` over some per-example losses ℓ, so each function returns a
`LossParts(total=Σ w·ℓ, normalizer=Σ w, epsilon=ε, per_example=ℓ)` and the caller picks:

- `parts.value()`: the loss of this batch, exactly the original's formula (one device).
- `parts.total` and `parts.normalizer`: what `bert_tf.training.steps` sums over the replicas, so
  that each replica's share is `total / (Σ_replicas normalizer + ε)`.

Masked LM: ε = 1e-5 (the original's). Means (next sentence, span, regression) have
w = 1 and ε = 0; the token-classification loss is a weighted mean that ignores weight-0 positions.
A zero normaliser with ε = 0 gives 0, not NaN. Everything is computed in float32, whatever the
dtype of the logits.
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

MASKED_LM_EPSILON = 1e-5


class LossParts(NamedTuple):
    """A weighted-mean loss in pieces; all float32.

    Attributes:
        total: scalar, Σ w·ℓ over this batch (this replica's part of it under a strategy).
        normalizer: scalar, Σ w.
        epsilon: added to the normaliser (1e-5 for the masked LM, else 0).
        per_example: ℓ, unweighted, shaped like the labels ([B] or [B, P]).
    """

    total: tf.Tensor
    normalizer: tf.Tensor
    epsilon: float
    per_example: tf.Tensor

    def value(self) -> tf.Tensor:
        """The loss of this batch: total / (normalizer + epsilon), float32 scalar."""
        return _divide(self.total, self.normalizer, self.epsilon)


def _divide(total: tf.Tensor, normalizer: tf.Tensor, epsilon: float) -> tf.Tensor:
    if epsilon:
        return total / (normalizer + epsilon)
    return tf.math.divide_no_nan(total, normalizer)


def _weighted(per_example: tf.Tensor, weights: tf.Tensor | None, epsilon: float) -> LossParts:
    if weights is None:
        weights = tf.ones_like(per_example)
    weights = tf.cast(weights, tf.float32)
    return LossParts(tf.reduce_sum(weights * per_example), tf.reduce_sum(weights), epsilon,
                     per_example)


def cross_entropy(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    """Per-example softmax cross-entropy in float32.

    Args:
        logits: [..., C] any float dtype.
        labels: [...] integer class ids in [0, C).

    Returns:
        [...] float32, −log softmax(logits)[label].
    """
    return tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.cast(labels, tf.int32), logits=tf.cast(logits, tf.float32))


def weighted_cross_entropy(logits: tf.Tensor, labels: tf.Tensor, weights: tf.Tensor | None = None,
                           epsilon: float = 0.0) -> LossParts:
    """Σ w·CE / (Σ w + epsilon) in parts; weights None means all 1.

    Args:
        logits: [..., C] float.
        labels: [...] int class ids.
        weights: [...] float or int, or None.
        epsilon: added to Σ w by `value()`.
    """
    return _weighted(cross_entropy(logits, labels), weights, epsilon)


def masked_lm_loss(logits: tf.Tensor, label_ids: tf.Tensor, label_weights: tf.Tensor) -> LossParts:
    """Masked-LM loss: Σ w·CE / (Σ w + 1e-5), divided by the number of real predictions.

    Args:
        logits: [B, P, V] float, one row per masked slot.
        label_ids: [B, P] int, the original tokens (0 in padding slots).
        label_weights: [B, P] float, 1.0 for a real prediction, 0.0 for a padding slot.
    """
    return weighted_cross_entropy(logits, label_ids, label_weights, MASKED_LM_EPSILON)


def next_sentence_loss(logits: tf.Tensor, labels: tf.Tensor) -> LossParts:
    """Next-sentence loss: mean CE over the batch. logits [B, 2], labels [B] (0 = is next)."""
    return weighted_cross_entropy(logits, tf.reshape(labels, [-1]))


def regression_loss(predictions: tf.Tensor, labels: tf.Tensor) -> LossParts:
    """Regression (STS-B) loss: mean squared error. predictions [B] or [B, 1], labels [B] float."""
    predictions = tf.reshape(tf.cast(predictions, tf.float32), [-1])
    labels = tf.reshape(tf.cast(labels, tf.float32), [-1])
    return _weighted(tf.square(predictions - labels), None, 0.0)


def span_loss(start_logits: tf.Tensor, end_logits: tf.Tensor, start_positions: tf.Tensor,
              end_positions: tf.Tensor) -> LossParts:
    """SQuAD loss: (mean start CE + mean end CE) / 2.

    Args:
        start_logits, end_logits: [B, S] float.
        start_positions, end_positions: [B] int token positions (0 = [CLS] for no answer).

    Returns:
        LossParts whose per_example is [B], the mean of the start and end CE of each example.
    """
    per_example = 0.5 * (cross_entropy(start_logits, tf.reshape(start_positions, [-1]))
                         + cross_entropy(end_logits, tf.reshape(end_positions, [-1])))
    return _weighted(per_example, None, 0.0)


def token_classification_loss(logits: tf.Tensor, labels: tf.Tensor,
                              weights: tf.Tensor) -> LossParts:
    """Tagging (NER) loss: Σ w·CE / Σ w, so weight-0 positions (padding, sub-words) do not count.

    Args:
        logits: [B, S, num_labels] float.
        labels: [B, S] int (any valid id where the weight is 0).
        weights: [B, S] float or int; 0 where a position is ignored.
    """
    return weighted_cross_entropy(logits, labels, weights)
