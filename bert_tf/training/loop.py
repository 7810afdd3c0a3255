"""The one training loop of every run_* script: train, evaluate, predict (docs/training_api.md).

A script supplies a `Task` (model + loss terms + metrics), input functions and a `RunConfig`; the
loop does the rest: strategy scope, dtype policy, optimizer, XLA, gradient accumulation,
checkpoints with exact resume, `init_checkpoint`, summaries and log lines.

Exact resume: a checkpoint holds the model (including the dropout RNG states), the optimizer and
the global step. The input position is NOT stored (a tf.data iterator checkpoint holds shuffle
buffers and cannot follow a multi-worker job); instead the training input is deterministic for a
seed and, on resume, each input pipeline skips the batches the finished steps consumed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
import time
import weakref
from typing import Any, Callable, Iterator, Mapping, Protocol

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import filesystem
from bert_tf.training import optimizers
from bert_tf.checkpoints import model_config
from bert_tf.checkpoints.files import holds_bert_tf_checkpoint
from bert_tf.errors import MissingFileError, UserError
from bert_tf.filesystem import full_disk
from bert_tf.model.config import BertConfig
from bert_tf.training import distribution, preemption, schedules, steps as training_steps
from bert_tf.training.log import SummaryLog, host_values, summarize, write_scalars

InputFn = Callable[[tf.distribute.InputContext, int], tf.data.Dataset]
CHECKPOINT_NAME = "ckpt"


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Run options shared by every script (see docs/training_api.md for each field)."""

    output_dir: str
    train_batch_size: int = 32
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    learning_rate: float = 5e-5
    num_train_steps: int = 1000
    num_warmup_steps: int = 0
    lr_schedule: str = "linear"
    lr_end: float = 0.0
    lr_power: float = 1.0
    layerwise_lr_decay: float = 1.0
    optimizer: str = "adamw"
    weight_decay_rate: float = 0.01
    clip_norm: float | None = 1.0
    gradient_accumulation_steps: int = 1
    dtype: str = "float32"
    use_xla: bool = False
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 5
    iterations_per_loop: int = 1000
    log_every_n_steps: int = 100
    init_checkpoint: str | None = None
    max_eval_steps: int | None = None
    seed: int = 12345

    def __post_init__(self) -> None:
        if not self.output_dir:
            raise UserError("RunConfig.output_dir is required (--output_dir).")
        if filesystem.exists(self.output_dir) and not filesystem.isdir(self.output_dir):
            raise UserError(f"--output_dir={self.output_dir} is an existing file, not a "
                            "directory: give a directory (created if missing)")
        for name in ("train_batch_size", "eval_batch_size", "predict_batch_size",
                     "gradient_accumulation_steps", "save_checkpoints_steps",
                     "keep_checkpoint_max", "iterations_per_loop", "log_every_n_steps"):
            if getattr(self, name) < 1:
                raise UserError(f"--{name} must be at least 1, got {getattr(self, name)}")
        if self.num_train_steps < 0 or self.num_warmup_steps < 0:
            raise UserError("--num_train_steps and --num_warmup_steps must not be negative")
        if self.optimizer not in optimizers.OPTIMIZER_TYPES:
            raise UserError(f"--optimizer must be one of {', '.join(optimizers.OPTIMIZER_TYPES)}"
                             f", got {self.optimizer!r}")
        distribution.policy_name(self.dtype)  # validates --dtype
        schedules.check_schedule_options(self.lr_schedule, self.learning_rate, self.lr_end,
                                         self.lr_power)
        schedules.check_layerwise_decay(self.layerwise_lr_decay)

    def replace(self, **changes: Any) -> "RunConfig":
        return dataclasses.replace(self, **changes)


