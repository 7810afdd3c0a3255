"""Token tagging (NER) fine-tuning, evaluation and prediction: what `run_ner.py` runs.

`run_ner(options, run_config, strategy)` reads the tagging files (`bert_tf.tasks.ner.data`), writes
their windows as TFRecords in the output directory, and trains, evaluates and predicts through
the shared loop (`bert_tf.training.loop`) with a token classifier on the sequence output (with
`crf`, a linear-chain CRF over the word scores; with `lstm_size`, a BiLSTM under them; decoded
under the tag scheme's constraints by default: `bert_tf.model.crf`). Outputs:

  label_list.txt          the labels, one per line, in the order of the model's outputs.
  eval_results.txt        `key = value` lines (the original's format): eval_loss, loss,
                          global_step, eval_precision/recall/f1 (entities, exact spans, all
                          types), eval_accuracy (words), eval_<TYPE>_precision/recall/f1.
  eval_predictions.txt    the dev file with a predicted-tag column appended.
  test_predictions.txt    the test file with a predicted-tag column appended.
  test_results.txt        the same entity and word figures (test_ keys), when the test file
                          has tags.
  best/, best_state.json  with evaluation during training (`bert_tf.training.best_checkpoint`).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, NamedTuple, Sequence

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import filesystem
from bert_tf.checkpoints import hf_export, model_config
from bert_tf.errors import UserError
from bert_tf.model import crf as crf_ops
from bert_tf.model import losses, models
from bert_tf.model.config import BertConfig
from bert_tf.model.inputs import MODEL_INPUTS
from bert_tf.records import datasets
from bert_tf.records import features as record_schemas
from bert_tf.serving import openvino, precision
from bert_tf.tasks.ner import data as tagging
from bert_tf.tasks.ner import metrics as tag_metrics
from bert_tf.text import tokenizers
from bert_tf.tasks import finetuning
from bert_tf.training import best_checkpoint, loop as training

LABEL_LIST_FILE = finetuning.LABEL_LIST_FILE
DECODES = ("constrained", "argmax")
DEFAULT_BEST_METRIC = "eval_f1"


@dataclasses.dataclass(frozen=True, kw_only=True)
class NerOptions(finetuning.FinetuningOptions, openvino.ExportOptions):
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
    crf: bool = False
    lstm_size: int = 0
    crf_learning_rate: float | None = None
    decode: str = "constrained"
    export_dir: str | None = None  # write a raw-text SavedModel here (tasks/ner/export.py)

    def path(self, name: str) -> str:
        return os.path.join(self.data_dir, name)


class TaggingTask(finetuning.EncoderTask):
    """Token tagger over the word rows (the first WordPiece of each word a window predicts:
    `label_weights` 1), so sub-words, special tokens and padding count nowhere.

    Softmax head: loss = Σ w·CE / Σ w. With `crf`: loss = −Σ log p(tags | window) / windows
    with words, a linear-chain CRF over each window's word rows (`bert_tf.model.crf`).
    Decoding: `argmax` per word, or `constrained` (Viterbi where `scheme` forbids ill-formed
    spans; over the CRF's scores with `crf`, else over the log-softmax), which needs `labels`.

    Features: int32 `input_ids, input_mask, segment_ids, label_ids, label_weights` [B,S].
    """

    def __init__(self, bert_config: BertConfig, num_labels: int, *,
                 labels: Sequence[str] | None = None, scheme: str = "bio", crf: bool = False,
                 lstm_size: int = 0, decode: str = "argmax", crf_rate_factor: float = 1.0):
        self.bert_config, self.num_labels = bert_config, num_labels
        self.crf, self.lstm_size, self.decode = crf, lstm_size, decode
        self.constraints = (crf_ops.scheme_constraints(labels, scheme)
                            if decode == "constrained" else None)
        if crf and crf_rate_factor != 1.0:
            self.learning_rate_multipliers = {"crf/": crf_rate_factor}

    def build_model(self, encoder: keras.Layer | None = None) -> keras.Model:
        # The head never reads the pooled output: the loop leaves the pooler, which gets no
        # gradient, as loaded (as the original's optimizer does).
        return models.token_classifier_model(self.bert_config, self.num_labels,
                                             lstm_size=self.lstm_size, crf=self.crf,
                                             encoder=encoder)

    def soft_targets(self) -> finetuning.SoftTargets:
        # Per word: the rows `label_weights` marks (each word's first piece).
        return finetuning.SoftTargets(
            ("logits",), "softmax", lambda features: tf.cast(features["label_weights"],
                                                             tf.float32))

    def loss_normalizers(self, features):
        if self.crf:  # windows with at least one word
            return {"tagging": tf.reduce_sum(tf.cast(
                tf.reduce_max(features["label_weights"], axis=1) > 0, tf.float32))}
        return {"tagging": tf.reduce_sum(tf.cast(features["label_weights"], tf.float32))}

    def losses(self, features, outputs):
        if self.crf:
            emissions, lengths, order = crf_ops.compact(outputs["logits"],
                                                        features["label_weights"])
            tags = tf.gather(features["label_ids"], order, batch_dims=1)
            likelihood = crf_ops.crf_log_likelihood(
                emissions, tags, lengths, outputs["transitions"], outputs["start_scores"],
                outputs["end_scores"])
            return {"tagging": -tf.reduce_sum(likelihood)}
        parts = losses.token_classification_loss(outputs["logits"], features["label_ids"],
                                                 features["label_weights"])
        return {"tagging": parts.total}

    def decoded(self, features, outputs) -> tf.Tensor:
        """int32 [B,S] predicted label ids (0 where `label_weights` is 0 with a Viterbi)."""
        logits = outputs["logits"]  # [B,S,C]
        if not self.crf and self.decode == "argmax":
            return tf.argmax(logits, axis=-1, output_type=tf.int32)
        weights = features["label_weights"]
        scores = logits if self.crf else tf.nn.log_softmax(logits)
        emissions, lengths, order = crf_ops.compact(scores, weights)
        moves = ([outputs[name] for name in ("transitions", "start_scores", "end_scores")]
                 if self.crf else [0.0, 0.0, 0.0])
        if self.constraints is not None:
            moves = [m + c for m, c in zip(moves, self.constraints)]
        tags, _ = crf_ops.crf_decode(emissions, lengths, *moves)
        return crf_ops.expand(tags, order, weights)

    def metrics(self, features, outputs):
        weights = tf.cast(features["label_weights"], tf.float32)  # [B,S]
        predicted = self.decoded(features, outputs)
        correct = tf.cast(tf.equal(predicted, features["label_ids"]), tf.float32)
        return {"accuracy": (tf.reduce_sum(weights * correct), tf.reduce_sum(weights))}

    def predictions(self, features, outputs):
        return {"predicted_ids": self.decoded(features, outputs)}


class Split(NamedTuple):
    """A tagging file read and packed: its sentences, their tags in the run's scheme (None
    without a tag column), the windows, and the TFRecord file holding them."""

    source: str
    sentences: list[tagging.Sentence]
    tags: list[list[str]] | None
    features: tagging.TaggingFeatures
    record_path: str


def resolve_labels(options: NerOptions, output_dir: str,
                   train: list[tagging.Sentence] | None,
                   init_checkpoint: str | None = None) -> list[str]:
    """The label list (see NerOptions.labels).

    When `output_dir` holds checkpoints, its label_list.txt is the list they were trained with
    (one model output per label): it is used, and a different --labels is an error. A Hugging
    Face `init_checkpoint` brings its id2label the same way (model_config.checkpoint_labels).
    """
    saved_path = os.path.join(output_dir, LABEL_LIST_FILE)
    saved = None
    if filesystem.isfile(saved_path) and tf.train.latest_checkpoint(output_dir):
        saved = [line for line in filesystem.read_text(saved_path).split("\n") if line.strip()]
    given = model_config.checkpoint_labels(options.labels, init_checkpoint, "--labels")
    if given:
        labels = given
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
SEQUENCE_FEATURES = (*MODEL_INPUTS, "label_ids", "label_weights")


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
                 options: NerOptions | None = None,
                 checkpoint: str | None = None) -> list[list[str]]:
    """Each sentence's predicted tags (every word predicted by exactly one window)."""
    rows = training.predict(task, run_config, input_fn(split, max_seq_length, False,
                                                       options=options), strategy,
                            checkpoint=checkpoint)
    predicted = np.zeros([split.features.num_windows, max_seq_length], np.int32)
    count = 0
    for i, row in zip(range(split.features.num_windows), rows):
        # A trimmed batch predicts its own length; positions past it are padding, never read.
        predicted[i, :len(row["predicted_ids"])] = row["predicted_ids"]
        count += 1
    if count != split.features.num_windows:
        raise UserError(f"{split.record_path}: {count} windows predicted for "
                        f"{split.features.num_windows} written (was the file changed during the "
                        "run?); no predictions are written")
    per_sentence = tagging.stitch_predictions(
        split.features, predicted, [len(s.words) for s in split.sentences])
    names = np.asarray(labels, dtype=object)
    return [names[ids].tolist() for ids in per_sentence]


