"""The BERT encoder as a Keras 3 model: embeddings, post-LayerNorm Transformer blocks, pooler.

Dimension legend (used in every shape comment of this package):
  B  batch size                      S  sequence length (tokens per example)
  H  hidden_size                     N  num_attention_heads
  D  head size = H // N              I  intermediate_size (feed-forward width)
  V  vocab_size                      T  type_vocab_size (segment ids)
  P  max_position_embeddings         L  num_hidden_layers

Variables, by attribute path on a `BertEncoder` named `encoder` (dense kernels are [in, out], as
in the original TF1 checkpoint; `encoder.layer_{i}` is also `encoder.transformer_layers[i]`;
the TF1 names are under `bert/`, and `.../` abbreviates `encoder/layer_{i}/`):

  attribute path                                  shape       original TF1 name
  embeddings.word_embeddings                      [V,H]       embeddings/word_embeddings
  embeddings.token_type_embeddings                [T,H]       embeddings/token_type_embeddings
  embeddings.position_embeddings                  [P,H]       embeddings/position_embeddings
  embeddings.layer_norm.{gamma,beta}              [H]         embeddings/LayerNorm/*
  layer_{i}.query.{kernel,bias}                   [H,H],[H]   .../attention/self/query/*
  layer_{i}.key.{kernel,bias}                     [H,H],[H]   .../attention/self/key/*
  layer_{i}.value.{kernel,bias}                   [H,H],[H]   .../attention/self/value/*
  layer_{i}.attention_output.{kernel,bias}        [H,H],[H]   .../attention/output/dense/*
  layer_{i}.attention_layer_norm.{gamma,beta}     [H]         .../attention/output/LayerNorm/*
  layer_{i}.intermediate.{kernel,bias}            [H,I],[I]   .../intermediate/dense/*
  layer_{i}.output_dense.{kernel,bias}            [I,H],[H]   .../output/dense/*
  layer_{i}.output_layer_norm.{gamma,beta}        [H]         .../output/LayerNorm/*
  pooler.{kernel,bias}                            [H,H],[H]   pooler/dense/*

Query, key and value keep their own [H,H] variables (one-to-one with the original); the forward
pass concatenates them into one [H,3H] kernel (columns [0:H] query, [H:2H] key, [2H:3H] value)
for a single matmul. All variables exist as soon as
the encoder is constructed (no dummy call needed).

Mixed precision: under a Keras dtype policy such as "mixed_bfloat16", matmuls run in the compute
dtype while variables stay float32; embedding sums, LayerNorm and softmax run in float32. The
outputs (`sequence_output`, `pooled_output`, `encoder_outputs`) are in the compute dtype.
"""

from __future__ import annotations

import math
from typing import Callable

import keras
import tensorflow as tf

from bert_tf.config import BertConfig

LAYER_NORM_EPSILON = 1e-12
# Added to the attention scores of padding positions, as in the original.
ATTENTION_MASK_BIAS = -10000.0


def gelu(x: tf.Tensor) -> tf.Tensor:
    """The original's "gelu": 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) (tanh approximation).

    tf.nn.gelu computes exactly this formula, in a form that TensorFlow's graph optimizer fuses
    into the preceding matmul on oneDNN CPUs.
    """
    return tf.nn.gelu(x, approximate=True)


def gelu_exact(x: tf.Tensor) -> tf.Tensor:
    """GELU in its erf form: 0.5·x·(1 + erf(x/√2)) (Hugging Face's "gelu")."""
    return tf.nn.gelu(x, approximate=False)


def _linear(x: tf.Tensor) -> tf.Tensor:
    return x


ACTIVATIONS: dict[str, Callable[[tf.Tensor], tf.Tensor]] = {
    "gelu": gelu, "gelu_exact": gelu_exact, "relu": tf.nn.relu, "tanh": tf.tanh, "linear": _linear,
}


def get_activation(name: str) -> Callable[[tf.Tensor], tf.Tensor]:
    """Maps a `hidden_act` name from bert_config.json to a function."""
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise ValueError(
            f"unknown hidden_act {name!r}; expected one of {', '.join(ACTIVATIONS)}") from None


