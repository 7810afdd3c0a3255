"""SQuAD v1.1 / v2.0 fine-tuning, prediction and evaluation: what `run_squad.py` runs.

`run_squad(options, run_config, strategy)` caches each SQuAD file's windows as TFRecords in the
output directory, fine-tunes the span model through the shared loop (`bert_tf.training.loop`), and
predicts. It writes the original's outputs, plus the official evaluation when the predict file
has answers:

  predictions.json        {question id: answer text} ("" = no answer, v2.0)
  nbest_predictions.json  {question id: [{text, probability, start_logit, end_logit}, ...]}
  null_odds.json          v2.0: {question id: null score − best non-null score}
  eval_results.txt/.json  exact_match and f1 (v1.1); exact, f1, HasAns_*, NoAns_*, best_exact,
                          best_f1 and their thresholds (v2.0); null_score_diff_threshold.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Mapping

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import filesystem
from bert_tf.errors import MissingFileError, UserError
from bert_tf.model import losses, models
from bert_tf.model.config import BertConfig
from bert_tf.model.inputs import MODEL_INPUTS
from bert_tf.records import datasets
from bert_tf.records import features as record_schemas
from bert_tf.serving import openvino, precision
from bert_tf.tasks.squad import (examples as squad, postprocess as squad_postprocess,
                                 records as squad_records)
from bert_tf.tasks.squad import metrics as squad_metrics
from bert_tf.text.chinese import conversion
from bert_tf.tasks import finetuning
from bert_tf.training import best_checkpoint, log as training_log, loop as training

AUTO_THRESHOLD = "auto"
DEFAULT_BEST_METRIC = "f1"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SquadOptions(finetuning.FinetuningOptions, openvino.ExportOptions):
    """SQuAD's options: the shared ones plus run_squad.py's own flags (its defaults).

    `null_score_diff_threshold` is a float or "auto" (v2.0: use the threshold that maximises F1
    on the predict file, which must have answers). Prediction evaluates when the predict file
    has answers (there is no separate --do_eval).
    """

    max_seq_length: int = 384
    doc_stride: int = 128
    max_query_length: int = 64
    version_2_with_negative: bool = False
    train_file: str | None = None
    predict_file: str | None = None
    n_best_size: int = 20
    max_answer_length: int = 30
    verbose_logging: bool = False
    null_score_diff_threshold: float | str = 0.0
    export_dir: str | None = None  # write a raw-text SavedModel here (tasks/squad/export.py)

    @property
    def features(self) -> squad_records.FeatureSettings:
        """What shapes the windows (and keys the cached records)."""
        return squad_records.FeatureSettings(
            max_seq_length=self.max_seq_length, doc_stride=self.doc_stride,
            max_query_length=self.max_query_length, do_lower_case=self.do_lower_case,
            version_2_with_negative=self.version_2_with_negative,
            chinese_conversion=self.chinese_conversion)


def parse_threshold(value: str) -> float | str:
    """--null_score_diff_threshold: a number, or "auto"."""
    if value.strip().lower() == AUTO_THRESHOLD:
        return AUTO_THRESHOLD
    try:
        return float(value)
    except ValueError:
        raise UserError("--null_score_diff_threshold must be a number or auto, "
                         f"got {value!r}") from None


class SpanTask(finetuning.EncoderTask):
    """Start/end logits over every token; loss = (start CE + end CE) / 2, mean over windows.

    Features: int32 `input_ids, input_mask, segment_ids` [B,S], `unique_ids` [B,1] and in
    training `start_positions, end_positions` [B,1].
    """

    def __init__(self, bert_config: BertConfig):
        self.bert_config = bert_config

    def build_model(self, encoder: keras.Layer | None = None) -> keras.Model:
        # The head never reads the pooled output: the loop leaves the pooler, which gets no
        # gradient, as loaded (as the original's optimizer does).
        return models.span_model(self.bert_config, encoder=encoder)

    def soft_targets(self) -> finetuning.SoftTargets:
        return finetuning.SoftTargets(("start_logits", "end_logits"), "softmax")

    def loss_normalizers(self, features):
        return {"span": tf.cast(tf.shape(features["input_ids"])[0], tf.float32)}

    def losses(self, features, outputs):
        parts = losses.span_loss(outputs["start_logits"], outputs["end_logits"],
                                 features["start_positions"], features["end_positions"])
        return {"span": parts.total}

    def metrics(self, features, outputs):
        correct = []
        for side in ("start", "end"):
            predicted = tf.argmax(outputs[f"{side}_logits"], axis=-1, output_type=tf.int32)
            labels = tf.reshape(features[f"{side}_positions"], [-1])
            correct.append(tf.cast(tf.equal(predicted, labels), tf.float32))
        both = correct[0] * correct[1]  # [B]
        return {"span_accuracy": (tf.reduce_sum(both), tf.cast(tf.size(both), tf.float32))}

    def predictions(self, features, outputs):
        return {"unique_ids": tf.reshape(features["unique_ids"], [-1]),
                "start_logits": tf.cast(outputs["start_logits"], tf.float32),
                "end_logits": tf.cast(outputs["end_logits"], tf.float32)}


def train_input_fn(cached: squad_records.CachedRecords, max_seq_length: int, seed: int):
    """Shuffled, repeated, full batches of training windows (deterministic for a seed)."""
    schema = record_schemas.squad_schema(max_seq_length, is_training=True)

    def input_fn(context, batch_size: int) -> tf.data.Dataset:
        return datasets.record_dataset(cached.path, schema, batch_size, is_training=True,
                                       input_context=context, seed=seed,
                                       shuffle_buffer=max(1, min(cached.num_features, 1 << 17)))
    return input_fn


def predict_input_fn(cached: squad_records.CachedRecords, max_seq_length: int):
    """Windows in file order, padded with `unique_ids = -1` rows to whole global batches."""
    schema = record_schemas.squad_schema(max_seq_length, is_training=False)
    padding = schema.encode({"unique_ids": [-1],
                             **{k: np.zeros(max_seq_length) for k in MODEL_INPUTS}})

    def input_fn(context, batch_size: int) -> tf.data.Dataset:
        global_batch = batch_size * (context.num_replicas_in_sync if context else 1)
        dataset = tf.data.TFRecordDataset(cached.path).concatenate(
            tf.data.Dataset.from_tensors(padding).repeat(-cached.num_features % global_batch))
        if context and context.num_input_pipelines > 1:
            dataset = dataset.shard(context.num_input_pipelines, context.input_pipeline_id)
        dataset = dataset.batch(batch_size, drop_remainder=True)
        dataset = dataset.map(schema.parse_fn(), num_parallel_calls=tf.data.AUTOTUNE)
        return dataset.prefetch(tf.data.AUTOTUNE)
    return input_fn


def _check(options: SquadOptions) -> None:
    if not (options.do_train or options.do_predict or options.export_dir or options.export_hf_dir):
        raise UserError("nothing to do: set --do_train, --do_predict, --export_dir and/or "
                        "--export_hf_dir")
    options.check_export(options.export_dir)
    if options.do_train and not options.train_file:
        raise UserError("--do_train needs --train_file")
    if options.do_predict and not options.predict_file:
        raise UserError("--do_predict needs --predict_file")
    openvino_export = bool(options.export_dir) and options.export_runtime == "openvino"
    int8 = openvino_export and options.export_dtype == "int8"
    if int8 and not options.train_file:
        raise UserError("--export_dtype=int8 is calibrated on --train_file's questions: give it")
    if openvino_export and not options.predict_file:
        raise UserError("--export_runtime=openvino compares the export with float32 on "
                        "--predict_file's answers: give it")
    for flag, path, needed in (("train_file", options.train_file, options.do_train or int8),
                               ("predict_file", options.predict_file,
                                options.do_predict or openvino_export)):
        if needed and not filesystem.isfile(path):
            raise MissingFileError(f"{path}: SQuAD file not found (check --{flag})")
    if options.max_seq_length <= options.max_query_length + 3:
        raise UserError(f"--max_seq_length={options.max_seq_length} must be greater than "
                         f"--max_query_length + 3 = {options.max_query_length + 3}")
    if options.null_score_diff_threshold == AUTO_THRESHOLD and not options.version_2_with_negative:
        raise UserError("--null_score_diff_threshold=auto needs --version_2_with_negative")


@dataclasses.dataclass
class PreparedSquad:
    """A run's span task and tokenizer, from `prepare`; `evaluate` gives the predict file's
    figures for a checkpoint (evaluation during training: the file needs answers)."""

    options: SquadOptions
    run_config: training.RunConfig
    strategy: tf.distribute.Strategy | None
    loop_task: SpanTask
    tokenizer: Any

    def predict_records(self) -> squad_records.CachedRecords:
        """The predict file's windows (also the evaluation set during training)."""
        options = self.options
        if not options.predict_file:
            raise UserError("evaluation during training (--eval_every_n_steps, --best_metric, "
                             "...) reads --predict_file, with answers")
        return squad_records.cached_records(options.predict_file, self.run_config.output_dir,
                                            False, self.tokenizer, options.tokenizer_files,
                                            options.features)

    def evaluate(self, checkpoint: str | None = None) -> dict[str, float]:
        """The official metrics of the predict file's answers from `checkpoint`."""
        return _predict(self.options, self.loop_task, self.run_config, self.strategy,
                        self.predict_records(), self.tokenizer, checkpoint=checkpoint,
                        write=False)["eval"]


