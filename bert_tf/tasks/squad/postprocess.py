"""SQuAD prediction post-processing: window logits → n-best answer texts → predictions files.

For each window, the `n_best_size` highest start and end logits are paired; a pair is a candidate
when both ends are context tokens, the start token has its maximum context in this window, the
end is not before the start and the span is at most `max_answer_length` tokens. Candidates of all
windows of a question are ranked by start + end logit, mapped back to the original context text,
de-duplicated and soft-maxed. With v2.0, the null answer ("", scored by the window with the lowest
`start[0] + end[0]`) competes too, and `null_odds = null score − best non-null score` decides:
the prediction is "" when `null_odds > null_score_diff_threshold`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Callable, Sequence

import numpy as np
from absl import logging

from bert_tf import filesystem
from bert_tf.tasks.squad.examples import SquadExample
from bert_tf.tasks.squad.features import SquadFeatures
from bert_tf.text.tokenizers import BasicTokenizer, SentencePieceTokenizer

# Shown when no span of a question is valid (the original's placeholder).
NO_VALID_SPAN_TEXT = "empty"
_SPM_SPACE = "\u2581"  # SentencePiece's word-start marker


@dataclasses.dataclass
class SquadPredictions:
    """Post-processed predictions of a SQuAD file.

    Attributes:
      nbest: {question id: [{"text", "probability", "start_logit", "end_logit"}, ...]}, best first.
      best_non_null: {question id: the best non-empty answer text}.
      null_odds: v2.0 only, {question id: null score − best non-null score}; empty for v1.1.
    """

    nbest: dict[str, list[dict[str, Any]]]
    best_non_null: dict[str, str]
    null_odds: dict[str, float]

    def answers(self, null_score_diff_threshold: float = 0.0) -> dict[str, str]:
        """{question id: answer}: "" where (v2.0) `null_odds > null_score_diff_threshold`."""
        return {qid: "" if self.null_odds.get(qid, -np.inf) > null_score_diff_threshold else text
                for qid, text in self.best_non_null.items()}


def final_text(pred_text: str, orig_text: str, do_lower_case: bool, verbose: bool = False,
               convert: Callable[[str], str] | None = None) -> str:
    """Maps a detokenized prediction back onto the original words it came from.

    `pred_text` is normalised ("steve smith" for the words "Steve Smith's"); basic-tokenizing
    `orig_text` the same way and aligning the two character by character (spaces ignored) recovers
    the original casing, accents and punctuation. When the alignment fails (the tokenizer changed
    the length, e.g. decomposed accents), `orig_text` is returned whole, as the original does.
    `convert` (--chinese_conversion, checked to keep every length) is applied before aligning, so
    a prediction in the converted script is found in the original's text.
    """
    aligned = convert(orig_text) if convert is not None else orig_text
    tok_text = " ".join(BasicTokenizer(do_lower_case=do_lower_case).tokenize(aligned))
    start = tok_text.find(pred_text)
    if start == -1:
        if verbose:
            logging.info("Could not find %r in %r", pred_text, orig_text)
        return orig_text
    end = start + len(pred_text) - 1
    orig_chars = [i for i, c in enumerate(aligned) if c != " "]
    tok_chars = [i for i, c in enumerate(tok_text) if c != " "]
    if len(orig_chars) != len(tok_chars):
        if verbose:
            logging.info("Length not equal after stripping spaces: %r vs %r", orig_text, tok_text)
        return orig_text
    tok_to_nospace = {s: ns for ns, s in enumerate(tok_chars)}
    if start not in tok_to_nospace or end not in tok_to_nospace:
        return orig_text
    return orig_text[orig_chars[tok_to_nospace[start]]:orig_chars[tok_to_nospace[end]] + 1]


def detokenize(tokens: Sequence[str], sentencepiece: bool = False) -> str:
    """Joins word pieces: WordPiece `##` continuations are glued on; SentencePiece pieces are
    concatenated, with `▁` read as a space."""
    if sentencepiece:
        text = "".join(tokens).replace(_SPM_SPACE, " ")
    else:
        text = " ".join(tokens).replace(" ##", "").replace("##", "")
    return " ".join(text.split())


def softmax(scores: np.ndarray) -> np.ndarray:
    """Numerically safe softmax of a 1-D float64 array."""
    if len(scores) == 0:
        return scores
    exp = np.exp(scores - scores.max())
    return exp / exp.sum()


def span_candidates(features: SquadFeatures, start_logits: np.ndarray, end_logits: np.ndarray,
                    n_best_size: int, max_answer_length: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All valid (window, start, end) spans among each window's n best starts and ends.

    Args:
      features: the N windows.
      start_logits, end_logits: float [N, S], the model's outputs for those windows.

    Returns:
      (row, start, end) int64 [M] each, in the original's order: by window, then by start rank,
      then by end rank.
    """
    k = min(n_best_size, start_logits.shape[1])
    top_start = np.argsort(-start_logits, axis=1, kind="stable")[:, :k, None]  # [N, k, 1]
    top_end = np.argsort(-end_logits, axis=1, kind="stable")[:, None, :k]  # [N, 1, k]
    in_context = features.token_to_orig >= 0  # [N, S]
    start_ok = (np.take_along_axis(in_context, top_start[:, :, 0], 1)
                & (np.take_along_axis(features.token_is_max_context, top_start[:, :, 0], 1) > 0))
    end_ok = np.take_along_axis(in_context, top_end[:, 0, :], 1)
    length = top_end - top_start + 1  # [N, k, k]
    valid = (start_ok[:, :, None] & end_ok[:, None, :]
             & (length >= 1) & (length <= max_answer_length))
    row, i, j = np.nonzero(valid)
    return row, top_start[row, i, 0], top_end[row, 0, j]