def initializer(config: BertConfig) -> keras.initializers.Initializer:
    """Truncated normal (cut at 2 stddev) with stddev `initializer_range`, as the original."""
    return keras.initializers.TruncatedNormal(stddev=config.initializer_range)


class Dense(keras.layers.Layer):
    """x @ kernel + bias, then the activation; `kernel` [in,out] as in the original TF1 layout.

    Inputs of any rank [..., in] are flattened to 2-D for the matmul (the fastest path).
    """

    def __init__(self, config: BertConfig, units: int, input_dim: int, activation=None, **kwargs):
        super().__init__(**kwargs)
        self.activation = activation
        self.kernel = self.add_weight(shape=(input_dim, units), initializer=initializer(config),
                                      name="kernel")
        self.bias = self.add_weight(shape=(units,), initializer="zeros", name="bias")
        self.built = True

    def call(self, x: tf.Tensor) -> tf.Tensor:
        shape = tf.shape(x)
        # matmul + bias_add (+ activation) is the pattern oneDNN fuses into one kernel.
        y = tf.nn.bias_add(tf.matmul(tf.reshape(x, [-1, self.kernel.shape[0]]), self.kernel),
                           self.bias)
        if self.activation is not None:
            y = self.activation(y)
        return tf.reshape(y, tf.concat([shape[:-1], [self.kernel.shape[1]]], 0))  # [..., out]


class LayerNorm(keras.layers.Layer):
    """LayerNorm over the last axis, computed in float32 (ε 1e-12); returns the compute dtype.

    Variables `gamma`, `beta` [H] stay float32 (the layer does not autocast them).
    """

    def __init__(self, hidden_size: int, **kwargs):
        super().__init__(autocast=False, **kwargs)
        self.gamma = self.add_weight(shape=(hidden_size,), initializer="ones", name="gamma")
        self.beta = self.add_weight(shape=(hidden_size,), initializer="zeros", name="beta")
        self.built = True

    def call(self, x: tf.Tensor) -> tf.Tensor:
        x = tf.cast(x, tf.float32)
        mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
        # (x - mean) / sqrt(variance + ε) · gamma + beta, as x·inv + (beta - mean·inv): two
        # passes over x instead of four.
        y = tf.nn.batch_normalization(x, mean, variance, offset=self.beta, scale=self.gamma,
                                      variance_epsilon=LAYER_NORM_EPSILON)
        return tf.cast(y, self.compute_dtype)


class BertEmbeddings(keras.layers.Layer):
    """word + token type + position embeddings → LayerNorm → dropout.

    Tables stay float32 and are gathered before any cast (casting a [V,H] table every step
    would cost more than the lookup); the sum and LayerNorm run in float32.
    """

    def __init__(self, config: BertConfig, **kwargs):
        super().__init__(autocast=False, **kwargs)
        init = initializer(config)
        h = config.embedding_width  # H for BERT, E for ALBERT
        self.word_embeddings = self.add_weight(
            shape=(config.vocab_size, h), initializer=init, name="word_embeddings")
        self.token_type_embeddings = self.add_weight(
            shape=(config.type_vocab_size, h), initializer=init, name="token_type_embeddings")
        self.position_embeddings = self.add_weight(
            shape=(config.max_position_embeddings, h), initializer=init, name="position_embeddings")
        self.layer_norm = LayerNorm(h, name="layer_norm", dtype=self.dtype_policy)
        self.dropout = keras.layers.Dropout(config.hidden_dropout_prob, dtype=self.dtype_policy)
        self.max_positions = config.max_position_embeddings
        self.built = True  # every variable exists already; shapes come from the config

    def call(self, input_ids: tf.Tensor, segment_ids: tf.Tensor, training=False) -> tf.Tensor:
        """input_ids, segment_ids: int32 [B,S] → [B,S,H] in the compute dtype."""
        if input_ids.shape[1] is not None and input_ids.shape[1] > self.max_positions:
            raise ValueError(
                f"sequence length {input_ids.shape[1]} exceeds max_position_embeddings "
                f"({self.max_positions}) of the bert config; use a shorter --max_seq_length")
        seq_length = tf.shape(input_ids)[1]
        x = tf.gather(tf.convert_to_tensor(self.word_embeddings), input_ids)  # [B,S,H]
        x += tf.gather(tf.convert_to_tensor(self.token_type_embeddings), segment_ids)  # [B,S,H]
        x += tf.convert_to_tensor(self.position_embeddings)[tf.newaxis, :seq_length]  # [1,S,H]
        return self.dropout(self.layer_norm(x), training=training)


