"""Exports an encoder as a SavedModel that turns raw text into features (bert-as-service's
pooling strategies, served).

Signatures, tokenized and packed inside the graph (`bert_tf.serving.packing`):
* `serving_default`: `text` string [B], each `text` or `text_a ||| text_b` as
  extract_features.py reads its lines (stripped, split at the last ` ||| `);
* `serve_pair`: `text_a` and `text_b` string [B], the two texts apart (an empty `text_b`, or
  one without tokens, packs `text_a` alone, as the original does);

both ->
* `cls` float32 [B,H]: the last layer's [CLS] vector;
* `pooled` float32 [B,H]: the pooler's output (dense + tanh on [CLS]);
* `mean` float32 [B,H]: the last layer averaged over the real tokens ([CLS] and [SEP] included);
* `layers` float32 [B,S,L,H]: the `--layers` activations of every token (S the batch's
  longest row; zeros past a row's `length`), what extract_features.py writes per token;
* `tokens` string [B,S] (empty past `length`) and `length` int32 [B].
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf

from bert_tf.serving import openvino, packing
from bert_tf.serving.saved_model import SIGNATURE_KEY, model_inputs_spec, save
from bert_tf.serving.text import character_classes
from bert_tf.model.inputs import MODEL_INPUTS

PAIR_SIGNATURE_KEY = "serve_pair"  # text_a and text_b as two inputs


def _strip_pattern() -> str:
    """What Python's str.strip() removes: every str.isspace() character."""
    space = character_classes()["python_space"]
    return f"^{space}+|{space}+$"