class Task:
    """What a script supplies to the loop; subclass it (docs/training_api.md has an example).

    Loss terms: `losses()[name]` is a float32 SUM over this (micro-)batch and
    `loss_normalizers()[name]` (from the features only) what it is divided by, summed over the
    global batch by the loop. Metrics are weighted means given as `(Σ w·value, Σ w)`; a metric
    that is no mean (an AUC) comes from `counts` that add up, through `metrics_from_counts`.
    """

    # {term: ε} added once to the term's global normalizer (the original's masked LM: 1e-5).
    loss_epsilons: Mapping[str, float] = {}
    # {substring of a variable path: factor of the learning rate} (e.g. a CRF's own rate).
    learning_rate_multipliers: Mapping[str, float] = {}

    def build_model(self) -> keras.Model:
        """A fresh model; called inside the strategy's scope under the run's dtype policy."""
        raise NotImplementedError

    def variable_groups(self, model: keras.Model) -> list[int] | None:
        """Variables that only some batches train (a multi-task run's heads): one group number
        per variable of `model.trainable_variables`, -1 for those every batch trains; None (the
        default) when every batch trains every variable. A variable of group g >= 0 is updated,
        moments and weight decay included, only on steps whose `trained_groups` flag g."""
        return None

    def trained_groups(self, features: Mapping[str, tf.Tensor]) -> tf.Tensor:
        """[groups] bool: the groups of `variable_groups` this (replica's) batch trains; the
        step trains the groups any replica's batch flags."""
        raise NotImplementedError

    def forward(self, model: keras.Model, features: Mapping[str, tf.Tensor],
                training: bool, static_shapes: bool = False) -> Mapping[str, tf.Tensor]:
        """The model's outputs for one batch. `static_shapes`: the step's shapes must not depend
        on the batch's padding (XLA, TPUs); the models of `bert_tf.model.models` pass it on to
        their encoder. A model of one's own is called with it only when it is set."""
        if static_shapes:
            return model(features, training=training, static_shapes=True)
        return model(features, training=training)

    def loss_normalizers(self, features: Mapping[str, tf.Tensor]) -> Mapping[str, tf.Tensor]:
        """{term: float32 scalar}: the sum of the loss weights of this batch, from features only."""
        raise NotImplementedError

    def losses(self, features: Mapping[str, tf.Tensor],
               outputs: Mapping[str, tf.Tensor]) -> Mapping[str, tf.Tensor]:
        """{term: float32 scalar}: the sum of the weighted losses of this batch."""
        raise NotImplementedError

    def metrics(self, features: Mapping[str, tf.Tensor], outputs: Mapping[str, tf.Tensor]
                ) -> Mapping[str, tuple[tf.Tensor, tf.Tensor]]:
        """{name: (Σ w·value, Σ w)} for weighted-mean metrics of this batch."""
        return {}

    def counts(self, features: Mapping[str, tf.Tensor], outputs: Mapping[str, tf.Tensor]
               ) -> Mapping[str, tf.Tensor]:
        """{name: float32 tensor of a fixed shape}: counts of this batch that add up (a
        histogram, say); the loop sums them over replicas, steps and eval batches."""
        return {}

    def metrics_from_counts(self, counts: Mapping[str, np.ndarray]) -> Mapping[str, float]:
        """{metric: value} from `counts` summed over a log line's steps or a whole evaluation
        (float64 arrays); runs on the host, once per log line or evaluation."""
        return {}

    def predictions(self, features: Mapping[str, tf.Tensor],
                    outputs: Mapping[str, tf.Tensor]) -> Mapping[str, tf.Tensor]:
        """Per-example tensors (leading batch axis) that `predict` yields."""
        return outputs


class Evaluator(Protocol):
    """Evaluation during training (`bert_tf.training.best_checkpoint.BestCheckpoint`): `train`
    saves a checkpoint at every step where `due`, calls the evaluator on it, and stops when it
    says so."""

    def steps_to_next(self, step: int) -> int: ...

    def due(self, step: int, num_train_steps: int) -> bool: ...

    def resume(self, step: int, num_train_steps: int, checkpoint: str) -> bool: ...

    def __call__(self, step: int, checkpoint: str) -> bool: ...


