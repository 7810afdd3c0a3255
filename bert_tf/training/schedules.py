"""Every learning-rate curve of a run, and layer-wise learning-rate decay (docs/optimization.md).

Curves (`--lr_schedule`), each a function of the number of updates already applied (`step`, 0 for
the first update), so a resumed run follows the uninterrupted run's curve. W = num_warmup_steps,
T = num_train_steps, lr = the peak learning rate:

- `linear` (default): the original BERT's `WarmupLinearSchedule`, decay counted from step 0.
- `cosine`, `constant`, `polynomial`, `inverse_sqrt`: transformers' curves of the same names
  (`get_scheduler`), after the same linear warm-up `lr · step / W` for step < W:
    cosine:       lr_end + (lr − lr_end) · ½(1 + cos(π·p)),   p = min((step − W) / (T − W), 1)
    constant:     lr
    polynomial:   lr_end + (lr − lr_end) · (1 − p)^lr_power
    inverse_sqrt: lr · √(τ / (step − W + τ)),   τ = W, or 10000 without warm-up

Layer-wise decay (`layerwise_rate_factors`): the head learns at lr, encoder layer i of L (0-based)
at ξ^(L−i)·lr, the embeddings at ξ^(L+1)·lr; the optimizer multiplies each variable's rate by
its factor inside its update.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import keras
import tensorflow as tf

from bert_tf.errors import UserError

SCHEDULES = ("linear", "cosine", "constant", "polynomial", "inverse_sqrt")
# transformers' `get_inverse_sqrt_schedule` time scale when there is no warm-up.
INVERSE_SQRT_TIMESCALE = 10_000


@keras.saving.register_keras_serializable(package="bert_tf")
class WarmupLinearSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up, then linear decay to 0 counted from step 0 (the original's schedule).

    For step < num_warmup_steps: `learning_rate · step / num_warmup_steps`; otherwise
    `learning_rate · (1 − min(step, num_train_steps) / num_train_steps)`. So at step ==
    num_warmup_steps the rate is `learning_rate · (1 − warmup/total)`, and it stays 0 from
    num_train_steps on. `step` is the number of updates already applied (0 for the first update).

    Args:
        learning_rate: Peak learning rate (float).
        num_train_steps: Total number of updates; must be > 0.
        num_warmup_steps: Number of warm-up updates; 0 disables warm-up.
    """

    def __init__(self, learning_rate: float, num_train_steps: int, num_warmup_steps: int = 0):
        _check_steps(num_train_steps, num_warmup_steps)
        self.learning_rate = float(learning_rate)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)

    def __call__(self, step) -> tf.Tensor:
        """Returns the float32 scalar learning rate for integer (or float) `step`."""
        step = tf.cast(step, tf.float32)
        # Float32 arithmetic in the original's order: lr·(1 − p)^1 + 0 and lr·(step/warmup).
        done = tf.minimum(step, float(self.num_train_steps)) / float(self.num_train_steps)
        decayed = self.learning_rate * (1.0 - done)
        if not self.num_warmup_steps:
            return decayed
        warmup = self.learning_rate * (step / float(self.num_warmup_steps))
        return tf.where(step < float(self.num_warmup_steps), warmup, decayed)

    def get_config(self) -> dict:
        return {"learning_rate": self.learning_rate, "num_train_steps": self.num_train_steps,
                "num_warmup_steps": self.num_warmup_steps}


