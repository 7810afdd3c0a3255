"""The original BERT optimizer: Adam with decoupled weight decay, LAMB (schedules: schedules.py).

The update rule of `AdamWeightDecay` is the original's (its `optimization.py`), per variable θ
with gradient g (after global-norm clipping):

    m = β1·m + (1−β1)·g;   v = β2·v + (1−β2)·g²
    u = m / (√v + ε) + wd·θ        (wd·θ only for variables that are not excluded)
    θ = θ − lr·u

with NO bias correction and ε = 1e-6. This is not Keras' `AdamW` (which has bias correction,
ε 1e-7, and matches exclusions on the short variable name only).

Order of a step, on every replica (see `_BertOptimizer._clip_gradients`):
  1. gradients are summed across replicas (tf.distribute all-reduce), once;
  2. the summed gradients are clipped to global norm `clip_norm` (1.0, as the original);
  3. each variable is updated with the rule above (one XLA-compiled pure function per variable).
The loop therefore supplies each replica's share of the global-batch loss (see `bert_tf.model.losses`).

Weight-decay exclusion: a variable is not decayed when any of the `exclude_from_weight_decay`
strings (default `LayerNorm`, `layer_norm`, `bias`) occurs, case-sensitively, in its Keras path
(`variable.path`, e.g. `output_layer_norm/gamma`, `masked_lm/output_bias`), or in its name when it
has no path. Keras' default `layer_normalization*` layer names contain `layer_norm`.
See docs/optimization.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import keras
import tensorflow as tf

from bert_tf.errors import UserError
from bert_tf.training import schedules

DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")
OPTIMIZER_TYPES = ("adamw", "lamb")


def variable_key(variable) -> str:
    """The string the exclusion rules match: Keras `.path` when present, else `.name`."""
    return getattr(variable, "path", None) or variable.name


def matches_any(variable, patterns: Sequence[str]) -> bool:
    """True if any of `patterns` occurs in `variable_key(variable)` (plain, case-sensitive)."""
    key = variable_key(variable)
    return any(pattern in key for pattern in patterns)


def _moments(m, v, g, beta_1: float, beta_2: float):
    """Adam's moving averages, without bias correction: (β1·m + (1−β1)·g, β2·v + (1−β2)·g²)."""
    return beta_1 * m + (1.0 - beta_1) * g, beta_2 * v + (1.0 - beta_2) * tf.square(g)


def adamw_update(theta, m, v, g, lr, beta_1: float, beta_2: float, epsilon: float,
                 weight_decay: float):
    """The original's update of one variable; returns (new θ, new m, new v).

    Pure function of tensors (θ, m, v, g shaped alike, lr a scalar); `weight_decay` is 0.0 for
    excluded variables. Constants are Python floats, so (1−β2) is 0.001 as in the original.
    """
    m, v = _moments(m, v, g, beta_1, beta_2)
    update = m / (tf.sqrt(v) + epsilon)
    if weight_decay:
        update += weight_decay * theta
    return theta - lr * update, m, v


def lamb_update(theta, m, v, g, lr, step, beta_1: float, beta_2: float, epsilon: float,
                weight_decay: float, adapt: bool):
    """LAMB's update of one variable (`step` = 1-based update number); returns (θ, m, v)."""
    m, v = _moments(m, v, g, beta_1, beta_2)
    m_hat = m / (1.0 - tf.pow(beta_1, step))
    v_hat = v / (1.0 - tf.pow(beta_2, step))
    update = m_hat / (tf.sqrt(v_hat) + epsilon)
    if weight_decay:
        update += weight_decay * theta
    if adapt:
        w_norm, u_norm = tf.norm(theta), tf.norm(update)
        lr *= tf.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, tf.ones_like(w_norm))
    return theta - lr * update, m, v


# One XLA kernel per variable: a single pass over θ, m, v, g instead of ~15 element-wise ops.
_FUSED = {adamw_update: tf.function(adamw_update, jit_compile=True),
          lamb_update: tf.function(lamb_update, jit_compile=True)}


