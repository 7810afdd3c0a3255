"""The official SQuAD metrics: exact match and F1 (v1.1); HasAns/NoAns and threshold search (v2.0).

Written from the published definitions. Answers are normalised (lower-case, ASCII punctuation
removed, the articles a/an/the removed, whitespace collapsed) and each prediction scores the
maximum over its question's gold answers. Scores are percentages.

`dataset` arguments are the `data` list of a SQuAD file (articles → paragraphs → qas).
"""

from __future__ import annotations

import collections
import re
import string
from typing import Any, Iterable, Mapping

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-cases, removes punctuation and articles, and collapses whitespace."""
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when the normalised strings are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str, both_empty: float = 1.0) -> float:
    """Token-level F1 of the normalised answers.

    One empty answer scores 0.0; two score `both_empty` (1.0 in the v2.0 script, 0.0 in v1.1's).
    """
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not pred_tokens or not gold_tokens:
        return both_empty if pred_tokens == gold_tokens else 0.0
    common = sum((collections.Counter(pred_tokens) & collections.Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _questions(dataset: Iterable[Mapping[str, Any]]) -> Iterable[Mapping[str, Any]]:
    for article in dataset:
        for paragraph in article["paragraphs"]:
            yield from paragraph["qas"]


def evaluate_v1(dataset: Iterable[Mapping[str, Any]],
                predictions: Mapping[str, str]) -> dict[str, float]:
    """SQuAD v1.1: {"exact_match", "f1"} over all questions; a missing prediction scores 0."""
    exact = f1 = 0.0
    total = 0
    for qa in _questions(dataset):
        total += 1
        if qa["id"] not in predictions:
            continue
        golds = [answer["text"] for answer in qa["answers"]]
        prediction = predictions[qa["id"]]
        exact += max((exact_match(prediction, g) for g in golds), default=0.0)
        f1 += max((f1_score(prediction, g, both_empty=0.0) for g in golds), default=0.0)
    total = max(total, 1)
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total}


def raw_scores_v2(dataset: Iterable[Mapping[str, Any]], predictions: Mapping[str, str]
                  ) -> tuple[dict[str, float], dict[str, float], dict[str, bool]]:
    """Per-question exact and F1 (0/1 and [0, 1]) and whether the question has an answer.

    Gold answers that normalise to "" are dropped; a question left without any is unanswerable
    and only the empty prediction scores on it. Questions without a prediction are left out.
    """
    exact, f1, has_answer = {}, {}, {}
    for qa in _questions(dataset):
        qid = qa["id"]
        has_answer[qid] = bool(qa["answers"])
        golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
        if qid not in predictions:
            continue
        exact[qid] = max(exact_match(predictions[qid], g) for g in golds)
        f1[qid] = max(f1_score(predictions[qid], g) for g in golds)
    return exact, f1, has_answer


def find_best_threshold(predictions: Mapping[str, str], scores: Mapping[str, float],
                        null_odds: Mapping[str, float],
                        has_answer: Mapping[str, bool]) -> tuple[float, float]:
    """The null-odds threshold that maximises a score, as the official v2.0 search does.

    Starting from "answer nothing" (every unanswerable question right), questions are answered in
    increasing order of null odds; the best cumulative score gives the threshold (predict "" when
    null odds > threshold).

    Returns:
      (best score in percent of the scored questions, threshold).
    """
    current = best = float(sum(1 for qid in has_answer if not has_answer[qid]))
    threshold = 0.0
    for qid in sorted(null_odds, key=lambda q: null_odds[q]):
        if qid not in scores:
            continue
        if has_answer[qid]:
            current += scores[qid]
        elif predictions[qid]:
            current -= 1
        if current > best:
            best, threshold = current, null_odds[qid]
    return 100.0 * best / max(len(scores), 1), threshold


def evaluate_v2(dataset: Iterable[Mapping[str, Any]], predictions: Mapping[str, str],
                null_odds: Mapping[str, float] | None = None,
                null_prob_threshold: float = 1.0) -> dict[str, float]:
    """SQuAD v2.0: exact, f1, total, HasAns_* and NoAns_* splits, and, given `null_odds`, the best
    exact/F1 over thresholds (`best_exact`, `best_exact_thresh`, `best_f1`, `best_f1_thresh`).

    `null_prob_threshold` is the official script's `--na-prob-thresh`: questions whose null odds
    exceed it count as answered "".
    """
    dataset = list(dataset)
    exact_raw, f1_raw, has_answer = raw_scores_v2(dataset, predictions)
    odds = null_odds if null_odds is not None else {qid: 0.0 for qid in has_answer}
    exact = _apply_null_threshold(exact_raw, odds, has_answer, null_prob_threshold)
    f1 = _apply_null_threshold(f1_raw, odds, has_answer, null_prob_threshold)
    results = _summary(exact, f1, list(exact))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [qid for qid in exact if has_answer[qid] == wanted]
        if qids:
            results.update({f"{prefix}_{k}": v for k, v in _summary(exact, f1, qids).items()})
    if null_odds is not None:
        results["best_exact"], results["best_exact_thresh"] = find_best_threshold(
            predictions, exact_raw, null_odds, has_answer)
        results["best_f1"], results["best_f1_thresh"] = find_best_threshold(
            predictions, f1_raw, null_odds, has_answer)
    return results


def _apply_null_threshold(scores: Mapping[str, float], null_odds: Mapping[str, float],
                          has_answer: Mapping[str, bool], threshold: float) -> dict[str, float]:
    return {qid: float(not has_answer[qid]) if null_odds[qid] > threshold else score
            for qid, score in scores.items()}


def _summary(exact: Mapping[str, float], f1: Mapping[str, float],
             qids: list[str]) -> dict[str, float]:
    total = max(len(qids), 1)
    return {"exact": 100.0 * sum(exact[q] for q in qids) / total,
            "f1": 100.0 * sum(f1[q] for q in qids) / total, "total": len(qids)}


def has_gold_answers(dataset: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a SQuAD file can be evaluated: some question carries an answer."""
    return any(qa.get("answers") for qa in _questions(dataset))
