"""Which task each training step's batch comes from.

With n_i training examples and weight w_i (tasks.json), task i is drawn with probability

    p_i ∝ w_i · n_i^α

  proportional  α = 1 (every example as often as in one mixed dataset)
  uniform       α = 0 (every task as often)
  annealed      α from 1 at the first step to 0.2 at the last, linearly (Stickland & Murray's
                annealed sampling, as TF Model Garden's multitask samplers): large tasks first,
                then the small ones more often than their size says.

The schedule of all steps is drawn once from the run's seed, so a resumed run reads the same
tasks in the same order.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from bert_tf.errors import UserError

SAMPLINGS = ("proportional", "uniform", "annealed")
ANNEALED_FINAL_ALPHA = 0.2


def alpha(sampling: str, step: int, num_steps: int) -> float:
    """The exponent α of `sampling` at `step` (0-based) of `num_steps`."""
    if sampling == "proportional":
        return 1.0
    if sampling == "uniform":
        return 0.0
    if sampling == "annealed":
        progress = step / (num_steps - 1) if num_steps > 1 else 0.0
        return 1.0 - (1.0 - ANNEALED_FINAL_ALPHA) * progress
    raise UserError(f"--task_sampling must be one of {', '.join(SAMPLINGS)}, got {sampling!r}")


def probabilities(sizes: Sequence[int], weights: Sequence[float], exponent: float) -> np.ndarray:
    """p_i ∝ w_i · n_i^exponent (float64 [K], sums to 1)."""
    scores = np.asarray(weights, np.float64) * np.asarray(sizes, np.float64) ** exponent
    return scores / scores.sum()


def schedule(sizes: Sequence[int], weights: Sequence[float], sampling: str, num_steps: int,
             seed: int) -> np.ndarray:
    """The task index of every step (int32 [num_steps])."""
    if any(n < 1 for n in sizes) or any(w <= 0 for w in weights):
        raise UserError(f"every task needs training examples and a positive weight; sizes "
                        f"{list(sizes)}, weights {list(weights)}")
    rng = np.random.default_rng(seed)
    draws = rng.random(num_steps)
    chosen = np.empty(num_steps, np.int32)
    for step in range(num_steps):
        cumulative = np.cumsum(probabilities(sizes, weights, alpha(sampling, step, num_steps)))
        chosen[step] = min(int(np.searchsorted(cumulative, draws[step], side="right")),
                           len(sizes) - 1)
    return chosen