def compute_predictions(examples: Sequence[SquadExample], features: SquadFeatures,
                        start_logits: np.ndarray, end_logits: np.ndarray, tokenizer: Any,
                        n_best_size: int = 20, max_answer_length: int = 30,
                        do_lower_case: bool = True, version_2_with_negative: bool = False,
                        verbose: bool = False) -> SquadPredictions:
    """Ranks answer spans for every example from its windows' logits.

    Args:
      examples: the examples the features were built from (`features.example_index` indexes them).
      features: the N windows; rows of one example are consecutive.
      start_logits, end_logits: float [N, S].
      tokenizer: maps window token ids back to tokens (`convert_ids_to_tokens`).
      n_best_size, max_answer_length, do_lower_case: as the flags of the same names.
      version_2_with_negative: add the null answer and compute `null_odds`.
      verbose: log why an answer could not be aligned with the original text.
    """
    start_logits = np.asarray(start_logits, np.float64)
    end_logits = np.asarray(end_logits, np.float64)
    row, start, end = span_candidates(features, start_logits, end_logits, n_best_size,
                                      max_answer_length)
    score = start_logits[row, start] + end_logits[row, end]
    example = features.example_index[row]
    order = np.lexsort((-score, example))  # by example, then best first; stable for ties
    row, start, end, example = row[order], start[order], end[order], example[order]
    bounds = np.searchsorted(example, np.arange(len(examples) + 1))
    window_bounds = np.searchsorted(features.example_index, np.arange(len(examples) + 1))
    out = SquadPredictions({}, {}, {})
    for index, ex in enumerate(examples):
        spans = slice(bounds[index], bounds[index + 1])
        candidates = [(float(start_logits[r, s]), float(end_logits[r, e]),
                       _span_text(ex, features, r, s, e, tokenizer, do_lower_case, verbose))
                      for r, s, e in zip(row[spans], start[spans], end[spans])]
        null = None
        if version_2_with_negative:
            null = _null_candidate(start_logits, end_logits, window_bounds[index],
                                   window_bounds[index + 1])
        nbest = _nbest(candidates, null, n_best_size)
        out.nbest[ex.qas_id] = nbest
        best = next(entry for entry in nbest if entry["text"])
        out.best_non_null[ex.qas_id] = best["text"]
        if null is not None:
            out.null_odds[ex.qas_id] = null[0] + null[1] - best["start_logit"] - best["end_logit"]
    return out