class _TrainedGroups:
    """The per-step flags of `variable_groups`, kept out of checkpoints: a plain object, which
    tf.train.Checkpoint does not track, holds the variable (set before every update, it is no
    state to resume, and a checkpoint written without it restores as before)."""

    def __init__(self, groups: int):
        self.flags = tf.Variable(tf.ones([groups]), trainable=False, name="trained_groups",
                                 synchronization=tf.VariableSynchronization.ON_READ,
                                 aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)


class _BertOptimizer(keras.optimizers.Optimizer):
    """Shared parts: replica all-reduce, global-norm clipping, weight-decay exclusion by path.

    Keras' own `weight_decay` and `global_clipnorm` are not used: Keras clips each replica's
    gradients before they are summed (TF backend), and it decays by the short variable name.

    Keras has no public hook for "sum across replicas, then clip", so this overrides three
    private methods of `keras.optimizers.Optimizer` (checked on Keras 3.15.1 with TensorFlow
    2.21.0): `_clip_gradients` (called once per update, in the replica context),
    `_all_reduce_sum_gradients` (the TF backend's sum, made a no-op) and
    `_get_current_learning_rate` (reading `_learning_rate`); it also reads `_get_variable_index`.
    `add_optimizer_variables` needs Keras 3.10.
    tests/training/test_optimization.py's `test_replica_gradients_are_summed_exactly_once`
    fails if Keras changes what they mean (gradients summed twice or never).

    After each update `gradient_norm` (a float32 scalar variable, same on every replica) holds the
    global norm of the summed gradients BEFORE clipping, for summaries.
    """

    def __init__(self, learning_rate=0.001, weight_decay_rate: float = 0.01, beta_1: float = 0.9,
                 beta_2: float = 0.999, epsilon: float = 1e-6,
                 exclude_from_weight_decay: Sequence[str] | None = None,
                 clip_norm: float | None = 1.0, fuse_update: bool = True,
                 learning_rate_multipliers: Mapping[str, float] | None = None,
                 variable_rate_factors: Sequence[float] | None = None,
                 variable_groups: Sequence[int] | None = None,
                 name: str | None = None, **kwargs):
        for arg in ("weight_decay", "global_clipnorm", "clipnorm", "clipvalue"):
            if kwargs.get(arg) is not None:
                raise ValueError(f"{type(self).__name__} does not take Keras' `{arg}`: use "
                                 "weight_decay_rate / clip_norm.")
            kwargs.pop(arg, None)
        super().__init__(learning_rate=learning_rate, name=name or type(self).__name__, **kwargs)
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        if self.gradient_accumulation_steps and replicas > 1:
            # Keras accumulates inside a tf.cond, where tf.distribute cannot synchronise replicas.
            raise UserError("gradient_accumulation_steps needs a single replica: with several, "
                             "sum the micro-batch gradients in the train step and apply once.")
        self.weight_decay_rate = float(weight_decay_rate)
        self.beta_1 = float(beta_1)
        self.beta_2 = float(beta_2)
        self.epsilon = float(epsilon)
        self.exclude_from_weight_decay_patterns = tuple(
            DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY if exclude_from_weight_decay is None
            else exclude_from_weight_decay)
        self.clip_norm = None if clip_norm is None or clip_norm <= 0 else float(clip_norm)
        self.fuse_update = bool(fuse_update)
        self.learning_rate_multipliers = dict(learning_rate_multipliers or {})
        self.variable_rate_factors = (None if variable_rate_factors is None
                                      else [float(f) for f in variable_rate_factors])
        self.variable_groups = None if variable_groups is None else [int(g) for g in
                                                                     variable_groups]
        self._trained_groups: _TrainedGroups | None = None

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._momentums, self._velocities = self.add_optimizer_variables(
            var_list, ["m", "v"])
        # Decided here from the Keras paths: `update_step` may see the backing tf.Variable,
        # whose name has lost the layer path.
        self._weight_decays = [
            0.0 if matches_any(v, self.exclude_from_weight_decay_patterns)
            else self.weight_decay_rate for v in var_list]
        # The first pattern found in a variable's path scales its rate (e.g. a CRF's scores),
        # times the variable's own factor (layer-wise decay).
        factors = self.variable_rate_factors or [1.0] * len(var_list)
        if len(factors) != len(var_list):
            raise ValueError(f"{len(factors)} variable_rate_factors for {len(var_list)} "
                             "variables: give one per variable the optimizer is built with")
        self._rate_factors = [
            factor * next((multiplier for pattern, multiplier
                           in self.learning_rate_multipliers.items()
                           if matches_any(v, [pattern])), 1.0)
            for v, factor in zip(var_list, factors)]
        self.gradient_norm = tf.Variable(
            0.0, trainable=False, name="gradient_norm",
            synchronization=tf.VariableSynchronization.ON_READ,
            aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        if self.variable_groups is not None:
            if len(self.variable_groups) != len(var_list):
                raise ValueError(f"{len(self.variable_groups)} variable_groups for "
                                 f"{len(var_list)} variables: give one per variable")
            self._trained_groups = _TrainedGroups(max(self.variable_groups) + 1)

    def set_trained_groups(self, trained: tf.Tensor) -> None:
        """Which groups of `variable_groups` the next update trains: `trained` [groups] bool,
        the same on every replica. Call it in the replica context, before `apply`."""
        if self._trained_groups is None:
            raise ValueError("set_trained_groups needs an optimizer built with variable_groups")
        self._trained_groups.flags.assign(tf.cast(trained, tf.float32))

    def uses_weight_decay(self, variable) -> bool:
        """Whether `variable` (one the optimizer was built with) is decayed."""
        return self._weight_decays[self._get_variable_index(variable)] > 0

    def _clip_gradients(self, grads):
        # Keras calls this on the gradients of one update (after accumulation), in the replica
        # context: sum across replicas first so that the norm is the global batch's.
        context = tf.distribute.get_replica_context()
        if context is not None and context.num_replicas_in_sync > 1:
            grads = context.all_reduce(tf.distribute.ReduceOp.SUM, list(grads))
        # Dense, as the original: m and v of every embedding row decay at every step.
        grads = [tf.convert_to_tensor(g) for g in grads]
        norm = tf.linalg.global_norm(grads)
        self.gradient_norm.assign(norm)
        if self.clip_norm is None:
            return grads
        clipped, _ = tf.clip_by_global_norm(grads, self.clip_norm, use_norm=norm)
        return clipped

    def _all_reduce_sum_gradients(self, grads_and_vars):
        # Already summed in `_clip_gradients`; Keras' TF optimizer would sum a second time.
        return list(grads_and_vars)

    def _get_current_learning_rate(self):
        # Keras evaluates a schedule at the micro-step count under gradient accumulation; the
        # schedule is defined over updates, which `iterations` counts.
        if isinstance(self._learning_rate, keras.optimizers.schedules.LearningRateSchedule):
            return self._learning_rate(self.iterations)
        return super()._get_current_learning_rate()

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        function, options = self._update_function(index)
        if self._rate_factors[index] != 1.0:
            learning_rate = learning_rate * self._rate_factors[index]
        if self.fuse_update:
            function = _FUSED[function]
        old_values = (tf.convert_to_tensor(variable), tf.convert_to_tensor(m),
                      tf.convert_to_tensor(v))
        new_values = function(*old_values, tf.cast(gradient, variable.dtype),
                              tf.cast(learning_rate, variable.dtype), **options)
        group = self.variable_groups[index] if self.variable_groups is not None else -1
        if group >= 0:  # a variable of a group this update may not train: kept as it was
            trained = self._trained_groups.flags[group] > 0
            new_values = [tf.where(trained, new, old) for new, old in zip(new_values, old_values)]
        for target, value in zip((variable, m, v), new_values):
            self.assign(target, value)

    def _update_function(self, index: int):
        """(pure update function, its keyword arguments) for the variable at `index`."""
        raise NotImplementedError

    def get_config(self) -> dict:
        config = super().get_config()
        for key in ("weight_decay", "clipnorm", "global_clipnorm", "clipvalue"):
            config.pop(key, None)
        config.update(weight_decay_rate=self.weight_decay_rate, beta_1=self.beta_1,
                      beta_2=self.beta_2, epsilon=self.epsilon, clip_norm=self.clip_norm,
                      fuse_update=self.fuse_update,
                      learning_rate_multipliers=dict(self.learning_rate_multipliers),
                      variable_rate_factors=self.variable_rate_factors,
                      variable_groups=self.variable_groups,
                      exclude_from_weight_decay=list(self.exclude_from_weight_decay_patterns))
        return config


@keras.saving.register_keras_serializable(package="bert_tf")
class AdamWeightDecay(_BertOptimizer):
    """Adam with decoupled weight decay and no bias correction, exactly as the original BERT.

    Args:
        learning_rate: float or `LearningRateSchedule` (`bert_tf.training.schedules`).
        weight_decay_rate: wd in `u = m/(√v+ε) + wd·θ`; the decay is multiplied by lr.
        beta_1, beta_2, epsilon: Adam constants (original: 0.9, 0.999, 1e-6).
        exclude_from_weight_decay: substrings of variable paths never decayed (None: the default
            `LayerNorm`, `layer_norm`, `bias`).
        clip_norm: global-norm clip of the replica-summed gradients; None or 0 disables.
        fuse_update: compile each variable's update with XLA (one pass over θ, m, v, g; same
            arithmetic); False runs it as separate TensorFlow ops (where XLA is unavailable).
        learning_rate_multipliers: {substring of a variable path: factor}; those variables
            update at factor × the scheduled rate (run_ner.py --crf_learning_rate).
        variable_rate_factors: one factor of the scheduled rate per variable of the list the
            optimizer is built with, in its order (layer-wise decay:
            `schedules.layerwise_rate_factors`); multiplies `learning_rate_multipliers`.
        variable_groups: one group number per variable of that list, -1 for a variable every
            update trains; a variable of group g >= 0 (a multi-task run's head) is updated,
            with its moments and weight decay, only by updates whose `set_trained_groups`
            flags g, and left exactly as it was by the others.
        name: optimizer name (default: the class name).
        **kwargs: other Keras optimizer arguments (`gradient_accumulation_steps`, ...).
    """

    def _update_function(self, index: int):
        return adamw_update, dict(beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon,
                                  weight_decay=self._weight_decays[index])


@keras.saving.register_keras_serializable(package="bert_tf")
class Lamb(_BertOptimizer):
    """LAMB (You et al. 2019) for large batches, with the original's decay exclusions.

    Per variable, with t = number of this update (1-based):
        m, v as Adam;  m̂ = m/(1−β1^t);  v̂ = v/(1−β2^t)
        u = m̂/(√v̂ + ε) + wd·θ             (wd·θ only if not excluded from weight decay)
        r = ‖θ‖/‖u‖ if both norms > 0 else 1   (r = 1 for variables excluded from layer adaptation)
        θ = θ − lr·r·u

    Args:
        exclude_from_layer_adaptation: substrings of variable paths updated without the trust
            ratio; None: the same list as `exclude_from_weight_decay` (LayerNorm and biases).
        Other arguments as `AdamWeightDecay`.
    """

    def __init__(self, learning_rate=0.001,
                 exclude_from_layer_adaptation: Sequence[str] | None = None, **kwargs):
        super().__init__(learning_rate, **kwargs)
        self.exclude_from_layer_adaptation_patterns = (
            self.exclude_from_weight_decay_patterns if exclude_from_layer_adaptation is None
            else tuple(exclude_from_layer_adaptation))

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._adapt = [not matches_any(v, self.exclude_from_layer_adaptation_patterns)
                       for v in var_list]

    def _update_function(self, index: int):
        return lamb_update, dict(step=tf.cast(self.iterations + 1, tf.float32), beta_1=self.beta_1,
                                 beta_2=self.beta_2, epsilon=self.epsilon,
                                 weight_decay=self._weight_decays[index],
                                 adapt=self._adapt[index])

    def get_config(self) -> dict:
        config = super().get_config()
        config["exclude_from_layer_adaptation"] = list(self.exclude_from_layer_adaptation_patterns)
        return config


def _share_overflow(context: tf.distribute.ReplicaContext, grads: list) -> list:
    """Makes every replica's gradients non-finite if any replica's are (an all-reduced flag)."""
    grads = [None if g is None else tf.convert_to_tensor(g) for g in grads]
    local = tf.logical_not(tf.reduce_all([tf.reduce_all(tf.math.is_finite(g))
                                          for g in grads if g is not None]))
    overflows = context.all_reduce(tf.distribute.ReduceOp.SUM, tf.cast(local, tf.float32))
    poison = tf.where(overflows > 0, float("nan"), 0.0)
    return [None if g is None else g + tf.cast(poison, g.dtype) for g in grads]


@keras.saving.register_keras_serializable(package="bert_tf")
class LossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """Keras' dynamic loss scaling, with the finite-gradient test agreed across replicas.

    Keras decides "skip this step" from the first replica's gradients only; under MirroredStrategy
    an overflow on another replica would then reach the all-reduce and poison every weight. Here
    the decision is all replicas' (an overflow anywhere skips the step everywhere).
    The loop multiplies the loss by `scale_loss(loss)`; gradients are unscaled here. A skipped
    step does not advance `iterations` (nor the learning-rate schedule).
    """

    def apply(self, grads, trainable_variables=None):
        context = tf.distribute.get_replica_context()
        if context is not None and context.num_replicas_in_sync > 1:
            grads = _share_overflow(context, grads)
        return super().apply(grads, trainable_variables)

    @property
    def gradient_norm(self):
        return self.inner_optimizer.gradient_norm


def build_optimizer(init_lr: float, num_train_steps: int, num_warmup_steps: int,
                     optimizer_type: str = "adamw", weight_decay_rate: float = 0.01,
                     clip_norm: float | None = 1.0, loss_scale: bool = False,
                     gradient_accumulation_steps: int | None = None,
                     lr_schedule: str = "linear", lr_end: float = 0.0, lr_power: float = 1.0,
                     **kwargs) -> keras.optimizers.Optimizer:
    """Builds the original's optimizer (or LAMB) on a warm-up schedule (default: the
    original's warm-up + linear decay).

    Create it inside `strategy.scope()` so that its variables are mirrored like the model's.

    Args:
        init_lr: Peak learning rate (the original's `--learning_rate`).
        num_train_steps: Number of updates over which the rate decays.
        num_warmup_steps: Number of linear warm-up updates.
        optimizer_type: `adamw` (the original, default) or `lamb`.
        weight_decay_rate: Decoupled weight decay (0.01 as the original).
        clip_norm: Global-norm gradient clipping (1.0 as the original); None disables.
        loss_scale: Wrap in a dynamic `LossScaleOptimizer` (for float16 compute).
        gradient_accumulation_steps: Keras gradient accumulation (None or 1: off). The schedule
            and `iterations` then count updates, not micro-batches.
        lr_schedule, lr_end, lr_power: the curve after warm-up (`schedules.SCHEDULES`).
        **kwargs: passed to the optimizer class (epsilon, beta_1, exclusions, ...).

    Returns:
        The optimizer; `iterations` counts applied updates (the global step).
    """
    classes = {"adamw": AdamWeightDecay, "lamb": Lamb}
    if optimizer_type not in classes:
        raise UserError(f"Unknown optimizer_type {optimizer_type!r}: use one of "
                         f"{', '.join(OPTIMIZER_TYPES)}.")
    if gradient_accumulation_steps is not None and gradient_accumulation_steps <= 1:
        gradient_accumulation_steps = None
    schedule = schedules.learning_rate_schedule(lr_schedule, init_lr, num_train_steps,
                                                num_warmup_steps, lr_end=lr_end,
                                                lr_power=lr_power)
    optimizer = classes[optimizer_type](
        learning_rate=schedule, weight_decay_rate=weight_decay_rate, clip_norm=clip_norm,
        gradient_accumulation_steps=gradient_accumulation_steps, **kwargs)
    return LossScaleOptimizer(optimizer) if loss_scale else optimizer