def _check(options: NerOptions, labels: Sequence[str] | None = None) -> None:
    if not (options.do_train or options.do_eval or options.do_predict or options.export_dir
            or options.export_hf_dir):
        raise UserError("nothing to do: set at least one of --do_train, --do_eval, --do_predict, "
                        "--export_dir, --export_hf_dir")
    options.check_export(options.export_dir)
    if options.export_hf_dir and options.lstm_size:
        raise hf_export.HfExportError(hf_export.LSTM_REFUSAL)
    if options.data_format not in tagging.DATA_FORMATS:
        raise UserError(f"--data_format must be one of {tagging.DATA_FORMATS}")
    if options.tag_scheme not in tagging.TAG_SCHEMES:
        raise UserError(f"--tag_scheme must be one of {sorted(tagging.TAG_SCHEMES)}")
    if options.decode not in DECODES:
        raise UserError(f"--decode must be one of {', '.join(DECODES)}, got {options.decode!r}")
    if options.lstm_size < 0:
        raise UserError(f"--lstm_size must not be negative, got {options.lstm_size}")
    if labels is not None and options.crf and tag_metrics.OUTSIDE not in labels:
        raise UserError(f"--crf: the label list {list(labels)} has no {tag_metrics.OUTSIDE!r} "
                         "(the tag of words outside entities); add it to --labels")


