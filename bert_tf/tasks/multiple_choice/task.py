"""Multiple-choice fine-tuning (SWAG), evaluation and prediction: what `run_swag.py` runs.

`run_multiple_choice(options, run_config, strategy)` reads the question files
(`bert_tf.tasks.multiple_choice.data`), writes their packed choices as TFRecords in the output
directory, and trains, evaluates, predicts and exports through the shared loop
(`bert_tf.training.loop`): one score per choice from its pooled [CLS] vector (one learned
vector, the BERT paper's SWAG head, transformers' `BertForMultipleChoice`), a softmax over the
N scores and the cross-entropy of the right one. Outputs:

  eval_results.txt  `key = value` lines (the original's format): eval_accuracy, eval_loss,
                    global_step, loss.
  test_results.tsv  one line per test question: the N choices' probabilities, tab-separated.
  best/, best_state.json  with evaluation during training (`bert_tf.training.best_checkpoint`).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, NamedTuple

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import filesystem
from bert_tf.errors import UserError
from bert_tf.model import heads, losses, models
from bert_tf.model.config import BertConfig
from bert_tf.model.inputs import MODEL_INPUTS
from bert_tf.records import datasets
from bert_tf.records import features as record_schemas
from bert_tf.serving import openvino, precision
from bert_tf.tasks.multiple_choice import data
from bert_tf.text import tokenizers
from bert_tf.tasks import finetuning
from bert_tf.training import best_checkpoint, loop as training

DEFAULT_BEST_METRIC = "eval_accuracy"
REPORTED_KEYS = ("eval_accuracy", "eval_loss", "global_step", "loss")
LOSS_TERM = "multiple_choice"


@dataclasses.dataclass(frozen=True, kw_only=True)
class MultipleChoiceOptions(finetuning.FinetuningOptions, openvino.ExportOptions):
    """The multiple-choice options: the shared ones plus run_swag.py's own flags. File names
    are relative to `data_dir` (or absolute); `export_dir`: write a raw-text SavedModel there
    (`bert_tf.tasks.multiple_choice.export`)."""

    data_dir: str
    do_eval: bool = False
    train_file: str = "train.csv"
    dev_file: str = "val.csv"
    test_file: str = "test.csv"
    export_dir: str | None = None

    def path(self, name: str) -> str:
        return os.path.join(self.data_dir, name)


class MultipleChoiceModel(models._EncoderModel):
    """One score per choice from its pooled output, `classifier` a one-output classifier head
    (the TF1 names `output_weights` / `output_bias`, transformers' `classifier.*`).

    Features: int32 `input_ids, input_mask, segment_ids` [B,N,S]; the encoder reads them as
    B·N rows.
    """

    HF_CLASS_SUFFIX = "ForMultipleChoice"

    def __init__(self, config: BertConfig, dtype=None, name: str = "multiple_choice_model",
                 **kwargs):
        super().__init__(config, dtype=dtype, name=name, **kwargs)
        self.classifier = heads.Classifier(config, 1, name="classifier", dtype=self.dtype_policy)
        self.built = True

    def call(self, features: dict, training=False, static_shapes: bool = False) -> dict:
        """→ `logits` [B,N] (float32)."""
        shape = tf.shape(features["input_ids"])  # [B,N,S]
        rows = {name: tf.reshape(features[name], [-1, shape[2]])  # [B·N,S]
                for name in MODEL_INPUTS}
        # The head reads [CLS] only: the last layer computes no other position past its keys.
        no_positions = tf.zeros([shape[0] * shape[1], 0], tf.int32)  # [B·N,0]
        pooled = self.encoder(rows, training=training, output_positions=no_positions,
                              static_shapes=static_shapes)["pooled_output"]  # [B·N,H]
        scores = self.classifier(pooled, training=training)  # [B·N,1]
        return {"logits": tf.reshape(scores, shape[:2])}

    def dummy_inputs(self, batch_size: int = 1, seq_length: int = 2) -> dict:
        """A zero batch of one choice per question: [B,1,S]."""
        return {name: value[:, None] for name, value in
                super().dummy_inputs(batch_size, seq_length).items()}


class MultipleChoiceTask(finetuning.EncoderTask):
    """Softmax over the choices' scores; loss = Σ w·CE / Σ w, w = is_real_example.

    Features: int32 `input_ids, input_mask, segment_ids` [B,N·S] as the records hold them (one
    row per question, its choices one after the other: the shape every task's batches have,
    so that the workflows read, mix and time them as any other's), or [B,N,S]; `label_ids`
    and `is_real_example` [B]. `forward` gives the model its [B,N,S].
    """

    def __init__(self, bert_config: BertConfig, max_seq_length: int):
        self.bert_config, self.max_seq_length = bert_config, max_seq_length

    def build_model(self, encoder: keras.Layer | None = None) -> keras.Model:
        return MultipleChoiceModel(self.bert_config, encoder=encoder)

    def model_inputs(self, features: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """int32 [B,N,S] model inputs of a batch of [B,N·S] (or [B,N,S]) features."""
        batch = tf.shape(features["input_ids"])[0]
        return {name: tf.reshape(features[name], [batch, -1, self.max_seq_length])
                for name in MODEL_INPUTS}

    def forward(self, model: keras.Model, features: Mapping[str, tf.Tensor], training: bool,
                static_shapes: bool = False) -> Mapping[str, tf.Tensor]:
        return model(self.model_inputs(features), training=training,
                     static_shapes=static_shapes)

    def soft_targets(self) -> finetuning.SoftTargets:
        return finetuning.SoftTargets(("logits",), "softmax", finetuning.example_weights)

    def encoder_rows(self, features: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """One row per choice: [B·N,S] inputs, each question's is_real_example per choice."""
        rows = {name: tf.reshape(features[name], [-1, self.max_seq_length])  # [B·N,S]
                for name in MODEL_INPUTS}
        if "is_real_example" in features:
            choices = tf.shape(rows["input_ids"])[0] // tf.shape(features["input_ids"])[0]
            rows["is_real_example"] = tf.repeat(
                tf.reshape(features["is_real_example"], [-1]), choices)  # [B·N]
        return rows

    def loss_normalizers(self, features):
        return {LOSS_TERM: tf.reduce_sum(finetuning.example_weights(features))}

    def losses(self, features, outputs):
        labels = tf.reshape(features["label_ids"], [-1])
        return {LOSS_TERM: tf.reduce_sum(finetuning.example_weights(features)
                                         * losses.cross_entropy(outputs["logits"], labels))}

    def metrics(self, features, outputs):
        weights = finetuning.example_weights(features)
        return {"accuracy": finetuning.accuracy_counts(outputs["logits"], features["label_ids"],
                                                       weights)}

    def predictions(self, features, outputs):
        return {"probabilities": tf.nn.softmax(tf.cast(outputs["logits"], tf.float32), axis=-1),
                "is_real_example": tf.reshape(features["is_real_example"], [-1])}


def schema(num_choices: int, max_seq_length: int) -> record_schemas.Schema:
    """A question's record: its N×S model inputs flattened, its label and is_real_example."""
    length = num_choices * max_seq_length
    return record_schemas.Schema("multiple_choice", [
        *(record_schemas.Feature(name, length, flag="--max_seq_length")
          for name in MODEL_INPUTS),
        record_schemas.Feature("label_ids", 1), record_schemas.Feature("is_real_example", 1)])


class Split(NamedTuple):
    """A file's questions, packed and written as TFRecords (padding questions included)."""

    source: str
    examples: list[data.Example]
    num_choices: int
    max_seq_length: int
    record_path: str
    num_records: int


def prepare_split(source: str, examples: list[data.Example], max_seq_length: int, tokenizer,
                  record_path: str, pad_to_multiple: int = 1,
                  need_labels: bool = True) -> Split:
    """Packs a file's questions and writes them as TFRecords."""
    if need_labels and any(example.label is None for example in examples):
        raise UserError(f"{source}: no labels; training and evaluation need them")
    choices = data.num_choices(examples, source)
    packed = data.convert_examples(examples, max_seq_length, tokenizer, pad_to_multiple)
    flat = {name: value.reshape(len(value), -1) for name, value in packed.items()}
    record_schemas.write_records(record_path, flat, schema(choices, max_seq_length))
    logging.info("%s: %d questions of %d choices -> %s", source, len(examples), choices,
                 record_path)
    return Split(source, examples, choices, max_seq_length, record_path,
                 len(flat["input_ids"]))


def input_fn(split: Split, is_training: bool, seed: int = 12345):
    """The loop's input function over a split's records: int32 `input_ids, input_mask,
    segment_ids` [b,N·S], `label_ids` and `is_real_example` [b]. Evaluation records are padded
    to whole batches when written (`prepare_split`), so every batch is full."""
    records = schema(split.num_choices, split.max_seq_length)
    buffer = max(1, min(split.num_records, datasets.MAX_SHUFFLE_BUFFER))

    def flat_labels(features):
        return {**features, **{name: tf.reshape(features[name], [-1])
                               for name in ("label_ids", "is_real_example")}}

    def make(context, batch_size: int) -> tf.data.Dataset:
        return datasets.record_dataset(
            split.record_path, records, batch_size, is_training=is_training,
            input_context=context, seed=seed, drop_remainder=True,
            shuffle_buffer=buffer).map(flat_labels)
    return make


def probabilities(task: MultipleChoiceTask, run_config: training.RunConfig, strategy,
                  split: Split, checkpoint: str | None = None) -> np.ndarray:
    """float32 [Q,N]: each real question's choice probabilities, in file order."""
    rows = [row["probabilities"] for row in training.predict(
        task, run_config, input_fn(split, False), strategy,
        checkpoint=checkpoint) if row["is_real_example"] > 0]
    if len(rows) != len(split.examples):
        raise UserError(f"{split.record_path}: {len(rows)} questions predicted for "
                        f"{len(split.examples)} written (was the file changed during the run?); "
                        "no predictions are written")
    return np.stack(rows).astype(np.float32)


def write_test_results(path: str, rows: np.ndarray) -> None:
    """test_results.tsv: one line per question, its choices' probabilities tab-separated."""
    finetuning.write_lines(path, ("\t".join(str(value) for value in row) + "\n"
                                  for row in rows.astype(np.float32)))


def exported_choices(options: MultipleChoiceOptions) -> int:
    """N of the export: the choices of the questions of the first of the training, dev and
    test files that exists."""
    for name in (options.train_file, options.dev_file, options.test_file):
        if filesystem.exists(options.path(name)):
            return data.num_choices(data.read_examples(options.path(name)), options.path(name))
    raise UserError(f"--export_dir: none of --train_file, --dev_file, --test_file exists in "
                    f"{options.data_dir}; the export takes as many choices as their questions")


def _export(options: MultipleChoiceOptions, task: MultipleChoiceTask,
            run_config: training.RunConfig, checkpoint: str | None) -> str:
    """Writes --export_dir: the TensorFlow SavedModel, or the OpenVINO export compared with
    float32 on the dev questions."""
    from bert_tf.tasks.multiple_choice import export

    num_choices = exported_choices(options)
    if options.export_runtime == "tensorflow":
        return export.export_multiple_choice(precision.model_in_dtype(
            training.load_model(task, run_config, checkpoint=checkpoint), task.build_model,
            options.export_dtype), options, num_choices)
    # The questions first: their errors come before the model loads.
    calibration = (serving_questions(options.path(options.train_file),
                                     options.int8_calibration_examples)
                   if options.export_dtype == "int8" else [])
    evaluation = dev_evaluation(options.path(options.dev_file))
    return export.export_multiple_choice_openvino(
        training.load_model(task, run_config, checkpoint=checkpoint), options, num_choices,
        calibration, evaluation)


def _serving_inputs(example: data.Example) -> dict[str, str]:
    """A question as `serving_default`'s inputs."""
    return {"context": example.context, "stem": example.stem,
            **{f"choice_{i}": ending for i, ending in enumerate(example.endings)}}


def serving_questions(path: str, count: int) -> list[dict[str, str]]:
    """`count` questions of `path` (a seeded draw; all when there are fewer) as
    `serving_default`'s inputs: what the int8 export calibrates on."""
    examples = data.read_examples(path)
    chosen = np.random.default_rng(0).permutation(len(examples))[:count]
    return [_serving_inputs(examples[i]) for i in sorted(chosen)]


def dev_evaluation(path: str) -> openvino.Evaluation:
    """The questions of `path` and their accuracy, scored from `serving_default`'s
    `prediction` (an OpenVINO export is compared with float32 on it)."""
    examples = data.read_examples(path)
    if any(example.label is None for example in examples):
        raise UserError(f"--export_runtime=openvino compares the export with float32 on "
                        f"--dev_file's answers: {path} has none")
    labels = np.array([example.label for example in examples])

    def accuracy(outputs: dict[str, np.ndarray]) -> float:
        return float(np.mean(outputs["prediction"] == labels))

    return openvino.Evaluation([_serving_inputs(e) for e in examples], "accuracy", accuracy,
                               "prediction")


def _check(options: MultipleChoiceOptions) -> None:
    if not (options.do_train or options.do_eval or options.do_predict or options.export_dir
            or options.export_hf_dir):
        raise UserError("nothing to do: set at least one of --do_train, --do_eval, --do_predict, "
                        "--export_dir, --export_hf_dir")
    options.check_export(options.export_dir)


@dataclasses.dataclass
class PreparedMultipleChoice:
    """A run's tokenizer and loop task, from `prepare`; `evaluate` gives --do_eval's figures
    for a checkpoint. The task keeps the model and traced steps of its first evaluation, so
    later calls restore into them."""

    options: MultipleChoiceOptions
    run_config: training.RunConfig
    strategy: tf.distribute.Strategy | None
    tokenizer: tokenizers.FullTokenizer | tokenizers.SentencePieceTokenizer
    task: MultipleChoiceTask
    _dev: Split | None = dataclasses.field(default=None, init=False, repr=False)

    def split(self, name: str, record_name: str, batch: int, need_labels: bool,
              examples: list[data.Example] | None = None) -> Split:
        """The file `name` of the data directory (or its `examples`) as records."""
        path = self.options.path(name)
        return prepare_split(path, examples or data.read_examples(path),
                             self.options.max_seq_length, self.tokenizer,
                             os.path.join(self.run_config.output_dir, record_name), batch,
                             need_labels)

    def dev(self) -> Split:
        """The dev file's records, written at the first call."""
        if self._dev is None:
            self._dev = self.split(self.options.dev_file, "eval.tf_record",
                                   self.run_config.eval_batch_size, True)
        return self._dev

    def evaluate(self, checkpoint: str | None = None) -> dict[str, float]:
        """eval_results.txt's figures for `checkpoint` (default: the latest)."""
        loop = training.evaluate(self.task, self.run_config, input_fn(self.dev(), False),
                                 self.strategy, checkpoint=checkpoint)
        return {"eval_accuracy": loop["accuracy"], "eval_loss": loop[f"{LOSS_TERM}_loss"],
                "global_step": int(loop["global_step"]), "loss": loop["loss"]}


def prepare(options: MultipleChoiceOptions, run_config: training.RunConfig,
            strategy: tf.distribute.Strategy | None = None) -> PreparedMultipleChoice:
    """The tokenizer and loop task, as run_swag reads them."""
    bert_config = options.load_bert_config(run_config)
    filesystem.makedirs(run_config.output_dir)
    return PreparedMultipleChoice(options, run_config, strategy,
                                  options.create_tokenizer(run_config.init_checkpoint,
                                                           bert_config),
                                  MultipleChoiceTask(bert_config, options.max_seq_length))


def run_multiple_choice(options: MultipleChoiceOptions, run_config: training.RunConfig,
                        strategy: tf.distribute.Strategy | None = None,
                        training_task: finetuning.TrainingTask | None = None
                        ) -> dict[str, Any]:
    """Trains, evaluates, predicts and exports, as `options` asks.

    Args:
      options: the multiple-choice options.
      run_config: the loop's options; num_train_steps/num_warmup_steps are computed here from
        the training questions, num_train_epochs and warmup_proportion.
      strategy: from `bert_tf.training.distribution`; None picks the default.
      training_task: what --do_train trains in place of the multiple-choice task (given it).

    Returns:
      {"train": loop figures, "eval": eval_results.txt's figures, "files": {name: path},
       "export_dir", "export_hf_dir"} for the steps that ran.
    """
    _check(options)
    prepared = prepare(options, run_config, strategy)
    task, output_dir = prepared.task, run_config.output_dir
    out: dict[str, Any] = {"files": {}}
    if options.do_train:
        split = prepared.split(options.train_file, "train.tf_record", 1, True)
        run_config = finetuning.epochs_run_config(run_config, options, len(split.examples),
                                                  "training questions")
        evaluator = best_checkpoint.from_options(
            options, output_dir, prepared.evaluate,
            len(split.examples) // run_config.train_batch_size, DEFAULT_BEST_METRIC,
            REPORTED_KEYS, training.is_chief(strategy or tf.distribute.get_strategy()))
        out["train"] = training.train(training_task(task) if training_task else task,
                                      run_config, input_fn(split, True, run_config.seed),
                                      strategy, evaluator)
    if options.do_eval:
        out["eval"] = prepared.evaluate()
        out["files"]["eval_results"] = os.path.join(output_dir, "eval_results.txt")
        finetuning.write_results(out["files"]["eval_results"], out["eval"])
    checkpoint = (best_checkpoint.prediction_checkpoint(output_dir, options.predict_from)
                  if options.do_predict or options.export_dir or options.export_hf_dir
                  else None)
    if options.do_predict:
        split = prepared.split(options.test_file, "predict.tf_record",
                               run_config.predict_batch_size, False)
        out["files"]["test_results"] = os.path.join(output_dir, "test_results.tsv")
        write_test_results(out["files"]["test_results"],
                           probabilities(task, run_config, strategy, split, checkpoint))
    if options.export_dir:
        out["export_dir"] = _export(options, task, run_config, checkpoint)
        logging.info("Exported the SavedModel to %s", out["export_dir"])
    if options.export_hf_dir:
        out["export_hf_dir"] = finetuning.export_hf(
            options, training.load_model(task, run_config, checkpoint=checkpoint), strategy)
    return out