class TransformerBlock(keras.layers.Layer):
    """One post-LayerNorm block: self-attention → add & norm → feed-forward → add & norm."""

    def __init__(self, config: BertConfig, **kwargs):
        super().__init__(**kwargs)
        h, i, policy = config.hidden_size, config.intermediate_size, self.dtype_policy
        self.num_heads = config.num_attention_heads
        self.head_size = config.head_size
        self.query = Dense(config, h, h, name="query", dtype=policy)
        self.key = Dense(config, h, h, name="key", dtype=policy)
        self.value = Dense(config, h, h, name="value", dtype=policy)
        self.attention_output = Dense(config, h, h, name="attention_output", dtype=policy)
        self.attention_layer_norm = LayerNorm(h, name="attention_layer_norm", dtype=policy)
        self.intermediate = Dense(config, i, h, activation=get_activation(config.hidden_act),
                                  name="intermediate", dtype=policy)
        self.output_dense = Dense(config, h, i, name="output_dense", dtype=policy)
        self.output_layer_norm = LayerNorm(h, name="output_layer_norm", dtype=policy)
        self.attention_dropout = keras.layers.Dropout(config.attention_probs_dropout_prob,
                                                      dtype=policy)
        self.hidden_dropout = keras.layers.Dropout(config.hidden_dropout_prob, dtype=policy)
        self.built = True

    def _self_attention(self, x: tf.Tensor, mask_bias: tf.Tensor, batch: tf.Tensor,
                        seq_length: tf.Tensor, training) -> tf.Tensor:
        """x: [B*S,H]; mask_bias: float32 [B,1,1,S] → context [B*S,H]."""
        n, d = self.num_heads, self.head_size
        dtype = self.compute_dtype
        kernel = tf.concat([tf.cast(l.kernel, dtype) for l in (self.query, self.key, self.value)],
                           axis=1)  # [H,3H]
        bias = tf.concat([tf.cast(l.bias, dtype) for l in (self.query, self.key, self.value)], 0)
        qkv = tf.nn.bias_add(tf.matmul(x, kernel), bias)  # [B*S,3H]
        qkv = tf.reshape(qkv, [batch, seq_length, 3, n, d])  # [B,S,3,N,D]
        qkv = tf.transpose(qkv, [2, 0, 3, 1, 4])  # [3,B,N,S,D]
        q, k, v = qkv[0], qkv[1], qkv[2]  # each [B,N,S,D]
        scores = tf.matmul(q, k, transpose_b=True)  # [B,N,S,S]
        scores = tf.cast(scores, tf.float32) * (1.0 / math.sqrt(d)) + mask_bias
        probs = tf.cast(tf.nn.softmax(scores, axis=-1), dtype)  # [B,N,S,S]
        probs = self.attention_dropout(probs, training=training)
        context = tf.matmul(probs, v)  # [B,N,S,D]
        context = tf.transpose(context, [0, 2, 1, 3])  # [B,S,N,D]
        return tf.reshape(context, [batch * seq_length, n * d])  # [B*S,H]

    def call(self, x: tf.Tensor, input_mask: tf.Tensor, training=False) -> tf.Tensor:
        """x: [B,S,H]; input_mask: int [B,S] (1 = token, 0 = padding) → [B,S,H]."""
        # The mask arrives as integers (Keras would cast a float bias to the compute dtype);
        # [B,S] → [B,1,1,S]: one bias row broadcast over heads and query positions.
        mask_bias = (1.0 - tf.cast(input_mask, tf.float32)) * ATTENTION_MASK_BIAS
        mask_bias = mask_bias[:, tf.newaxis, tf.newaxis, :]
        shape = tf.shape(x)
        batch, seq_length, h = shape[0], shape[1], x.shape[-1]
        x2 = tf.reshape(x, [-1, h])  # [B*S,H]: 2-D matmuls are the fastest path on every device
        context = self._self_attention(x2, mask_bias, batch, seq_length, training)
        attention = self.hidden_dropout(self.attention_output(context), training=training)
        x2 = self.attention_layer_norm(tf.cast(attention, tf.float32) + tf.cast(x2, tf.float32))
        hidden = self.output_dense(self.intermediate(x2))  # [B*S,I] → [B*S,H]
        hidden = self.hidden_dropout(hidden, training=training)
        x2 = self.output_layer_norm(tf.cast(hidden, tf.float32) + tf.cast(x2, tf.float32))
        return tf.reshape(x2, shape)  # [B,S,H]


