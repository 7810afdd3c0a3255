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
# Steps drawn per numpy pass: bounds its [steps, tasks] arrays (a few MB) for any run length.
SCHEDULE_CHUNK_STEPS = 1 << 16


def alpha(sampling: str, step: int | np.ndarray, num_steps: int) -> np.ndarray:
    """The exponent α of `sampling` at `step` (0-based; one step or an array of steps) of
    `num_steps` (float64, shaped as `step`)."""
    step = np.asarray(step, np.float64)
    if sampling == "proportional":
        return np.ones_like(step)
    if sampling == "uniform":
        return np.zeros_like(step)
    if sampling == "annealed":
        progress = step / (num_steps - 1) if num_steps > 1 else np.zeros_like(step)
        return 1.0 - (1.0 - ANNEALED_FINAL_ALPHA) * progress
    raise UserError(f"--task_sampling must be one of {', '.join(SAMPLINGS)}, got {sampling!r}")


def probabilities(sizes: Sequence[int], weights: Sequence[float],
                  exponent: float | np.ndarray) -> np.ndarray:
    """p_i ∝ w_i · n_i^exponent: float64 [K] for one exponent, [..., K] for an array of them
    (each row sums to 1)."""
    scores = (np.asarray(weights, np.float64)
              * np.asarray(sizes, np.float64) ** np.asarray(exponent, np.float64)[..., None])
    return scores / scores.sum(axis=-1, keepdims=True)


def schedule(sizes: Sequence[int], weights: Sequence[float], sampling: str, num_steps: int,
             seed: int) -> np.ndarray:
    """The task index of every step (int32 [num_steps]): step t draws u_t ~ U[0, 1) and takes
    the first task whose cumulative probability at t exceeds it. Drawn in numpy, many steps per
    pass: a run of a million steps draws its schedule in well under a second, at every
    (re)start."""
    if any(n < 1 for n in sizes) or any(w <= 0 for w in weights):
        raise UserError(f"every task needs training examples and a positive weight; sizes "
                        f"{list(sizes)}, weights {list(weights)}")
    draws = np.random.default_rng(seed).random(num_steps)
    chosen = np.empty(num_steps, np.int32)
    for start in range(0, num_steps, SCHEDULE_CHUNK_STEPS):
        stop = min(start + SCHEDULE_CHUNK_STEPS, num_steps)
        exponents = alpha(sampling, np.arange(start, stop), num_steps)
        cumulative = np.cumsum(probabilities(sizes, weights, exponents), axis=-1)
        taken = (cumulative <= draws[start:stop, None]).sum(axis=-1)  # searchsorted(side="right")
        chosen[start:stop] = np.minimum(taken, len(sizes) - 1)
    return chosen
