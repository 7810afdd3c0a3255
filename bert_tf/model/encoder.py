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

Query, key and value keep their own [H,H] variables (one-to-one with the original); in training
the forward pass concatenates them into one [H,3H] kernel (columns [0:H] query, [H:2H] key,
[2H:3H] value) for a single matmul, at inference it multiplies by each (no per-call copy of the
weights). All variables exist as soon as
the encoder is constructed (no dummy call needed).

Mixed precision: under a Keras dtype policy such as "mixed_bfloat16", the products run in the
compute dtype (Q/K/V, attention context and output, feed-forward with GELU, pooler; their
dropout, whose mask `Dropout` draws in float32) while variables stay float32; the residual
stream stays float32 (the embedding sum, the residual sums, LayerNorm, which every product's
input is cast down from once), and so do the attention scores and softmax (docs/modeling.md,
"Mixed precision", says what each costs and saves); the dense layers' bias gradients sum the
batch's rows in float32 (`bias_add`). `sequence_output` and `encoder_outputs` are float32,
`pooled_output` is in the compute dtype.
Under the pure "bfloat16" policy (the bfloat16 exports) the variables are bfloat16 too.
"""

from __future__ import annotations

import math
from typing import Callable

import keras
import tensorflow as tf

from bert_tf.model.config import BertConfig

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


# The original's names (its "gelu" is the tanh form) and the names that mean one function in
# every family (`bert_tf.model.config.GELU_TANH`, `GELU_ERF`: what `BertConfig.activation` gives).
ACTIVATIONS: dict[str, Callable[[tf.Tensor], tf.Tensor]] = {
    "gelu": gelu, "gelu_tanh": gelu, "gelu_exact": gelu_exact, "relu": tf.nn.relu, "tanh": tf.tanh,
}


def get_activation(name) -> Callable[[tf.Tensor], tf.Tensor] | None:
    """Maps a `hidden_act` name from bert_config.json (any case) to a function.

    As in the original: a non-string (a function, or None) is returned as is, and "linear" or an
    empty name give None (no activation).
    """
    if not isinstance(name, str):
        return name
    if not name or name.lower() == "linear":
        return None
    try:
        return ACTIVATIONS[name.lower()]
    except KeyError:
        raise ValueError(
            f"unknown hidden_act {name!r}; expected one of {', '.join(ACTIVATIONS)}, linear"
        ) from None


def initializer(config: BertConfig) -> keras.initializers.Initializer:
    """Truncated normal (cut at 2 stddev) with stddev `initializer_range`, as the original."""
    return keras.initializers.TruncatedNormal(stddev=config.initializer_range)


@tf.custom_gradient
def _bias_add_summing_in_float32(y: tf.Tensor, bias: tf.Tensor):
    def gradient(upstream: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        rows = tf.reshape(tf.cast(upstream, tf.float32), [-1, bias.shape[-1]])
        return upstream, tf.cast(tf.reduce_sum(rows, axis=0), bias.dtype)

    return tf.nn.bias_add(y, bias), gradient


def bias_add(y: tf.Tensor, bias) -> tf.Tensor:
    """tf.nn.bias_add(y [..., out], bias [out]), whose bias gradient sums the rows in float32.

    TensorFlow's BiasAddGrad sums in the gradient's dtype: in bfloat16 the sum stops growing
    once its addends fall below half its last place (1024 rows of 1 sum to 512). float32
    keeps the plain op and its gradient. The forward op stays tf.nn.bias_add on the matmul, the
    pattern oneDNN fuses (with the activation) into one kernel.
    """
    if y.dtype == tf.float32:
        return tf.nn.bias_add(y, bias)
    return _bias_add_summing_in_float32(y, tf.convert_to_tensor(bias))


class Dropout(keras.layers.Dropout):
    """keras.layers.Dropout whose keep mask is drawn in float32 whatever the input's dtype.

    Keras draws the mask's uniform numbers in the input's dtype. From the same seed, float32's
    numbers then drop other units than bfloat16's, and bfloat16's take 1.4-1.5× as long to draw
    on a CPU (`benchmarks/bfloat16_profile.py`: 112-120 against 79 ms per BERT-base training
    step at 8 × 128). Drawn in float32, with the op and seed Keras uses, a bfloat16 input loses
    the units a float32 one would; the kept values are scaled in the input's dtype, as Keras
    does. float32 inputs take Keras's own path. The mask has the input's shape (no
    `noise_shape`).
    """

    def call(self, inputs: tf.Tensor, training=False) -> tf.Tensor:
        if not training or not self.rate or inputs.dtype == tf.float32:
            return super().call(inputs, training=training)
        keep = keras.random.uniform(tf.shape(inputs), dtype="float32",
                                    seed=self.seed_generator) >= self.rate
        scale = tf.constant(1.0 / (1.0 - self.rate), inputs.dtype)
        return tf.where(keep, inputs * scale, tf.zeros([], inputs.dtype))


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
        y = bias_add(tf.matmul(tf.reshape(x, [-1, self.kernel.shape[0]]), self.kernel),
                     self.bias)
        if self.activation is not None:
            y = self.activation(y)
        return tf.reshape(y, tf.concat([shape[:-1], [self.kernel.shape[1]]], 0))  # [..., out]


class LayerNorm(keras.layers.Layer):
    """LayerNorm over the last axis (ε: the config's layer_norm_eps, 1e-12), computed in
    float32; returns float32 [..., H].

    The input is cast to float32 once (a no-op for the float32 residual stream) and normalized
    there: normalizing in bfloat16 rounds the row's mean and 1/σ, and those errors, shared by a
    whole row, were the largest part of a bfloat16 export's difference from float32
    (docs/modeling.md, "Mixed precision"). Consumers cast the output to their compute dtype
    where they multiply. Variables `gamma`, `beta` [H] keep the variable dtype (the layer does
    not autocast them).
    """

    def __init__(self, hidden_size: int, epsilon: float = LAYER_NORM_EPSILON, **kwargs):
        super().__init__(autocast=False, **kwargs)
        self.epsilon = epsilon
        self.gamma = self.add_weight(shape=(hidden_size,), initializer="ones", name="gamma")
        self.beta = self.add_weight(shape=(hidden_size,), initializer="zeros", name="beta")
        self.built = True

    def call(self, x: tf.Tensor) -> tf.Tensor:
        x = tf.cast(x, tf.float32)
        # (x - mean) · (gamma / sqrt(variance + ε)) + beta, the centered rows computed once:
        # tf.nn.batch_normalization's x·inv + (beta - mean·inv) makes three [T,H] products of
        # its [T,1] statistics and [H] scale: 1.36× this forward's time on BERT-base's
        # [4096,768] (benchmarks/encoder_ops.py).
        centered = x - tf.reduce_mean(x, axis=-1, keepdims=True)
        variance = tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True)
        scale = tf.math.rsqrt(variance + self.epsilon) * tf.cast(self.gamma, tf.float32)
        return centered * scale + tf.cast(self.beta, tf.float32)


class TokenLayout:
    """Where the real tokens of a [B,S] batch are, so that dense layers skip the padding.

    Every dense layer, LayerNorm and dropout of the encoder works on the T real-token rows of the
    batch ([T,H], T = Σ input_mask), not on all B·S positions: the outputs at real positions are
    the same (padding keys get a -10000 bias, whose softmax weight is exactly 0 in float32), and
    the work shrinks with the padding. Only attention needs the [B,S] grid; `pad` and `unpad` move
    rows between the two (gathers, each the other's gradient, so no sparse gradients). With
    `remove_padding=False` T = B·S and both are reshapes.

    With neither `remove_padding` nor `static_shapes` (the span model), attention reads the first
    K = `key_length` keys only: the end of the longest row (S if a row is all padding: it attends
    all S evenly). Keys past it are padding in every row and weigh exactly 0, so every output and
    gradient is that of all S keys. Otherwise `key_length` is None (all S keys).
    """

    def __init__(self, input_mask: tf.Tensor, remove_padding: bool, static_shapes: bool = False):
        """input_mask: int [B,S], 1 = real token, 0 = padding; `static_shapes`: no shape may
        depend on the mask's values (XLA)."""
        shape = tf.shape(input_mask)
        self.batch, self.seq_length = shape[0], shape[1]
        if remove_padding or static_shapes:
            self.key_length = None
            bias = (1.0 - tf.cast(input_mask, tf.float32)) * ATTENTION_MASK_BIAS  # [B,S]
        else:
            ends = tf.reduce_max(tf.where(input_mask != 0, tf.range(1, self.seq_length + 1), 0),
                                 axis=1)  # [B], 0 for a row of padding only
            # All S keys when some row is padding only (it attends every position) or there is
            # no row at all (a max over no rows is no length).
            self.key_length = tf.where(tf.reduce_any(ends == 0) | (self.batch == 0),
                                       self.seq_length, tf.reduce_max(ends))
            bias = ((1.0 - tf.cast(input_mask[:, :self.key_length], tf.float32))
                    * ATTENTION_MASK_BIAS)  # [B,K]
        # → [B,1,1,S|K]: one bias row broadcast over heads and query positions.
        self.mask_bias = bias[:, tf.newaxis, tf.newaxis, :]
        if remove_padding:
            # Kept besides the real tokens: the first position (the pooler reads it), and every
            # position of an all-padding row (the eval padding examples), which then computes
            # what the original computes for it.
            empty_row = tf.reduce_max(input_mask, axis=1, keepdims=True) == 0  # [B,1]
            keep = (input_mask != 0) | empty_row | (tf.range(self.seq_length) == 0)
            keep = tf.reshape(keep, [-1])  # [B*S]
            self.token_index = tf.cast(tf.where(keep), tf.int32)  # [T,1] in [0,B*S)
            # The row of every position among the T kept ones (only read at kept positions).
            self._row_of_position = tf.cumsum(tf.cast(keep, tf.int32)) - 1  # [B*S]
            self._kept = keep
            # `pad`'s source of every position: its row, or row T (a zero row) where not kept.
            self._source_row = tf.where(keep, self._row_of_position,
                                        tf.shape(self.token_index)[0])  # [B*S] in [0,T]
        else:
            self.token_index = None

    def unpad(self, x: tf.Tensor) -> tf.Tensor:
        """[B*S, ...] → the kept rows [T, ...]."""
        return x if self.token_index is None else tf.gather_nd(x, self.token_index)

    def pad(self, rows: tf.Tensor) -> tf.Tensor:
        """[T,C] → [B*S,C], zeros at the positions not kept."""
        if self.token_index is None:
            return rows
        return _pad_rows(rows, self._source_row, self.token_index)

    def key_rows(self, x: tf.Tensor) -> tf.Tensor:
        """[B*S,C] → [B*K,C]: the rows of the first K positions of every sequence (needs
        `key_length`)."""
        width = x.shape[-1]
        x = tf.reshape(x, [self.batch, self.seq_length, width])[:, :self.key_length]
        return tf.reshape(x, [-1, width])

    def rows_at(self, positions: tf.Tensor) -> tf.Tensor:
        """int [B,Q] positions → int [B*Q] rows of [T,...].

        Raises:
          tf.errors.InvalidArgumentError: with padding removed, a position that was not kept
            (a padding position of a row with real tokens, which has no row).
        """
        offsets = tf.range(self.batch)[:, tf.newaxis] * self.seq_length  # [B,1]
        flat = tf.reshape(tf.cast(positions, tf.int32) + offsets, [-1])
        if self.token_index is None:
            return flat
        check = tf.debugging.Assert(tf.reduce_all(tf.gather(self._kept, flat)), [
            "output_positions points at a padding position (input_mask 0); build the encoder "
            "with compute_padding=True to read padding positions as the original does"])
        with tf.control_dependencies([check]):
            return tf.gather(self._row_of_position, flat)


@tf.custom_gradient
def _pad_rows(rows: tf.Tensor, source_row: tf.Tensor, token_index: tf.Tensor):
    """rows [T,C] → [B*S,C]: row `source_row[p]` at each position p, zeros where it is T.

    A gather from the rows and one zero row: scatter_nd gives the same result 2.0-2.7× slower
    on the CPU (BERT-base's [4096,768]; benchmarks/encoder_ops.py). The gradient gathers the
    kept rows back (`token_index` [T,1]: each row's position), as scatter_nd's does.
    """
    zero_row = tf.zeros([1, rows.shape[-1]], rows.dtype)  # a constant: the width is static
    padded = tf.gather(tf.concat([rows, zero_row], 0), source_row)

    def gradient(upstream: tf.Tensor) -> tuple[tf.Tensor, None, None]:
        return tf.gather_nd(upstream, token_index), None, None

    return padded, gradient


def _float32_rows(table, index: tf.Tensor) -> tf.Tensor:
    """table[index] in float32: [V,H] gathered at int [T] → [T,H]."""
    return tf.cast(tf.gather(tf.convert_to_tensor(table), index), tf.float32)


class BertEmbeddings(keras.layers.Layer):
    """word + token type + position embeddings of width E → LayerNorm → dropout, for the real
    tokens, then the family's projection E → H where it has one (every family's embeddings).

    The rows are gathered before any cast (casting a [V,H] table every step would cost more
    than the lookup); the sum, LayerNorm and dropout run in float32, the start of the float32
    residual stream (tables in bfloat16, as in a bfloat16 export, are cast row by row); the
    projection, a Dense named as the family's checkpoints name it
    (`config.embedding_projection`: ALBERT's `embedding_hidden_mapping_in`, ELECTRA's
    `embeddings_project`), runs in the compute dtype.

    `shared`: another BertEmbeddings whose tables, LayerNorm and dropout these use, with a
    projection of their own (ELECTRA's generator over the discriminator's embeddings).
    """

    def __init__(self, config: BertConfig, shared: "BertEmbeddings | None" = None, **kwargs):
        super().__init__(autocast=False, **kwargs)
        self.projection_name = config.embedding_projection
        if shared is not None:
            self.shared = shared
        else:
            self._make_tables(config)
        # After the tables: the variables keep the order that earlier checkpoints' optimizer
        # slots follow.
        if self.projection_name:
            setattr(self, self.projection_name, Dense(
                config, config.hidden_size, config.embedding_width, name=self.projection_name,
                dtype=self.dtype_policy))
        self.built = True  # every variable exists already; shapes come from the config

    def _make_tables(self, config: BertConfig) -> None:
        init = initializer(config)
        h = config.embedding_width  # H for BERT, E for ALBERT
        self.word_embeddings = self.add_weight(
            shape=(config.vocab_size, h), initializer=init, name="word_embeddings")
        self.token_type_embeddings = self.add_weight(
            shape=(config.type_vocab_size, h), initializer=init, name="token_type_embeddings")
        self.position_embeddings = self.add_weight(
            shape=(config.max_position_embeddings, h), initializer=init, name="position_embeddings")
        self.layer_norm = LayerNorm(h, config.layer_norm_eps, name="layer_norm",
                                    dtype=self.dtype_policy)
        self.dropout = Dropout(config.hidden_dropout_prob, autocast=False,
                               dtype=self.dtype_policy)
        self.max_positions = config.max_position_embeddings

    def call(self, input_ids: tf.Tensor, segment_ids: tf.Tensor, layout: TokenLayout,
             training=False) -> tf.Tensor:
        """input_ids, segment_ids: int32 [B,S] → [T,H] (the real tokens): float32, or in the
        compute dtype where projected."""
        tables = getattr(self, "shared", self)
        embedded = tables.embed(input_ids, segment_ids, layout, training)  # [T,E]
        if not self.projection_name:
            return embedded
        return getattr(self, self.projection_name)(embedded)

    def embed(self, input_ids: tf.Tensor, segment_ids: tf.Tensor, layout: TokenLayout,
              training) -> tf.Tensor:
        """input_ids, segment_ids: int32 [B,S] → float32 [T,E]: the tables' sum, normalized."""
        if input_ids.shape[1] is not None and input_ids.shape[1] > self.max_positions:
            raise ValueError(
                f"sequence length {input_ids.shape[1]} exceeds max_position_embeddings "
                f"({self.max_positions}) of the bert config; use a shorter --max_seq_length")
        positions = tf.tile(tf.range(layout.seq_length), [layout.batch])  # [B*S]
        ids, types, positions = (layout.unpad(tf.reshape(t, [-1]))
                                 for t in (input_ids, segment_ids, positions))  # each [T]
        x = (_float32_rows(self.word_embeddings, ids)
             + _float32_rows(self.token_type_embeddings, types)
             + _float32_rows(self.position_embeddings, positions))  # [T,H]
        return self.dropout(self.layer_norm(x), training=training)


def _swap_heads(x: tf.Tensor) -> tf.Tensor:
    """[B,Q,N,D] ↔ [B,N,Q,D]: axes 1 and 2 swapped.

    As `tf.einsum` rather than `tf.transpose`: the same copy, but on oneDNN builds a transpose
    becomes a oneDNN reorder that costs ~70 µs even on one short text's [1,9,12,32] (4 a block:
    a tenth of MiniLM's time at batch 1), where einsum's own transpose takes ~8 µs; on
    training-sized tensors the two are equally fast.
    """
    return tf.einsum("abcd->acbd", x)


class TransformerBlock(keras.layers.Layer):
    """One post-LayerNorm block: self-attention → add & norm → feed-forward → add & norm.

    The residual stream (the block's input and output, the sums and LayerNorm) is float32; the
    products run in the compute dtype, their inputs cast down once each.
    """

    def __init__(self, config: BertConfig, **kwargs):
        super().__init__(autocast=False, **kwargs)  # the float32 residual stream comes in as is
        h, i, policy = config.hidden_size, config.intermediate_size, self.dtype_policy
        self.num_heads = config.num_attention_heads
        self.head_size = config.head_size
        self.query = Dense(config, h, h, name="query", dtype=policy)
        self.key = Dense(config, h, h, name="key", dtype=policy)
        self.value = Dense(config, h, h, name="value", dtype=policy)
        self.attention_output = Dense(config, h, h, name="attention_output", dtype=policy)
        self.attention_layer_norm = LayerNorm(h, config.layer_norm_eps,
                                              name="attention_layer_norm", dtype=policy)
        self.intermediate = Dense(config, i, h, activation=get_activation(config.activation),
                                  name="intermediate", dtype=policy)
        self.output_dense = Dense(config, h, i, name="output_dense", dtype=policy)
        self.output_layer_norm = LayerNorm(h, config.layer_norm_eps, name="output_layer_norm",
                                           dtype=policy)
        self.attention_dropout = Dropout(config.attention_probs_dropout_prob, dtype=policy)
        self.hidden_dropout = Dropout(config.hidden_dropout_prob, dtype=policy)
        self.built = True

    def _projections(self, x: tf.Tensor, layers: tuple[Dense, ...], training) -> list[tf.Tensor]:
        """x [M,H] in the compute dtype → x @ kernel + bias of each layer: one [M,H] tensor per
        layer.

        Training multiplies by the kernels side by side ([H,kH]: one matmul, and one for its
        gradient); inference by each kernel on its own, because concatenating the kernels copies
        those weights on every call, which a small batch never pays back (about a sixth of
        MiniLM's time on one short text; at large batches the two are equally fast).
        """
        dtype = self.compute_dtype
        kernels = [tf.cast(l.kernel, dtype) for l in layers]
        biases = [tf.cast(l.bias, dtype) for l in layers]
        if training and len(layers) > 1:
            fused = bias_add(tf.matmul(x, tf.concat(kernels, axis=1)),
                             tf.concat(biases, axis=0))  # [M,kH]
            return tf.split(fused, len(layers), axis=1)
        return [bias_add(tf.matmul(x, k), b) for k, b in zip(kernels, biases)]

    def _heads(self, x: tf.Tensor, batch: tf.Tensor, length: tf.Tensor) -> tf.Tensor:
        """[B*Q,H] → [B,N,Q,D], Q = `length` (given: a batch of no rows has no Q to infer)."""
        x = tf.reshape(x, [batch, length, self.num_heads, self.head_size])  # [B,Q,N,D]
        return _swap_heads(x)

    def _attention(self, q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, layout: TokenLayout,
                   training) -> tuple[tf.Tensor, tf.Tensor]:
        """q [B*Q,H] (Q queries per sequence); k, v [B*S,H] or, with `layout.key_length`,
        [B*K,H] (`layout.key_rows`) → (context [B*Q,H], float32 scores [B,N,Q,S|K] before the
        mask and softmax)."""
        batch = layout.batch
        queries = tf.shape(q)[0] // tf.maximum(batch, 1)
        keys = tf.shape(layout.mask_bias)[-1]  # S or K
        q = self._heads(q, batch, queries)  # [B,N,Q,D]
        k, v = (self._heads(t, batch, keys) for t in (k, v))  # [B,N,K,D]
        # The scores in float32: rounded to bfloat16 they shift softmax's weights by up to a
        # few percent (docs/modeling.md, "Mixed precision"). Scaled on q ([B,N,Q,D]), not on
        # the scores ([B,N,Q,K]): fewer values to multiply.
        q = tf.cast(q, tf.float32) * (1.0 / math.sqrt(self.head_size))
        scores = tf.matmul(q, tf.cast(k, tf.float32), transpose_b=True)  # [B,N,Q,K]
        probs = tf.cast(tf.nn.softmax(scores + layout.mask_bias, axis=-1), v.dtype)
        probs = self.attention_dropout(probs, training=training)
        context = _swap_heads(tf.matmul(probs, v))  # [B,Q,N,D]
        return tf.reshape(context, [-1, self.num_heads * self.head_size]), scores  # [B*Q,H]

    def call(self, x: tf.Tensor, layout: TokenLayout, training=False,
             query_rows: tf.Tensor | None = None, return_attention_scores: bool = False):
        """x: [T,H], the real-token rows of `layout` (any float dtype) → float32 [T,H].

        With `query_rows` (int [B*Q]: Q rows of each sequence, in batch order), only those rows
        are computed past the keys and values (the original's heads read no others): → [B*Q,H].
        With `return_attention_scores`: (that, the float32 scores [B,N,Q,S|K] before the mask and
        softmax; 0 at padding rows and keys while padding is skipped).
        """
        x = tf.cast(x, tf.float32)  # ALBERT's projected embeddings come in the compute dtype
        rows = tf.cast(x, self.compute_dtype)  # the Q/K/V products' input, cast down once
        if query_rows is None and layout.key_length is not None:
            # Every position is a row: keys and values only where attention reads them.
            q, = self._projections(rows, (self.query,), training)  # [B*S,H]
            k, v = self._projections(layout.key_rows(rows), (self.key, self.value),
                                     training)  # [B*K,H] each
            residual = x
        elif query_rows is None:
            q, k, v = (layout.pad(t) for t in self._projections(
                rows, (self.query, self.key, self.value), training))  # [B*S,H] each
            residual = x
        else:
            k, v = (layout.pad(t) for t in self._projections(
                rows, (self.key, self.value), training))  # [B*S,H] each
            if layout.key_length is not None:
                k, v = layout.key_rows(k), layout.key_rows(v)  # [B*K,H]: the mask's K columns
            residual = tf.gather(x, query_rows)  # [B*Q,H]
            q, = self._projections(tf.gather(rows, query_rows), (self.query,), training)
        context, scores = self._attention(q, k, v, layout, training)  # [B*S|B*Q,H]
        if query_rows is None:
            context = layout.unpad(context)  # [T,H]
        attention = self.hidden_dropout(self.attention_output(context), training=training)
        x = self.attention_layer_norm(tf.cast(attention, tf.float32) + residual)
        hidden = self.hidden_dropout(self.output_dense(self.intermediate(x)), training=training)
        x = self.output_layer_norm(tf.cast(hidden, tf.float32) + x)
        return (x, scores) if return_attention_scores else x


class BertEncoder(keras.Model):
    """The BERT encoder. Call with a dict of int32 [B,S] tensors:

    `input_ids`; `input_mask` (1 = real token, 0 = padding; default all ones); `segment_ids`
    (default all zeros). Returns a dict: `sequence_output` [B,S,H], `pooled_output` [B,H] (dense
    + tanh on the first token), `encoder_outputs` (list of L tensors [B,S,H], one per block),
    `embedding_output` [B,S,H] (the blocks' input: the embeddings after LayerNorm and dropout),
    and with `output_attention_scores=True` `attention_scores` (list of L float32 [B,N,S,S]: each
    block's scaled query·key scores before the mask and softmax, as distillation reads them).
    See the module docstring for variable names and mixed
    precision.

    Padding: by default the encoder skips the padding positions of rows that have real tokens
    (the speed comes from there): `sequence_output` and `encoder_outputs` are zeros there, while
    the original computes every position. Every real position, the first position and rows of
    padding only hold the original's values. `compute_padding=True` (at construction, or as a
    call argument for that call) computes every position as the original does; attention then
    stops at the batch's longest row (`TokenLayout.key_length`: the same numbers).
    `static_shapes=True` (a call argument, for XLA and TPUs, which need static shapes) computes
    every position and attends all S keys.

    `output_positions` (int [B,P]) asks for the last layer at those positions
    only (and at [CLS], for the pooler): the outputs are then `selected_output` [B,P,H] and
    `pooled_output`, and the last layer skips every other position past its keys and values.
    While padding is skipped, a position at padding raises InvalidArgumentError (it has no
    value); with padding computed it reads the original's value there.
    """

    def __init__(self, config: BertConfig, dtype=None, name: str = "bert",
                 compute_padding: bool = False, **kwargs):
        """Args:
          config: the model's hyper-parameters.
          dtype: a Keras dtype policy or its name ("float32", "mixed_bfloat16",
            "mixed_float16"); default: the global policy.
          compute_padding: compute the padding positions too, as the original (slower on
            padded batches); False skips them (zeros in `sequence_output`), unless a call
            asks for them.
        """
        super().__init__(name=name, dtype=dtype, **kwargs)
        self.config = config
        self.compute_padding = compute_padding
        policy = self.dtype_policy
        self.embeddings = self._make_embeddings(config, policy)
        self._make_blocks(config, policy)
        self.pooler = self._make_pooler(config, policy)
        self.built = True

    def _make_pooler(self, config: BertConfig, policy) -> Dense | None:
        """BERT's pooler (dense + tanh on [CLS]); None where [CLS]'s vector is the pooled
        output (ELECTRA)."""
        return Dense(config, config.hidden_size, config.hidden_size, activation=tf.tanh,
                     name="pooler", dtype=policy)

    def _pool(self, first_tokens: tf.Tensor) -> tf.Tensor:
        """[B,H] [CLS] rows → `pooled_output` [B,H]."""
        return first_tokens if self.pooler is None else self.pooler(first_tokens)

    def _make_embeddings(self, config: BertConfig, policy) -> BertEmbeddings:
        return BertEmbeddings(config, name="embeddings", dtype=policy)

    def _make_blocks(self, config: BertConfig, policy) -> None:
        """Attributes layer_0 … layer_{L-1} (not a list: tf.train.Checkpoint does not follow
        Keras' tracked lists), mirroring the original's `layer_{i}` scopes."""
        for i in range(config.num_hidden_layers):
            setattr(self, f"layer_{i}", TransformerBlock(config, name=f"layer_{i}", dtype=policy))

    @property
    def transformer_layers(self) -> list[TransformerBlock]:
        """The L blocks in order (the attributes `layer_0` … `layer_{L-1}`)."""
        return [getattr(self, f"layer_{i}") for i in range(self.config.num_hidden_layers)]

    @property
    def embedding_table(self):
        """The word-embedding variable [V,H] (float32); the masked-LM head ties to it."""
        return self.embeddings.word_embeddings

    def call(self, inputs: dict, training=False, output_positions: tf.Tensor | None = None,
             output_attention_scores: bool = False, compute_padding: bool | None = None,
             static_shapes: bool = False) -> dict:
        """`compute_padding`: this call's choice (default: the encoder's own);
        `static_shapes`: every position and all S keys (XLA, TPUs). See the class docstring."""
        input_ids = tf.convert_to_tensor(inputs["input_ids"])
        input_mask = inputs.get("input_mask")
        input_mask = tf.ones_like(input_ids) if input_mask is None else input_mask
        segment_ids = inputs.get("segment_ids")
        segment_ids = tf.zeros_like(input_ids) if segment_ids is None else segment_ids
        if compute_padding is None:
            compute_padding = self.compute_padding
        layout = TokenLayout(input_mask, remove_padding=not (compute_padding or static_shapes),
                             static_shapes=static_shapes)
        x = self.embeddings(input_ids, segment_ids, layout=layout, training=training)  # [T,H]
        blocks = self.transformer_layers
        hidden_size = self.config.hidden_size
        if output_positions is not None:
            for block in blocks[:-1]:
                x = block(x, layout=layout, training=training)
            first = tf.zeros([layout.batch, 1], output_positions.dtype)  # [CLS], for the pooler
            positions = tf.concat([first, output_positions], 1)  # [B,1+P]
            rows = blocks[-1](x, layout=layout, training=training,
                              query_rows=layout.rows_at(positions))
            rows = tf.reshape(rows, [layout.batch, tf.shape(positions)[1],
                                     hidden_size])  # [B,1+P,H]
            return {"selected_output": rows[:, 1:], "pooled_output": self._pool(rows[:, 0])}
        embedding_output = tf.reshape(layout.pad(x),
                                      [layout.batch, layout.seq_length, x.shape[-1]])
        encoder_outputs, attention_scores = [], []
        for block in blocks:
            if output_attention_scores:
                x, scores = block(x, layout=layout, training=training,
                                  return_attention_scores=True)
                attention_scores.append(scores)
            else:
                x = block(x, layout=layout, training=training)
            encoder_outputs.append(
                tf.reshape(layout.pad(x), [layout.batch, layout.seq_length, hidden_size]))
        first_tokens = tf.gather(x, layout.rows_at(tf.zeros([layout.batch, 1], tf.int32)))
        outputs = {"sequence_output": encoder_outputs[-1],
                   "pooled_output": self._pool(first_tokens),
                   "encoder_outputs": encoder_outputs, "embedding_output": embedding_output}
        if output_attention_scores:
            outputs["attention_scores"] = attention_scores
        return outputs

    def dummy_inputs(self, batch_size: int = 1, seq_length: int = 2) -> dict:
        """A zero batch of the input dict, for building or tracing."""
        ids = tf.zeros([batch_size, seq_length], tf.int32)
        return {"input_ids": ids, "input_mask": tf.ones_like(ids), "segment_ids": ids}