def prepare(options: SquadOptions, run_config: training.RunConfig,
            strategy: tf.distribute.Strategy | None = None) -> PreparedSquad:
    """The span task over the run's config and the tokenizer, as run_squad reads them."""
    bert_config = options.load_bert_config(run_config)
    return PreparedSquad(options, run_config, strategy, SpanTask(bert_config),
                         options.create_tokenizer(run_config.init_checkpoint, bert_config))


def run_squad(options: SquadOptions, run_config: training.RunConfig,
              strategy: tf.distribute.Strategy | None = None,
              training_task: finetuning.TrainingTask | None = None) -> dict[str, Any]:
    """Trains and/or predicts (and evaluates), as `options` asks.

    Args:
      options: the SQuAD options.
      run_config: the loop's options; num_train_steps/num_warmup_steps are computed here from the
        number of training questions, num_train_epochs and warmup_proportion.
      strategy: from `bert_tf.training.distribution`; None picks the default.
      training_task: what --do_train trains in place of the span task (given it).

    Returns:
      {"train": loop figures, "train_counts", "predict_counts": read/feature counts,
       "eval": the metrics (when the predict file has answers), "files": {name: path}}.
    """
    _check(options)
    if options.chinese_conversion != "none":
        convert = conversion.make_length_preserving_converter(options.chinese_conversion)
        for path in (options.train_file if options.do_train else None,
                     options.predict_file if options.do_predict else None):
            if path:
                squad.check_conversion_keeps_offsets(path, convert)
    prepared = prepare(options, run_config, strategy)
    task, tokenizer = prepared.loop_task, prepared.tokenizer
    out: dict[str, Any] = {}
    if options.do_train:
        cached = squad_records.cached_records(options.train_file, run_config.output_dir, True,
                                              tokenizer, options.tokenizer_files,
                                              options.features, run_config.seed)
        out["train_counts"] = cached.counts
        run_config = finetuning.epochs_run_config(run_config, options, cached.num_examples,
                                                  "training questions")
        input_fn = train_input_fn(cached, options.max_seq_length, run_config.seed)
        evaluator = best_checkpoint.from_options(
            options, run_config.output_dir, prepared.evaluate,
            cached.num_examples // run_config.train_batch_size, DEFAULT_BEST_METRIC,
            None, training.is_chief(strategy or tf.distribute.get_strategy()))
        out["train"] = training.train(training_task(task) if training_task else task,
                                      run_config, input_fn, strategy, evaluator)
    if options.do_predict:
        cached = prepared.predict_records()
        out["predict_counts"] = cached.counts
        out.update(_predict(options, task, run_config, strategy, cached, tokenizer,
                            best_checkpoint.prediction_checkpoint(run_config.output_dir,
                                                                  options.predict_from)))
    log_summary(out)
    if options.export_dir:
        out["export_dir"] = _export(options, task, run_config, out.get("eval"))
    if options.export_hf_dir:
        checkpoint = best_checkpoint.prediction_checkpoint(run_config.output_dir,
                                                           options.predict_from)
        out["export_hf_dir"] = finetuning.export_hf(
            options, training.load_model(task, run_config, checkpoint=checkpoint), strategy)
    return out