@contextlib.contextmanager
def _dtype_policy(dtype: str):
    """Sets the Keras dtype policy for the run's dtype while layers are built, then restores it."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(distribution.policy_name(dtype))
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def _seed_states(model: keras.Model) -> list:
    """The dropout RNG states: Keras does not track SeedGenerators for tf.train.Checkpoint.

    Keras' `variables` are the `weights` plus every SeedGenerator's state (its documented
    meaning: "all layer state, including random seeds").
    """
    weights = {id(variable) for variable in model.weights}
    return [variable for variable in model.variables if id(variable) not in weights]


class _Run:
    """Model, optimizer and checkpoint of one run, built inside `strategy.scope()`."""

    def __init__(self, task: Task, config: RunConfig, strategy: tf.distribute.Strategy,
                 with_optimizer: bool):
        self.config, self.strategy = config, strategy
        with strategy.scope():
            with _dtype_policy(config.dtype):
                self.model = task.build_model()
            self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step",
                                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
            objects = {"model": self.model, "global_step": self.global_step,
                       "rng": _seed_states(self.model)}
            self.optimizer = None
            if with_optimizer:
                self.optimizer = optimizers.build_optimizer(
                    config.learning_rate, config.num_train_steps, config.num_warmup_steps,
                    optimizer_type=config.optimizer, weight_decay_rate=config.weight_decay_rate,
                    clip_norm=config.clip_norm, loss_scale=config.dtype == "float16",
                    lr_schedule=config.lr_schedule, lr_end=config.lr_end,
                    lr_power=config.lr_power,
                    learning_rate_multipliers=task.learning_rate_multipliers,
                    variable_rate_factors=_layerwise_factors(self.model,
                                                             config.layerwise_lr_decay),
                    variable_groups=task.variable_groups(self.model))
                # Built now so that a restore fills the slots at once and XLA sees no new variables.
                self.optimizer.build(self.model.trainable_variables)
                objects["optimizer"] = self.optimizer
        self.checkpoint = tf.train.Checkpoint(**objects)

    def restore(self, checkpoint: str | None) -> bool:
        """Restores `checkpoint` (default: latest in output_dir), else loads init_checkpoint.

        Returns whether a checkpoint of this run was restored.
        """
        path = checkpoint or tf.train.latest_checkpoint(self.config.output_dir)
        if path:
            status = self.checkpoint.read(path)
            if self.optimizer is None:
                status.expect_partial()  # an eval/predict run has no optimizer slots to fill
            status.assert_existing_objects_matched()
            logging.info("restored %s (global step %d)", path, int(self.global_step.numpy()))
            return True
        if self.config.init_checkpoint:
            from bert_tf.checkpoints import name_map as checkpoints  # noqa: PLC0415 (heavy; only when used)
            with self.strategy.scope():
                checkpoints.init_from_checkpoint(self.model, self.config.init_checkpoint)
        return False

    def step(self) -> int:
        return int(self.global_step.numpy())


def _layerwise_factors(model: keras.Model, decay: float) -> list[float] | None:
    """The rate factor of each trainable variable under layer-wise decay; None when off."""
    if decay == 1.0:
        return None
    encoder = getattr(model, "encoder", None)
    if encoder is None:
        raise UserError("--layerwise_lr_decay needs a model with an encoder (`model.encoder`) "
                        "whose layers it decays; leave it at 1.0 for this model")
    return schedules.layerwise_rate_factors(encoder, model.trainable_variables, decay)


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process writes the run's files (always, except on non-chief workers)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief


def _distribute(strategy: tf.distribute.Strategy, input_fn: InputFn, global_batch_size: int,
                skip_steps: int = 0) -> tf.data.Dataset | tf.distribute.DistributedDataset:
    """The input of the strategy's replicas; each pipeline skips the batches of `skip_steps`
    finished steps.

    One replica on this host's CPU (`_one_host_replica`) reads a plain dataset without tf.data's
    autotuning: freeing an autotuned iterator waits for its autotuning thread, which TensorFlow
    2.21 wakes too early (before its cancellation counts) so that it sleeps out its period, up
    to a minute, as the script stands still after training or an evaluation. Its parallel maps
    run as many calls as there are cores (at most 16), as autotuning starts them. Other
    strategies get their distributed dataset, whose per-device iterators autotune regardless.
    """
    replicas = strategy.num_replicas_in_sync
    if global_batch_size % replicas:
        raise UserError(f"batch size {global_batch_size} is not divisible by the "
                         f"{replicas} replicas of the {type(strategy).__name__}")

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        dataset = input_fn(context, global_batch_size // replicas)
        batches_per_step = replicas // context.num_input_pipelines
        return dataset.skip(skip_steps * batches_per_step) if skip_steps else dataset

    if _one_host_replica(strategy):
        options = tf.data.Options()
        options.autotune.enabled = False
        return dataset_fn(tf.distribute.InputContext()).with_options(options)
    return strategy.distribute_datasets_from_function(dataset_fn)


def _one_host_replica(strategy: tf.distribute.Strategy) -> bool:
    """Whether the strategy runs one replica, on this host's CPU, or is the default strategy
    (whose datasets are plain ones already)."""
    if strategy is tf.distribute.get_strategy() and not tf.distribute.has_strategy():
        return True
    devices = strategy.extended.worker_devices
    return (strategy.num_replicas_in_sync == 1 and len(devices) == 1
            and tf.DeviceSpec.from_string(devices[0]).device_type == "CPU")


def _write_bert_config(model: keras.Model, output_dir: str) -> None:
    """output_dir/bert_config.json, atomically, local or gs:// (so the run is a whole model)."""
    config = getattr(model, "config", None)
    if isinstance(config, BertConfig):
        path = os.path.join(output_dir, "bert_config.json")
        _check_resumed_activation(config, path)
        filesystem.write_atomically(path, config.to_json_string())