def _span_text(example: SquadExample, features: SquadFeatures, row: int, start: int, end: int,
               tokenizer: Any, do_lower_case: bool, verbose: bool) -> Callable[[], str]:
    """A lazy answer text: the window tokens [start, end] mapped back to the context words."""
    def text() -> str:
        tokens = tokenizer.convert_ids_to_tokens(features.input_ids[row, start:end + 1].tolist())
        first, last = features.token_to_orig[row, start], features.token_to_orig[row, end]
        words = example.doc_tokens[first:last + 1]
        inner = getattr(tokenizer, "tokenizer", tokenizer)  # under a --chinese_conversion wrapper
        pred_text = detokenize(tokens, isinstance(inner, SentencePieceTokenizer))
        return final_text(pred_text, " ".join(words), do_lower_case, verbose,
                          getattr(tokenizer, "convert_text", None))
    return text


def _null_candidate(start_logits: np.ndarray, end_logits: np.ndarray, first: int,
                    stop: int) -> tuple[float, float]:
    """(start, end) logits of `[CLS]` in the window with the lowest null score of rows
    [first, stop); (0, 0) when the question has no window."""
    if first == stop:
        return 0.0, 0.0
    scores = start_logits[first:stop, 0] + end_logits[first:stop, 0]
    best = first + int(np.argmin(scores))  # first minimum, as the original's strict "<"
    return float(start_logits[best, 0]), float(end_logits[best, 0])


def _nbest(candidates: list[tuple[float, float, Callable[[], str]]],
           null: tuple[float, float] | None, n_best_size: int) -> list[dict[str, Any]]:
    """The n best distinct answers with their soft-maxed probabilities.

    `candidates` are sorted best first. The null answer ranks after non-null ones of equal score
    and is appended when it did not make the n best (so v2.0 lists may hold n + 1 entries).
    """
    ranked: list[tuple[float, float, Callable[[], str] | None]] = list(candidates)
    if null is not None:
        null_score = null[0] + null[1]
        at = next((i for i, (s, e, _) in enumerate(ranked) if null_score > s + e), len(ranked))
        ranked.insert(at, (*null, None))
    entries: list[tuple[str, float, float]] = []
    seen: set[str] = set()
    for start_logit, end_logit, text_fn in ranked:
        if len(entries) >= n_best_size:
            break
        text = "" if text_fn is None else text_fn()
        if text_fn is not None and text in seen:
            continue
        seen.add(text)
        entries.append((text, start_logit, end_logit))
    if null is not None and "" not in seen:
        entries.append(("", *null))
    # No valid span at all: a placeholder, so that every question has a non-null answer.
    if not any(text for text, _, _ in entries):
        entries.append((NO_VALID_SPAN_TEXT, 0.0, 0.0))
    probs = softmax(np.array([s + e for _, s, e in entries], np.float64))
    return [{"text": text, "probability": float(p), "start_logit": s, "end_logit": e}
            for (text, s, e), p in zip(entries, probs)]


def write_predictions(output_dir: str | os.PathLike, predictions: SquadPredictions,
                      null_score_diff_threshold: float = 0.0) -> dict[str, str]:
    """Writes `predictions.json`, `nbest_predictions.json` and (v2.0) `null_odds.json` atomically.

    Returns:
      {"predictions" | "nbest_predictions" | "null_odds": path written}.
    """
    files = {"predictions": predictions.answers(null_score_diff_threshold),
             "nbest_predictions": predictions.nbest}
    if predictions.null_odds:
        files["null_odds"] = predictions.null_odds
    paths = {}
    for name, content in files.items():
        paths[name] = os.path.join(output_dir, name + ".json")
        write_json_atomic(paths[name], content)
    return paths


def write_json_atomic(path: str | os.PathLike, content: Any) -> None:
    """Writes JSON (indent 4, as the original) to a temporary name, then renames it into place."""
    filesystem.write_atomically(os.fspath(path),
                                json.dumps(content, indent=4, ensure_ascii=False) + "\n")
