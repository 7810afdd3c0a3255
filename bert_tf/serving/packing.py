"""`[CLS] a [SEP] b [SEP]` packing as ops, with the original's pair truncation.

The same inputs as the classifier's features (`tasks/classifier/features.py`): `input_ids`, `input_mask`, `segment_ids` int32
[B,S], where S is the batch's longest packed row (at most `max_seq_length`): the encoder skips
the padding it would otherwise compute on.
"""

from __future__ import annotations

import tensorflow as tf


def truncate_pair_lengths(len_a: tf.Tensor, len_b: tf.Tensor, max_total: int
                          ) -> tuple[tf.Tensor, tf.Tensor]:
    """Lengths kept by the original's pair trimming (drop the last token of the longer side, of
    `b` on a tie, until the pair fits): `bert_tf.text.pairs.truncate_pair_lengths` on int [B].
    """
    excess = tf.maximum(len_a + len_b - max_total, 0)
    first = tf.minimum(tf.abs(len_a - len_b), excess)  # the longer side shrinks until equal
    a_longer = len_a > len_b
    len_a = tf.where(a_longer, len_a - first, len_a)
    len_b = tf.where(a_longer, len_b, len_b - first)
    rest = excess - first  # then they alternate, b first
    return len_a - rest // 2, len_b - (rest + 1) // 2


def _head(ids: tf.RaggedTensor, lengths: tf.Tensor) -> tf.RaggedTensor:
    """The first `lengths[i]` items of each row of ragged [B, (T)]."""
    keep = tf.ragged.range(ids.row_lengths()) < tf.expand_dims(tf.cast(lengths, tf.int64), 1)
    return tf.ragged.boolean_mask(ids, keep)


def pack(ids_a: tf.RaggedTensor, ids_b: tf.RaggedTensor | None, cls_id: int, sep_id: int,
         max_seq_length: int, has_b: tf.Tensor | None = None) -> dict[str, tf.Tensor]:
    """Packs WordPiece ids as the original's `convert_single_example`.

    Args:
      ids_a: int64 ragged [B, (Ta)] first segment.
      ids_b: int64 ragged [B, (Tb)] second segment, or None for single-sentence models.
      cls_id, sep_id: the vocabulary's [CLS] and [SEP] ids.
      max_seq_length: the longest packed row (>= 3 for pairs, >= 2 otherwise).
      has_b: bool [B], which rows are pairs (default: all when `ids_b` is given; a row whose
        second text has no tokens is never one, as in the original); the others
        pack as single texts, `[CLS] a [SEP]` trimmed to max_seq_length - 2 (extract_features'
        `text` lines beside `text_a ||| text_b` lines).

    Returns:
      `input_ids`, `input_mask`, `segment_ids`: int32 [B,S], S the longest row in the batch;
      `lengths_a`: int32 [B] tokens of `a` kept (what follows [CLS]).
    """
    batch = ids_a.nrows()
    column = lambda value: tf.fill([batch, 1], tf.constant(value, tf.int64))  # noqa: E731
    len_a = tf.cast(ids_a.row_lengths(), tf.int32)
    single_a = tf.minimum(len_a, max_seq_length - 2)
    if ids_b is None:
        keep_a = single_a
        pieces = [column(cls_id), _head(ids_a, keep_a), column(sep_id)]
    else:
        # The original's `if tokens_b`: a second text without tokens packs as a single text.
        has_b = ids_b.row_lengths() > 0 if has_b is None else has_b & (ids_b.row_lengths() > 0)
        len_b = tf.where(has_b, tf.cast(ids_b.row_lengths(), tf.int32), 0)
        pair_a, keep_b = truncate_pair_lengths(len_a, len_b, max_seq_length - 3)
        keep_a = tf.where(has_b, pair_a, single_a)
        last_sep = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(tf.cast(has_b, tf.int64))], tf.constant(sep_id, tf.int64)),
            tf.cast(has_b, tf.int64))
        pieces = [column(cls_id), _head(ids_a, keep_a), column(sep_id), _head(ids_b, keep_b),
                  last_sep]
    first = keep_a + 2
    packed = tf.concat(pieces, axis=1)  # ragged [B, (S_i)]
    input_ids = tf.cast(packed.to_tensor(0), tf.int32)  # [B,S]
    lengths = tf.cast(packed.row_lengths(), tf.int32)
    positions = tf.range(tf.shape(input_ids)[1])[None, :]  # [1,S]
    return {"input_ids": input_ids,
            "input_mask": tf.cast(positions < lengths[:, None], tf.int32),
            "segment_ids": tf.cast((positions >= first[:, None]) & (positions < lengths[:, None]),
                                   tf.int32),
            "lengths_a": keep_a}