def export_threshold(options: SquadOptions, output_dir: str,
                     evaluation: Mapping[str, float] | None) -> float | None:
    """The null-score threshold a v2.0 export keeps (None for v1.1): the flag's number, or with
    `auto` the one this run's prediction chose, else the last one written to
    eval_results.json."""
    if not options.version_2_with_negative:
        return None
    if options.null_score_diff_threshold != AUTO_THRESHOLD:
        return float(options.null_score_diff_threshold)
    if evaluation and "null_score_diff_threshold" in evaluation:
        return float(evaluation["null_score_diff_threshold"])
    path = os.path.join(output_dir, "eval_results.json")
    try:
        return float(json.loads(filesystem.read_text(path))["null_score_diff_threshold"])
    except (OSError, ValueError, KeyError, TypeError):
        raise UserError(f"--export_dir with --null_score_diff_threshold=auto: no threshold chosen "
                        f"yet ({path} has none); add --do_predict with a --predict_file that has "
                        "answers, or give the threshold as a number") from None


def _export(options: SquadOptions, task: SpanTask, run_config: training.RunConfig,
            evaluation: Mapping[str, float] | None) -> str:
    """Writes the raw-text export of the checkpoint that predicted (or would predict): the
    TensorFlow SavedModel, or the OpenVINO export compared with float32 on the predict file."""
    from bert_tf.serving.saved_model import in_graph_tokenizer
    from bert_tf.tasks.squad import export

    threshold = export_threshold(options, run_config.output_dir, evaluation)
    # The OpenVINO export's questions first: their errors come before the model loads.
    openvino_runtime = options.export_runtime == "openvino"
    calibration = (serving_questions(options.train_file, options.int8_calibration_examples)
                   if openvino_runtime and options.export_dtype == "int8" else [])
    comparison = predict_file_evaluation(options) if openvino_runtime else None
    checkpoint = best_checkpoint.prediction_checkpoint(run_config.output_dir, options.predict_from)
    model = training.load_model(task, run_config, checkpoint=checkpoint)
    settings = (in_graph_tokenizer(options.vocab_file, options.spm_model_file,
                                   options.do_lower_case),
                options.max_seq_length, options.doc_stride, options.max_query_length,
                options.n_best_size, options.max_answer_length, options.do_lower_case, threshold)
    if comparison is not None:
        export_dir = export.export_squad_openvino(
            model, options.export_dir, *settings, precision=options.export_dtype,
            calibration=calibration, evaluation=comparison,
            max_relative_loss=options.export_max_relative_loss,
            quantization=options.quantization())
    else:
        export_dir = export.export_squad(precision.model_in_dtype(
            model, task.build_model, options.export_dtype), options.export_dir, *settings)
    logging.info("Exported the SavedModel to %s%s", export_dir,
                 "" if threshold is None else f" (null_score_diff_threshold {threshold:.4f})")
    return export_dir


