"""Streaming pretraining-eval metrics (`eval_results.txt` is written by `bert_tf.training.log`).

The metrics are those the original's `run_pretraining.py` reports (its `metric_fn`), with the
streaming semantics of TF1 `tf.metrics.mean` / `tf.metrics.accuracy`: every metric is
Σ w·x / Σ w accumulated over ALL batches (not a mean of per-batch means):

- masked_lm_accuracy: x = [argmax logits == label], w = masked_lm_weights.
- masked_lm_loss: x = per-slot cross-entropy, w = masked_lm_weights (no 1e-5 here).
- next_sentence_accuracy / next_sentence_loss: per example, w = 1.
- loss: the mean over batches of each batch's total loss (MLM + NSP), as the original's `loss`.

`PretrainingMetrics.update` may run eagerly, in a tf.function, or inside `strategy.run` with each
replica's part of the batch: the sums live in SUM-on-read variables, so `result()` (called outside
`strategy.run`) combines the replicas. Create the object inside `strategy.scope()`.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from bert_tf.model import losses

METRIC_NAMES = ("masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
                "next_sentence_loss", "loss")


def _sum_variable(name: str) -> tf.Variable:
    return tf.Variable(0.0, trainable=False, name=name,
                       synchronization=tf.VariableSynchronization.ON_READ,
                       aggregation=tf.VariableAggregation.SUM)


class StreamingMean(tf.Module):
    """Σ w·x / Σ w over every `update` (0 before any weight), like TF1 `tf.metrics.mean`."""

    def __init__(self, name: str):
        super().__init__(name=name)
        self.total = _sum_variable("total")
        self.count = _sum_variable("count")

    def update(self, values, weights=None) -> None:
        """Adds `values` (any shape) with `weights` (same shape, or None for all 1)."""
        values = tf.cast(values, tf.float32)
        weights = tf.ones_like(values) if weights is None else tf.cast(weights, tf.float32)
        self.total.assign_add(tf.reduce_sum(values * weights))
        self.count.assign_add(tf.reduce_sum(weights))

    def result(self) -> np.float32:
        """The mean so far, as numpy float32 (read outside `strategy.run`)."""
        count = float(self.count.numpy())
        return np.float32(float(self.total.numpy()) / count if count else 0.0)

    def reset(self) -> None:
        self.total.assign(0.0)
        self.count.assign(0.0)


def _accuracy(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    predictions = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return tf.cast(tf.equal(predictions, tf.cast(labels, tf.int32)), tf.float32)


class PretrainingMetrics(tf.Module):
    """The five streaming metrics of the original's pretraining eval; see the module docstring."""

    def __init__(self, name: str = "pretraining_metrics"):
        super().__init__(name=name)
        self.means = {key: StreamingMean(key) for key in METRIC_NAMES}

    def update(self, masked_lm_logits, masked_lm_ids, masked_lm_weights, next_sentence_logits,
               next_sentence_labels, loss=None) -> None:
        """Adds one batch (or one replica's part of it).

        Args:
            masked_lm_logits: [B, P, V] float.
            masked_lm_ids: [B, P] int.
            masked_lm_weights: [B, P] float (1.0 real prediction, 0.0 padding slot).
            next_sentence_logits: [B, 2] float.
            next_sentence_labels: [B] or [B, 1] int.
            loss: optional float scalar, this batch's total loss; inside `strategy.run` pass
                the replica's share (`LossParts.replica_value()` sums), so that the replicas'
                contributions add up to one batch.
        """
        nsp_labels = tf.reshape(next_sentence_labels, [-1])
        self.means["masked_lm_accuracy"].update(_accuracy(masked_lm_logits, masked_lm_ids),
                                                masked_lm_weights)
        self.means["masked_lm_loss"].update(losses.cross_entropy(masked_lm_logits, masked_lm_ids),
                                            masked_lm_weights)
        self.means["next_sentence_accuracy"].update(_accuracy(next_sentence_logits, nsp_labels))
        self.means["next_sentence_loss"].update(
            losses.cross_entropy(next_sentence_logits, nsp_labels))
        if loss is not None:
            # The replicas' shares add up to the batch's loss, and each counts 1/num_replicas of
            # a batch, so the SUM over replicas adds one batch.
            context = tf.distribute.get_replica_context()
            replicas = context.num_replicas_in_sync if context is not None else 1
            self.means["loss"].total.assign_add(tf.cast(loss, tf.float32))
            self.means["loss"].count.assign_add(1.0 / replicas)

    def result(self) -> dict[str, np.float32]:
        """{metric name: numpy float32}; `loss` only if some update passed a loss."""
        results = {key: mean.result() for key, mean in self.means.items()}
        if not float(self.means["loss"].count.numpy()):
            del results["loss"]
        return results

    def reset(self) -> None:
        for mean in self.means.values():
            mean.reset()