class BertEncoder(keras.Model):
    """The BERT encoder. Call with a dict of int32 [B,S] tensors:

    `input_ids`; `input_mask` (1 = real token, 0 = padding; default all ones); `segment_ids`
    (default all zeros). Returns a dict: `sequence_output` [B,S,H], `pooled_output` [B,H]
    (dense + tanh on the first token), `encoder_outputs` (list of L tensors [B,S,H], one per
    block). See the module docstring for variable names and mixed precision.
    """

    def __init__(self, config: BertConfig, dtype=None, name: str = "bert", **kwargs):
        """Args:
          config: the model's hyper-parameters.
          dtype: a Keras dtype policy or its name ("float32", "mixed_bfloat16",
            "mixed_float16"); default: the global policy.
        """
        super().__init__(name=name, dtype=dtype, **kwargs)
        self.config = config
        policy = self.dtype_policy
        self.embeddings = BertEmbeddings(config, name="embeddings", dtype=policy)
        # Attributes layer_0 … layer_{L-1} (not a list: tf.train.Checkpoint does not follow
        # Keras' tracked lists), mirroring the original's `layer_{i}` scopes.
        for i in range(config.num_hidden_layers):
            setattr(self, f"layer_{i}", TransformerBlock(config, name=f"layer_{i}", dtype=policy))
        self.pooler = Dense(config, config.hidden_size, config.hidden_size, activation=tf.tanh,
                            name="pooler", dtype=policy)
        self.built = True

    @property
    def transformer_layers(self) -> list[TransformerBlock]:
        """The L blocks in order (the attributes `layer_0` … `layer_{L-1}`)."""
        return [getattr(self, f"layer_{i}") for i in range(self.config.num_hidden_layers)]

    @property
    def embedding_table(self):
        """The word-embedding variable [V,H] (float32); the masked-LM head ties to it."""
        return self.embeddings.word_embeddings

    def call(self, inputs: dict, training=False) -> dict:
        input_ids = tf.convert_to_tensor(inputs["input_ids"])
        input_mask = inputs.get("input_mask")
        input_mask = tf.ones_like(input_ids) if input_mask is None else input_mask
        segment_ids = inputs.get("segment_ids")
        segment_ids = tf.zeros_like(input_ids) if segment_ids is None else segment_ids
        x = self.embeddings(input_ids, segment_ids, training=training)  # [B,S,H]
        encoder_outputs = []
        for block in self.transformer_layers:
            x = block(x, input_mask, training=training)
            encoder_outputs.append(x)
        pooled = self.pooler(x[:, 0])  # [B,H]
        return {"sequence_output": x, "pooled_output": pooled, "encoder_outputs": encoder_outputs}

    def dummy_inputs(self, batch_size: int = 1, seq_length: int = 2) -> dict:
        """A zero batch of the input dict, for building or tracing."""
        ids = tf.zeros([batch_size, seq_length], tf.int32)
        return {"input_ids": ids, "input_mask": tf.ones_like(ids), "segment_ids": ids}