def split_pairs(text: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """`extraction.parse_line` on string [B] -> (text_a, text_b, has_b bool [B])."""
    text = tf.strings.regex_replace(text, _strip_pattern(), "")
    pair = r"^(.*) \|\|\| (.*)$"  # greedy: the last " ||| " splits, as Python's re
    has_b = tf.strings.regex_full_match(text, pair)
    text_a = tf.where(has_b, tf.strings.regex_replace(text, pair, r"\1"), text)
    text_b = tf.where(has_b, tf.strings.regex_replace(text, pair, r"\2"), "")
    return text_a, text_b, has_b


_TEXT = tf.TensorSpec([None], tf.string, name="text")
_TEXT_A = tf.TensorSpec([None], tf.string, name="text_a")
_TEXT_B = tf.TensorSpec([None], tf.string, name="text_b")


class _FeaturesServing(tf.Module):
    def __init__(self, encoder: keras.Model, tokenizer: tf.Module, layers: Sequence[int],
                 max_seq_length: int):
        super().__init__(name="features_serving")
        self.encoder = encoder
        self.tokenizer = tokenizer
        self._layers = list(layers)
        self._max_seq_length = max_seq_length
        # Both signatures call this one function, so an export traces and stores the encoder once.
        self.encode = tf.function(self.model_outputs, autograph=False,
                                  input_signature=[model_inputs_spec()])

    @tf.function(autograph=False, input_signature=[_TEXT])
    def serve_text(self, text):
        return self._serve(self._prepare_text(text))

    @tf.function(autograph=False, input_signature=[_TEXT_A, _TEXT_B])
    def serve_pair(self, text_a, text_b):
        return self._serve(self._prepare_pair(text_a, text_b))

    def _serve(self, prepared: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        outputs = self.encode({k: prepared[k] for k in MODEL_INPUTS})
        return self.finish({**outputs, **prepared})

    def text_signatures(self) -> dict[str, tuple[list[tf.TensorSpec], Callable]]:
        """Both signatures' inputs and their `prepare` (`bert_tf.serving.openvino`)."""
        return {SIGNATURE_KEY: ([_TEXT], self._prepare_text),
                PAIR_SIGNATURE_KEY: ([_TEXT_A, _TEXT_B], self._prepare_pair)}

    def _prepare_text(self, text: tf.Tensor) -> dict[str, tf.Tensor]:
        return self.prepare(*split_pairs(text))

    def _prepare_pair(self, text_a: tf.Tensor, text_b: tf.Tensor) -> dict[str, tf.Tensor]:
        tf.debugging.assert_equal(tf.size(text_a), tf.size(text_b),
                                  message="text_a and text_b must hold as many texts")
        return self.prepare(text_a, text_b, None)

    def prepare(self, text_a: tf.Tensor, text_b: tf.Tensor, has_b: tf.Tensor | None
                ) -> dict[str, tf.Tensor]:
        """The model's inputs for string [B] pairs (`has_b` [B]: which rows are pairs; None:
        those whose `text_b` has tokens), with the rows' `tokens` string [B,S] (empty past
        `length`) and `length` int32 [B]."""
        features = packing.pack(self.tokenizer.tokenize(text_a), self.tokenizer.tokenize(text_b),
                                self.tokenizer.special_ids["[CLS]"],
                                self.tokenizer.special_ids["[SEP]"], self._max_seq_length, has_b)
        inputs = {k: features[k] for k in MODEL_INPUTS}
        tokens = self.tokenizer.tokens(inputs["input_ids"])  # [B,S]
        return {**inputs, "tokens": tf.where(inputs["input_mask"] > 0, tokens, ""),
                "length": tf.reduce_sum(inputs["input_mask"], axis=1)}

    def finish(self, values: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """The signatures' outputs from the encoder's and `prepare`'s."""
        sequence = values["sequence"]  # [B,S,H]
        # The real tokens lead each packed row: the first `length` positions.
        mask = tf.sequence_mask(values["length"], tf.shape(sequence)[1], tf.float32)[:, :, None]
        return {"cls": sequence[:, 0],
                "pooled": values["pooled"],
                "mean": tf.reduce_sum(sequence * mask, axis=1) / tf.reduce_sum(mask, axis=1),
                "layers": values["layers"] * mask[:, :, :, None],
                "tokens": values["tokens"], "length": values["length"]}

    def model_outputs(self, inputs: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """float32 `sequence` [B,S,H], `pooled` [B,H] and the chosen `layers` [B,S,L,H]."""
        outputs = self.encoder(inputs, training=False)
        layers = tf.stack([tf.cast(outputs["encoder_outputs"][i], tf.float32)
                           for i in self._layers], axis=2)
        return {"sequence": tf.cast(outputs["sequence_output"], tf.float32),
                "pooled": tf.cast(outputs["pooled_output"], tf.float32), "layers": layers}


def export_features(encoder: keras.Model, export_dir: str, tokenizer: tf.Module,
                    layers: Sequence[int], max_seq_length: int) -> str:
    """Writes the encoder's raw-text feature signatures as a SavedModel at `export_dir` (atomically).

    Args:
      encoder: a `BertEncoder` (or ALBERT's) with its weights restored.
      tokenizer: `bert_tf.serving.saved_model.in_graph_tokenizer(...)`.
      layers: encoder layers for the `layers` output (-1 = last), as extract_features' --layers.
      max_seq_length: the longest packed row.

    Returns:
      export_dir.
    """
    module = _FeaturesServing(encoder, tokenizer, layers, max_seq_length)
    return save(module, export_dir, {SIGNATURE_KEY: module.serve_text,
                                     PAIR_SIGNATURE_KEY: module.serve_pair})


def export_features_openvino(encoder: keras.Model, export_dir: str, tokenizer: tf.Module,
                             layers: Sequence[int], max_seq_length: int, precision: str,
                             calibration: Sequence[Mapping[str, str]],
                             comparison: Sequence[Mapping[str, str]],
                             max_relative_loss: float,
                             quantization: openvino.Quantization = openvino.Quantization()) -> str:
    """Writes the features OpenVINO export (`bert_tf.serving.openvino`): `export_features`'
    signatures, the encoder on OpenVINO in `precision` (int8 calibrated on `calibration`,
    `{"text": line}` each), compared with float32 on `comparison` before it is written
    (`vector_agreement`).

    Returns:
      export_dir.
    """
    module = _FeaturesServing(encoder, tokenizer, layers, max_seq_length)
    evaluation = openvino.Evaluation(comparison, "cosine", vector_agreement, "tokens",
                                     against_float32=True)
    return openvino.export(module, export_dir, precision, calibration, evaluation,
                           max_relative_loss, quantization)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The cosine similarity of `a` and `b` along their last axis, in float64."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    norms = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return np.sum(a * b, axis=-1) / np.maximum(norms, np.finfo(np.float64).tiny)


def vector_agreement(outputs: dict[str, np.ndarray], float32: dict[str, np.ndarray]) -> float:
    """How close an export's vectors are to float32's: the mean cosine similarity over every
    vector the signature returns (each text's `cls`, `pooled` and `mean`; each real token's
    vector in each of `layers`); float32 against itself scores 1."""
    real = np.arange(outputs["layers"].shape[1])[None, :] < outputs["length"][:, None]  # [B,S]
    cosines = [_cosines(outputs[name], float32[name]) for name in ("cls", "pooled", "mean")]
    cosines.append(_cosines(outputs["layers"], float32["layers"])[real])  # [real tokens, L]
    return float(np.mean(np.concatenate([c.ravel() for c in cosines])))
