"""Multi-task fine-tuning: what `run_multitask.py` runs.

`run_multitask(options, run_config, strategy)` trains one encoder with one head per task of
tasks.json (any task family that offers the mix, `TaskFamily.multitask`: classifier and NER
tasks; `tasks_file`), each step on a batch of ONE task drawn by `sampling`, through the shared
loop (checkpoints, exact resume, preemption). Each task's head is the model its single-task
script trains (its loop task's `build_model` over the shared encoder) and its loss, metrics and
records are that task's own (`MultitaskSupport.training_data`), so the workflow only composes
them.

After training, each task's model (the shared encoder and its head) is written as a checkpoint of
its own, `<output_dir>/<task>/multitask/`, and evaluated, predicted and exported by the task's own
run function (`TaskFamily.run`: run_classifier, run_ner) from it: the figures are exactly those
the single-task script gives for the same weights. Outputs in `output_dir`:

  ckpt-<step>.*, checkpoint     the multi-task run (all heads), resumed by re-running
  eval_results_<task>.txt       each task's dev figures (its script's eval_results.txt keys)
  <task>/                       the task's run directory: records, label_list.txt,
                                test_results.tsv or test_predictions.txt (--do_predict)
  <task>/multitask/             the task's model after multi-task training (a checkpoint that
                                run_classifier.py / run_ner.py --init_checkpoint take)
  <task>/refined/, eval_results_<task>_refined.txt
                                with --refine: the task fine-tuned alone from there (MT-DNN's
                                second stage), its predictions and figures
  <export_dir>/<task>/          with --export_dir: one raw-text SavedModel per task, each the
                                task's own export (refined ones with --refine)
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Callable, Mapping

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import filesystem
from bert_tf.errors import UserError
from bert_tf.model.families import build_encoder
from bert_tf.model.config import BertConfig
from bert_tf.model.inputs import MODEL_INPUTS
from bert_tf.tasks.family import Prepared, TrainingData
from bert_tf.tasks import finetuning
from bert_tf.training import best_checkpoint, loop as training
from bert_tf.workflows.multitask import sampling
from bert_tf.workflows.multitask.tasks_file import TaskEntry, read_tasks_file

TASK_ID = "task_id"
SHARED_CHECKPOINT_DIR = "multitask"
REFINED_DIR = "refined"
SCHEDULE_FILE = "task_schedule.json"


@dataclasses.dataclass(frozen=True)
class MultitaskOptions:
    """run_multitask.py's options: the tasks file, the options every task shares (model,
    tokenizer, --max_seq_length, --num_train_epochs for --refine), and what to run."""

    tasks_file: str
    shared: finetuning.FinetuningOptions
    task_sampling: str = "proportional"
    do_eval: bool = False
    export_dir: str | None = None
    refine: bool = False


@dataclasses.dataclass
class PreparedTask:
    """A task of the mix with its training records read: its loop task (loss, metrics), its
    number of training examples (windows for NER) and its training input function."""

    entry: TaskEntry
    loop_task: finetuning.EncoderTask
    num_examples: int
    train_input_fn: Callable[[tf.distribute.InputContext, int], tf.data.Dataset]

    def build_model(self, encoder: keras.Layer) -> keras.Model:
        """The task's single-task model over `encoder` (what its script's task builds)."""
        return self.loop_task.build_model(encoder=encoder)

    @property
    def label_specs(self) -> dict[str, tf.TensorSpec]:
        """The task's features other than the model inputs (labels, weights), per example."""
        spec = self.train_input_fn(None, 1).element_spec
        return {name: tf.TensorSpec(value.shape[1:], value.dtype)
                for name, value in spec.items() if name not in MODEL_INPUTS}


def check_task_files(entries: list[TaskEntry], splits: tuple[str, ...]) -> None:
    """Reads every task's files of `splits` ("train", "dev", "test") as its script would, so
    that a missing or malformed file of any task (a bad row, a classifier label outside its
    list) fails before the first task's data is converted and anything is written."""
    for entry in entries:
        entry.family.multitask.check_files(entry.options, splits)


