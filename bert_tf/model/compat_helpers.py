"""The original modeling.py's functional helpers, with their meaning, on TF2 tensors.

Shapes, masks, initializers, dropout and LayerNorm, and the two embedding functions. The TF1
functions that created variables (`layer_norm`, `embedding_lookup`, `embedding_postprocessor`)
create fresh ones at every call here, as each call did in a new variable scope; a model that
trains them keeps them in layers instead (`bert_tf.model.encoder`'s `LayerNorm`, `BertEmbeddings`).
`attention_layer` and `transformer_model` are not here: the Transformer is `BertEncoder`'s
(and `BertModel`'s), the one implementation.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from bert_tf.model.encoder import LayerNorm


def get_shape_list(tensor, expected_rank: int | list[int] | None = None,
                   name: str | None = None) -> list:
    """The shape of `tensor` as a list: Python ints where static, scalar int32 tensors where not.

    Raises:
      ValueError: `expected_rank` given and the rank differs.
    """
    tensor = tf.convert_to_tensor(tensor)
    if expected_rank is not None:
        assert_rank(tensor, expected_rank, name)
    static = tensor.shape.as_list()
    if all(dim is not None for dim in static):
        return static
    dynamic = tf.shape(tensor)
    return [dim if dim is not None else dynamic[i] for i, dim in enumerate(static)]


def assert_rank(tensor, expected_rank: int | list[int], name: str | None = None) -> None:
    """Raises ValueError unless `tensor`'s rank is `expected_rank` (an int or a list of ints)."""
    tensor = tf.convert_to_tensor(tensor)
    allowed = {expected_rank} if isinstance(expected_rank, int) else set(expected_rank)
    rank = tensor.shape.rank
    if rank not in allowed:
        label = name or getattr(tensor, "name", "tensor")
        raise ValueError(f"For the tensor `{label}`, the actual rank `{rank}` (shape = "
                         f"{tensor.shape}) is not equal to the expected rank `{expected_rank}`")


def reshape_to_matrix(input_tensor: tf.Tensor) -> tf.Tensor:
    """[..., W] (rank ≥ 2) → [-1, W]; a matrix is returned as is."""
    rank = input_tensor.shape.rank
    if rank < 2:
        raise ValueError(f"Input tensor must have at least rank 2. Shape = {input_tensor.shape}")
    if rank == 2:
        return input_tensor
    return tf.reshape(input_tensor, [-1, input_tensor.shape[-1]])


def reshape_from_matrix(output_tensor: tf.Tensor, orig_shape_list: list) -> tf.Tensor:
    """[-1, W] → orig_shape_list[:-1] + [W] (the inverse of `reshape_to_matrix`)."""
    if len(orig_shape_list) == 2:
        return output_tensor
    width = get_shape_list(output_tensor)[-1]
    return tf.reshape(output_tensor, list(orig_shape_list[:-1]) + [width])


def create_initializer(initializer_range: float = 0.02) -> keras.initializers.Initializer:
    """Normal with stddev `initializer_range`, redrawn beyond two stddevs (truncated normal)."""
    return keras.initializers.TruncatedNormal(stddev=initializer_range)


def dropout(input_tensor: tf.Tensor, dropout_prob: float | None) -> tf.Tensor:
    """Drops each value with probability `dropout_prob` (not a keep probability) and scales the
    rest by 1/(1 - dropout_prob); None or 0 returns the input."""
    if not dropout_prob:
        return input_tensor
    return tf.nn.dropout(input_tensor, rate=dropout_prob)


def layer_norm(input_tensor: tf.Tensor, name: str | None = None) -> tf.Tensor:
    """LayerNorm over the last axis (ε 1e-12) with a new gamma (ones) and beta (zeros)."""
    return LayerNorm(input_tensor.shape[-1], name=name)(input_tensor)


def layer_norm_and_dropout(input_tensor: tf.Tensor, dropout_prob: float | None,
                           name: str | None = None) -> tf.Tensor:
    return dropout(layer_norm(input_tensor, name), dropout_prob)


def _new_table(name: str, rows: int, width: int, initializer_range: float) -> tf.Variable:
    return tf.Variable(create_initializer(initializer_range)([rows, width]), name=name)


def embedding_lookup(input_ids, vocab_size: int, embedding_size: int = 128,
                     initializer_range: float = 0.02, word_embedding_name: str = "word_embeddings",
                     use_one_hot_embeddings: bool = False) -> tuple[tf.Tensor, tf.Variable]:
    """Embeds int ids [B,S] (or [B,S,K]) in a new [V,E] table.

    Returns:
      ([B,S,E] (or [B,S,K·E]) float32, the table variable).
    """
    input_ids = tf.convert_to_tensor(input_ids)
    if input_ids.shape.rank == 2:
        input_ids = input_ids[..., tf.newaxis]  # [B,S,1]
    table = _new_table(word_embedding_name, vocab_size, embedding_size, initializer_range)
    flat = tf.reshape(input_ids, [-1])
    if use_one_hot_embeddings:  # the original's TPU path: the same values
        output = tf.matmul(tf.one_hot(flat, depth=vocab_size), table)
    else:
        output = tf.gather(table, flat)
    shape = get_shape_list(input_ids)
    return tf.reshape(output, shape[:-1] + [shape[-1] * embedding_size]), table


def embedding_postprocessor(input_tensor: tf.Tensor, use_token_type: bool = False,
                            token_type_ids=None, token_type_vocab_size: int = 16,
                            token_type_embedding_name: str = "token_type_embeddings",
                            use_position_embeddings: bool = True,
                            position_embedding_name: str = "position_embeddings",
                            initializer_range: float = 0.02, max_position_embeddings: int = 512,
                            dropout_prob: float = 0.1) -> tf.Tensor:
    """[B,S,W] word embeddings + token-type and position embeddings from new tables, then
    LayerNorm and dropout → [B,S,W].

    Raises:
      ValueError: `use_token_type` without `token_type_ids`, or S > max_position_embeddings.
    """
    batch_size, seq_length, width = get_shape_list(input_tensor, expected_rank=3)
    output = input_tensor
    if use_token_type:
        if token_type_ids is None:
            raise ValueError("`token_type_ids` must be specified if `use_token_type` is True.")
        table = _new_table(token_type_embedding_name, token_type_vocab_size, width,
                           initializer_range)
        types = tf.one_hot(tf.reshape(token_type_ids, [-1]), depth=token_type_vocab_size)
        output += tf.reshape(tf.matmul(types, table), [batch_size, seq_length, width])
    if use_position_embeddings:
        tf.debugging.assert_less_equal(
            seq_length, max_position_embeddings,
            message="sequence length exceeds max_position_embeddings")
        table = _new_table(position_embedding_name, max_position_embeddings, width,
                           initializer_range)
        output += table[:seq_length][tf.newaxis]  # [1,S,W], broadcast over the batch
    return layer_norm_and_dropout(output, dropout_prob)


def create_attention_mask_from_input_mask(from_tensor, to_mask) -> tf.Tensor:
    """float32 [B,F,T]: row f of example b is to_mask[b] (attend to real tokens, from anywhere).

    Args:
      from_tensor: [B,F] or [B,F,...]; only its shape is read.
      to_mask: int [B,T], 1 = token, 0 = padding.
    """
    batch_size, from_seq_length = get_shape_list(from_tensor, expected_rank=[2, 3])[:2]
    assert_rank(to_mask, 2)
    to_mask = tf.cast(to_mask, tf.float32)[:, tf.newaxis, :]  # [B,1,T]
    return tf.ones([batch_size, from_seq_length, 1], tf.float32) * to_mask