def _check_resumed_activation(config: BertConfig, path: str) -> None:
    """Refuses to resume a run with a config whose activation is not the one its checkpoints
    were trained with (an ELECTRA run started while bert_tf read ELECTRA's "gelu" as the tanh
    form, resumed with a config whose "gelu" now means google's erf form)."""
    if not (filesystem.isfile(path) and holds_bert_tf_checkpoint(filesystem.dirname(path))):
        return
    trained = model_config.load_model_config(path)
    if trained.activation != config.activation:
        raise UserError(
            f"{path}: this run's checkpoints were trained with the activation {trained.activation}"
            f" but the model config given now means {config.activation}: set \"hidden_act\": "
            f"\"{trained.hidden_act}\" in the config to resume the run (docs/electra.md)")


def _checkpoint_manager(run: _Run, chief: bool) -> tf.train.CheckpointManager:
    # Non-chief workers take part in saving (it may run collectives) but into a scratch directory.
    directory = run.config.output_dir if chief else tempfile.mkdtemp(prefix="bert_tf_worker_")
    return tf.train.CheckpointManager(run.checkpoint, directory, run.config.keep_checkpoint_max,
                                      checkpoint_name=CHECKPOINT_NAME)


def _save(manager: tf.train.CheckpointManager, step: int, chief: bool) -> None:
    if manager.latest_checkpoint and manager.latest_checkpoint.endswith(f"-{step}"):
        return  # a preemption save right after the periodic one
    prefix = os.path.join(manager.directory, f"{CHECKPOINT_NAME}-{step}")

    def remove_partial() -> None:
        filesystem.delete_any(*filesystem.glob(f"{prefix}.*"), f"{prefix}_temp")

    with full_disk.named_when_full(prefix, remove_partial):
        path = manager.save(checkpoint_number=step)
    if chief:
        logging.info("saved %s", path)
    else:
        filesystem.delete_tree(manager.directory)


def train(task: Task, config: RunConfig, input_fn: InputFn,
          strategy: tf.distribute.Strategy | None = None,
          evaluator: Evaluator | None = None) -> dict[str, float]:
    """Trains until the global step reaches `config.num_train_steps`, resuming if possible, or
    until `evaluator` (evaluation during training) stops it early.

    Returns:
        The last log window's figures and "global_step".
    """
    strategy = strategy or tf.distribute.get_strategy()
    keras.utils.set_random_seed(config.seed)
    chief = is_chief(strategy)
    filesystem.makedirs(config.output_dir)
    run = _Run(task, config, strategy, with_optimizer=True)
    run.restore(None)
    if chief:
        _write_bert_config(run.model, config.output_dir)
    start = run.step()
    if evaluator is not None and evaluator.resume(start, config.num_train_steps,
                                                  _checkpoint_path(config, start)):
        return {"global_step": float(start)}
    if start >= config.num_train_steps:
        logging.info("global step %d ≥ num_train_steps %d: nothing to train", start,
                     config.num_train_steps)
        return {"global_step": float(start)}
    per_replica = config.train_batch_size // strategy.num_replicas_in_sync
    if config.train_batch_size % strategy.num_replicas_in_sync or (
            per_replica % config.gradient_accumulation_steps):
        raise UserError(
            f"train_batch_size {config.train_batch_size} must split evenly into "
            f"{strategy.num_replicas_in_sync} replicas × {config.gradient_accumulation_steps} "
            "gradient accumulation steps")
    for warning in distribution.speed_warnings(strategy, config.dtype, config.use_xla):
        logging.warning(warning)
    with strategy.scope():
        step_fn = training_steps.make_train_step(
            task, run.model, run.optimizer,
            accumulation_steps=config.gradient_accumulation_steps,
            loss_scale=config.dtype == "float16", jit_compile=config.use_xla)
    dataset = _distribute(strategy, input_fn, config.train_batch_size, skip_steps=start)
    manager = _checkpoint_manager(run, chief)
    log = SummaryLog(os.path.join(config.output_dir, "train") if chief else None,
                     config.num_train_steps, config.train_batch_size,
                     last_values=training_steps.LAST_VALUE_FIGURES,
                     metrics_from_counts=task.metrics_from_counts)
    step, figures = start, {}
    with preemption.PreemptionWatch(strategy, lambda at: _save(manager, at, chief),
                                    config.output_dir) as watch, _Input(dataset) as inputs:
        with strategy.scope():
            loop = training_steps.make_train_loop(strategy, step_fn, watch.notice)
        while step < config.num_train_steps:
            steps = _steps_this_call(step, config)
            if evaluator is not None:
                steps = min(steps, evaluator.steps_to_next(step))
            started = time.perf_counter()
            with preemption.lost_workers_named(config.output_dir):
                totals, steps, noticed = loop(inputs.iterator, tf.constant(steps, tf.int32))
                steps = int(steps)  # waits for the steps; fewer than asked after a notice
            run.global_step.assign_add(steps)
            totals = host_values(totals)
            step += steps
            log.add(totals, steps, time.perf_counter() - started)
            if step % config.log_every_n_steps == 0 or step == config.num_train_steps:
                figures = log.flush(step)
            evaluate = evaluator is not None and evaluator.due(step, config.num_train_steps)
            if (evaluate or step % config.save_checkpoints_steps == 0
                    or step == config.num_train_steps):
                _save(manager, step, chief)
            if evaluate and evaluator(step, _checkpoint_path(config, step)):
                break
            watch.after_call(step, bool(noticed))
    return {**figures, "global_step": float(step)}


