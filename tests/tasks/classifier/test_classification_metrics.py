"""GLUE metrics against values worked out by hand (the arithmetic is in the comments)."""

import math

import numpy as np
import pytest

from bert_tf.tasks.classifier import metrics as m

PREDS = [1, 1, 0, 1, 0]
LABELS = [1, 0, 0, 1, 1]  # TP=2 (idx 0,3), FP=1 (idx 1), TN=1 (idx 2), FN=1 (idx 4)


def test_accuracy():
    assert m.accuracy(PREDS, LABELS) == pytest.approx(3 / 5)
    assert m.accuracy([2, 0], [2, 0]) == 1.0


def test_f1():
    # 2·TP / (predicted positives + actual positives) = 4 / (3 + 3).
    assert m.f1(PREDS, LABELS) == pytest.approx(4 / 6)
    # Class 0 as positive: TP=1, predicted 2, actual 2.
    assert m.f1(PREDS, LABELS, positive=0) == pytest.approx(0.5)
    assert m.f1([0, 0], [0, 0]) == 0.0


def test_matthews_binary():
    # (TP·TN − FP·FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (2 − 1) / sqrt(3·3·2·2) = 1/6.
    assert m.matthews_corrcoef(PREDS, LABELS) == pytest.approx(1 / 6)
    assert m.matthews_corrcoef([0, 1, 1], [0, 1, 1]) == pytest.approx(1.0)
    assert m.matthews_corrcoef([1, 0, 0], [0, 1, 1]) == pytest.approx(-1.0)
    assert m.matthews_corrcoef([1, 1, 1], [0, 1, 1]) == 0.0  # undefined: constant predictions


def test_matthews_multiclass():
    # Correct c=4 of s=6; true counts t=(2,2,2), predicted counts p=(2,3,1):
    # (c·s − t·p) / sqrt((s² − p·p)(s² − t·t)) = (24 − 12) / sqrt(22 · 24).
    value = m.matthews_corrcoef([0, 1, 1, 1, 2, 0], [0, 0, 1, 1, 2, 2])
    assert value == pytest.approx(12 / math.sqrt(22 * 24))


def test_pearson():
    # dx = (−1, 0, 1), dy = (−5/3, −2/3, 7/3): Σdxdy = 4, Σdx² = 2, Σdy² = 78/9.
    assert m.pearson([1, 2, 3], [1, 2, 5]) == pytest.approx(4 / math.sqrt(2 * 78 / 9))
    assert m.pearson([1, 1, 1], [1, 2, 3]) == 0.0


def test_average_ranks_share_tied_ranks():
    np.testing.assert_array_equal(m.average_ranks([10, 20, 10, 30, 20, 20]), [1.5, 4, 1.5, 6, 4, 4])


def test_spearman_with_ties():
    # Ranks x = (1, 2.5, 2.5, 4), y = (1, 3, 2, 4); around 2.5: Σdxdy = 4.5, Σdx² = 4.5, Σdy² = 5.
    assert m.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / math.sqrt(4.5 * 5))
    assert m.spearman([0.1, 0.5, 0.9], [10, 20, 300]) == pytest.approx(1.0)  # monotone, not linear


def test_compute_metrics_drops_padding_rows():
    preds = np.array(PREDS + [1, 1])
    labels = np.array(LABELS + [0, 0])
    weights = np.array([1] * 5 + [0, 0])
    got = m.compute_metrics(("accuracy", "f1", "mcc"), preds, labels, weights)
    assert got == pytest.approx({"accuracy": 3 / 5, "f1": 4 / 6, "mcc": 1 / 6})


def test_errors():
    with pytest.raises(ValueError, match="unknown metric.*'auc'"):
        m.compute_metrics(("auc",), np.zeros(2), np.zeros(2))
    with pytest.raises(ValueError, match="same length"):
        m.accuracy([1, 2], [1])
    with pytest.raises(ValueError, match="at least one example"):
        m.pearson([], [])
