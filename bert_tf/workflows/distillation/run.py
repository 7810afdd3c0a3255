"""Task distillation end to end: what `run_distillation.py` (bert-distill) runs.

`run_distillation(task, options, run_config, distillation)` trains a student of a fine-tuned
teacher through the task family's own run function (`TaskFamily.run`: run_classifier, run_ner,
run_squad, ...) with its `training_task` set to a `DistillationTask`, one run per stage: every
stage but the last in `output_dir/<stage>/`, the last in `output_dir`, each the next one's
init_checkpoint. So every
stage has the loop's checkpoints, exact resume, preemption and best checkpoint, and `output_dir`
is an ordinary run directory of the task (--do_predict, --export_dir and bert-predict read it).

The teacher is evaluated on the same dev data in `output_dir/teacher/` (a run directory whose
init_checkpoint is the teacher), and `distillation_results.json` compares the two.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import time
from typing import Any

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import filesystem
from bert_tf.checkpoints import model_config, name_map
from bert_tf.errors import UserError
from bert_tf.model.config import BertConfig
from bert_tf.model.inputs import MODEL_INPUTS
from bert_tf.tasks import families
from bert_tf.tasks.family import TaskFamily
from bert_tf.tasks import finetuning
from bert_tf.training import best_checkpoint, loop as training
from bert_tf.workflows.distillation import augmentation, student as students
from bert_tf.workflows.distillation.task import (
    STAGES, DistillationTask, prediction_term)

RESULTS_FILE = "distillation_results.json"
AUGMENTED_DIR = "augmented_data"
TEACHER_DIR = "teacher"
DEV_RECORDS = "eval.tf_record"  # the dev windows every task caches in its run directory


@dataclasses.dataclass(frozen=True, kw_only=True)
class DistillationOptions:
    """bert-distill's own flags (the task's flags are the task's options).

    The teacher is `teacher_dir` (a bert_tf fine-tuning run: its bert_config.json, best or last
    checkpoint and label_list.txt) or `teacher_checkpoint` (any checkpoint bert_tf reads, with
    its trained head; config from --bert_config_file or beside it). The student is
    `student_config` (a bert_config.json) or `student_layers` (the teacher's width; its weights
    copied from the teacher's layers); `student_init_checkpoint` gives its first weights.
    The prediction stage runs --num_train_epochs at --learning_rate, the intermediate one
    `intermediate_epochs` at `intermediate_learning_rate`. With `augment_checkpoint` (a
    pretrained BERT with its masked-LM head) both stages train on the augmented training set
    (`augmentation.py`; classifier only).
    """

    teacher_dir: str | None = None
    teacher_checkpoint: str | None = None
    student_config: str | None = None
    student_layers: int | None = None
    student_init_checkpoint: str | None = None
    stages: tuple[str, ...] = STAGES
    intermediate_epochs: float = 10.0
    intermediate_learning_rate: float = 5e-5
    temperature: float = 1.0
    alpha: float = 1.0
    augment_checkpoint: str | None = None
    augment_copies: int = 20
    augment_probability: float = 0.4
    augment_top_k: int = 15


def _replace(options, **changes):
    """`options` with those of `changes` that are its fields (tasks differ in their flags)."""
    names = {field.name for field in dataclasses.fields(options)}
    return dataclasses.replace(options, **{k: v for k, v in changes.items() if k in names})


def _read_lines(path: str) -> list[str] | None:
    if not filesystem.exists(path):
        return None
    with filesystem.open_text(path) as f:
        return [line.rstrip("\n") for line in f]


def _beside(path: str | None, name: str) -> str | None:
    """`name` in the directory `path` is or is in, when it exists."""
    if not path:
        return None
    directory = path if filesystem.isdir(path) else os.path.dirname(path)
    candidate = os.path.join(directory, name)
    return candidate if filesystem.exists(candidate) else None


class _Teacher:
    """Loads the teacher's model for a base task and checks its labels against the run's."""

    def __init__(self, distillation: DistillationOptions, config: BertConfig):
        self.distillation, self.config = distillation, config
        self.model: keras.Model | None = None

    @property
    def checkpoint(self) -> str:
        """What a run directory that evaluates the teacher initialises from."""
        d = self.distillation
        if d.teacher_dir:
            return (best_checkpoint.prediction_checkpoint(d.teacher_dir, "best")
                    or tf.train.latest_checkpoint(d.teacher_dir) or d.teacher_dir)
        return d.teacher_checkpoint

    def _labels(self) -> tuple[list[str] | None, str]:
        """The teacher's label_list.txt (None without one) and its path."""
        if not self.distillation.teacher_dir:
            return None, ""
        source = os.path.join(self.distillation.teacher_dir, finetuning.LABEL_LIST_FILE)
        return _read_lines(source), source

    def check_data_labels(self, family: TaskFamily, options, output_dir: str) -> None:
        """The labels the student's data gives, found before any data is converted, against
        the teacher's label_list.txt."""
        teacher_labels, source = self._labels()
        if teacher_labels is None:
            return
        ours = family.data_labels(options, output_dir)
        if ours is None:  # a family without a label list (SQuAD's spans)
            return
        students.check_same_labels(teacher_labels, ours, source,
                                   f"the student's data (--data_dir={options.data_dir})")

    def check_labels(self, output_dir: str) -> None:
        """The run's label_list.txt (written by the task before training) against the
        teacher's."""
        teacher_labels, source = self._labels()
        ours = os.path.join(output_dir, finetuning.LABEL_LIST_FILE)
        if teacher_labels is not None:
            students.check_same_labels(teacher_labels, _read_lines(ours) or [], source,
                                       f"{ours} (from the data)")

    def load(self, base: finetuning.EncoderTask) -> keras.Model:
        if self.model is not None:
            return self.model
        task = base.with_bert_config(self.config)
        if self.distillation.teacher_dir:
            self.model = training.load_model(task, training.RunConfig(
                output_dir=self.distillation.teacher_dir), checkpoint=self.checkpoint)
        else:
            self.model = task.build_model()
            report = name_map.init_from_checkpoint(self.model, self.checkpoint)
            untrained = report.missing + report.mismatched
            if untrained:
                raise UserError(f"--teacher_checkpoint={self.checkpoint}: the teacher lacks "
                                f"trained weights for {', '.join(untrained)}; give a fine-tuned "
                                "checkpoint with this task's head and labels")
        return self.model


def _check_flags(options, run_config: training.RunConfig,
                 distillation: DistillationOptions) -> None:
    if bool(distillation.teacher_dir) == bool(distillation.teacher_checkpoint):
        raise UserError("give one of --teacher_dir (a bert_tf fine-tuning run) and "
                        "--teacher_checkpoint")
    if run_config.init_checkpoint:
        raise UserError("bert-distill: the student starts from --student_init_checkpoint (or "
                        "the teacher's layers with --student_layers), not --init_checkpoint")
    if not distillation.stages or any(stage not in STAGES for stage in distillation.stages):
        raise UserError(f"--stages must list some of {', '.join(STAGES)}, got "
                        f"{','.join(distillation.stages)}")
    if distillation.teacher_dir and options.bert_config_file:
        raise UserError("--bert_config_file is the config of --teacher_checkpoint; with "
                        "--teacher_dir the teacher's bert_config.json is read from there")


def _with_teacher_vocabulary(options, distillation: DistillationOptions):
    """`options` whose --vocab_file is, when not given, the teacher's vocab.txt (beside
    --teacher_checkpoint or in --teacher_dir): teacher and student share one vocabulary."""
    if options.vocab_file or options.spm_model_file:
        return options
    teacher = distillation.teacher_dir or distillation.teacher_checkpoint
    vocab_file = _beside(teacher, "vocab.txt")
    if vocab_file is None:
        raise UserError(f"--vocab_file is required: the teacher ({teacher}) has no vocab.txt "
                        "beside it; give the vocab.txt it was fine-tuned with")
    logging.info("--vocab_file=%s: the teacher's", vocab_file)
    return dataclasses.replace(options, vocab_file=vocab_file)


def run_distillation(task: str, options: finetuning.FinetuningOptions,
                     run_config: training.RunConfig, distillation: DistillationOptions,
                     strategy: tf.distribute.Strategy | None = None) -> dict[str, Any]:
    """Distils the teacher into a student in `run_config.output_dir`, stage by stage.

    Args:
      task: the task family's name (`bert_tf.tasks.families`: "classifier", "ner", ...).
      options: the task's options (its data, tokenizer, evaluation and export flags).
      run_config: the loop's options; learning_rate is the prediction stage's.
      distillation: teacher, student and stages.

    Returns:
      {"stages": {stage: the task's results}, "results": distillation_results.json's figures
       (when the last stage evaluated the student)}.
    """
    family = families.family_named(task)
    _check_flags(options, run_config, distillation)
    # The last stage exports; the stages before it do not, so their runs would not check.
    options.check_export(options.export_dir)
    options = _with_teacher_vocabulary(options, distillation)
    # Everything that can be checked is, before anything is written or converted.
    teacher_config = model_config.resolve_model_config(
        options.bert_config_file, distillation.teacher_checkpoint, distillation.teacher_dir,
        max_seq_length=options.max_seq_length)
    config = students.student_config(teacher_config, distillation.student_config,
                                     distillation.student_layers)
    if "intermediate" in distillation.stages:
        students.check_heads(config, teacher_config)
    for source, flag in ((distillation.teacher_dir or distillation.teacher_checkpoint, "teacher"),
                         (distillation.student_init_checkpoint, "--student_init_checkpoint")):
        if options.vocab_file:
            students.check_same_vocabulary(options.vocab_file, _beside(source, "vocab.txt"), flag)
    options.create_tokenizer(None, config)  # its special tokens, its size against the config
    output_dir = run_config.output_dir
    teacher = _Teacher(distillation, teacher_config)
    teacher.check_data_labels(family, options, output_dir)
    if distillation.augment_checkpoint:
        _check_augmentation(family, options, distillation)
    filesystem.makedirs(output_dir)
    config_file = os.path.join(output_dir, "student_config.json")
    filesystem.write_atomically(config_file, config.to_json_string())
    if distillation.augment_checkpoint:
        options = _augmented(family, options, run_config, distillation)
    student_options = _replace(options, bert_config_file=config_file)
    stage_results, made = {}, {}
    init = distillation.student_init_checkpoint
    for i, stage in enumerate(distillation.stages):
        last = i == len(distillation.stages) - 1
        stage_dir = output_dir if last else os.path.join(output_dir, stage)
        epochs = (options.num_train_epochs if stage == "prediction"
                  else distillation.intermediate_epochs)
        stage_options = _replace(student_options, do_train=True, num_train_epochs=epochs)
        if not last:
            stage_options = _replace(stage_options, do_eval=False, do_predict=False,
                                     export_dir=None, export_hf_dir=None, eval_every_n_steps=0,
                                     eval_every_epoch=False, best_metric=None)
        stage_config = run_config.replace(
            output_dir=stage_dir, init_checkpoint=init,
            learning_rate=(run_config.learning_rate if stage == "prediction"
                           else distillation.intermediate_learning_rate))

        def distillation_task(base, stage=stage, stage_dir=stage_dir, first=i == 0):
            teacher.check_labels(stage_dir)
            made["base"] = base
            return DistillationTask(
                base, lambda: teacher.load(base), stage, prediction_term(base.soft_targets()),
                distillation.temperature, distillation.alpha,
                initialise_from_teacher=(first and distillation.student_layers is not None
                                         and not distillation.student_init_checkpoint))

        logging.info("distillation stage %s → %s", stage, stage_dir)
        stage_results[stage] = family.run(stage_options, stage_config, strategy,
                                          training_task=distillation_task)
        init = stage_dir
    out = {"stages": stage_results}
    student_eval = stage_results[distillation.stages[-1]].get("eval")
    if student_eval is not None:
        out["results"] = _compare(family, options, run_config, teacher, made["base"],
                                  student_eval, strategy)
    return out


def _check_augmentation(family: TaskFamily, options, distillation: DistillationOptions) -> None:
    if family.augment is None or getattr(options, "processor", None):
        augmentable = [f.name for f in families.FAMILIES if f.augment is not None]
        raise UserError(f"--augment_checkpoint augments a {' or '.join(augmentable)} task's "
                        f"files (--task={'|'.join(augmentable)}, no --processor)")
    if not 0.0 <= distillation.augment_probability <= 1.0 or distillation.augment_copies < 1:
        raise UserError("--augment_probability must be in [0, 1] and --augment_copies at least 1")
    if options.vocab_file:
        students.check_same_vocabulary(options.vocab_file, _beside(
            distillation.augment_checkpoint, "vocab.txt"), "--augment_checkpoint")


def _augmented(family: TaskFamily, options, run_config: training.RunConfig,
               distillation: DistillationOptions):
    """`options` reading the augmented copy of the task's data (written now, or kept from an
    earlier run with the same settings; `_check_augmentation` passed)."""
    settings = {"checkpoint": distillation.augment_checkpoint, "data_dir": options.data_dir,
                "copies": distillation.augment_copies,
                "probability": distillation.augment_probability,
                "top_k": distillation.augment_top_k, "seed": run_config.seed}
    return augmentation.augmented_options(
        family, options, os.path.join(run_config.output_dir, AUGMENTED_DIR),
        lambda: augmentation.MaskedLmCandidates(
            distillation.augment_checkpoint, options.vocab_file, options.do_lower_case,
            distillation.augment_top_k, options.max_seq_length),
        distillation.augment_copies, distillation.augment_probability, run_config.seed, settings)


def _main_metric(family: TaskFamily, options) -> str:
    """The figure the results compare: --best_metric's key, else the family's default for
    these options (the classifier's first GLUE metric: eval_mcc for CoLA, eval_pearson for
    regression)."""
    if options.best_metric:
        return options.best_metric.split(":")[0]
    return family.default_metric(options)


def _compare(family: TaskFamily, options, run_config: training.RunConfig, teacher: _Teacher,
             base: finetuning.EncoderTask, student_eval: dict[str, Any],
             strategy) -> dict[str, Any]:
    """Evaluates the teacher on the same dev data, measures both models' throughput on the dev
    windows, and writes distillation_results.json."""
    teacher_dir = os.path.join(run_config.output_dir, TEACHER_DIR)
    teacher_options = _replace(options, do_train=False, export_dir=None, export_hf_dir=None,
                               do_predict=family.evaluates_by_predicting and options.do_predict)
    teacher_eval = family.run(teacher_options, run_config.replace(
        output_dir=teacher_dir, init_checkpoint=teacher.checkpoint), strategy)["eval"]
    student_model = training.load_model(base, run_config, checkpoint=(
        best_checkpoint.prediction_checkpoint(run_config.output_dir, options.predict_from)))
    metric = _main_metric(family, options)
    dev = dev_inputs(os.path.join(run_config.output_dir, DEV_RECORDS))
    speeds = throughput({"teacher": teacher.load(base), "student": student_model}, dev,
                        run_config.eval_batch_size, base)
    results = {
        "metric": metric,
        "teacher": {"dev": float(teacher_eval[metric]),
                    "parameters": count_parameters(teacher.load(base)),
                    "examples_per_second": speeds["teacher"]},
        "student": {"dev": float(student_eval[metric]),
                    "parameters": count_parameters(student_model),
                    "examples_per_second": speeds["student"]},
        "dev_examples": len(dev["input_ids"]),
    }
    results["student_to_teacher"] = {
        "dev": results["student"]["dev"] / results["teacher"]["dev"]
        if results["teacher"]["dev"] else None,
        "speed": speeds["student"] / speeds["teacher"],
        "parameters": results["student"]["parameters"] / results["teacher"]["parameters"]}
    filesystem.write_atomically(os.path.join(run_config.output_dir, RESULTS_FILE),
                                json.dumps(results, indent=2, sort_keys=True) + "\n")
    logging.info("distillation results: %s", json.dumps(results, sort_keys=True))
    return results


def count_parameters(model: keras.Model) -> int:
    """The model's weights (encoder and head), without a distillation projection."""
    return int(sum(np.prod(v.shape) for v in model.weights
                   if not v.path.startswith("distillation_projection/")))


def dev_inputs(path: str) -> dict[str, np.ndarray]:
    """int32 [N,S] `input_ids, input_mask, segment_ids` of a task's cached dev records."""
    rows: dict[str, list] = {name: [] for name in MODEL_INPUTS}
    for record in tf.data.TFRecordDataset(path):
        example = tf.train.Example.FromString(record.numpy())
        for name in rows:
            rows[name].append(example.features.feature[name].int64_list.value)
    return {name: np.asarray(values, np.int32) for name, values in rows.items()}


def throughput(models: dict[str, keras.Model], inputs: dict[str, np.ndarray], batch_size: int,
               task: finetuning.EncoderTask, rounds: int = 3) -> dict[str, float]:
    """Examples per second of each model over `inputs` (the records' model inputs) in batches,
    each run through `task.forward` as the task runs it, the models measured in turn in every
    round (so a busy machine slows them alike); the median round of each."""
    count = len(inputs["input_ids"])
    batches = [{name: tf.constant(values[i:i + batch_size]) for name, values in inputs.items()}
               for i in range(0, count, batch_size)]
    calls = {name: tf.function(lambda features, m=model: task.forward(m, features,
                                                                      training=False),
                               reduce_retracing=True) for name, model in models.items()}
    for call in calls.values():  # traced and warm before timing
        for batch in batches[:2]:
            tf.nest.map_structure(lambda t: t.numpy(), call(batch))
    seconds: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(rounds):
        for name, call in calls.items():
            started = time.perf_counter()
            for batch in batches:
                tf.nest.map_structure(lambda t: t.numpy(), call(batch))
            seconds[name].append(time.perf_counter() - started)
    return {name: count / statistics.median(values) for name, values in seconds.items()}
