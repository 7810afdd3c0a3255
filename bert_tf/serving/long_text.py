"""Long single texts as ops: the pieces `--truncation` keeps, the windows of
`--long_text=chunks` and the pooling of their logits, as `bert_tf.text.long_text` does in Python
for the classifier's records (so an export and --do_predict keep the same pieces).
"""

from __future__ import annotations

import tensorflow as tf

from bert_tf.text.long_text import LongText


def truncate(ids: tf.RaggedTensor, window: int, long_text: LongText) -> tf.RaggedTensor:
    """`bert_tf.text.long_text.truncate` on each row of int ragged [B, (T)]."""
    head = long_text.kept_head(window)
    lengths = ids.row_lengths()  # [B]
    # On the flat pieces: comparing ragged with dense [B, 1] tensors would broadcast their
    # shapes in the graph, which costs more to trace than the rest of an export's text ops.
    row = ids.value_rowids()  # [N]: each piece's row
    length = tf.gather(lengths, row)
    position = tf.range(tf.size(row, out_type=row.dtype)) - tf.gather(ids.row_starts(), row)
    keep = (length <= window) | (position < head) | (position >= length - (window - head))
    # Each row keeps min(T, window) pieces: all of a row that fits, else head + tail.
    return tf.RaggedTensor.from_row_lengths(tf.boolean_mask(ids.flat_values, keep),
                                            tf.minimum(lengths, window), validate=False)


def split_windows(ids: tf.RaggedTensor, window: int, stride: int
                  ) -> tuple[tf.RaggedTensor, tf.Tensor]:
    """`bert_tf.text.long_text.window_spans` on each row of int ragged [B, (T)].

    Returns:
      the windows' pieces, ragged [W, (<= window)], the windows of a row consecutive and in
      order; and int64 [W] the row each window comes from.
    """
    lengths = ids.row_lengths()  # [B]
    counts = 1 + tf.maximum(tf.constant(0, lengths.dtype),
                            -((window - lengths) // stride))  # ceil((T - window) / stride)
    text_of_window = tf.repeat(tf.range(tf.size(lengths, out_type=tf.int64)), counts)  # [W]
    starts = tf.ragged.range(counts).flat_values * stride  # [W], within each text
    length = tf.gather(lengths, text_of_window)
    ends = tf.minimum(starts + window, length)
    offset = tf.gather(ids.row_starts(), text_of_window)  # where each text starts in flat_values
    pieces = tf.ragged.range(offset + starts, offset + ends)  # [W, (<= window)] flat positions
    return tf.gather(ids.flat_values, pieces), text_of_window


def pool(logits: tf.Tensor, text_of_window: tf.Tensor, num_texts: tf.Tensor, pooling: str
         ) -> tf.Tensor:
    """Per text, the mean or max over its windows of float [W, C] logits -> [num_texts, C]."""
    reduce = {"mean": tf.math.unsorted_segment_mean,
              "max": tf.math.unsorted_segment_max}[pooling]
    return reduce(logits, text_of_window, num_texts)
