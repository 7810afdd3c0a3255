"""The OpenVINO export's model: the encoder's LayerNorms and erf GELUs, as converted, are
rewritten into OpenVINO's `MVN` and `Gelu` nodes, and the model still computes TensorFlow's
logits."""

import collections

import keras
import numpy as np
import tensorflow as tf

from bert_tf.model import models
from bert_tf.model.config import BertConfig
from bert_tf.serving.saved_model import model_inputs_spec
from conftest import require_extra


def test_layer_norms_and_erf_gelus_become_fused_nodes_with_the_same_logits():
    require_extra("openvino", "openvino")
    from bert_tf.serving import openvino

    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=37, hidden_act="gelu_exact",
                        initializer_range=0.3)
    # initializer_range 0.3: activations wide enough that the GELU's form shows in the logits.
    keras.utils.set_random_seed(0)
    model = models.classifier_model(config, 3)
    rng = np.random.default_rng(0)
    for variable in model.weights:  # biases, LayerNorm scales and shifts away from 0 and 1
        if len(variable.shape) == 1:
            variable.assign(variable.numpy() + rng.normal(0, 0.5, variable.shape))
    traced = tf.function(lambda f: {"logits": model(f, training=False)["logits"]},
                         input_signature=[model_inputs_spec()]).get_concrete_function()
    mask = (np.arange(7)[None] < np.array([[7], [3]])).astype(np.int32)
    features = {"input_ids": rng.integers(5, 50, mask.shape).astype(np.int32) * mask,
                "input_mask": mask, "segment_ids": np.zeros_like(mask)}
    expected = traced({k: tf.constant(v) for k, v in features.items()})["logits"].numpy()

    converted = openvino.convert(traced, ["logits"])
    nodes = collections.Counter(op.get_type_name() for op in converted.get_ops())
    # 1 + 2 per block LayerNorms, 1 GELU per block; none of their element-wise parts left.
    assert (nodes["MVN"], nodes["Gelu"]) == (5, 2)
    assert (nodes["ReduceMean"], nodes["Erf"], nodes["Power"]) == (0, 0, 0)
    logits = openvino.compile_model(converted, "float32")(features)["logits"]
    # Within float32 rounding (6e-8 here): the tanh GELU in place of erf's is off by 1.5e-5.
    np.testing.assert_allclose(logits, expected, rtol=0, atol=3e-6)
