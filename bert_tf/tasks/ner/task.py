"""Token tagging (NER) fine-tuning, evaluation and prediction: what `run_ner.py` runs.

`run_ner(options, run_config, strategy)` reads the tagging files (`bert_tf.tasks.ner.data`), writes
their windows as TFRecords in the output directory, and trains, evaluates and predicts through
the shared loop (`bert_tf.training.loop`) with a token classifier on the sequence output. Outputs:

  label_list.txt          the labels, one per line, in the order of the model's outputs.
  eval_results.txt        `key = value` lines (the original's format): eval_loss, loss,
                          global_step, eval_precision/recall/f1 (entities, exact spans, all
                          types), eval_accuracy (words), eval_<TYPE>_precision/recall/f1.
  eval_predictions.txt    the dev file with a predicted-tag column appended.
  test_predictions.txt    the test file with a predicted-tag column appended.
  test_results.txt        the same entity and word figures (test_ keys), when the test file
                          has tags.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, NamedTuple, Sequence

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf.errors import UserError
from bert_tf.model import losses, models
from bert_tf.model.config import BertConfig
from bert_tf.records import datasets
from bert_tf.records import features as record_schemas
from bert_tf.tasks.ner import data as tagging
from bert_tf.tasks.ner import metrics as tag_metrics
from bert_tf.training import finetuning, loop as training

LABEL_LIST_FILE = finetuning.LABEL_LIST_FILE


@dataclasses.dataclass(frozen=True, kw_only=True)
class NerOptions(finetuning.FinetuningOptions):
    """The tagging options: the shared ones plus run_ner.py's own flags.

    File names are relative to `data_dir` (or absolute); `labels` None means: the
    label_list.txt of the checkpoints in the output directory if there are some, else every tag
    of the training file's entity types.
    """

    data_dir: str
    do_eval: bool = False
    data_format: str = "conll"
    tag_scheme: str = "bio"
    labels: Sequence[str] | None = None
    train_file: str = "train.txt"
    dev_file: str = "dev.txt"
    test_file: str = "test.txt"
    window_overlap: int = 32
    export_dir: str | None = None  # write a raw-text SavedModel here (tasks/ner/export.py)

    def path(self, name: str) -> str:
        return os.path.join(self.data_dir, name)


class TaggingTask(finetuning.EncoderTask):
    """Token classifier; loss = Σ w·CE / Σ w over the positions with weight 1 (the first
    WordPiece of each predicted word), so sub-words, special tokens and padding count nowhere.

    Features: int32 `input_ids, input_mask, segment_ids, label_ids, label_weights` [B,S].
    """

    def __init__(self, bert_config: BertConfig, num_labels: int):
        self.bert_config, self.num_labels = bert_config, num_labels

    def build_model(self) -> keras.Model:
        # The head never reads the pooled output: the loop leaves the pooler, which gets no
        # gradient, as loaded (as the original's optimizer does).
        return models.token_classifier_model(self.bert_config, self.num_labels)

    def loss_normalizers(self, features):
        return {"tagging": tf.reduce_sum(tf.cast(features["label_weights"], tf.float32))}

    def losses(self, features, outputs):
        parts = losses.token_classification_loss(outputs["logits"], features["label_ids"],
                                                 features["label_weights"])
        return {"tagging": parts.total}

    def metrics(self, features, outputs):
        weights = tf.cast(features["label_weights"], tf.float32)  # [B,S]
        predicted = tf.argmax(outputs["logits"], axis=-1, output_type=tf.int32)
        correct = tf.cast(tf.equal(predicted, features["label_ids"]), tf.float32)
        return {"accuracy": (tf.reduce_sum(weights * correct), tf.reduce_sum(weights))}

    def predictions(self, features, outputs):
        return {"predicted_ids": tf.argmax(outputs["logits"], axis=-1, output_type=tf.int32)}


class Split(NamedTuple):
    """A tagging file read and packed: its sentences, their tags in the run's scheme (None
    without a tag column), the windows, and the TFRecord file holding them."""

    source: str
    sentences: list[tagging.Sentence]
    tags: list[list[str]] | None
    features: tagging.TaggingFeatures
    record_path: str


def resolve_labels(options: NerOptions, output_dir: str,
                   train: list[tagging.Sentence] | None) -> list[str]:
    """The label list (see NerOptions.labels).

    When `output_dir` holds checkpoints, its label_list.txt is the list they were trained with
    (one model output per label): it is used, and a different --labels is an error.
    """
    saved_path = os.path.join(output_dir, LABEL_LIST_FILE)
    saved = None
    if os.path.isfile(saved_path) and tf.train.latest_checkpoint(output_dir):
        with open(saved_path, encoding="utf-8") as f:
            saved = [line.rstrip("\n") for line in f if line.strip()]
    if options.labels:
        labels = list(options.labels)
        for label in labels:
            tag_metrics.split_tag(label)
    elif saved is not None:
        labels = saved
    else:
        if train is None:
            train = tagging.read_sentences(options.path(options.train_file), options.data_format)
        labels = tagging.labels_from_sentences(train, options.tag_scheme)
    if saved is not None and saved != labels:
        raise UserError(f"--labels {labels} differ from {saved_path} {saved}, the labels the "
                         "checkpoints there were trained with; use another --output_dir")
    if len(labels) < 2:
        raise UserError(f"label list {labels}: the training file has no entities; check "
                         "--data_format and the tag column")
    return labels


def prepare_split(source: str, sentences: list[tagging.Sentence], options: NerOptions,
                  labels: Sequence[str], tokenizer, record_path: str, pad_to_multiple: int = 1,
                  need_tags: bool = True) -> Split:
    """Converts a file's sentences into windows and writes them as TFRecords."""
    tagged = sentences[0].tags is not None
    if need_tags and not tagged:
        raise UserError(f"{source}: no tag column; training and evaluation need tags")
    tags = tagging.convert_tags([s.tags for s in sentences], options.tag_scheme) if tagged else None
    ids = tagging.label_ids(sentences, tags, labels, source) if tagged else None
    features = tagging.convert_sentences(sentences, ids, tokenizer, options.max_seq_length,
                                         options.window_overlap, pad_to_multiple)
    record_schemas.write_records(record_path, features.arrays,
                                 record_schemas.tagging_schema(options.max_seq_length))
    logging.info("%s: %d sentences, %d words, %d windows -> %s", source, len(sentences),
                 sum(len(s.words) for s in sentences), features.num_windows, record_path)
    return Split(source, sentences, tags, features, record_path)