class _Input:
    """The training input's iterator, freed when the loop ends (returns or raises), with a log
    line first where freeing it may wait (see `_distribute`)."""

    def __init__(self, dataset: tf.data.Dataset | tf.distribute.DistributedDataset):
        self.iterator = iter(dataset)
        self._distributed = not isinstance(dataset, tf.data.Dataset)

    def __enter__(self) -> "_Input":
        return self

    def __exit__(self, *_) -> None:
        if self._distributed:
            logging.info("training ended: freeing its distributed input, whose tf.data "
                         "autotuning threads TensorFlow may wait up to a minute for")
        del self.iterator


def _checkpoint_path(config: RunConfig, step: int) -> str:
    return os.path.join(config.output_dir, f"{CHECKPOINT_NAME}-{step}")


def _steps_this_call(step: int, config: RunConfig) -> int:
    """Updates until the next log line, checkpoint or the end, at most iterations_per_loop."""
    def to_next(every: int) -> int:
        return every - step % every
    return min(config.iterations_per_loop, to_next(config.log_every_n_steps),
               to_next(config.save_checkpoints_steps), config.num_train_steps - step)


def evaluate(task: Task, config: RunConfig, input_fn: InputFn,
             strategy: tf.distribute.Strategy | None = None, *,
             checkpoint: str | None = None) -> dict[str, float]:
    """Evaluates the latest checkpoint (or `checkpoint`) on the whole input.

    Returns:
        "loss" (mean over batches of the batch loss), "<term>_loss" and every metric as weighted
        means over the whole input, the task's `metrics_from_counts` of the counts summed over
        the whole input, and "global_step".
    """
    strategy = strategy or tf.distribute.get_strategy()
    run, eval_step = _restored_step(task, config, strategy, checkpoint,
                                    training_steps.make_eval_step)
    dataset = _traced_for_input(eval_step, _distribute(strategy, input_fn,
                                                       config.eval_batch_size))
    totals: dict[str, float | np.ndarray] = {}
    batches = 0
    for features in dataset:
        if config.max_eval_steps is not None and batches >= config.max_eval_steps:
            break
        figures = host_values(training_steps.first_replica(strategy, eval_step(features)))
        for name, value in figures.items():
            totals[name] = totals.get(name, 0.0) + value
        batches += 1
    if not batches:
        raise UserError("the evaluation input is empty (fewer examples than one batch?)")
    results = {**summarize(totals, batches, task.metrics_from_counts),
               "global_step": float(run.step())}
    if is_chief(strategy):
        write_scalars(os.path.join(config.output_dir, "eval"), run.step(), results)
    return results