def _splits_read(options: MultitaskOptions) -> tuple[str, ...]:
    """The splits the run converts: train to train (or --refine), dev to evaluate (at the end
    or during training), test to predict."""
    shared = options.shared
    evaluates = (options.do_eval or shared.eval_every_n_steps or shared.eval_every_epoch
                 or shared.best_metric)
    wanted = (("train", shared.do_train or options.refine), ("dev", evaluates),
              ("test", shared.do_predict))
    return tuple(split for split, read in wanted if read)


def task_dir(output_dir: str, name: str) -> str:
    return os.path.join(output_dir, name)


def prepare_task(entry: TaskEntry, directory: str, bert_config: BertConfig, tokenizer,
                 run_config: training.RunConfig) -> PreparedTask:
    """Reads a task's training file into its records (in `directory`, where its single-task
    run would write them), as its script does."""
    data: TrainingData = entry.family.multitask.training_data(
        entry.options, directory, bert_config, tokenizer, run_config)
    return PreparedTask(entry, data.loop_task, data.num_examples, data.input_fn)


class MultitaskModel(keras.Model):
    """One encoder; `task_models[k]` is task k's single-task model over it."""

    def __init__(self, config: BertConfig, tasks: list[PreparedTask], **kwargs):
        super().__init__(name="multitask_model", **kwargs)
        self.config = config
        self.encoder = build_encoder(config, dtype=self.dtype_policy)
        self.num_tasks = len(tasks)
        # One attribute each: checkpoints track a Keras model's layer attributes, not lists.
        for k, task in enumerate(tasks):
            setattr(self, f"task_{k}", task.build_model(self.encoder))
        self.built = True

    @property
    def task_models(self) -> list[keras.Model]:
        return [getattr(self, f"task_{k}") for k in range(self.num_tasks)]


class MultitaskTask(training.Task):
    """The loop's task: a batch holds the model inputs, `task_id` and every task's label
    features (zeros but for its own task). Only the batch's task's model runs
    (`tf.switch_case`); its loss terms and metrics are that task's own, named
    `<task>_<term>` / `<task>_<metric>`: the other tasks' terms have a zero normalizer and
    count nowhere. Each task's head is a variable group (`variable_groups`): a step updates
    the encoder and the head of its batch's task, and leaves the other heads and their
    optimizer moments exactly as they were (as if each head had an optimizer of its own, as
    MT-DNN and TF Model Garden's multi-task trainer step only the sampled task's head)."""

    def __init__(self, bert_config: BertConfig, tasks: list[PreparedTask]):
        self.bert_config, self.tasks = bert_config, tasks
        self.names = [task.entry.name for task in tasks]
        self.label_specs = [task.label_specs for task in tasks]
        self.loss_epsilons = {f"{name}_{term}": value for name, task in zip(self.names, tasks)
                              for term, value in task.loop_task.loss_epsilons.items()}
        self.learning_rate_multipliers = {
            key: value for task in tasks
            for key, value in task.loop_task.learning_rate_multipliers.items()}
        self._figure_names: list[tuple[list[str], list[str]]] | None = None

    def build_model(self) -> keras.Model:
        model = MultitaskModel(self.bert_config, self.tasks)
        self._figure_names = [self._probe(k, model) for k in range(len(self.tasks))]
        return model

    def variable_groups(self, model: MultitaskModel) -> list[int] | None:
        """Task k's head variables form group k, the encoder's are -1 (every step); None with
        one task, whose every step trains every variable (the single-task script's run)."""
        if model.num_tasks == 1:
            return None
        owner = {id(variable): k for k, task_model in enumerate(model.task_models)
                 for variable in task_model.trainable_variables}
        owner.update({id(variable): -1 for variable in model.encoder.trainable_variables})
        return [owner[id(variable)] for variable in model.trainable_variables]

    def trained_groups(self, features: Mapping[str, tf.Tensor]) -> tf.Tensor:
        return tf.one_hot(features[TASK_ID][0], len(self.tasks)) > 0

    def task_features(self, features: Mapping[str, tf.Tensor], k: int) -> dict[str, tf.Tensor]:
        """Task k's own features (the names its loop task reads) from a mixed batch."""
        own = {name: features[f"{self.names[k]}/{name}"] for name in self.label_specs[k]}
        return {**{name: features[name] for name in MODEL_INPUTS}, **own}

    def _probe(self, k: int, model: MultitaskModel) -> tuple[list[str], list[str]]:
        """Task k's loss term and metric names, from one all-zero example (eager)."""
        task = self.tasks[k].loop_task
        length = self.tasks[k].entry.options.max_seq_length
        batch = {name: tf.zeros([1, length], tf.int32) for name in MODEL_INPUTS}
        batch.update({name: tf.zeros([1, *spec.shape], spec.dtype)
                      for name, spec in self.label_specs[k].items()})
        outputs = task.forward(model.task_models[k], batch, training=False)
        return sorted(task.losses(batch, outputs)), sorted(task.metrics(batch, outputs))

    def forward(self, model, features, training, static_shapes=False):
        def branch(k: int):
            def run():
                task = self.tasks[k].loop_task
                own = self.task_features(features, k)
                outputs = task.forward(model.task_models[k], own, training=training,
                                       static_shapes=static_shapes)
                figures = self._zeros()
                for term, value in task.losses(own, outputs).items():
                    figures[f"{self.names[k]}_{term}"] = tf.cast(value, tf.float32)
                for metric, (total, weight) in task.metrics(own, outputs).items():
                    figures[f"{self.names[k]}_{metric}/sum"] = tf.cast(total, tf.float32)
                    figures[f"{self.names[k]}_{metric}/weight"] = tf.cast(weight, tf.float32)
                return figures
            return run
        return tf.switch_case(features[TASK_ID][0], [branch(k) for k in range(len(self.tasks))])

    def _zeros(self) -> dict[str, tf.Tensor]:
        figures = {}
        for name, (terms, metrics) in zip(self.names, self._figure_names):
            figures.update({f"{name}_{term}": tf.zeros([]) for term in terms})
            for metric in metrics:
                figures[f"{name}_{metric}/sum"] = tf.zeros([])
                figures[f"{name}_{metric}/weight"] = tf.zeros([])
        return figures

    def loss_normalizers(self, features):
        return {f"{name}_{term}": value for k, name in enumerate(self.names)
                for term, value in self.tasks[k].loop_task.loss_normalizers(
                    self.task_features(features, k)).items()}

    def losses(self, features, outputs):
        return {f"{name}_{term}": outputs[f"{name}_{term}"]
                for name, (terms, _) in zip(self.names, self._figure_names) for term in terms}

    def metrics(self, features, outputs):
        return {f"{name}_{metric}": (outputs[f"{name}_{metric}/sum"],
                                     outputs[f"{name}_{metric}/weight"])
                for name, (_, metrics) in zip(self.names, self._figure_names)
                for metric in metrics}


