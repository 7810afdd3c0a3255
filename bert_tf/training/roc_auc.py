"""The area under the ROC curve as `tf.compat.v1.metrics.auc` computes it (and
`keras.metrics.AUC(num_thresholds=200)`), from counts that add up over batches and replicas.

Thresholds: -1e-7, 1/199, 2/199, ..., 198/199, 1 + 1e-7 (for 200); a probability counts as
positive at every threshold it exceeds. Each batch gives a histogram, the weight of its positive
and of its negative examples in each bucket between two thresholds, the loop sums the histograms
(`Task.counts`), and `roc_auc` turns the sum into true- and false-positive rates at every
threshold and sums the curve's trapezoids, with the original's 1e-6 in each rate's denominator.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

NUM_THRESHOLDS = 200
# tf.compat.v1.metrics.auc's guard against dividing by zero.
_RATE_EPSILON = 1e-6


def roc_histogram(labels: tf.Tensor, probabilities: tf.Tensor, weights: tf.Tensor | None = None,
                  num_thresholds: int = NUM_THRESHOLDS) -> tf.Tensor:
    """[2, num_thresholds - 1] float32: the weight of the positive (row 0) and negative (row 1)
    examples whose probability exceeds thresholds 0..k and no higher one, in column k.

    Args:
        labels: any shape; non-zero is positive.
        probabilities: the shape of `labels`, in [0, 1] (clipped there).
        weights: the shape of `labels` (default: 1 for every example).
    """
    probabilities = tf.clip_by_value(tf.reshape(tf.cast(probabilities, tf.float32), [-1]), 0., 1.)
    positive = tf.cast(tf.not_equal(tf.reshape(labels, [-1]), 0), tf.float32)
    weights = (tf.ones_like(positive) if weights is None
               else tf.reshape(tf.cast(weights, tf.float32), [-1]))
    # Thresholds 1..N-2 are k/(N-1): p exceeds exactly ceil(p·(N-1)) - 1 of them (Keras' bucket).
    buckets = tf.cast(tf.math.ceil(probabilities * float(num_thresholds - 1)) - 1., tf.int32)
    buckets = tf.maximum(buckets, 0)
    weighted = tf.stack([positive * weights, (1. - positive) * weights], 1)  # [n, 2]
    return tf.transpose(tf.math.unsorted_segment_sum(weighted, buckets, num_thresholds - 1))


def roc_auc(histogram: np.ndarray) -> float:
    """The area under the ROC curve of a (summed) `roc_histogram`: trapezoids between the
    (false-positive rate, true-positive rate) points of the thresholds."""
    histogram = np.asarray(histogram, np.float64)
    # Weight above each threshold: those of its own and every higher bucket; none above 1 + 1e-7.
    above = np.concatenate([np.cumsum(histogram[:, ::-1], axis=1)[:, ::-1],
                            np.zeros([2, 1])], axis=1)
    true_positives, false_positives = above
    positives, negatives = true_positives[0], false_positives[0]
    recall = (true_positives + _RATE_EPSILON) / (positives + _RATE_EPSILON)
    false_positive_rate = false_positives / (negatives + _RATE_EPSILON)
    return float(np.sum((false_positive_rate[:-1] - false_positive_rate[1:])
                        * (recall[:-1] + recall[1:]) / 2.))