def make_task(options: NerOptions, bert_config: BertConfig, labels: Sequence[str],
              learning_rate: float) -> TaggingTask:
    """The tagging task `options` ask for (softmax or CRF head, BiLSTM, decoding)."""
    rate = options.crf_learning_rate
    return TaggingTask(bert_config, len(labels), labels=labels, scheme=options.tag_scheme,
                       crf=options.crf, lstm_size=options.lstm_size, decode=options.decode,
                       crf_rate_factor=rate / learning_rate if rate else 1.0)


def reported_keys(labels: Sequence[str]) -> list[str]:
    """The keys of eval_results.txt for `labels` (per entity type: those the dev file has)."""
    types = sorted({tag_metrics.split_tag(label)[1] for label in labels} - {""})
    return (["eval_loss", "loss", "global_step", "eval_precision", "eval_recall", "eval_f1",
             "eval_accuracy"]
            + [f"eval_{kind}_{name}" for kind in types for name in ("precision", "recall", "f1")])


@dataclasses.dataclass
class PreparedTagger:
    """A run's labels, tokenizer and tagging task, from `prepare`; `evaluate` gives --do_eval's
    figures for a checkpoint. The task keeps the model and traced steps of its first
    evaluation, so later calls on the same object (each evaluation during training, or each of
    a multi-task run's) restore into them instead of building and tracing again."""

    options: NerOptions
    run_config: training.RunConfig
    strategy: tf.distribute.Strategy | None
    labels: list[str]
    tokenizer: tokenizers.FullTokenizer | tokenizers.SentencePieceTokenizer
    task: TaggingTask
    _dev: Split | None = dataclasses.field(default=None, init=False, repr=False)

    def split(self, name: str, record_name: str, batch: int, need_tags: bool,
              sentences: list[tagging.Sentence] | None = None) -> Split:
        """The file `name` of the data directory (or `sentences` read from it) as records."""
        path = self.options.path(name)
        return prepare_split(
            path, sentences or tagging.read_sentences(path, self.options.data_format),
            self.options, self.labels, self.tokenizer,
            os.path.join(self.run_config.output_dir, record_name), batch, need_tags)

    def dev(self) -> Split:
        """The dev file's records, written at the first call."""
        if self._dev is None:
            self._dev = self.split(self.options.dev_file, "eval.tf_record",
                                   self.run_config.eval_batch_size, True)
        return self._dev

    def evaluate(self, checkpoint: str | None = None) -> dict[str, float]:
        """eval_results.txt's figures for `checkpoint` (default: the latest)."""
        return self.evaluate_with_tags(checkpoint)[0]

    def evaluate_with_tags(self, checkpoint: str | None = None
                           ) -> tuple[dict[str, float], list[list[str]]]:
        """eval_results.txt's figures and the predicted tags of the dev file."""
        options, run_config = self.options, self.run_config
        loop = training.evaluate(self.task, run_config, input_fn(
            self.dev(), options.max_seq_length, False, options=options), self.strategy,
            checkpoint=checkpoint)
        predicted = predict_tags(self.task, run_config.replace(
            predict_batch_size=run_config.eval_batch_size), self.strategy, self.dev(),
            self.labels, options.max_seq_length, options, checkpoint)
        return {"eval_loss": loop["tagging_loss"], "loss": loop["loss"],
                "global_step": int(loop["global_step"]),
                **tag_metrics.results_entries(tag_metrics.evaluate(self.dev().tags, predicted))
                }, predicted