def mixed_input_fn(tasks: list[PreparedTask], names: list[str],
                   label_specs: list[dict[str, tf.TensorSpec]], schedule: np.ndarray):
    """The loop's input: step t's batch is the next batch of task `schedule[t]`, with
    `task_id` and zeros for the other tasks' label features."""
    def input_fn(context, batch_size: int) -> tf.data.Dataset:
        def to_mixed(k: int):
            def convert(features):
                mixed = {name: features[name] for name in MODEL_INPUTS}
                mixed[TASK_ID] = tf.fill([batch_size], tf.constant(k, tf.int32))
                for j, specs in enumerate(label_specs):
                    for name, spec in specs.items():
                        mixed[f"{names[j]}/{name}"] = (
                            features[name] if j == k else
                            tf.zeros([batch_size, *spec.shape], spec.dtype))
                return mixed
            return convert
        sources = [task.train_input_fn(context, batch_size).map(to_mixed(k))
                   for k, task in enumerate(tasks)]
        choices = tf.data.Dataset.from_tensor_slices(schedule.astype(np.int64))
        return tf.data.Dataset.choose_from_datasets(sources, choices)
    return input_fn


def _schedule(tasks: list[PreparedTask], options: MultitaskOptions,
              run_config: training.RunConfig) -> np.ndarray:
    chosen = sampling.schedule([task.num_examples for task in tasks],
                               [task.entry.weight for task in tasks], options.task_sampling,
                               run_config.num_train_steps, run_config.seed)
    counts = {task.entry.name: int((chosen == k).sum()) for k, task in enumerate(tasks)}
    logging.info("multi-task schedule (--task_sampling=%s): batches per task %s",
                 options.task_sampling, counts)
    if training.is_chief(tf.distribute.get_strategy()):
        filesystem.write_atomically(
            os.path.join(run_config.output_dir, SCHEDULE_FILE),
            json.dumps({"task_sampling": options.task_sampling, "batches": counts,
                        "examples": {task.entry.name: task.num_examples for task in tasks}},
                       indent=1))
    return chosen


