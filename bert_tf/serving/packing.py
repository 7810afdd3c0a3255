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


def _token_cells(ids: tf.RaggedTensor, keep: tf.Tensor, offset: tf.Tensor, junk: tf.Tensor
                 ) -> tuple[tf.Tensor, tf.Tensor]:
    """Where each token of ragged [B, (T)] goes in the packed [B, S+1] grid: the first `keep[i]`
    of row i to columns `offset[i]`, `offset[i] + 1`, ...; the others to column `junk` (= S).

    Returns:
      int64 [N,2] (row, column) cells and int64 [N] ids, N = the tokens of `ids`.
    """
    rows = ids.value_rowids()  # [N]
    index = tf.range(tf.size(rows, out_type=tf.int64)) - tf.gather(ids.row_starts(), rows)  # [N]
    keep, offset = (tf.gather(tf.cast(t, tf.int64), rows) for t in (keep, offset))
    return tf.stack([rows, tf.where(index < keep, offset + index, junk)], axis=1), ids.flat_values


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
      `input_ids`, `input_mask`, `segment_ids`: int32 [B,S], S the longest row in the batch
        (2 when B = 0);
      `lengths_a`: int32 [B] tokens of `a` kept (what follows [CLS]).
    """
    len_a = tf.cast(ids_a.row_lengths(), tf.int32)
    single_a = tf.minimum(len_a, max_seq_length - 2)
    if ids_b is None:
        keep_a, keep_b = single_a, tf.zeros_like(single_a)
    else:
        # The original's `if tokens_b`: a second text without tokens packs as a single text.
        has_b = ids_b.row_lengths() > 0 if has_b is None else has_b & (ids_b.row_lengths() > 0)
        len_b = tf.where(has_b, tf.cast(ids_b.row_lengths(), tf.int32), 0)
        pair_a, keep_b = truncate_pair_lengths(len_a, len_b, max_seq_length - 3)
        keep_a = tf.where(has_b, pair_a, single_a)
        keep_b = tf.where(has_b, keep_b + 1, 0)  # with its [SEP]
    first = keep_a + 2  # [CLS] a [SEP]
    lengths = first + keep_b  # [B]
    # One scatter into [B, S+1] (S the longest row): [CLS], each segment's kept tokens and the
    # [SEP]s at their columns, dropped tokens into the extra column S, which is cut off.
    # Every row holds [CLS] and [SEP]: 2 columns for a batch of no rows too, so that [B,S]
    # outputs (the first column, the mean over columns) exist with B = 0.
    width = tf.maximum(tf.reduce_max(lengths), 2)
    junk = tf.cast(width, tf.int64)
    rows = tf.range(tf.size(lengths, out_type=tf.int64))  # [B]
    cells = [tf.stack([rows, tf.zeros_like(rows)], axis=1),
             tf.stack([rows, tf.cast(first - 1, tf.int64)], axis=1),
             tf.stack([rows, tf.where(keep_b > 0, tf.cast(lengths - 1, tf.int64), junk)], axis=1)]
    values = [tf.fill(tf.shape(rows), tf.constant(cls_id, tf.int64)),
              tf.fill(tf.shape(rows), tf.constant(sep_id, tf.int64)),
              tf.fill(tf.shape(rows), tf.constant(sep_id, tf.int64))]
    for ids, keep, offset in ((ids_a, keep_a, tf.ones_like(keep_a)), (ids_b, keep_b - 1, first)):
        if ids is not None:
            segment_cells, segment_ids = _token_cells(ids, keep, offset, junk)
            cells.append(segment_cells)
            values.append(tf.cast(segment_ids, tf.int64))
    grid = tf.scatter_nd(tf.concat(cells, 0), tf.concat(values, 0),
                         tf.stack([tf.size(lengths, out_type=tf.int64), junk + 1]))  # [B,S+1]
    input_ids = tf.cast(grid[:, :width], tf.int32)  # [B,S]
    positions = tf.range(width)[None, :]  # [1,S]
    return {"input_ids": input_ids,
            "input_mask": tf.cast(positions < lengths[:, None], tf.int32),
            "segment_ids": tf.cast((positions >= first[:, None]) & (positions < lengths[:, None]),
                                   tf.int32),
            "lengths_a": keep_a}