def prepare(options: NerOptions, run_config: training.RunConfig,
            strategy: tf.distribute.Strategy | None = None,
            train: list[tagging.Sentence] | None = None) -> PreparedTagger:
    """The labels (from `train`, --label_list or a saved label list), written to output_dir,
    the tokenizer and the tagging task, as run_ner reads them."""
    bert_config = options.load_bert_config(run_config)
    options = finetuning.static_shape_options(options, run_config, strategy)
    filesystem.makedirs(run_config.output_dir)
    labels = resolve_labels(options, run_config.output_dir, train, run_config.init_checkpoint)
    _check(options, labels)
    finetuning.write_label_list(run_config.output_dir, labels)
    return PreparedTagger(options, run_config, strategy, labels,
                          options.create_tokenizer(run_config.init_checkpoint, bert_config),
                          make_task(options, bert_config, labels, run_config.learning_rate))


def run_ner(options: NerOptions, run_config: training.RunConfig,
            strategy: tf.distribute.Strategy | None = None,
            training_task: finetuning.TrainingTask | None = None) -> dict[str, Any]:
    """Trains, evaluates and predicts, as `options` asks.

    Args:
      options: the tagging options.
      run_config: the loop's options; num_train_steps/num_warmup_steps are computed here from
        the training windows, num_train_epochs and warmup_proportion.
      strategy: from `bert_tf.training.distribution`; None picks the default.
      training_task: what --do_train trains in place of the tagging task (given it).

    Returns:
      {"labels", "train": loop figures, "eval": eval_results.txt's figures, "test": test
       figures (tagged test file), "files": {name: path}, "export_dir"} for the steps that ran.
    """
    _check(options)
    train = (tagging.read_sentences(options.path(options.train_file), options.data_format)
             if options.do_train else None)
    prepared = prepare(options, run_config, strategy, train)
    options, labels, task = prepared.options, prepared.labels, prepared.task
    output_dir = run_config.output_dir
    out: dict[str, Any] = {"labels": labels, "files": {}}

    if options.do_train:
        split = prepared.split(options.train_file, "train.tf_record", 1, True, train)
        # Windows are the examples the original would count.
        run_config = finetuning.epochs_run_config(run_config, options,
                                                  split.features.num_windows, "training windows")
        evaluator = best_checkpoint.from_options(
            options, output_dir, prepared.evaluate,
            split.features.num_windows // run_config.train_batch_size, DEFAULT_BEST_METRIC,
            reported_keys(labels), training.is_chief(strategy or tf.distribute.get_strategy()))
        out["train"] = training.train(
            training_task(task) if training_task else task, run_config,
            input_fn(split, options.max_seq_length, True, run_config.seed, options), strategy,
            evaluator)
    if options.do_eval:
        out["eval"], predicted = prepared.evaluate_with_tags()
        out["files"].update(_write_outputs(output_dir, "eval", prepared.dev(), options, predicted,
                                           out["eval"]))
    if options.do_predict:
        split = prepared.split(options.test_file, "predict.tf_record",
                               run_config.predict_batch_size, False)
        predicted = predict_tags(task, run_config, strategy, split, labels, options.max_seq_length,
                                 options, best_checkpoint.prediction_checkpoint(
                                     output_dir, options.predict_from))
        if split.tags is not None:
            out["test"] = tag_metrics.results_entries(tag_metrics.evaluate(split.tags, predicted),
                                                      prefix="test_")
        out["files"].update(_write_outputs(output_dir, "test", split, options, predicted,
                                           out.get("test")))
    if options.export_dir:
        out["export_dir"] = _export(prepared, options, run_config)
        logging.info("Exported the SavedModel to %s", out["export_dir"])
    if options.export_hf_dir:
        checkpoint = best_checkpoint.prediction_checkpoint(output_dir, options.predict_from)
        out["export_hf_dir"] = finetuning.export_hf(
            options, training.load_model(task, run_config, checkpoint=checkpoint), strategy,
            hf_export.HeadLabels(labels))
    return out