def write_task_checkpoints(multitask: MultitaskTask, run_config: training.RunConfig,
                           checkpoint: str) -> dict[str, str]:
    """Each task's model (shared encoder + its head) from the multi-task checkpoint as a
    checkpoint of its own at the same step, with bert_config.json: {task: prefix}."""
    model = training.load_model(multitask, run_config, checkpoint=checkpoint)
    step = checkpoint_step(checkpoint)
    prefixes = {}
    for name, task_model in zip(multitask.names, model.task_models):
        directory = os.path.join(task_dir(run_config.output_dir, name), SHARED_CHECKPOINT_DIR)
        filesystem.makedirs(directory)
        prefixes[name] = training.write_model_checkpoint(
            task_model, os.path.join(directory, "model.ckpt"), step)
        filesystem.write_atomically(os.path.join(directory, "bert_config.json"),
                                    multitask.bert_config.to_json_string())
    return prefixes


def checkpoint_step(checkpoint: str) -> int:
    """The step in a run's checkpoint prefix (`.../ckpt-<step>`)."""
    return int(checkpoint.rsplit("-", 1)[1])


def _task_run_options(entry: TaskEntry, run_config: training.RunConfig, *, train: bool,
                      do_eval: bool, do_predict: bool, init_checkpoint: str, output_dir: str,
                      export_dir: str | None
                      ) -> tuple[finetuning.FinetuningOptions, training.RunConfig]:
    """The task's script options and run config for a run from `init_checkpoint` (a task
    checkpoint of `write_task_checkpoints`) into `output_dir`."""
    task_options = dataclasses.replace(
        entry.options, do_train=train, do_eval=do_eval, do_predict=do_predict,
        export_dir=export_dir,
        bert_config_file=os.path.join(os.path.dirname(init_checkpoint), "bert_config.json"))
    return task_options, run_config.replace(output_dir=output_dir,
                                            init_checkpoint=init_checkpoint)


def _run_task(entry: TaskEntry, run_config: training.RunConfig, strategy, *, train: bool,
              do_eval: bool, do_predict: bool, init_checkpoint: str, output_dir: str,
              export_dir: str | None) -> dict[str, Any]:
    """The task's own script function on its model: evaluate, predict, export (and train)."""
    task_options, task_config = _task_run_options(
        entry, run_config, train=train, do_eval=do_eval, do_predict=do_predict,
        init_checkpoint=init_checkpoint, output_dir=output_dir, export_dir=export_dir)
    return entry.family.run(task_options, task_config, strategy)


def main_metric(prepared: PreparedTask) -> str:
    """The eval_results key that stands for a task in `mean`: its script's --best_metric
    default (the first GLUE metric of a classifier task, eval_f1 for NER)."""
    return prepared.entry.family.default_metric(prepared.entry.options)


class TaskEvaluations:
    """Every task's dev figures for a multi-task checkpoint, as `<task>_<key>`, and `mean`: the
    mean of the tasks' main metrics (`main_metric`). Each task's evaluation is its script's
    --do_eval (`TaskFamily.prepare`), prepared at the first call and
    kept, so that its model is built and its steps traced once per run, not per evaluation."""

    def __init__(self, multitask: MultitaskTask, tasks: list[PreparedTask],
                 run_config: training.RunConfig, strategy: tf.distribute.Strategy | None):
        self.multitask, self.tasks = multitask, tasks
        self.run_config, self.strategy = run_config, strategy
        self._prepared: dict[str, Prepared] = {}

    def _prepare(self, entry: TaskEntry, prefix: str) -> Prepared:
        if entry.name not in self._prepared:
            options, config = _task_run_options(
                entry, self.run_config, train=False, do_eval=True, do_predict=False,
                init_checkpoint=prefix, output_dir=task_dir(self.run_config.output_dir,
                                                            entry.name), export_dir=None)
            self._prepared[entry.name] = entry.family.prepare(options, config, self.strategy)
        return self._prepared[entry.name]

    def __call__(self, checkpoint: str) -> dict[str, float]:
        prefixes = write_task_checkpoints(self.multitask, self.run_config, checkpoint)
        results: dict[str, float] = {}
        for task in self.tasks:
            name = task.entry.name
            figures = self._prepare(task.entry, prefixes[name]).evaluate(prefixes[name])
            results.update({f"{name}_{key}": value for key, value in figures.items()})
        results["mean"] = float(np.mean([results[f"{task.entry.name}_{main_metric(task)}"]
                                         for task in self.tasks]))
        return results