def _questions(path: str) -> list[dict[str, str]]:
    """A SQuAD file's questions in file order: `id`, `question` and `context`."""
    return [{"id": str(qa["id"]), "question": qa["question"], "context": paragraph["context"]}
            for article in squad.load_squad_json(path) for paragraph in article["paragraphs"]
            for qa in paragraph["qas"]]


def serving_questions(path: str, count: int) -> list[dict[str, str]]:
    """`count` questions of `path` (a seeded draw; all when there are fewer) as the raw-text
    signature's inputs: what the int8 export calibrates on (each gives one or more windows)."""
    questions = _questions(path)
    chosen = np.random.default_rng(0).permutation(len(questions))[:count]
    return [{k: questions[i][k] for k in ("question", "context")} for i in sorted(chosen)]


def predict_file_evaluation(options: SquadOptions) -> openvino.Evaluation:
    """The predict file's questions and the official F1 of the raw-text signature's `answer`
    (an OpenVINO export is compared with float32 on it; v2.0: the answers as the export's null
    threshold leaves them)."""
    questions = _questions(options.predict_file)
    dataset = squad.load_squad_json(options.predict_file)
    if not squad_metrics.has_gold_answers(dataset):
        raise UserError(f"--export_runtime=openvino compares the export with float32 on "
                        f"--predict_file's answers: {options.predict_file} has none")

    def f1(outputs: dict[str, np.ndarray]) -> float:
        answers = {q["id"]: a.decode("utf-8") for q, a in zip(questions, outputs["answer"])}
        if options.version_2_with_negative:
            return squad_metrics.evaluate_v2(dataset, answers)["f1"]
        return squad_metrics.evaluate_v1(dataset, answers)["f1"]

    return openvino.Evaluation([{k: q[k] for k in ("question", "context")} for q in questions],
                               "f1", f1, "answer")