# The [B,S] features of a tagging batch: trimmed together with dynamic padding.
SEQUENCE_FEATURES = (*finetuning.MODEL_INPUTS, "label_ids", "label_weights")


def input_fn(split: Split, max_seq_length: int, is_training: bool, seed: int = 12345,
             options: NerOptions | None = None):
    """The loop's input function over a split's records. Eval/predict records are padded to
    whole global batches (rows of weight 0), so every batch is full. `options` give dynamic
    padding and, in training, length groups (None: full-length batches)."""
    trim = options.trim_features(SEQUENCE_FEATURES) if options else ()
    groups = options.length_groups if options else 1
    schema = record_schemas.tagging_schema(max_seq_length)
    buffer = max(1, min(split.features.num_windows, datasets.MAX_SHUFFLE_BUFFER))

    def make(context, batch_size: int) -> tf.data.Dataset:
        return datasets.record_dataset(split.record_path, schema, batch_size,
                                       is_training=is_training, input_context=context, seed=seed,
                                       drop_remainder=True, shuffle_buffer=buffer,
                                       trim_features=trim, length_groups=groups)
    return make


def predict_tags(task: TaggingTask, run_config: training.RunConfig, strategy, split: Split,
                 labels: Sequence[str], max_seq_length: int,
                 options: NerOptions | None = None) -> list[list[str]]:
    """Each sentence's predicted tags (every word predicted by exactly one window)."""
    rows = training.predict(task, run_config, input_fn(split, max_seq_length, False,
                                                       options=options), strategy)
    predicted = np.zeros([split.features.num_windows, max_seq_length], np.int32)
    for i, row in zip(range(split.features.num_windows), rows):
        # A trimmed batch predicts its own length; positions past it are padding, never read.
        predicted[i, :len(row["predicted_ids"])] = row["predicted_ids"]
    per_sentence = tagging.stitch_predictions(
        split.features, predicted, [len(s.words) for s in split.sentences])
    names = np.asarray(labels, dtype=object)
    return [names[ids].tolist() for ids in per_sentence]


def _check(options: NerOptions) -> None:
    if not (options.do_train or options.do_eval or options.do_predict or options.export_dir):
        raise UserError("nothing to do: set at least one of --do_train, --do_eval, --do_predict, "
                        "--export_dir")
    if options.data_format not in tagging.DATA_FORMATS:
        raise UserError(f"--data_format must be one of {tagging.DATA_FORMATS}")
    if options.tag_scheme not in tagging.TAG_SCHEMES:
        raise UserError(f"--tag_scheme must be one of {sorted(tagging.TAG_SCHEMES)}")