def predict(task: Task, config: RunConfig, input_fn: InputFn,
            strategy: tf.distribute.Strategy | None = None, *,
            checkpoint: str | None = None) -> Iterator[dict[str, np.ndarray]]:
    """Yields `task.predictions(...)` one example at a time, in input order (single worker)."""
    strategy = strategy or tf.distribute.get_strategy()
    _, predict_step = _restored_step(task, config, strategy, checkpoint,
                                     training_steps.make_predict_step)
    for features in _traced_for_input(predict_step, _distribute(strategy, input_fn,
                                                                config.predict_batch_size)):
        outputs = predict_step(features)
        # Replicas take consecutive batches of the one pipeline: concatenating keeps input order.
        batch = {name: np.concatenate([np.asarray(v) for v in
                                       strategy.experimental_local_results(value)])
                 for name, value in outputs.items()}
        size = len(next(iter(batch.values()))) if batch else 0
        for i in range(size):
            yield {name: value[i] for name, value in batch.items()}


def _restored_run(task: Task, config: RunConfig, strategy: tf.distribute.Strategy,
                  checkpoint: str | None) -> _Run:
    run = _Run(task, config, strategy, with_optimizer=False)
    if not run.restore(checkpoint) and not config.init_checkpoint:
        raise MissingFileError(
            f"no checkpoint in {config.output_dir} and no init_checkpoint: train first "
            "(--do_train) or pass --init_checkpoint")
    return run


# Each task object's restored runs, by dtype (see `_restored_step`): kept by the loop, dropped
# with the task (a copy of a task, e.g. over another config, starts with none).
_RESTORED_RUNS: "weakref.WeakKeyDictionary[Task, dict[str, _RestoredRun]]" = \
    weakref.WeakKeyDictionary()


@dataclasses.dataclass
class _RestoredRun:
    """A run restored for evaluate()/predict(), and its steps by kind (`make_*_step`)."""
    run: _Run
    strategy: tf.distribute.Strategy
    steps: dict[Callable, Callable] = dataclasses.field(default_factory=dict)


def _restored_step(task: Task, config: RunConfig, strategy: tf.distribute.Strategy,
                   checkpoint: str | None, make_step: Callable) -> tuple[_Run, Callable]:
    """The restored run and a tf.function running `make_step(task, model)` on every replica.

    A later call for the same task, strategy and dtype restores its checkpoint into the model
    of the first and reuses that model, and its step of the same kind: repeated
    evaluate()/predict() calls (each evaluation during training, say) trace once (see
    `_traced_for_input`), and an evaluation that also predicts builds one model. Only a call
    that restores a checkpoint of the run reuses a model, as restoring overwrites every
    variable; an init_checkpoint may not (a head it lacks).
    """
    runs = _RESTORED_RUNS.setdefault(task, {})
    path = checkpoint or tf.train.latest_checkpoint(config.output_dir)
    cached = runs.get(config.dtype)
    if path and cached and cached.strategy is strategy:
        cached.run.config = config
        cached.run.restore(path)
    else:
        cached = runs[config.dtype] = _RestoredRun(
            _restored_run(task, config, strategy, checkpoint), strategy)
    if make_step not in cached.steps:
        with strategy.scope():
            step_fn = make_step(task, cached.run.model)

        @tf.function(autograph=False)
        def distributed_step(features):
            return strategy.run(step_fn, args=(features,))
        cached.steps[make_step] = distributed_step
    return cached.run, cached.steps[make_step]


def _traced_for_input(step: tf.types.experimental.PolymorphicFunction,
                      dataset: tf.distribute.DistributedDataset
                      ) -> tf.distribute.DistributedDataset:
    """`dataset`, once `step` is traced for its element spec.

    The spec holds None where batches differ (the length of batches trimmed to their longest
    sequence, the size of a last partial batch): every batch then runs that one trace, where
    tracing at the first batch's shape would trace again at the first other shape. The same
    spec at a later call (the next evaluation) finds the trace made.
    """
    step.get_concrete_function(dataset.element_spec)
    return dataset


def load_model(task: Task, config: RunConfig, *, checkpoint: str | None = None) -> keras.Model:
    """The model restored from `checkpoint` (default: latest in output_dir), without a strategy."""
    return _restored_run(task, config, tf.distribute.get_strategy(), checkpoint).model


def write_model_checkpoint(model: keras.Model, prefix: str, global_step: int) -> str:
    """`model` written as a run's checkpoint at `global_step`, without optimizer slots: what
    `evaluate`, `predict` and `load_model` restore as `checkpoint=` (and, like any bert_tf
    checkpoint, an init_checkpoint). Returns the prefix written."""
    return tf.train.Checkpoint(
        model=model, global_step=tf.Variable(global_step, dtype=tf.int64, trainable=False),
        rng=_seed_states(model)).write(prefix)
