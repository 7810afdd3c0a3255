"""--export_dtype: a model rebuilt in bfloat16 holds the trained weights rounded, its heads'
small weights in float32; an unknown dtype is one error."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.errors import UserError
from bert_tf.model import models
from bert_tf.serving import precision


def test_bfloat16_model_holds_the_weights_rounded_and_float32_heads(tiny_config):
    def build():
        return models.token_classifier_model(tiny_config, 3, crf=True)

    trained = build()
    assert precision.model_in_dtype(trained, build, "float32") is trained
    exported = precision.model_in_dtype(trained, build, "bfloat16")
    assert exported.dtype_policy.name == "bfloat16"
    dtypes = {}
    for source, copy in zip(trained.weights, exported.weights):
        dtypes[copy.path] = copy.dtype
        np.testing.assert_array_equal(copy.numpy(), tf.cast(source, copy.dtype).numpy())
    assert dtypes["embeddings/word_embeddings"] == dtypes["query/kernel"] == "bfloat16"
    assert {dtypes[name] for name in dtypes if name.startswith(("token_classifier/", "crf/"))} == {
        "float32"}
    ids = tf.constant([[2, 5, 6, 0]])
    logits = exported({"input_ids": ids, "input_mask": tf.cast(ids > 0, tf.int32)})["logits"]
    assert logits.dtype == tf.float32


def test_an_unknown_export_dtype_is_one_error(tiny_config):
    with pytest.raises(UserError, match="--export_dtype must be one of float32, bfloat16, got 'fp8'"):
        precision.check_export_dtype("fp8")
    model = models.classifier_model(tiny_config, 2)
    with pytest.raises(ValueError, match="other variables"):
        precision.model_in_dtype(model, lambda: models.classifier_model(tiny_config, 3), "bfloat16")