def run_ner(options: NerOptions, run_config: training.RunConfig,
            strategy: tf.distribute.Strategy | None = None) -> dict[str, Any]:
    """Trains, evaluates and predicts, as `options` asks.

    Args:
      options: the tagging options.
      run_config: the loop's options; num_train_steps/num_warmup_steps are computed here from
        the training windows, num_train_epochs and warmup_proportion.
      strategy: from `bert_tf.training.distribution`; None picks the default.

    Returns:
      {"labels", "train": loop figures, "eval": eval_results.txt's figures, "test": test
       figures (tagged test file), "files": {name: path}, "export_dir"} for the steps that ran.
    """
    _check(options)
    bert_config = options.load_bert_config(run_config)
    options = finetuning.static_shape_options(options, run_config, strategy)
    output_dir = run_config.output_dir
    os.makedirs(output_dir, exist_ok=True)
    train = (tagging.read_sentences(options.path(options.train_file), options.data_format)
             if options.do_train else None)
    labels = resolve_labels(options, output_dir, train)
    finetuning.write_label_list(output_dir, labels)
    tokenizer = options.create_tokenizer(run_config.init_checkpoint)
    task = TaggingTask(bert_config, len(labels))
    out: dict[str, Any] = {"labels": labels, "files": {}}

    def prepare(name: str, record_name: str, batch: int, need_tags: bool, sentences=None) -> Split:
        path = options.path(name)
        return prepare_split(path, sentences or tagging.read_sentences(path, options.data_format),
                             options, labels, tokenizer, os.path.join(output_dir, record_name),
                             batch, need_tags)

    if options.do_train:
        split = prepare(options.train_file, "train.tf_record", 1, True, train)
        # Windows are the examples the original would count.
        run_config = finetuning.epochs_run_config(run_config, options,
                                                  split.features.num_windows, "training windows")
        out["train"] = training.train(task, run_config, input_fn(
            split, options.max_seq_length, True, run_config.seed, options), strategy)
    if options.do_eval:
        split = prepare(options.dev_file, "eval.tf_record", run_config.eval_batch_size, True)
        loop = training.evaluate(task, run_config, input_fn(
            split, options.max_seq_length, False, options=options), strategy)
        predicted = predict_tags(task, run_config.replace(
            predict_batch_size=run_config.eval_batch_size), strategy, split, labels,
            options.max_seq_length, options)
        out["eval"] = {"eval_loss": loop["tagging_loss"], "loss": loop["loss"],
                       "global_step": int(loop["global_step"]),
                       **tag_metrics.results_entries(tag_metrics.evaluate(split.tags, predicted))}
        out["files"].update(_write_outputs(output_dir, "eval", split, options, predicted,
                                           out["eval"]))
    if options.do_predict:
        split = prepare(options.test_file, "predict.tf_record", run_config.predict_batch_size,
                        False)
        predicted = predict_tags(task, run_config, strategy, split, labels, options.max_seq_length,
                                 options)
        if split.tags is not None:
            out["test"] = tag_metrics.results_entries(tag_metrics.evaluate(split.tags, predicted),
                                                      prefix="test_")
        out["files"].update(_write_outputs(output_dir, "test", split, options, predicted,
                                           out.get("test")))
    if options.export_dir:
        from bert_tf.serving.saved_model import in_graph_tokenizer
        from bert_tf.tasks.ner.export import export_tagger

        out["export_dir"] = export_tagger(
            training.load_model(task, run_config), options.export_dir,
            in_graph_tokenizer(options.vocab_file, options.spm_model_file, options.do_lower_case),
            labels, options.max_seq_length, options.window_overlap, options.data_format == "char")
        logging.info("Exported the SavedModel to %s", out["export_dir"])
    return out


def _write_outputs(output_dir: str, name: str, split: Split, options: NerOptions,
                   predicted: list[list[str]], results: dict[str, float] | None) -> dict[str, str]:
    """`<name>_predictions.txt` and, with figures, `<name>_results.txt`; logs the figures."""
    files = {f"{name}_predictions": os.path.join(output_dir, f"{name}_predictions.txt")}
    tagging.write_predictions(split.source, files[f"{name}_predictions"], options.data_format,
                              predicted)
    if results is not None:
        files[f"{name}_results"] = os.path.join(output_dir, f"{name}_results.txt")
        finetuning.write_results(files[f"{name}_results"], results)
    return files
