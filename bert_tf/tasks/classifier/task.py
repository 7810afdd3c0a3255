"""Sentence (pair) classification and regression fine-tuning: what `run_classifier.py` runs.

`run_classifier(options, run_config, strategy)` reads the task's files, caches their features as
TFRecords in the output directory, and trains, evaluates, predicts and exports through the shared
training loop (`bert_tf.training.loop`). It writes the original's outputs:

  eval_results.txt  `key = value` lines: eval_accuracy, eval_loss, global_step, loss, plus the
                    task's GLUE metrics (eval_f1, eval_mcc, eval_pearson, eval_spearman).
                    Regression tasks have no eval_accuracy.
  test_results.tsv  one line per test example: tab-separated class probabilities in the order of
                    label_list.txt, or one predicted score for a regression task; multi-label:
                    one sigmoid probability per label, then the predicted labels joined by
                    the label separator (empty: none).
  thresholds.json   multi-label with --tune_thresholds: the per-label thresholds chosen on dev.
  label_list.txt    the labels, one per line, in output order.

A single text longer than max_seq_length - 2 pieces keeps its head (the original), its tail or
its head and tail (`truncation`), or with `long_text="chunks"` is split into windows: training
labels each window as its text; evaluation, test_results.tsv and the export pool the windows'
logits per text (mean or max) before the softmax. eval_loss stays the windows' mean loss (what
training minimises); eval_accuracy and the GLUE metrics are per text.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Iterable, Mapping

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import filesystem
from bert_tf.checkpoints import hf_export, model_config
from bert_tf.errors import UserError
from bert_tf.model import losses, models
from bert_tf.model.config import BertConfig
from bert_tf.serving import openvino, precision
from bert_tf.serving.saved_model import in_graph_tokenizer
from bert_tf.tasks.classifier import compat
from bert_tf.tasks.classifier import export as serving
from bert_tf.tasks.classifier import metrics as glue_metrics
from bert_tf.tasks.classifier import multi_label as multi_label_metrics
from bert_tf.tasks.classifier import processors as classification, features as classifier_features
from bert_tf.text.long_text import DEFAULT_HEAD_TOKENS, LongText
from bert_tf.tasks import finetuning
from bert_tf.training import best_checkpoint, loop as training


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClassifierOptions(finetuning.FinetuningOptions, openvino.ExportOptions):
    """The classifier's options: the shared ones plus run_classifier.py's own flags.

    `custom_spec` is the custom task's spec dict (see `classification.custom_task`),
    `export_dir` where to write the SavedModel (None: no export), `processor` a user's
    DataProcessor class as `module:Class` or `path/to/file.py:Class` (compat.py),
    which then reads the examples in place of the task's files. A multi-label task predicts
    the labels whose probability is at least `threshold`, or with `tune_thresholds` at least
    the per-label thresholds chosen on the dev set (thresholds.json). `truncation`,
    `truncation_head_tokens`, `long_text`, `chunk_stride` and `chunk_pooling`: see
    `long_text_options`.
    """

    task_name: str | None
    data_dir: str
    do_eval: bool = False
    xnli_language: str = "zh"
    custom_spec: Mapping[str, Any] | None = None
    export_dir: str | None = None
    processor: str | None = None
    threshold: float = multi_label_metrics.DEFAULT_THRESHOLD
    tune_thresholds: bool = False
    truncation: str = "head"
    truncation_head_tokens: int = DEFAULT_HEAD_TOKENS
    long_text: str = "truncate"
    chunk_stride: int | None = None
    chunk_pooling: str = "mean"

    def long_text_options(self) -> LongText:
        """What a single text longer than one row becomes (`bert_tf.text.long_text`)."""
        return LongText(mode=self.long_text, truncation=self.truncation,
                        head_tokens=self.truncation_head_tokens, stride=self.chunk_stride,
                        pooling=self.chunk_pooling)


class ClassifierTask(finetuning.EncoderTask):
    """Classifier head on the pooled output; cross-entropy, or squared error for regression, or
    for multi-label one sigmoid per label with binary cross-entropy (mean over the labels, as
    PyTorch's BCEWithLogitsLoss).

    Features: int32 `input_ids, input_mask, segment_ids` [B,S], `label_ids` [B] (int32, or
    float32 for regression; int32 0/1 [B,num_labels] for multi-label) and `is_real_example` [B];
    padding rows (is_real_example 0) count in neither the loss nor the metrics.
    """

    def __init__(self, bert_config: BertConfig, num_labels: int, regression: bool = False,
                 multi_label: bool = False, windows: bool = False):
        self.bert_config, self.num_labels, self.regression = bert_config, num_labels, regression
        self.multi_label, self.windows = multi_label, windows

    def build_model(self, encoder: keras.Layer | None = None) -> keras.Model:
        return models.classifier_model(self.bert_config, self.num_labels, encoder=encoder)

    _weights = staticmethod(finetuning.example_weights)

    def soft_targets(self) -> finetuning.SoftTargets:
        kind = ("squared_error" if self.regression else "sigmoid" if self.multi_label
                else "softmax")
        return finetuning.SoftTargets(("logits",), kind, finetuning.example_weights)

    def _per_example_loss(self, features, outputs) -> tf.Tensor:
        if self.multi_label:
            per_label = tf.nn.sigmoid_cross_entropy_with_logits(
                labels=tf.cast(features["label_ids"], tf.float32),
                logits=tf.cast(outputs["logits"], tf.float32))  # [B,num_labels]
            return tf.reduce_mean(per_label, axis=-1)  # [B]
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
        if self.regression or self.multi_label:  # from the predictions (eval_metrics)
            return {}
        weights = self._weights(features)
        return {"accuracy": finetuning.accuracy_counts(outputs["logits"], features["label_ids"],
                                                       weights)}

    def predictions(self, features, outputs):
        logits = tf.cast(outputs["logits"], tf.float32)
        out = {"label_ids": (features["label_ids"] if self.multi_label
                             else tf.reshape(features["label_ids"], [-1])),
               "is_real_example": tf.reshape(features["is_real_example"], [-1])}
        if self.windows:  # pooled per text afterwards (pool_windows)
            out["logits"] = logits
            out["text_index"] = tf.reshape(features["text_index"], [-1])
        if self.multi_label:
            out["probabilities"] = tf.math.sigmoid(logits)  # [B,num_labels]
        elif self.regression:
            out["predictions"] = logits[:, 0]  # [B]
        else:
            out["probabilities"] = tf.nn.softmax(logits, axis=-1)  # [B,num_labels]
        return out


def write_test_results(path: str, rows: Iterable[np.ndarray], num_examples: int | None = None,
                       source: str = "", label_sets: Iterable[str] | None = None) -> int:
    """One line per example: tab-separated values (class probabilities, or one score), and
    for a multi-label task the predicted labels (joined by the task's separator) last.

    Args:
      path: test_results.tsv.
      rows: the predictions of the real examples.
      num_examples: how many there must be: with another count nothing is written (a file of
        records changed during the run, e.g. cut by another process) and `source` is named.
      source: the records the rows were predicted from.

    Returns:
      the number of lines written.
    """
    lines = ["\t".join(str(v) for v in np.atleast_1d(row).astype(np.float32)) for row in rows]
    if label_sets is not None:
        lines = [f"{line}\t{labels}" for line, labels in zip(lines, label_sets)]
    lines = [line + "\n" for line in lines]
    if num_examples is not None and len(lines) != num_examples:
        raise UserError(f"{source}: {len(lines)} predictions for {num_examples} examples; {path} is "
                         "not written (was the file changed during the run?); run again to rebuild it")
    finetuning.write_lines(path, lines)
    return len(lines)


def pool_windows(rows: Iterable[Mapping[str, np.ndarray]], num_texts: int, pooling: str,
                 task: classification.TaskSpec) -> list[dict[str, np.ndarray]]:
    """The predictions of the texts from those of their windows (--long_text=chunks).

    Args:
      rows: the predictions of each window (`ClassifierTask(windows=True).predictions`), the
        windows of a text consecutive; padding rows (is_real_example 0) are left out.
      num_texts: how many texts the windows come from.
      pooling: "mean" or "max" of the windows' logits.

    Returns:
      one row per text, as the predictions of a model without windows: `label_ids`,
      `is_real_example` (1) and `probabilities` (softmax, or sigmoid for multi-label) or
      `predictions` (regression) of the pooled logits.
    """
    real = [r for r in rows if r["is_real_example"] > 0]
    text_index = np.array([int(r["text_index"]) for r in real], np.int64)
    if not np.array_equal(np.unique(text_index), np.arange(num_texts)):
        raise UserError(f"the windows come from {len(np.unique(text_index))} texts, not "
                         f"{num_texts}; delete the cached records and run again")
    logits = np.stack([r["logits"] for r in real]).astype(np.float64)  # [W,C]
    starts = np.searchsorted(text_index, np.arange(num_texts))  # the first window of each text
    if pooling == "max":
        pooled = np.maximum.reduceat(logits, starts, axis=0)
    else:
        pooled = np.add.reduceat(logits, starts, axis=0) / np.diff(
            np.append(starts, len(text_index)))[:, None]
    out = []
    for start, text_logits in zip(starts, pooled.astype(np.float32)):
        row = {"label_ids": real[start]["label_ids"], "is_real_example": np.int32(1)}
        if task.regression:
            row["predictions"] = text_logits[0]
        elif task.multi_label:
            row["probabilities"] = 1.0 / (1.0 + np.exp(-text_logits))
        else:
            shifted = np.exp(text_logits - text_logits.max())
            row["probabilities"] = shifted / shifted.sum()
        out.append(row)
    return out


def eval_metrics(task: classification.TaskSpec, loop_results: Mapping[str, float],
                 rows: list[Mapping[str, np.ndarray]] | None,
                 thresholds: np.ndarray | float | None = None,
                 per_text: bool = False) -> dict[str, float]:
    """eval_results.txt's figures from the loop's evaluate() and, for the GLUE metrics that are
    not weighted means (F1, MCC, Pearson, Spearman) and the multi-label ones (at `thresholds`),
    the per-example eval predictions. `per_text`: `rows` are the texts' pooled predictions
    (`pool_windows`), from which eval_accuracy is computed too."""
    results = {"eval_loss": loop_results["classifier_loss"], "loss": loop_results["loss"],
               "global_step": int(loop_results["global_step"])}
    if task.multi_label:
        gold, probabilities = _multi_label_rows(rows)
        return {**results, **multi_label_metrics.results_entries(
            gold, multi_label_metrics.predict(probabilities, thresholds), task.labels)}
    if not task.regression:
        results["eval_accuracy"] = loop_results["accuracy"]
    extra = [name for name in task.metrics if name != "accuracy"]
    if per_text and not task.regression:
        extra = ["accuracy", *extra]
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


def _multi_label_rows(rows) -> tuple[np.ndarray, np.ndarray]:
    """(gold 0/1 [N,C], probabilities [N,C]) of the real examples."""
    real = [r for r in rows if r["is_real_example"] > 0]
    return (np.stack([r["label_ids"] for r in real]),
            np.stack([r["probabilities"] for r in real]))


def resolve_task(options: ClassifierOptions, init_checkpoint: str | None = None
                 ) -> classification.TaskSpec:
    """The TaskSpec with its label list known: for a custom task the list given, else the
    id2label of a Hugging Face `init_checkpoint`, else the training file's labels."""
    task = classification.get_task(options.task_name, xnli_language=options.xnli_language,
                                   custom_spec=options.custom_spec)
    if options.custom_spec is not None and not task.regression:
        labels = model_config.checkpoint_labels(task.labels, init_checkpoint, "--label_list")
        task = dataclasses.replace(task, labels=tuple(labels) if labels else None)
    if not task.regression and task.labels is None:
        train_path = os.path.join(options.data_dir, task.splits["train"].filename)
        if not filesystem.isfile(train_path):
            raise UserError(f"{train_path}: not found, and the custom task gives no 'labels'; "
                             "add the label list to the spec (or --label_list) to run without it")
        task = classification.infer_labels(task, options.data_dir)
    return task


def output_labels(options: ClassifierOptions) -> list[str]:
    """The labels a run with `options` writes to label_list.txt, in output order ([] for a
    regression task), read without converting any data."""
    task, _ = _task_and_reader(options, None)
    return [] if task.regression else list(task.labels)


def _task_and_reader(options: ClassifierOptions, init_checkpoint: str | None):
    """The task and, for a user's processor, its example reader (None: the task's files)."""
    if options.processor is None:
        if not options.task_name:
            raise UserError("--task_name is required (or --processor=module:Class for your own "
                            "DataProcessor)")
        return resolve_task(options, init_checkpoint), None
    splits = tuple(split for split, wanted in (("train", options.do_train), ("dev", options.do_eval),
                                               ("test", options.do_predict)) if wanted)
    processor = compat.load_processor(options.processor, splits)
    return compat.processor_task(
        processor, options.task_name or type(processor).__name__)


@dataclasses.dataclass
class PreparedClassifier:
    """A run's task, feature cache and loop task, from `prepare`; `evaluate` gives --do_eval's
    figures for a checkpoint. The loop task keeps the model and traced steps of its first
    evaluation, so later calls on the same object (each evaluation during training, or each of
    a multi-task run's) restore into them instead of building and tracing again."""

    options: ClassifierOptions
    run_config: training.RunConfig
    strategy: tf.distribute.Strategy | None
    task: classification.TaskSpec
    loop_task: ClassifierTask
    cache: classifier_features.FeatureCache
    long_text: LongText
    pair: bool
    trim: bool

    def evaluate(self, checkpoint: str | None = None) -> dict[str, float]:
        """eval_results.txt's figures for `checkpoint` (default: the latest)."""
        return _evaluate(self.task, self.loop_task, self.run_config, self.cache, self.strategy,
                         self.trim, checkpoint, self.options)


def prepare(options: ClassifierOptions, run_config: training.RunConfig,
            strategy: tf.distribute.Strategy | None = None) -> PreparedClassifier:
    """The task, its label list in output_dir and its feature cache, as run_classifier reads
    them."""
    task, read_split = _task_and_reader(options, run_config.init_checkpoint)
    bert_config = options.load_bert_config(run_config)
    options = finetuning.static_shape_options(options, run_config, strategy)
    pair = any(layout.text_b is not None for layout in task.splits.values())
    long_text = options.long_text_options()
    long_text.check(options.max_seq_length, pair)
    filesystem.makedirs(run_config.output_dir)
    finetuning.write_label_list(run_config.output_dir, [] if task.regression else task.labels)
    cache = classifier_features.FeatureCache(
        task, options.data_dir, run_config.output_dir, options.max_seq_length,
        options.create_tokenizer(run_config.init_checkpoint, bert_config), options.tokenizer_files,
        options.do_lower_case, read_split, long_text)
    loop_task = ClassifierTask(bert_config, task.num_labels, task.regression, task.multi_label,
                               windows=long_text.chunks)
    return PreparedClassifier(options, run_config, strategy, task, loop_task, cache, long_text,
                              pair, options.trim_features())


def run_classifier(options: ClassifierOptions, run_config: training.RunConfig,
                   strategy: tf.distribute.Strategy | None = None,
                   training_task: finetuning.TrainingTask | None = None) -> dict[str, Any]:
    """Trains, evaluates, predicts and exports, as `options` asks.

    Args:
      options: the task-specific options.
      run_config: the loop's options; num_train_steps/num_warmup_steps are computed here from
        the training file, num_train_epochs and warmup_proportion.
      strategy: from `bert_tf.training.distribution`; None picks the default.
      training_task: what --do_train trains in place of the classifier's task (given it).

    Returns:
      {"train": loop figures, "eval": eval_results.txt's figures, "num_predictions": int,
       "export_dir": str} for the steps that ran.
    """
    if not (options.do_train or options.do_eval or options.do_predict or options.export_dir
            or options.export_hf_dir):
        raise UserError("nothing to do: set at least one of --do_train, --do_eval, --do_predict, "
                         "--export_dir, --export_hf_dir")
    options.check_export(options.export_dir)
    prepared = prepare(options, run_config, strategy)
    options, task, loop_task, cache = (prepared.options, prepared.task, prepared.loop_task,
                                       prepared.cache)
    long_text, trim = prepared.long_text, prepared.trim
    out: dict[str, Any] = {}
    if options.do_train:
        split = cache.records("train")
        run_config = finetuning.epochs_run_config(
            run_config, options, split.num_examples,
            "training windows" if long_text.chunks else "training examples")
        input_fn = cache.input_fn(split, is_training=True, seed=run_config.seed,
                                  trim_features=trim, length_groups=options.length_groups)
        evaluator = best_checkpoint.from_options(
            options, run_config.output_dir, prepared.evaluate,
            split.num_examples // run_config.train_batch_size, default_metric(task),
            reported_keys(task), training.is_chief(strategy or tf.distribute.get_strategy()))
        out["train"] = training.train(training_task(loop_task) if training_task else loop_task,
                                      run_config, input_fn, strategy, evaluator)
    if options.do_eval:
        out["eval"] = prepared.evaluate()
        finetuning.write_results(os.path.join(run_config.output_dir, "eval_results.txt"),
                                 out["eval"])
    checkpoint = best_checkpoint.prediction_checkpoint(run_config.output_dir,
                                                       options.predict_from)
    thresholds = None
    if task.multi_label and (options.do_predict or options.export_dir or options.export_hf_dir):
        thresholds = _thresholds(options, task, run_config.output_dir, checkpoint)
    if options.do_predict:
        split = cache.records("test")
        input_fn = cache.input_fn(split, is_training=False, trim_features=trim)
        rows = _text_rows(training.predict(loop_task, run_config, input_fn, strategy,
                                           checkpoint=checkpoint), split, task, long_text)
        rows = [r["predictions"] if task.regression else r["probabilities"]
                for r in rows if r["is_real_example"] > 0]
        label_sets = None
        if task.multi_label:
            names = np.asarray(task.labels, dtype=object)
            label_sets = [task.label_separator.join(names[chosen]) for chosen in
                          multi_label_metrics.predict(np.stack(rows), thresholds)]
        out["num_predictions"] = write_test_results(
            os.path.join(run_config.output_dir, "test_results.tsv"), rows, split.num_texts,
            split.path, label_sets)
    if options.export_dir and options.export_runtime == "openvino":
        out["export_dir"] = serving.export_classifier_openvino(
            training.load_model(loop_task, run_config, checkpoint=checkpoint), options.export_dir,
            task.labels, in_graph_tokenizer(options.vocab_file, options.spm_model_file,
                                            options.do_lower_case),
            options.max_seq_length, prepared.pair, options.export_dtype,
            calibration=serving_texts(prepared, "train", options.int8_calibration_examples)
            if options.export_dtype == "int8" else [],
            evaluation=dev_evaluation(prepared), max_relative_loss=options.export_max_relative_loss,
            long_text=long_text, quantization=options.quantization())
    elif options.export_dir:
        model = precision.model_in_dtype(
            training.load_model(loop_task, run_config, checkpoint=checkpoint),
            loop_task.build_model, options.export_dtype)
        out["export_dir"] = serving.export_classifier(
            model, options.export_dir, task.labels, task.regression,
            in_graph_tokenizer(options.vocab_file, options.spm_model_file, options.do_lower_case),
            options.max_seq_length, pair=prepared.pair, thresholds=thresholds, long_text=long_text)
        logging.info("Exported the SavedModel to %s", out["export_dir"])
    if options.export_hf_dir:
        out["export_hf_dir"] = finetuning.export_hf(
            options, training.load_model(loop_task, run_config, checkpoint=checkpoint), strategy,
            hf_head(task, thresholds))
    return out


def _examples(prepared: PreparedClassifier, split: str) -> list[classification.InputExample]:
    cache = prepared.cache
    if cache.read_split is not None:
        return cache.read_split(cache.data_dir, split)
    return classification.read_examples(prepared.task, cache.data_dir, split)


def _text_inputs(example: classification.InputExample, pair: bool) -> dict[str, str]:
    """An example as the raw-text signature's inputs."""
    return {"text_a": example.text_a, **({"text_b": example.text_b or ""} if pair else {})}


def serving_texts(prepared: PreparedClassifier, split: str, count: int) -> list[dict[str, str]]:
    """`count` examples of `split` (a seeded draw; all when there are fewer) as the raw-text
    signature's inputs: what the int8 export calibrates on."""
    examples = _examples(prepared, split)
    chosen = np.random.default_rng(0).permutation(len(examples))[:count]
    return [_text_inputs(examples[i], prepared.pair) for i in sorted(chosen)]


def dev_evaluation(prepared: PreparedClassifier) -> openvino.Evaluation:
    """The dev set and the task's first metric, scored from the raw-text signature's outputs
    (an OpenVINO export is compared with float32 on it)."""
    task = prepared.task
    if task.regression or task.multi_label:
        raise UserError("--export_runtime=openvino exports single-label classifiers; for a "
                        "regression or multi-label task use --export_runtime=tensorflow")
    examples = _examples(prepared, "dev")
    gold = np.array([task.labels.index(e.label) for e in examples])
    name = task.metrics[0]

    def score(outputs: dict[str, np.ndarray]) -> float:
        predicted = np.argmax(outputs["probabilities"], axis=-1)
        return float(glue_metrics.compute_metrics([name], predicted, gold)[name])

    return openvino.Evaluation([_text_inputs(e, prepared.pair) for e in examples], name, score,
                               "label")


def hf_head(task: classification.TaskSpec, thresholds=None) -> hf_export.HeadLabels:
    """What the classifier's outputs mean, in a Hugging Face config's terms."""
    problem_type = ("regression" if task.regression else "multi_label_classification"
                    if task.multi_label else "single_label_classification")
    return hf_export.HeadLabels(None if task.regression else task.labels, problem_type,
                                thresholds)


def _text_rows(rows: Iterable[Mapping[str, np.ndarray]], split: classifier_features.CachedSplit,
               task: classification.TaskSpec, long_text: LongText
               ) -> Iterable[Mapping[str, np.ndarray]]:
    """The predictions per text: the rows themselves, or with chunks their windows pooled."""
    if not long_text.chunks:
        return rows
    return pool_windows(rows, split.num_texts, long_text.pooling, task)


def default_metric(task: classification.TaskSpec) -> str:
    """The key --best_metric defaults to: the task's first GLUE metric."""
    return f"eval_{task.metrics[0]}"


def best_metric_default(options: ClassifierOptions) -> str:
    """--best_metric's default for a run with `options`: the task's first GLUE metric
    (eval_mcc for CoLA, eval_pearson for regression); eval_accuracy with a user's processor,
    whose task names no GLUE metrics."""
    if options.processor:
        return "eval_accuracy"
    return default_metric(resolve_task(options))


def reported_keys(task: classification.TaskSpec) -> list[str]:
    """The keys of eval_results.txt for `task`."""
    if task.multi_label:
        return ["eval_loss", "loss", "global_step", *multi_label_metrics.result_keys(task.labels)]
    return (["eval_loss", "loss", "global_step"] + ([] if task.regression else ["eval_accuracy"])
            + [f"eval_{name}" for name in task.metrics if name != "accuracy"])


def _thresholds(options: ClassifierOptions, task: classification.TaskSpec, output_dir: str,
                checkpoint: str | None) -> np.ndarray | float:
    """--threshold, or with --tune_thresholds those saved beside `checkpoint` (or the latest)."""
    if not options.tune_thresholds:
        return options.threshold
    return multi_label_metrics.read_thresholds(
        os.path.dirname(checkpoint) if checkpoint else output_dir, task.labels)


def _evaluate(task, loop_task, run_config, cache, strategy, trim_features,
              checkpoint: str | None = None,
              options: ClassifierOptions | None = None) -> dict[str, float]:
    """eval_results.txt's figures for `checkpoint` (default: the latest) on the dev split; with
    --tune_thresholds (multi-label) also the thresholds chosen on it, in thresholds.json."""
    split = cache.records("dev")
    input_fn = cache.input_fn(split, is_training=False, trim_features=trim_features)
    loop_results = training.evaluate(loop_task, run_config, input_fn, strategy,
                                     checkpoint=checkpoint)
    rows = None
    if (task.multi_label or loop_task.windows
            or any(name != "accuracy" for name in task.metrics)):
        rows = list(_text_rows(training.predict(loop_task, run_config, input_fn, strategy,
                                                checkpoint=checkpoint),
                               split, task, cache.long_text))
    thresholds = None
    if task.multi_label:
        thresholds = options.threshold if options else multi_label_metrics.DEFAULT_THRESHOLD
        if options and options.tune_thresholds:
            thresholds = multi_label_metrics.tune_thresholds(*_multi_label_rows(rows))
            multi_label_metrics.write_thresholds(run_config.output_dir, task.labels, thresholds)
    return eval_metrics(task, loop_results, rows, thresholds, loop_task.windows)
