"""Exports a fine-tuned classifier as a TensorFlow SavedModel that takes raw text.

Signatures:
* `serving_default`: `text_a` string [B] and, for pair tasks, `text_b` string [B] ->
  `probabilities` float32 [B,L] and `label` string [B] (the most probable label's name), or
  `predictions` float32 [B] for a regression task. The text is tokenized exactly as
  `FullTokenizer` does and packed `[CLS] a [SEP] b [SEP]` with the original's truncation to
  `max_seq_length` (`bert_tf.tasks.classifier.export`), inside the graph. A single text longer
  than one row keeps the pieces of the run's `--truncation`, or with `--long_text=chunks` is
  split into windows whose logits are pooled (`bert_tf.serving.long_text`), as the run's
  --do_predict does.
* `serve_ids`: int32 `input_ids`, `input_mask`, `segment_ids` [B,S] (any B and S up to
  max_position_embeddings, packed as `tasks/classifier` packs them) -> `probabilities` or
  `predictions`, for clients that tokenize themselves.

The label strings, in output order, are saved as the `labels` variable (empty for regression).
`export_classifier_openvino` writes the raw-text signature with the model on OpenVINO (int8,
bfloat16 or float32; `bert_tf.serving.openvino`).
Reload with TensorFlow and tensorflow-text alone:

    import tensorflow as tf, tensorflow_text  # registers the tokenizer ops
    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    serve(text_a=tf.constant(["a fine film"]))["label"]
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import keras
import tensorflow as tf

from bert_tf.serving import long_text as long_text_ops, openvino, packing
from bert_tf.serving.saved_model import IDS_SIGNATURE_KEY, SIGNATURE_KEY, model_inputs_spec, save
from bert_tf.text.long_text import LongText
from bert_tf.model.inputs import MODEL_INPUTS

# Kept for callers of the ids-in export; `serving_default` now takes raw text.
__all__ = ["SIGNATURE_KEY", "IDS_SIGNATURE_KEY", "export_classifier", "predict_outputs"]
_TEXT_A = tf.TensorSpec([None], tf.string, name="text_a")
_TEXT_B = tf.TensorSpec([None], tf.string, name="text_b")


class _ClassifierServing(tf.Module):
    """Holds the model, tokenizer and labels and the serving functions: what the SavedModel stores."""

    def __init__(self, model: keras.Model, labels: Sequence[str], regression: bool,
                 tokenizer: tf.Module, max_seq_length: int, pair: bool, thresholds=None,
                 long_text: LongText = LongText()):
        super().__init__(name="classifier_serving")
        # Only the raw-text function the task uses: a SavedModel traces and stores every
        # tf.function its module holds, used by a signature or not.
        self.serve_text = tf.function(
            self._serve_text_pair if pair else self._serve_text_a, autograph=False,
            input_signature=[_TEXT_A, _TEXT_B] if pair else [_TEXT_A])
        # Both signatures call this one function, so an export traces and stores the model once.
        self.logits = tf.function(self._model_logits, autograph=False,
                                  input_signature=[model_inputs_spec()])
        self._long_text = long_text
        self._pair = pair
        self.model = model
        self.labels = tf.Variable(list(labels), dtype=tf.string, trainable=False, shape=[None],
                                  name="labels")
        self.tokenizer = tokenizer
        self._regression = regression
        self._max_seq_length = max_seq_length
        self.thresholds = None
        if thresholds is not None:  # multi-label: sigmoid outputs and the decision thresholds
            self.thresholds = tf.Variable(
                tf.broadcast_to(tf.cast(thresholds, tf.float32), [len(labels)]),
                trainable=False, name="thresholds")

    @tf.function(autograph=False, input_signature=list(model_inputs_spec().values()))
    def serve_ids(self, input_ids, input_mask, segment_ids):
        return self._outputs(self.logits({"input_ids": input_ids, "input_mask": input_mask,
                                          "segment_ids": segment_ids}))

    def _serve_text_a(self, text_a):
        return self._serve_text(self._prepare_a(text_a))

    def _serve_text_pair(self, text_a, text_b):
        return self._serve_text(self._prepare_pair(text_a, text_b))

    def _prepare_a(self, text_a):
        return self.prepare(text_a, None)

    def _prepare_pair(self, text_a, text_b):
        tf.debugging.assert_equal(tf.size(text_a), tf.size(text_b),
                                  message="text_a and text_b must hold as many texts")
        return self.prepare(text_a, text_b)

    def _serve_text(self, prepared: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        logits = self.logits({name: prepared[name] for name in MODEL_INPUTS})
        return self.finish({"logits": logits, **prepared})

    def text_signatures(self) -> dict[str, tuple[list[tf.TensorSpec], Callable]]:
        """The raw-text signature's inputs and its `prepare` (`bert_tf.serving.openvino`)."""
        if self._pair:
            return {SIGNATURE_KEY: ([_TEXT_A, _TEXT_B], self._prepare_pair)}
        return {SIGNATURE_KEY: ([_TEXT_A], self._prepare_a)}

    def prepare(self, text_a: tf.Tensor, text_b: tf.Tensor | None) -> dict[str, tf.Tensor]:
        """The model's inputs for string [B] texts and `num_texts` (B); with
        `--long_text=chunks` also `text_of_window` int [R], each row's text."""
        ids_a = self.tokenizer.tokenize(text_a)
        ids_b = None if text_b is None else self.tokenizer.tokenize(text_b)
        window = self._max_seq_length - 2
        text_of_window = None
        if ids_b is None and self._long_text.chunks:
            ids_a, text_of_window = long_text_ops.split_windows(
                ids_a, window, self._long_text.window_stride(window))
        elif ids_b is None:
            ids_a = long_text_ops.truncate(ids_a, window, self._long_text)
        features = packing.pack(ids_a, ids_b, self.tokenizer.special_ids["[CLS]"],
                                self.tokenizer.special_ids["[SEP]"], self._max_seq_length)
        prepared = {name: features[name] for name in MODEL_INPUTS}
        prepared["num_texts"] = tf.size(text_a)
        if text_of_window is not None:
            prepared["text_of_window"] = text_of_window
        return prepared

    def model_outputs(self, features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """The model: float32 `logits` [B,num_labels] (`bert_tf.serving.openvino`)."""
        return {"logits": self._model_logits(features)}

    def finish(self, values: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """The raw-text signature's outputs from `logits` and `prepare`'s state."""
        logits = values["logits"]
        if "text_of_window" in values:  # the windows' logits, pooled per text
            logits = long_text_ops.pool(logits, values["text_of_window"], values["num_texts"],
                                        self._long_text.pooling)
        out = self._outputs(logits)
        if not self._regression and self.thresholds is None:
            out["label"] = tf.gather(self.labels, tf.argmax(out["probabilities"], axis=-1))
        return out

    def _model_logits(self, features: dict[str, tf.Tensor]) -> tf.Tensor:
        return tf.cast(self.model(features, training=False)["logits"], tf.float32)

    def _outputs(self, logits: tf.Tensor) -> dict[str, tf.Tensor]:
        if self._regression:
            return {"predictions": logits[:, 0]}  # [B]
        if self.thresholds is not None:
            probabilities = tf.math.sigmoid(logits)  # [B,num_labels]
            return {"probabilities": probabilities,
                    "predicted": probabilities >= self.thresholds}  # bool [B,num_labels]
        return {"probabilities": tf.nn.softmax(logits, axis=-1)}  # [B,num_labels]


def predict_outputs(model: keras.Model, features: dict, regression: bool) -> tf.Tensor:
    """The exported signature's output for a batch, computed with the Keras model directly.

    Returns:
      float32 [B,num_labels] probabilities, or [B] predictions for regression.
    """
    logits = tf.cast(model(features, training=False)["logits"], tf.float32)
    return logits[:, 0] if regression else tf.nn.softmax(logits, axis=-1)


def export_classifier(model: keras.Model, export_dir: str, labels: Sequence[str] | None,
                      regression: bool, tokenizer: tf.Module, max_seq_length: int,
                      pair: bool, thresholds=None, long_text: LongText = LongText()) -> str:
    """Writes `model` as a SavedModel under `export_dir`, replacing what was there (atomically).

    Args:
      model: a `bert_tf.model.models.ClassifierModel` (variables already trained or restored).
      export_dir: the SavedModel directory to create.
      labels: label strings in output order (None or empty for regression).
      regression: export `predictions` [B] instead of `probabilities` [B,num_labels].
      tokenizer: `bert_tf.serving.saved_model.in_graph_tokenizer(...)`.
      max_seq_length: the longest packed row of the raw-text signature.
      pair: the task has two texts: `serving_default` takes `text_a` and `text_b`.
      thresholds: multi-label: a float or one per label; the export returns sigmoid
        `probabilities` and bool `predicted` (probability >= threshold) [B,num_labels] instead
        of softmax `probabilities` and `label`.
      long_text: how a single text longer than one row is cut or split into windows (the
        options the model was trained and predicts with).

    Returns:
      export_dir.
    """
    module = _ClassifierServing(model, [] if regression else list(labels or []), regression,
                                tokenizer, max_seq_length, pair, thresholds, long_text)
    return save(module, export_dir, {SIGNATURE_KEY: module.serve_text,
                                     IDS_SIGNATURE_KEY: module.serve_ids})


def export_classifier_openvino(model: keras.Model, export_dir: str, labels: Sequence[str],
                               tokenizer: tf.Module, max_seq_length: int, pair: bool,
                               precision: str, calibration: Sequence[Mapping[str, str]],
                               evaluation: openvino.Evaluation, max_relative_loss: float,
                               long_text: LongText = LongText(),
                               quantization: openvino.Quantization = openvino.Quantization()
                               ) -> str:
    """Writes the classifier's OpenVINO export (`bert_tf.serving.openvino`): the raw-text
    signature of `export_classifier`, its model on OpenVINO in `precision`.

    Args:
      model: the float32 classifier (weights restored).
      precision: int8 (calibrated on `calibration`, texts by input name), bfloat16 or float32.
      evaluation: the dev set the export is compared with float32 on, before it is written.
      max_relative_loss: the largest relative loss of the dev metric that is written.
      labels, tokenizer, max_seq_length, pair, long_text: as `export_classifier`'s.
      quantization: int8: NNCF's settings (`ExportOptions.quantization`: the int8 flags).

    Returns:
      export_dir.
    """
    module = _ClassifierServing(model, list(labels), False, tokenizer, max_seq_length, pair,
                                long_text=long_text)
    return openvino.export(module, export_dir, precision, calibration, evaluation,
                           max_relative_loss, quantization)