def run_multitask(options: MultitaskOptions, run_config: training.RunConfig,
                  strategy: tf.distribute.Strategy | None = None) -> dict[str, Any]:
    """Trains on the mix, then evaluates, predicts, exports and refines each task, as
    `options` ask (see the module docstring).

    Returns:
      {"train": loop figures, "tasks": {task: its script's results}, "refined": {task: ...}}
      for the steps that ran.
    """
    shared = options.shared
    if not (shared.do_train or options.do_eval or shared.do_predict or options.export_dir
            or options.refine):
        raise UserError("nothing to do: set at least one of --do_train, --do_eval, "
                        "--do_predict, --export_dir, --refine")
    if options.task_sampling not in sampling.SAMPLINGS:
        raise UserError(f"--task_sampling must be one of {', '.join(sampling.SAMPLINGS)}")
    entries = read_tasks_file(options.tasks_file, shared)
    bert_config = shared.load_bert_config(run_config)
    tokenizer = shared.create_tokenizer(run_config.init_checkpoint, bert_config)
    check_task_files(entries, _splits_read(options))
    filesystem.makedirs(run_config.output_dir)
    tasks = [prepare_task(entry, task_dir(run_config.output_dir, entry.name), bert_config,
                          tokenizer, run_config) for entry in entries]
    multitask = MultitaskTask(bert_config, tasks)
    out: dict[str, Any] = {"tasks": {}, "refined": {}}
    if shared.do_train:
        run_config = finetuning.epochs_run_config(run_config, shared,
                                                  sum(task.num_examples for task in tasks))
        chosen = _schedule(tasks, options, run_config)
        evaluator = best_checkpoint.from_options(
            shared, run_config.output_dir,
            TaskEvaluations(multitask, tasks, run_config, strategy),
            sum(task.num_examples for task in tasks) // run_config.train_batch_size, "mean",
            None, training.is_chief(strategy or tf.distribute.get_strategy()))
        out["train"] = training.train(
            multitask, run_config,
            mixed_input_fn(tasks, multitask.names, multitask.label_specs, chosen), strategy,
            evaluator)
    if not tf.train.latest_checkpoint(run_config.output_dir):
        raise UserError(f"no multi-task checkpoint in {run_config.output_dir}: train first "
                        "(--do_train)")
    checkpoint = (best_checkpoint.prediction_checkpoint(run_config.output_dir, shared.predict_from)
                  or tf.train.latest_checkpoint(run_config.output_dir))
    prefixes = write_task_checkpoints(multitask, run_config, checkpoint)
    step = checkpoint_step(checkpoint)
    for entry in entries:
        directory = task_dir(run_config.output_dir, entry.name)
        export = (os.path.join(options.export_dir, entry.name)
                  if options.export_dir and not options.refine else None)
        if options.do_eval or shared.do_predict or export:
            results = _run_task(entry, run_config, strategy, train=False,
                                do_eval=options.do_eval, do_predict=shared.do_predict,
                                init_checkpoint=prefixes[entry.name], output_dir=directory,
                                export_dir=export)
            out["tasks"][entry.name] = results
            if "eval" in results:  # the multi-task step (the task's own run starts at 0)
                finetuning.write_results(
                    os.path.join(run_config.output_dir, f"eval_results_{entry.name}.txt"),
                    {**results["eval"], "global_step": step})
        if options.refine:
            results = _run_task(
                entry, run_config, strategy, train=True, do_eval=options.do_eval,
                do_predict=shared.do_predict, init_checkpoint=prefixes[entry.name],
                output_dir=os.path.join(directory, REFINED_DIR),
                export_dir=os.path.join(options.export_dir, entry.name) if options.export_dir
                else None)
            out["refined"][entry.name] = results
            if "eval" in results:
                finetuning.write_results(os.path.join(
                    run_config.output_dir, f"eval_results_{entry.name}_refined.txt"),
                    results["eval"])
    return out