def predict_logits(task: SpanTask, run_config: training.RunConfig,
                   strategy: tf.distribute.Strategy | None, cached: squad_records.CachedRecords,
                   max_seq_length: int, checkpoint: str | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Start and end logits of every window, float32 [N, S] each, in file order."""
    input_fn = predict_input_fn(cached, max_seq_length)
    rows = [r for r in training.predict(task, run_config, input_fn, strategy,
                                        checkpoint=checkpoint)
            if r["unique_ids"] >= 0]
    ids = np.array([r["unique_ids"] for r in rows])
    if not np.array_equal(ids, np.arange(cached.num_features)):
        raise RuntimeError(f"predictions came back for windows {ids[:5]}..., expected "
                           f"0..{cached.num_features - 1} in order")
    return np.stack([r["start_logits"] for r in rows]), np.stack([r["end_logits"] for r in rows])


def _predict(options: SquadOptions, task: SpanTask, run_config: training.RunConfig, strategy,
             cached: squad_records.CachedRecords, tokenizer, checkpoint: str | None = None,
             write: bool = True) -> dict[str, Any]:
    """Predicts the predict file from `checkpoint` (default: the latest); with answers in the
    file also its metrics ("eval"). `write`: the prediction and results files too."""
    v2 = options.version_2_with_negative
    examples, _ = squad.read_squad_examples(options.predict_file, False, v2)
    start_logits, end_logits = predict_logits(task, run_config, strategy, cached,
                                              options.max_seq_length, checkpoint)
    predictions = squad_postprocess.compute_predictions(
        examples, squad_records.load_metadata(cached), start_logits, end_logits, tokenizer,
        options.n_best_size, options.max_answer_length, options.do_lower_case, v2,
        options.verbose_logging)
    dataset = squad.load_squad_json(options.predict_file)
    gold = squad_metrics.has_gold_answers(dataset)
    threshold = options.null_score_diff_threshold
    if threshold == AUTO_THRESHOLD:
        if not gold:
            raise UserError("--null_score_diff_threshold=auto needs answers in "
                             f"{options.predict_file}")
        threshold = best_threshold(dataset, predictions)
        logging.info("null_score_diff_threshold=auto: %.4f maximises F1 on %s", threshold,
                     options.predict_file)
    threshold = float(threshold)
    if not write:
        if not gold:
            raise UserError(f"{options.predict_file} has no answers to evaluate during training")
        return {"eval": evaluate(dataset, predictions, threshold, v2)}
    files = squad_postprocess.write_predictions(run_config.output_dir, predictions, threshold)
    out: dict[str, Any] = {"files": files}
    if gold:
        out["eval"] = evaluate(dataset, predictions, threshold, v2)
        write_eval_results(run_config.output_dir, out["eval"])
        files["eval_results"] = os.path.join(run_config.output_dir, "eval_results.txt")
    return out


def best_threshold(dataset: list, predictions: squad_postprocess.SquadPredictions) -> float:
    """The null-odds threshold that maximises F1 when every question is first given its best
    non-null answer (so the search sees every possible choice)."""
    results = squad_metrics.evaluate_v2(dataset, predictions.best_non_null, predictions.null_odds)
    return float(results["best_f1_thresh"])


def evaluate(dataset: list, predictions: squad_postprocess.SquadPredictions, threshold: float,
             version_2_with_negative: bool) -> dict[str, float]:
    """The official metrics of the predictions made with `threshold`."""
    answers = predictions.answers(threshold)
    if not version_2_with_negative:
        return squad_metrics.evaluate_v1(dataset, answers)
    # Counting as "no answer" exactly the questions the threshold answered with "" makes the
    # scores those of predictions.json (the official script's default 1.0 agrees for t <= 1).
    results = squad_metrics.evaluate_v2(dataset, answers, predictions.null_odds,
                                        null_prob_threshold=threshold)
    return {**results, "null_score_diff_threshold": threshold}


def write_eval_results(output_dir: str, results: Mapping[str, float]) -> None:
    """eval_results.txt (`key = value` lines, sorted, as the original) and eval_results.json."""
    training_log.write_eval_results(os.path.join(output_dir, "eval_results.txt"), results)
    squad_postprocess.write_json_atomic(os.path.join(output_dir, "eval_results.json"),
                                        dict(results))


_SUMMARY = ("%s: %d questions (%d impossible), %d windows; skipped %d questions whose answer is "
            "not at its offset and %d without answers; %d questions truncated, %d contexts in "
            "several windows, %d training windows without the answer")


def log_summary(out: Mapping[str, Any]) -> None:
    """Logs the counts of kept and skipped questions and of windows, then the metrics."""
    for name in ("train", "predict"):
        counts = out.get(f"{name}_counts")
        if counts:
            logging.info(_SUMMARY, name, counts["questions"], counts["impossible"],
                         counts["features"], counts["skipped_answer_mismatch"],
                         counts["skipped_no_answer"], counts["queries_truncated"],
                         counts["long_contexts"], counts["answers_outside_window"])
    for key, value in sorted(out.get("eval", {}).items()):
        logging.info("  %s = %s", key, value)
