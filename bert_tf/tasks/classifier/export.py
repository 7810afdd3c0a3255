"""Exports a fine-tuned classifier as a TensorFlow SavedModel with a serving signature.

The `serving_default` signature takes int32 `input_ids`, `input_mask`, `segment_ids` [B,S]
(any B and S up to max_position_embeddings, packed as `bert_tf.tasks.classifier.features`
packs them) and returns `probabilities` float32 [B,num_labels] (softmax of the logits), or
`predictions` float32 [B] for a regression task. The label strings, in output order, are saved
with it as the `labels` variable (empty for regression). Reload with TensorFlow alone:

    loaded = tf.saved_model.load(export_dir)
    out = loaded.signatures["serving_default"](input_ids=ids, input_mask=mask, segment_ids=segs)
"""

from __future__ import annotations

import os
import shutil
import uuid
from typing import Sequence

import keras
import tensorflow as tf

from bert_tf import full_disk

SIGNATURE_KEY = "serving_default"
_INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")


class _ClassifierServing(tf.Module):
    """Holds the model's variables and the serving function; what the SavedModel stores."""

    def __init__(self, model: keras.Model, labels: Sequence[str], regression: bool):
        super().__init__(name="classifier_serving")
        self.model = model
        self.labels = tf.Variable(list(labels), dtype=tf.string, trainable=False, shape=[None],
                                  name="labels")
        self._regression = regression

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name=n)
                                  for n in _INPUT_NAMES])
    def serve(self, input_ids, input_mask, segment_ids):
        logits = self.model({"input_ids": input_ids, "input_mask": input_mask,
                             "segment_ids": segment_ids}, training=False)["logits"]
        logits = tf.cast(logits, tf.float32)
        if self._regression:
            return {"predictions": logits[:, 0]}  # [B]
        return {"probabilities": tf.nn.softmax(logits, axis=-1)}  # [B,num_labels]


def predict_outputs(model: keras.Model, features: dict, regression: bool) -> tf.Tensor:
    """The exported signature's output for a batch, computed with the Keras model directly.

    Returns:
      float32 [B,num_labels] probabilities, or [B] predictions for regression.
    """
    logits = tf.cast(model(features, training=False)["logits"], tf.float32)
    return logits[:, 0] if regression else tf.nn.softmax(logits, axis=-1)


def export_classifier(model: keras.Model, export_dir: str, labels: Sequence[str] | None,
                      regression: bool = False) -> str:
    """Writes `model` as a SavedModel under `export_dir`, replacing what was there.

    The SavedModel is written next to `export_dir` first and moved into place when complete, so
    a crash never leaves a half-written (or half-deleted) export under that name; a full disk is
    one `full_disk.DiskFullError` naming `export_dir`.

    Args:
      model: a `bert_tf.model.models.ClassifierModel` (variables already trained or restored).
      export_dir: the SavedModel directory to create.
      labels: label strings in output order (None or empty for regression).
      regression: export `predictions` [B] instead of `probabilities` [B,num_labels].

    Returns:
      export_dir.
    """
    module = _ClassifierServing(model, [] if regression else list(labels or []), regression)
    export_dir = os.path.abspath(export_dir)
    parent = os.path.dirname(export_dir)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{os.path.basename(export_dir)}.tmp-{uuid.uuid4().hex}")
    with full_disk.named_when_full(export_dir, lambda: full_disk.remove_if_exists(tmp)):
        tf.saved_model.save(module, tmp, signatures={SIGNATURE_KEY: module.serve})
    # The previous export moves aside whole before the new one takes its name, and is deleted
    # last: a crash at any moment leaves a complete export (or, between the renames, none).
    previous = None
    if os.path.exists(export_dir):
        previous = os.path.join(parent, f".{os.path.basename(export_dir)}.tmp-{uuid.uuid4().hex}")
        os.replace(export_dir, previous)
    os.replace(tmp, export_dir)
    if previous:
        shutil.rmtree(previous)
    return export_dir
