"""ALBERT's n-gram masking (`--ngram`), for the static path (`pretraining.create_masked_lm_predictions`).

The dynamic path draws the same way in TF ops (`dynamic_masking._choose_spans`).
Shapes: I = instances, S = max_seq_length, U = units (words or tokens) in the longest row.
"""

from __future__ import annotations

import numpy as np


def ngram_probabilities(ngram: int) -> np.ndarray:
    """ALBERT's n-gram length distribution: P(n) = (1/n) / sum_k 1/k for n = 1..ngram."""
    weights = 1.0 / np.arange(1, ngram + 1)
    return weights / weights.sum()


def choose_ngrams(candidates: np.ndarray, unit_starts: np.ndarray, separators: np.ndarray,
                  budget: np.ndarray, ngram: int, rng: np.random.Generator) -> np.ndarray:
    """ALBERT's n-gram masking over units (words with whole-word masking, else tokens).

    Visits each row's units in random order; at unit u draws n with P(n) ∝ 1/n among the lengths
    that stay inside u's segment, shortens the span u..u+n-1 until it fits the remaining budget
    (skipping u if not even one unit fits) and takes it unless it overlaps a span already taken.
    Rows run in lockstep, one visit rank per step.

    Args:
      candidates: bool [I, S] maskable tokens; unit_starts: bool [I, S] the first token of each unit.
      separators: bool [I, S] the [SEP] tokens (a span never crosses one).
      budget: int [I] tokens to mask per row.

    Returns:
      bool [I, S], the chosen tokens.
    """
    num, _ = candidates.shape
    row = np.arange(num)
    unit = np.cumsum(unit_starts, axis=1) - 1
    num_units = int(unit_starts.sum(axis=1).max()) if num else 0
    flat_unit = np.where(candidates, unit, num_units)
    cells = (row[:, None] * (num_units + 1) + flat_unit).ravel()
    sizes = np.bincount(cells, minlength=num * (num_units + 1)).reshape(num, num_units + 1)
    sizes[:, num_units] = 0  # the dummy unit of non-candidates
    # token count of units [0, u): a span u..u+n-1 holds first_token[u + n] - first_token[u]
    first_token = np.concatenate([np.zeros((num, 1), np.int64), np.cumsum(sizes, axis=1)], axis=1)
    # units left in a unit's segment (itself included): a segment ends at a [SEP]
    segment = np.cumsum(separators, axis=1)
    unit_segment = np.full((num, num_units + 1), -1)
    unit_segment[np.broadcast_to(row[:, None], unit.shape)[unit_starts], unit[unit_starts]] = segment[unit_starts]
    units_in_row = unit_starts.sum(axis=1)
    in_first_segment = (unit_segment == unit_segment[:, :1]).sum(axis=1)
    index = np.arange(num_units + 1)[None, :]
    left = np.where(unit_segment == unit_segment[:, :1], in_first_segment[:, None], units_in_row[:, None]) - index
    cumulative = np.cumsum(ngram_probabilities(ngram))
    order = np.argsort(np.where(sizes[:, :num_units] > 0, rng.random((num, num_units)), 2.0), axis=1)
    draws = rng.random((num, num_units))
    covered = np.zeros((num, num_units + ngram + 1), bool)
    used = np.zeros(num, np.int64)
    for step in range(num_units):
        u = order[:, step]
        longest = np.clip(left[row, u], 0, ngram)
        # n from P(n) ∝ 1/n restricted to 1..longest
        n = 1 + (draws[:, step, None] * cumulative[np.maximum(longest, 1) - 1][:, None]
                 >= cumulative[None, :]).sum(axis=1)
        n = np.minimum(n, np.maximum(longest, 1))
        for _ in range(ngram - 1):  # shorten until the span fits
            too_long = (n > 1) & (used + _span_tokens(first_token, u, n) > budget)
            n = np.where(too_long, n - 1, n)
        span = _span_tokens(first_token, u, n)
        overlaps = np.zeros(num, bool)
        for k in range(ngram):
            overlaps |= (k < n) & covered[row, u + k]
        take = (longest > 0) & (used + span <= budget) & ~overlaps
        for k in range(ngram):
            covered[row, u + k] |= take & (k < n)
        used += np.where(take, span, 0)
    return candidates & covered[row[:, None], flat_unit]


def _span_tokens(first_token: np.ndarray, u: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Tokens in units u..u+n-1 of each row (first_token: int [I, U + 2] prefix sums)."""
    row = np.arange(len(u))
    return first_token[row, np.minimum(u + n, first_token.shape[1] - 1)] - first_token[row, u]