@keras.saving.register_keras_serializable(package="bert_tf")
class WarmupDecaySchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up from 0 over `num_warmup_steps`, then one of transformers' curves
    (`cosine`, `constant`, `polynomial`, `inverse_sqrt`; formulas in the module docstring).

    Past num_train_steps, cosine and polynomial stay at `lr_end` (transformers' cosine would rise
    again; the loop never gets there).

    Args:
        schedule: the curve's name.
        learning_rate: peak learning rate, reached at the end of warm-up.
        num_train_steps: total number of updates (> 0).
        num_warmup_steps: warm-up updates; 0: none.
        lr_end: the rate cosine and polynomial decay to (0 ≤ lr_end < learning_rate).
        lr_power: polynomial's exponent (> 0; 1 is a straight line from lr to lr_end).
    """

    def __init__(self, schedule: str, learning_rate: float, num_train_steps: int,
                 num_warmup_steps: int = 0, lr_end: float = 0.0, lr_power: float = 1.0):
        _check_steps(num_train_steps, num_warmup_steps)
        check_schedule_options(schedule, learning_rate, lr_end, lr_power)
        if schedule == "linear":
            raise UserError("the linear schedule is WarmupLinearSchedule (the original's)")
        self.schedule = schedule
        self.learning_rate = float(learning_rate)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)
        self.lr_end = float(lr_end)
        self.lr_power = float(lr_power)

    def __call__(self, step) -> tf.Tensor:
        """Returns the float32 scalar learning rate for integer (or float) `step`."""
        step = tf.cast(step, tf.float32)
        after = self._after_warmup(step)
        if not self.num_warmup_steps:
            return after
        warmup = self.learning_rate * (step / float(self.num_warmup_steps))
        return tf.where(step < float(self.num_warmup_steps), warmup, after)

    def _after_warmup(self, step: tf.Tensor) -> tf.Tensor:
        lr, warmup = self.learning_rate, float(self.num_warmup_steps)
        if self.schedule == "constant":
            return tf.constant(lr, tf.float32)
        if self.schedule == "inverse_sqrt":
            timescale = warmup or float(INVERSE_SQRT_TIMESCALE)
            return lr * tf.sqrt(timescale / (step - warmup + timescale))
        # During warm-up `progress` is negative; tf.where then takes the warm-up branch.
        decay_steps = float(max(1, self.num_train_steps - self.num_warmup_steps))
        progress = tf.minimum((step - warmup) / decay_steps, 1.0)
        if self.schedule == "cosine":
            remaining = 0.5 * (1.0 + tf.cos(math.pi * progress))
        else:
            remaining = tf.pow(1.0 - progress, self.lr_power)
        return self.lr_end + (lr - self.lr_end) * remaining

    def get_config(self) -> dict:
        return {"schedule": self.schedule, "learning_rate": self.learning_rate,
                "num_train_steps": self.num_train_steps,
                "num_warmup_steps": self.num_warmup_steps, "lr_end": self.lr_end,
                "lr_power": self.lr_power}


def _check_steps(num_train_steps: int, num_warmup_steps: int) -> None:
    if num_train_steps <= 0:
        raise UserError(f"num_train_steps must be > 0 (got {num_train_steps}): the learning "
                        "rate schedule runs over it.")
    if num_warmup_steps < 0:
        raise UserError(f"num_warmup_steps must be >= 0 (got {num_warmup_steps}).")


def check_schedule_options(schedule: str, learning_rate: float, lr_end: float = 0.0,
                           lr_power: float = 1.0) -> None:
    """Raises UserError naming the flag when `--lr_schedule`, `--lr_end` or `--lr_power` is bad
    or given to a curve that does not read it."""
    if schedule not in SCHEDULES:
        raise UserError(f"--lr_schedule={schedule} is not a schedule: use one of "
                        f"{', '.join(SCHEDULES)}")
    if schedule in ("cosine", "polynomial"):
        if not 0.0 <= lr_end < learning_rate:
            raise UserError(f"--lr_end={lr_end} must be at least 0 and below --learning_rate="
                            f"{learning_rate}: the {schedule} schedule decays from one to the "
                            "other")
    elif lr_end:
        raise UserError(f"--lr_end is for --lr_schedule=cosine or polynomial, not {schedule}")
    if schedule == "polynomial":
        if lr_power <= 0:
            raise UserError(f"--lr_power={lr_power} must be > 0")
    elif lr_power != 1.0:
        raise UserError(f"--lr_power is for --lr_schedule=polynomial, not {schedule}")


def learning_rate_schedule(schedule: str, learning_rate: float, num_train_steps: int,
                           num_warmup_steps: int, lr_end: float = 0.0, lr_power: float = 1.0
                           ) -> keras.optimizers.schedules.LearningRateSchedule:
    """The curve `schedule` (one of SCHEDULES) over `num_train_steps` updates."""
    check_schedule_options(schedule, learning_rate, lr_end, lr_power)
    if schedule == "linear":
        return WarmupLinearSchedule(learning_rate, num_train_steps, num_warmup_steps)
    return WarmupDecaySchedule(schedule, learning_rate, num_train_steps, num_warmup_steps,
                               lr_end=lr_end, lr_power=lr_power)


def check_layerwise_decay(decay: float) -> None:
    """Raises UserError unless 0 < `decay` ≤ 1 (`--layerwise_lr_decay`)."""
    if not 0.0 < decay <= 1.0:
        raise UserError(f"--layerwise_lr_decay={decay} must be in (0, 1]: each layer learns at "
                        "that fraction of the rate of the layer above (1.0: off)")


def layerwise_rate_factors(encoder: keras.Model, variables: Sequence, decay: float
                           ) -> list[float]:
    """The factor of the learning rate of each of `variables` under layer-wise decay ξ = `decay`.

    With L = the encoder's number of layers: a variable of block i (`encoder.transformer_layers`,
    0-based) gets ξ^(L−i); any other variable of the encoder except its pooler (the embeddings,
    their LayerNorm and projections) ξ^(L+1); the pooler and every variable outside the encoder
    (the task's head) 1. So adjacent depths differ by exactly ξ.

    Args:
        encoder: a BertEncoder (or subclass) with one block object per layer.
        variables: the model's variables, in the order the optimizer is built with.
        decay: ξ, in (0, 1].

    Raises:
        UserError: when layers share their weights (ALBERT), as a shared block has no one depth.
    """
    check_layerwise_decay(decay)
    blocks = encoder.transformer_layers
    if len({id(block) for block in blocks}) < len(blocks):
        raise UserError(f"--layerwise_lr_decay cannot be used with this model: its "
                        f"{len(blocks)} layers share {len({id(b) for b in blocks})} set(s) of "
                        "weights (ALBERT), so no layer has a depth of its own to decay by; "
                        "leave --layerwise_lr_decay at 1.0")
    depth = len(blocks)
    exponents = {id(v): depth + 1 for v in encoder.trainable_variables}
    for i, block in enumerate(blocks):
        exponents.update({id(v): depth - i for v in block.trainable_variables})
    if encoder.pooler is not None:  # ELECTRA has none: [CLS]'s vector feeds the head
        exponents.update({id(v): 0 for v in encoder.pooler.trainable_variables})
    return [decay ** exponents.get(id(v), 0) for v in variables]
