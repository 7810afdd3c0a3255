"""Sentence-classification metrics as GLUE reports them: pure numpy functions.

Every function takes 1-D arrays of equal length (labels and predictions as class indices, or
float scores for the correlation metrics) and returns a Python float.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

# Metric names -> the keys they get in eval_results.txt (after the "eval_" prefix).
METRIC_NAMES = ("accuracy", "f1", "mcc", "pearson", "spearman")


def _pair(predictions: Sequence, labels: Sequence, dtype=None) -> tuple[np.ndarray, np.ndarray]:
    predictions, labels = np.asarray(predictions, dtype), np.asarray(labels, dtype)
    if predictions.shape != labels.shape or predictions.ndim != 1:
        raise ValueError(f"predictions {predictions.shape} and labels {labels.shape} must be "
                         "1-D arrays of the same length")
    if predictions.size == 0:
        raise ValueError("metrics need at least one example")
    return predictions, labels


def accuracy(predictions: Sequence[int], labels: Sequence[int]) -> float:
    """Fraction of predictions equal to the label."""
    predictions, labels = _pair(predictions, labels)
    return float(np.mean(predictions == labels))


def f1(predictions: Sequence[int], labels: Sequence[int], positive: int = 1) -> float:
    """Binary F1 of the `positive` class (0.0 when it is never predicted nor present)."""
    predictions, labels = _pair(predictions, labels)
    true_pos = np.sum((predictions == positive) & (labels == positive))
    predicted_pos = np.sum(predictions == positive)
    actual_pos = np.sum(labels == positive)
    if predicted_pos + actual_pos == 0:
        return 0.0
    return float(2.0 * true_pos / (predicted_pos + actual_pos))


def matthews_corrcoef(predictions: Sequence[int], labels: Sequence[int]) -> float:
    """Matthews correlation (multi-class form; the binary form for two classes).

    Returns 0.0 when it is undefined (every prediction or every label in one class).
    """
    predictions, labels = _pair(predictions, labels)
    classes, encoded = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
    num_classes = len(classes)
    confusion = np.zeros((num_classes, num_classes), np.float64)  # [true, predicted]
    np.add.at(confusion, (encoded[:len(labels)], encoded[len(labels):]), 1.0)
    true_counts, pred_counts = confusion.sum(axis=1), confusion.sum(axis=0)
    n, correct = confusion.sum(), np.trace(confusion)
    numerator = correct * n - np.dot(true_counts, pred_counts)
    denominator = np.sqrt((n * n - np.dot(pred_counts, pred_counts))
                          * (n * n - np.dot(true_counts, true_counts)))
    return float(numerator / denominator) if denominator > 0 else 0.0


def pearson(predictions: Sequence[float], labels: Sequence[float]) -> float:
    """Pearson correlation coefficient (0.0 when either side is constant)."""
    predictions, labels = _pair(predictions, labels, np.float64)
    x, y = predictions - predictions.mean(), labels - labels.mean()
    denominator = np.sqrt(np.dot(x, x) * np.dot(y, y))
    return float(np.dot(x, y) / denominator) if denominator > 0 else 0.0


def average_ranks(values: Sequence[float]) -> np.ndarray:
    """1-based ranks; tied values share the mean of the ranks they span. float64 [N]."""
    _, inverse, counts = np.unique(np.asarray(values), return_inverse=True, return_counts=True)
    last_rank = np.cumsum(counts)  # the highest rank in each group of equal values
    return (last_rank - (counts - 1) / 2.0)[inverse.reshape(-1)]


def spearman(predictions: Sequence[float], labels: Sequence[float]) -> float:
    """Spearman rank correlation: Pearson on average ranks (ties handled)."""
    predictions, labels = _pair(predictions, labels, np.float64)
    return pearson(average_ranks(predictions), average_ranks(labels))


_FUNCTIONS: Mapping[str, Callable[..., float]] = {
    "accuracy": accuracy, "f1": f1, "mcc": matthews_corrcoef,
    "pearson": pearson, "spearman": spearman,
}


def compute_metrics(names: Sequence[str], predictions: np.ndarray, labels: np.ndarray,
                    weights: np.ndarray | None = None) -> dict[str, float]:
    """Computes the named metrics over the examples whose weight is non-zero.

    Args:
      names: metric names from `METRIC_NAMES`, e.g. `("accuracy", "f1")` for MRPC.
      predictions: [N] class indices (int) or scores (float, regression).
      labels: [N] class indices or gold scores.
      weights: optional [N] `is_real_example`; rows with weight 0 (batch padding) are dropped.

    Returns:
      {name: value}.
    """
    unknown = [n for n in names if n not in _FUNCTIONS]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; known: {list(METRIC_NAMES)}")
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    if weights is not None:
        keep = np.asarray(weights) > 0
        predictions, labels = predictions[keep], labels[keep]
    return {name: _FUNCTIONS[name](predictions, labels) for name in names}
