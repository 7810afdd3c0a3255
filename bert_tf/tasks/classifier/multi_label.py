"""Multi-label classification: decision thresholds and metrics (scikit-learn's definitions).

Arrays: N examples, C labels; `gold` and `predicted` 0/1 (or bool) [N,C], probabilities
float [N,C]. A label is predicted when its probability is at least its threshold.

- precision/recall/F1 of a label: tp/(tp+fp), tp/(tp+fn), 2tp/(2tp+fp+fn), 0 when the
  denominator is 0 (scikit-learn's `zero_division=0`);
- micro: the same over the counts summed over labels; macro F1: the mean of the labels' F1;
- subset accuracy: the share of examples whose whole label set is right.
"""

from __future__ import annotations

import json
import os
from typing import Sequence

import numpy as np

from bert_tf import filesystem
from bert_tf.errors import UserError

THRESHOLDS_FILE = "thresholds.json"
DEFAULT_THRESHOLD = 0.5


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    numerator, denominator = np.asarray(numerator, np.float64), np.asarray(denominator, np.float64)
    return np.divide(numerator, denominator, out=np.zeros_like(numerator), where=denominator > 0)


def predict(probabilities: np.ndarray, thresholds: np.ndarray | float) -> np.ndarray:
    """bool [N,C]: probability ≥ the label's threshold."""
    return np.asarray(probabilities) >= np.asarray(thresholds)


def results_entries(gold: np.ndarray, predicted: np.ndarray, labels: Sequence[str],
                    prefix: str = "eval_") -> dict[str, float]:
    """eval_results.txt's multi-label keys: `<prefix>micro_f1`, `micro_precision`,
    `micro_recall`, `macro_f1`, `subset_accuracy`, and per label `<prefix><label>_precision`,
    `_recall`, `_f1`."""
    gold, predicted = np.asarray(gold, bool), np.asarray(predicted, bool)
    tp = np.sum(gold & predicted, axis=0)  # [C]
    fp = np.sum(~gold & predicted, axis=0)
    fn = np.sum(gold & ~predicted, axis=0)
    f1 = _ratio(2 * tp, 2 * tp + fp + fn)
    out = {f"{prefix}micro_f1": float(_ratio(2 * tp.sum(), 2 * tp.sum() + fp.sum() + fn.sum())),
           f"{prefix}micro_precision": float(_ratio(tp.sum(), tp.sum() + fp.sum())),
           f"{prefix}micro_recall": float(_ratio(tp.sum(), tp.sum() + fn.sum())),
           f"{prefix}macro_f1": float(np.mean(f1)),
           f"{prefix}subset_accuracy": float(np.mean(np.all(gold == predicted, axis=1)))}
    for c, label in enumerate(labels):
        out[f"{prefix}{label}_precision"] = float(_ratio(tp[c], tp[c] + fp[c]))
        out[f"{prefix}{label}_recall"] = float(_ratio(tp[c], tp[c] + fn[c]))
        out[f"{prefix}{label}_f1"] = float(f1[c])
    return out


def result_keys(labels: Sequence[str], prefix: str = "eval_") -> list[str]:
    """The keys `results_entries` reports for `labels`."""
    return ([f"{prefix}{name}" for name in ("micro_f1", "micro_precision", "micro_recall",
                                            "macro_f1", "subset_accuracy")]
            + [f"{prefix}{label}_{name}" for label in labels
               for name in ("precision", "recall", "f1")])


def tune_thresholds(gold: np.ndarray, probabilities: np.ndarray) -> np.ndarray:
    """float [C]: per label, the threshold with the best F1 on (gold, probabilities).

    Candidates are 0.5 and the midpoints between consecutive distinct probabilities of the
    label (every distinct decision on these examples); ties go to the candidate nearest 0.5.
    """
    gold, probabilities = np.asarray(gold, bool), np.asarray(probabilities, np.float64)
    thresholds = np.full(gold.shape[1], DEFAULT_THRESHOLD)
    for c in range(gold.shape[1]):
        values = np.unique(probabilities[:, c])
        candidates = np.concatenate([[DEFAULT_THRESHOLD], (values[1:] + values[:-1]) / 2])
        chosen = probabilities[:, c, None] >= candidates[None, :]  # [N,K]
        tp = np.sum(chosen & gold[:, c, None], axis=0)
        f1 = _ratio(2 * tp, chosen.sum(axis=0) + gold[:, c].sum())
        best = np.flatnonzero(f1 == f1.max())
        thresholds[c] = candidates[best[np.argmin(np.abs(candidates[best] - 0.5))]]
    return thresholds


def write_thresholds(directory: str, labels: Sequence[str], thresholds: np.ndarray) -> str:
    """`directory/thresholds.json` {"labels", "thresholds"}, atomically."""
    path = os.path.join(directory, THRESHOLDS_FILE)
    filesystem.write_atomically(path, json.dumps(
        {"labels": list(labels), "thresholds": [float(t) for t in thresholds]}, indent=1))
    return path


def read_thresholds(directory: str, labels: Sequence[str]) -> np.ndarray:
    """The thresholds `write_thresholds` saved in `directory` for `labels`."""
    path = os.path.join(directory, THRESHOLDS_FILE)
    if not filesystem.exists(path):
        raise UserError(f"{path}: not found; --tune_thresholds chooses the thresholds on the dev "
                         "set: run --do_eval (or evaluation during training) first, or give "
                         "--threshold instead")
    with filesystem.open_text(path) as f:
        saved = json.load(f)
    if saved["labels"] != list(labels):
        raise UserError(f"{path}: thresholds for labels {saved['labels']}, the run has "
                         f"{list(labels)}")
    return np.asarray(saved["thresholds"], np.float64)
