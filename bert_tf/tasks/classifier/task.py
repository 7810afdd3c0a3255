"""Sentence (pair) classification and regression fine-tuning: what `run_classifier.py` runs.

`run_classifier(options, run_config, strategy)` reads the task's files, caches their features as
TFRecords in the output directory, and trains, evaluates, predicts and exports through the shared
training loop (`bert_tf.training.loop`). It writes the original's outputs:

  eval_results.txt  `key = value` lines: eval_accuracy, eval_loss, global_step, loss, plus the
                    task's GLUE metrics (eval_f1, eval_mcc, eval_pearson, eval_spearman).
                    Regression tasks have no eval_accuracy.
  test_results.tsv  one line per test example: tab-separated class probabilities in the order of
                    label_list.txt, or one predicted score for a regression task.
  label_list.txt    the labels, one per line, in output order.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Iterable, Mapping

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf.errors import UserError
from bert_tf.model import losses, models
from bert_tf.model.config import BertConfig
from bert_tf.serving.saved_model import in_graph_tokenizer
from bert_tf.tasks.classifier import compat
from bert_tf.tasks.classifier import export as serving
from bert_tf.tasks.classifier import metrics as glue_metrics
from bert_tf.tasks.classifier import processors as classification, features as classifier_features
from bert_tf.training import finetuning, loop as training


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClassifierOptions(finetuning.FinetuningOptions):
    """The classifier's options: the shared ones plus run_classifier.py's own flags.

    `custom_spec` is the custom task's spec dict (see `classification.custom_task`),
    `export_dir` where to write the SavedModel (None: no export), `processor` a user's
    DataProcessor class as `module:Class` or `path/to/file.py:Class` (compat.py),
    which then reads the examples in place of the task's files.
    """

    task_name: str | None
    data_dir: str
    do_eval: bool = False
    xnli_language: str = "zh"
    custom_spec: Mapping[str, Any] | None = None
    export_dir: str | None = None
    processor: str | None = None


class ClassifierTask(finetuning.EncoderTask):
    """Classifier head on the pooled output; cross-entropy, or squared error for regression.

    Features: int32 `input_ids, input_mask, segment_ids` [B,S], `label_ids` [B] (int32, or
    float32 for regression) and `is_real_example` [B]; padding rows (is_real_example 0) count in
    neither the loss nor the metrics.
    """

    def __init__(self, bert_config: BertConfig, num_labels: int, regression: bool = False):
        self.bert_config, self.num_labels, self.regression = bert_config, num_labels, regression

    def build_model(self) -> keras.Model:
        return models.classifier_model(self.bert_config, self.num_labels)

    @staticmethod
    def _weights(features) -> tf.Tensor:
        return tf.reshape(tf.cast(features["is_real_example"], tf.float32), [-1])  # [B]

    def _per_example_loss(self, features, outputs) -> tf.Tensor:
        labels = tf.reshape(features["label_ids"], [-1])
        if self.regression:
            return losses.regression_loss(outputs["logits"], labels).per_example  # [B]
        return losses.cross_entropy(outputs["logits"], labels)  # [B]

    def loss_normalizers(self, features):
        return {"classifier": tf.reduce_sum(self._weights(features))}

    def losses(self, features, outputs):
        return {"classifier": tf.reduce_sum(self._weights(features)
                                            * self._per_example_loss(features, outputs))}

    def metrics(self, features, outputs):
        if self.regression:
            return {}
        weights = self._weights(features)
        predicted = tf.argmax(outputs["logits"], axis=-1, output_type=tf.int32)
        labels = tf.cast(tf.reshape(features["label_ids"], [-1]), tf.int32)
        correct = tf.cast(tf.equal(predicted, labels), tf.float32)
        return {"accuracy": (tf.reduce_sum(weights * correct), tf.reduce_sum(weights))}

    def predictions(self, features, outputs):
        logits = tf.cast(outputs["logits"], tf.float32)
        out = {"label_ids": tf.reshape(features["label_ids"], [-1]),
               "is_real_example": tf.reshape(features["is_real_example"], [-1])}
        if self.regression:
            out["predictions"] = logits[:, 0]  # [B]
        else:
            out["probabilities"] = tf.nn.softmax(logits, axis=-1)  # [B,num_labels]
        return out


def write_test_results(path: str, rows: Iterable[np.ndarray]) -> int:
    """One line per example: tab-separated values (class probabilities, or one score).

    Returns:
      the number of lines written.
    """
    lines = ["\t".join(str(v) for v in np.atleast_1d(row).astype(np.float32)) + "\n" for row in rows]
    finetuning.write_lines(path, lines)
    return len(lines)


def eval_metrics(task: classification.TaskSpec, loop_results: Mapping[str, float],
                 rows: list[Mapping[str, np.ndarray]] | None) -> dict[str, float]:
    """eval_results.txt's figures from the loop's evaluate() and, for the GLUE metrics that are
    not weighted means (F1, MCC, Pearson, Spearman), the per-example eval predictions."""
    results = {"eval_loss": loop_results["classifier_loss"], "loss": loop_results["loss"],
               "global_step": int(loop_results["global_step"])}
    if not task.regression:
        results["eval_accuracy"] = loop_results["accuracy"]
    extra = [name for name in task.metrics if name != "accuracy"]
    if extra:
        real = [r for r in rows if r["is_real_example"] > 0]
        labels = np.array([r["label_ids"] for r in real])
        if task.regression:
            predictions = np.array([r["predictions"] for r in real], np.float64)
        else:
            predictions = np.array([np.argmax(r["probabilities"]) for r in real])
        for name, value in glue_metrics.compute_metrics(extra, predictions, labels).items():
            results[f"eval_{name}"] = value
    return results


def resolve_task(options: ClassifierOptions) -> classification.TaskSpec:
    """The TaskSpec with its label list known (read from the training file for a custom task)."""
    task = classification.get_task(options.task_name, xnli_language=options.xnli_language,
                                   custom_spec=options.custom_spec)
    if not task.regression and task.labels is None:
        train_path = os.path.join(options.data_dir, task.splits["train"].filename)
        if not os.path.isfile(train_path):
            raise UserError(f"{train_path}: not found, and the custom task gives no 'labels'; "
                             "add the label list to the spec (or --label_list) to run without it")
        task = classification.infer_labels(task, options.data_dir)
    return task


def _task_and_reader(options: ClassifierOptions):
    """The task and, for a user's processor, its example reader (None: the task's files)."""
    if options.processor is None:
        if not options.task_name:
            raise UserError("--task_name is required (or --processor=module:Class for your own "
                            "DataProcessor)")
        return resolve_task(options), None
    splits = tuple(split for split, wanted in (("train", options.do_train), ("dev", options.do_eval),
                                               ("test", options.do_predict)) if wanted)
    processor = compat.load_processor(options.processor, splits)
    return compat.processor_task(
        processor, options.task_name or type(processor).__name__)


def run_classifier(options: ClassifierOptions, run_config: training.RunConfig,
                   strategy: tf.distribute.Strategy | None = None) -> dict[str, Any]:
    """Trains, evaluates, predicts and exports, as `options` asks.

    Args:
      options: the task-specific options.
      run_config: the loop's options; num_train_steps/num_warmup_steps are computed here from
        the training file, num_train_epochs and warmup_proportion.
      strategy: from `bert_tf.training.distribution`; None picks the default.

    Returns:
      {"train": loop figures, "eval": eval_results.txt's figures, "num_predictions": int,
       "export_dir": str} for the steps that ran.
    """
    if not (options.do_train or options.do_eval or options.do_predict or options.export_dir):
        raise UserError("nothing to do: set at least one of --do_train, --do_eval, --do_predict, "
                         "--export_dir")
    task, read_split = _task_and_reader(options)
    bert_config = options.load_bert_config(run_config)
    options = finetuning.static_shape_options(options, run_config, strategy)
    os.makedirs(run_config.output_dir, exist_ok=True)
    finetuning.write_label_list(run_config.output_dir, [] if task.regression else task.labels)
    cache = classifier_features.FeatureCache(
        task, options.data_dir, run_config.output_dir, options.max_seq_length,
        options.create_tokenizer(run_config.init_checkpoint), options.tokenizer_files, options.do_lower_case,
        read_split)
    loop_task = ClassifierTask(bert_config, task.num_labels, task.regression)
    out: dict[str, Any] = {}
    if options.do_train:
        split = cache.records("train")
        run_config = finetuning.epochs_run_config(run_config, options, split.num_examples)
        input_fn = cache.input_fn(split, is_training=True, seed=run_config.seed,
                                  trim_features=options.trim_features(),
                                  length_groups=options.length_groups)
        out["train"] = training.train(loop_task, run_config, input_fn, strategy)
    if options.do_eval:
        out["eval"] = _evaluate(task, loop_task, run_config, cache, strategy,
                                options.trim_features())
    if options.do_predict:
        input_fn = cache.input_fn(cache.records("test"), is_training=False,
                                  trim_features=options.trim_features())
        rows = (r["predictions"] if task.regression else r["probabilities"]
                for r in training.predict(loop_task, run_config, input_fn, strategy)
                if r["is_real_example"] > 0)
        out["num_predictions"] = write_test_results(
            os.path.join(run_config.output_dir, "test_results.tsv"), rows)
    if options.export_dir:
        model = training.load_model(loop_task, run_config)
        out["export_dir"] = serving.export_classifier(
            model, options.export_dir, task.labels, task.regression,
            in_graph_tokenizer(options.vocab_file, options.spm_model_file, options.do_lower_case),
            options.max_seq_length, pair=any(layout.text_b is not None for layout in task.splits.values()))
        logging.info("Exported the SavedModel to %s", out["export_dir"])
    return out


def _evaluate(task, loop_task, run_config, cache, strategy, trim_features) -> dict[str, float]:
    input_fn = cache.input_fn(cache.records("dev"), is_training=False, trim_features=trim_features)
    loop_results = training.evaluate(loop_task, run_config, input_fn, strategy)
    rows = None
    if any(name != "accuracy" for name in task.metrics):
        rows = list(training.predict(loop_task, run_config, input_fn, strategy))
    results = eval_metrics(task, loop_results, rows)
    finetuning.write_results(os.path.join(run_config.output_dir, "eval_results.txt"), results)
    return results