def _export(prepared: PreparedTagger, options: NerOptions, run_config: training.RunConfig
            ) -> str:
    """Writes --export_dir: the TensorFlow SavedModel, or the OpenVINO export compared with
    float32 on the dev file."""
    from bert_tf.serving.saved_model import in_graph_tokenizer
    from bert_tf.tasks.ner import export

    task = prepared.task
    checkpoint = best_checkpoint.prediction_checkpoint(run_config.output_dir,
                                                       options.predict_from)
    model = training.load_model(task, run_config, checkpoint=checkpoint)
    tokenizer = in_graph_tokenizer(options.vocab_file, options.spm_model_file,
                                   options.do_lower_case)
    common = dict(tokenizer=tokenizer, labels=prepared.labels,
                  max_seq_length=options.max_seq_length, window_overlap=options.window_overlap,
                  char_format=options.data_format == "char",
                  decoder=lambda outputs, weights: task.decoded({"label_weights": weights},
                                                                outputs))
    if options.export_runtime == "tensorflow":
        return export.export_tagger(precision.model_in_dtype(
            model, task.build_model, options.export_dtype), options.export_dir, **common)
    train = tagging.read_sentences(options.path(options.train_file), options.data_format)
    chosen = np.random.default_rng(0).permutation(len(train))[:options.int8_calibration_examples]
    calibration = ([{"text": _sentence_text(train[i].words, options)} for i in sorted(chosen)]
                   if options.export_dtype == "int8" else [])
    return export.export_tagger_openvino(
        model, options.export_dir, **common, precision=options.export_dtype,
        calibration=calibration, evaluation=dev_evaluation(prepared),
        max_relative_loss=options.export_max_relative_loss,
        quantization=options.quantization())


def _sentence_text(words: Sequence[str], options: NerOptions) -> str:
    """A sentence as the raw-text signature reads it: words apart by spaces (char: one string)."""
    return ("" if options.data_format == "char" else " ").join(words)


def dev_evaluation(prepared: PreparedTagger) -> openvino.Evaluation:
    """The dev file's sentences and entity F1 (eval_f1), scored from the raw-text signature's
    `tags` (an OpenVINO export is compared with float32 on it)."""
    dev = prepared.dev()

    def f1(outputs: dict[str, np.ndarray]) -> float:
        predicted = [[tag.decode("utf-8") for tag in row[:count]]
                     for row, count in zip(outputs["tags"], outputs["num_words"])]
        return tag_metrics.evaluate(dev.tags, predicted).overall.f1

    return openvino.Evaluation([{"text": _sentence_text(s.words, prepared.options)}
                                for s in dev.sentences], "f1", f1, "tags")


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
