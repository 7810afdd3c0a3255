"""The original optimization.py's API on TF2: `AdamWeightDecayOptimizer` and the
`create_optimizer(loss, init_lr, num_train_steps, num_warmup_steps, use_tpu)` call.

TF2 has no graph to hold a train op: the original's call takes the loss as a zero-argument
function here and returns a `TrainOp`, a callable that runs one training step when called (the
original's `sess.run(train_op)`): gradients of the loss with respect to every trainable variable
it reads (the original's `tf.trainable_variables()`), clipped to global norm 1.0, then one
update of `AdamWeightDecayOptimizer` on the warm-up + linear-decay schedule; the step count is
`train_op.optimizer.iterations` (the original's global step).
"""

from __future__ import annotations

from typing import Callable, Sequence

import tensorflow as tf

from bert_tf.errors import UserError
from bert_tf.training.optimizers import (DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY, AdamWeightDecay,
                                         build_optimizer)
from bert_tf.training.schedules import WarmupLinearSchedule


class AdamWeightDecayOptimizer(AdamWeightDecay):
    """The original's optimizer under its name and arguments: Adam without bias correction,
    decoupled weight decay, no clipping of its own (the original's `create_optimizer` clips
    before `apply_gradients`; pass `clip_norm=1.0` to clip here).

    As in the original, `weight_decay_rate` defaults to 0.0 and `exclude_from_weight_decay=None`
    decays every variable; a variable is excluded when a pattern occurs in its path or name.
    """

    def __init__(self, learning_rate, weight_decay_rate: float = 0.0, beta_1: float = 0.9,
                 beta_2: float = 0.999, epsilon: float = 1e-6,
                 exclude_from_weight_decay: Sequence[str] | None = None,
                 name: str = "AdamWeightDecayOptimizer", clip_norm: float | None = None,
                 **kwargs):
        super().__init__(learning_rate=learning_rate, weight_decay_rate=weight_decay_rate,
                         beta_1=beta_1, beta_2=beta_2, epsilon=epsilon,
                         exclude_from_weight_decay=tuple(exclude_from_weight_decay or ()),
                         clip_norm=clip_norm, name=name, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """Applies one update. `global_step` and `name` are accepted for the original's
        callers; the step count is `iterations`, which every update advances."""
        del global_step, name
        return super().apply_gradients(grads_and_vars)


class TrainOp:
    """One training step per call: `loss = train_op()`.

    Attributes:
      optimizer: the AdamWeightDecayOptimizer (its `iterations` is the global step).
      learning_rate: the schedule (`learning_rate(step)` gives the rate of that step).
    """

    def __init__(self, loss: Callable[[], tf.Tensor], optimizer: AdamWeightDecayOptimizer,
                 learning_rate: WarmupLinearSchedule, var_list: Sequence | None = None):
        self.loss, self.optimizer, self.var_list = loss, optimizer, var_list
        self.learning_rate = learning_rate

    def __call__(self) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = self.loss()
        variables = self.var_list or [v for v in tape.watched_variables() if v.trainable]
        grads = tape.gradient(loss, variables)
        # The original clips all gradients together, then applies them.
        grads, _ = tf.clip_by_global_norm(grads, clip_norm=1.0)
        self.optimizer.apply_gradients(zip(grads, variables))
        return loss


def create_train_op(loss: Callable[[], tf.Tensor], init_lr: float, num_train_steps: int,
                    num_warmup_steps: int, use_tpu: bool = False,
                    var_list: Sequence | None = None) -> TrainOp:
    """The original's `create_optimizer(loss, init_lr, num_train_steps, num_warmup_steps,
    use_tpu)`, in its TF2 form.

    Args:
      loss: a function of no arguments returning the scalar loss (the graph's loss tensor).
      init_lr: the peak learning rate.
      num_train_steps, num_warmup_steps: the schedule's length and warm-up.
      use_tpu: accepted for the original's callers; replicas are a tf.distribute strategy's
        business (create the TrainOp inside its scope).
      var_list: the variables to train; default every trainable variable the loss reads.

    Returns:
      The TrainOp: call it once per step.
    """
    del use_tpu
    if not callable(loss):
        raise UserError("create_optimizer(loss, ...) takes the loss as a function of no "
                        "arguments in TF2 (a computed tensor has no graph to differentiate): "
                        "pass `lambda: compute_loss(...)`")
    schedule = WarmupLinearSchedule(init_lr, num_train_steps, num_warmup_steps)
    optimizer = AdamWeightDecayOptimizer(
        learning_rate=schedule, weight_decay_rate=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
        exclude_from_weight_decay=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY)
    return TrainOp(loss, optimizer, schedule, var_list)


def create_optimizer(*args, **kwargs):
    """Builds the optimizer; two call forms.

    `create_optimizer(init_lr, num_train_steps, num_warmup_steps, ...)` returns the optimizer
    (`training.optimizers.build_optimizer`, what the training loop uses). The original's call
    `create_optimizer(loss, init_lr, num_train_steps, num_warmup_steps, use_tpu)`, with `loss` a
    function of no arguments, returns a `TrainOp` that runs one step per call (`create_train_op`
    above; docs/migrating.md).
    """
    first = args[0] if args else kwargs.get("loss")
    if callable(first) or tf.is_tensor(first):
        return create_train_op(*args, **kwargs)
    return build_optimizer(*args, **kwargs)
