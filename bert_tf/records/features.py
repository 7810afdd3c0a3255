"""Every TFRecord schema, defined once: names, lengths and dtypes, with its writer and its reader.

A `Schema` is a tuple of `Feature(name, length, dtype, flag)`. Writers call `schema.encode(values)`
(one record) or `schema.encode_batch(arrays)` (many, vectorised, no TensorFlow needed; `write_records`
writes a file of them); readers map
`schema.parse_fn()` over a `tf.data.TFRecordDataset`; tests use `schema.to_tf_example` and
`schema.decode`. The bytes are exactly those of `tf.train.Example.SerializeToString(deterministic=True)`
(features in name order), so the original's readers read our records and ours read theirs.

TensorFlow is imported only inside the reader helpers: the pretraining-data workers encode
millions of records and stay TF-free.

To add a fine-tuning schema, add a small block at the end: a function returning
`Schema("name", [Feature(...), ...])`.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from bert_tf import filesystem
from bert_tf.errors import UserError
from bert_tf.records import file_checks, tfrecord

INT64 = "int64"
FLOAT32 = "float32"


@dataclasses.dataclass(frozen=True)
class Feature:
    """One fixed-length feature of a record.

    Attributes:
      name: the tf.train.Example key.
      length: number of values per record.
      dtype: "int64" (read back as int32, as the original's readers cast) or "float32".
      flag: the command-line flag that sets `length`, named in error messages.
    """
    name: str
    length: int
    dtype: str = INT64
    flag: str | None = None

    def __post_init__(self):
        if self.dtype not in (INT64, FLOAT32):
            raise ValueError(f"feature {self.name}: dtype must be {INT64} or {FLOAT32}, got {self.dtype}")


class Schema:
    """A fixed set of features; see the module docstring."""

    def __init__(self, name: str, features: Sequence[Feature]):
        self.name = name
        self.features = tuple(features)
        self.by_name = {f.name: f for f in self.features}
        # deterministic serialization writes map entries sorted by key
        self._sorted = sorted(self.features, key=lambda f: f.name.encode("utf-8"))

    def __repr__(self) -> str:
        return f"Schema({self.name!r}, {[(f.name, f.length, f.dtype) for f in self.features]})"

    # ---------------------------------------------------------------- writing
    def encode_batch(self, values: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Serializes R records at once.

        Args:
          values: for each feature, an array [R, length] (int64-compatible or float32).

        Returns:
          (data uint8 [N], offsets int64 [R + 1]): record r is data[offsets[r]:offsets[r + 1]], the
          bytes of a `tf.train.Example`.
        """
        matrix, valid, lengths = self.encode_dense(values)
        offsets = np.zeros(len(matrix) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return matrix[valid], offsets

    def encode_dense(self, values: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Like `encode_batch`, as (matrix uint8 [R, W], valid bool [R, W], lengths int64 [R]):
        record r is matrix[r][valid[r]], lengths[r] bytes. `tfrecord.frame_dense` frames this form."""
        return _encode_rows(self._sorted, values, self._checked_rows(values))

    def encode(self, values: Mapping[str, Sequence[float] | np.ndarray]) -> bytes:
        """Serializes one record (see `encode_batch`)."""
        data, _ = self.encode_batch({k: np.asarray(v)[None] for k, v in values.items()})
        return data.tobytes()

    def to_tf_example(self, values: Mapping[str, Sequence[float] | np.ndarray]):
        """The same record as a `tf.train.Example` proto (the original's writer path)."""
        import tensorflow as tf  # reader/test side only

        self._checked_rows({k: np.asarray(v)[None] for k, v in values.items()})
        feature = {}
        for f in self.features:
            flat = np.asarray(values[f.name]).reshape(-1)
            if f.dtype == INT64:
                feature[f.name] = tf.train.Feature(int64_list=tf.train.Int64List(value=flat.tolist()))
            else:
                feature[f.name] = tf.train.Feature(float_list=tf.train.FloatList(value=flat.tolist()))
        return tf.train.Example(features=tf.train.Features(feature=feature))

    def _checked_rows(self, values: Mapping[str, np.ndarray]) -> int:
        missing = [f.name for f in self.features if f.name not in values]
        extra = [k for k in values if k not in self.by_name]
        if missing or extra:
            raise ValueError(f"schema {self.name}: missing features {missing}, unknown features {extra}")
        rows = None
        for f in self.features:
            shape = np.shape(values[f.name])
            if len(shape) != 2 or shape[1] != f.length or (rows is not None and shape[0] != rows):
                raise ValueError(f"schema {self.name}: feature {f.name} has shape {shape}, "
                                 f"expected [{rows if rows is not None else 'R'}, {f.length}]")
            rows = shape[0]
        return int(rows or 0)

    # ---------------------------------------------------------------- reading
    def parse_fn(self) -> Callable:
        """A function for `dataset.map`: serialized Example(s) -> dict of tensors.

        Works on a scalar string (one record) or a vector (a batch: map after `batch`, faster).
        int64 features come back as int32, as the original's readers cast them.
        """
        import tensorflow as tf

        spec = {f.name: tf.io.FixedLenFeature([f.length], tf.int64 if f.dtype == INT64 else tf.float32)
                for f in self.features}

        def parse(serialized):
            if serialized.shape.rank == 0:
                parsed = tf.io.parse_single_example(serialized, spec)
            else:
                parsed = tf.io.parse_example(serialized, spec)
            return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in parsed.items()}

        return parse

    def decode(self, record: bytes, source: str = "record") -> dict[str, np.ndarray]:
        """Parses one serialized Example into numpy arrays (int64 / float32), checking the schema."""
        from tensorflow.core.example import example_pb2

        example = example_pb2.Example.FromString(record)
        out = {}
        for f in self.features:
            if f.name not in example.features.feature:
                raise UserError(f"{source}: no feature {f.name!r}; is this a {self.name} record file?")
            proto = example.features.feature[f.name]
            values = proto.int64_list.value if f.dtype == INT64 else proto.float_list.value
            if len(values) != f.length:
                fix = f" (set --{f.flag} to the value used when the data was written)" if f.flag else ""
                raise UserError(f"{source}: feature {f.name} holds {len(values)} values but {f.length} "
                                 f"are expected{fix}")
            out[f.name] = np.asarray(values, np.int64 if f.dtype == INT64 else np.float32)
        return out

    def check_files(self, files: Iterable[str | os.PathLike]) -> None:
        """Decodes the first record of each file, raising a clear error naming the file on a mismatch.

        `tf.data` only reports a wrong length deep inside the input pipeline, without the file name;
        call this first with the files a run will read.
        """
        for path in files:
            for record in tfrecord.read_records(path, limit=1):
                self.decode(record, source=str(path))


# ------------------------------------------------------------------ protobuf wire format
# Every part of a record is built for all R rows at once as a dense block `bytes [R, w]` with a
# `valid [R, w]` mask (a varint gets its widest width, its unused bytes are masked out; None when
# every byte is used). Joining the blocks side by side and reading the valid bytes in row-major
# order gives the records back to back: one boolean selection instead of a scatter per part.
_Block = tuple  # (bytes uint8 [R, w], valid bool [R, w] or None)


def write_records(path: str, features: dict[str, np.ndarray], schema: Schema) -> dict:
    """Writes packed features as a TFRecord file, atomically (temp name, then rename).

    Returns:
      The file's `file_checks.Summary` as a dict (bytes, CRC-32, records), to check it on reuse.
    """
    values = {name: array.reshape(len(array), -1) for name, array in features.items()}
    data, offsets = schema.encode_batch(values)
    framed, _ = tfrecord.frame_records(data, offsets)
    summary = file_checks.Summary()
    summary.update(framed, len(offsets) - 1)
    filesystem.write_atomically(path, framed.tobytes())
    return summary.as_dict()


def _varint_block(values: np.ndarray) -> tuple[_Block, np.ndarray]:
    """Varints of `values` [R, n] (negatives as 10-byte two's complement) and each row's byte count.

    Byte k of a value is bits 7k..7k+6, with the high bit set when a further byte follows, that
    is when the value is at least 2**(7(k+1)); byte k exists when the value is at least 2**(7k).
    """
    values = np.asarray(values)
    rows = values.shape[0]
    low, top = (int(values.min()), int(values.max())) if values.size else (0, 0)
    if low == top >= 0:  # one value throughout, as in most length fields: no per-row work
        content = _varint_bytes(low) * values.shape[1]
        return _constant_block(content, rows), np.full(rows, len(content), np.int64)
    if low >= 0 and top < 128:  # one byte each (masks, segment ids, labels, short positions)
        data = values.astype(np.uint8)
        return (data, None), np.full(rows, values.shape[1], np.int64)
    # the narrowest unsigned type that holds the values: less memory for every step below
    rest = values.astype(np.min_scalar_type(top)) if low >= 0 else values.astype(np.int64).view(np.uint64)
    width = -(-int(rest.max()).bit_length() // 7)
    planes = np.empty(rest.shape + (width,), np.uint8)
    valid = np.empty(rest.shape + (width,), bool)
    valid[..., 0] = True
    sizes = np.full(rows, rest.shape[1], np.int64)
    for k in range(width - 1):  # `rest` = value >> 7k
        low_bits = (rest & 0x7F).astype(np.uint8)
        rest = rest >> 7
        more = rest != 0
        valid[..., k + 1] = more
        sizes += np.count_nonzero(more, axis=1)
        planes[..., k] = low_bits | (more.view(np.uint8) << 7)
    planes[..., width - 1] = rest  # below 128: the last byte has no continuation bit
    return (planes.reshape(rows, -1), valid.reshape(rows, -1)), sizes


def _constant_block(content: bytes, rows: int) -> _Block:
    data = np.broadcast_to(np.frombuffer(content, np.uint8), (rows, len(content)))
    return data, None


def _length_field(tag: bytes, body_sizes: np.ndarray, rows: int) -> tuple[list[_Block], np.ndarray]:
    """`tag varint(size)` header blocks of a length-delimited field, and the field's total sizes."""
    length_block, length_sizes = _varint_block(body_sizes[:, None])
    return [_constant_block(tag, rows), length_block], len(tag) + length_sizes + body_sizes


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _feature_blocks(f: Feature, values: np.ndarray, rows: int) -> tuple[list[_Block], np.ndarray]:
    """One `features.feature` map entry for every row, and its size.

    Wire layout: 0a len(E) E; E = 0a len(key) key | 12 len(V) V; V = 1a (int64_list) or
    12 (float_list) len(L) L; L = 0a len(P) P (left out when there are no values); P = packed values.
    """
    if f.dtype == INT64:
        payload, payload_sizes = _varint_block(np.asarray(values).reshape(rows, f.length))
        list_tag = b"\x1a"
    else:
        data = np.ascontiguousarray(np.asarray(values, dtype="<f4").reshape(rows, f.length)).view(np.uint8)
        payload, payload_sizes = (data, None), np.full(rows, 4 * f.length, np.int64)
        list_tag = b"\x12"
    blocks, list_sizes = [payload], payload_sizes
    if f.length:
        head, list_sizes = _length_field(b"\x0a", payload_sizes, rows)
        blocks = head + blocks
    head, value_sizes = _length_field(list_tag, list_sizes, rows)
    key = f.name.encode("utf-8")
    key_field = b"\x0a" + _varint_bytes(len(key)) + key
    value_head, value_field_sizes = _length_field(b"\x12", value_sizes, rows)
    entry_sizes = len(key_field) + value_field_sizes
    entry_head, total = _length_field(b"\x0a", entry_sizes, rows)
    return entry_head + [_constant_block(key_field, rows)] + value_head + head + blocks, total


def _encode_rows(features: Sequence[Feature], values: Mapping[str, np.ndarray],
                 rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Serializes `rows` Examples (`Example{features: Features{feature: entries}}`) as dense rows,
    with each row's record length."""
    blocks: list[_Block] = []
    features_size = np.zeros(rows, np.int64)
    for f in features:
        entry_blocks, entry_size = _feature_blocks(f, values[f.name], rows)
        blocks += entry_blocks
        features_size += entry_size
    head, lengths = _length_field(b"\x0a", features_size, rows)
    blocks = head + blocks
    matrix = np.concatenate([data for data, _ in blocks], axis=1)
    valid = np.ones(matrix.shape, bool)  # most blocks have no unused bytes: only the others are copied
    column = 0
    for data, block_valid in blocks:
        if block_valid is not None:
            valid[:, column:column + data.shape[1]] = block_valid
        column += data.shape[1]
    return matrix, valid, lengths


# ------------------------------------------------------------------ schemas
def pretraining_schema(max_seq_length: int, max_predictions_per_seq: int) -> Schema:
    """The original's pretraining records (create_pretraining_data.py / run_pretraining.py)."""
    seq = dict(length=max_seq_length, flag="max_seq_length")
    pred = dict(length=max_predictions_per_seq, flag="max_predictions_per_seq")
    return Schema("pretraining", [
        Feature("input_ids", **seq),
        Feature("input_mask", **seq),
        Feature("segment_ids", **seq),
        Feature("masked_lm_positions", **pred),
        Feature("masked_lm_ids", **pred),
        Feature("masked_lm_weights", dtype=FLOAT32, **pred),
        Feature("next_sentence_labels", length=1),
    ])


# token_kinds values of unmasked records: what each position may take part in.
TOKEN_PADDING, TOKEN_SPECIAL, TOKEN_WORD_START, TOKEN_WORD_CONTINUATION = 0, 1, 2, 3
# Features that hold the masking options, identical in every record of a file.
MASKING_OPTION_FEATURES = ("mask_token_id", "vocab_size", "do_whole_word_mask", "ngram", "masked_lm_prob")


def unmasked_pretraining_schema(max_seq_length: int) -> Schema:
    """Pretraining instances without masks (`create_pretraining_data.py --dynamic_masking`).

    `token_kinds` is `TOKEN_PADDING`, `TOKEN_SPECIAL` ([CLS], [SEP]), `TOKEN_WORD_START` or
    `TOKEN_WORD_CONTINUATION` (the input mask and the whole-word / n-gram units follow from it);
    the `MASKING_OPTION_FEATURES` tell `run_pretraining.py` how to draw the masks.
    """
    seq = dict(length=max_seq_length, flag="max_seq_length")
    return Schema("unmasked_pretraining", [
        Feature("input_ids", **seq),
        Feature("segment_ids", **seq),
        Feature("token_kinds", **seq),
        Feature("next_sentence_labels", length=1),
        Feature("mask_token_id", length=1),
        Feature("vocab_size", length=1),
        Feature("do_whole_word_mask", length=1),
        Feature("ngram", length=1),
        Feature("masked_lm_prob", length=1, dtype=FLOAT32),
    ])


def make_parse_fn(max_seq_length: int, max_predictions_per_seq: int) -> Callable:
    """Reader for pretraining records: serialized Example(s) -> dict of int32/float32 tensors."""
    return pretraining_schema(max_seq_length, max_predictions_per_seq).parse_fn()


def to_tf_example(values: Mapping[str, Sequence[float] | np.ndarray], max_seq_length: int,
                  max_predictions_per_seq: int):
    """One pretraining record as a `tf.train.Example`."""
    return pretraining_schema(max_seq_length, max_predictions_per_seq).to_tf_example(values)


# ------------------------------------------------------------------ classifier (run_classifier.py)
def classifier_schema(max_seq_length: int, regression: bool = False,
                      multi_label_width: int = 0, windows: bool = False) -> Schema:
    """Sentence (pair) classification records, the original's run_classifier.py layout.

    `label_ids` is the class index, or the float score of a regression task (STS-B), or for a
    multi-label task (`multi_label_width` labels) one 0/1 per label;
    `is_real_example` is 0 for the rows that only pad the last eval/predict batch.
    With `windows` (--long_text=chunks) each record is one window of a text, and `text_index`
    the text's row in its split (the windows of a text are consecutive).
    """
    seq = dict(length=max_seq_length, flag="max_seq_length")
    return Schema("classifier", [
        Feature("input_ids", **seq),
        Feature("input_mask", **seq),
        Feature("segment_ids", **seq),
        Feature("label_ids", length=multi_label_width or 1,
                dtype=FLOAT32 if regression else INT64),
        Feature("is_real_example", length=1),
        *([Feature("text_index", length=1)] if windows else []),
    ])


# ------------------------------------------------------------------ SQuAD (run_squad.py)
def squad_schema(max_seq_length: int, is_training: bool) -> Schema:
    """SQuAD window records, the original's run_squad.py layout.

    `unique_ids` identifies the window (bert_tf: its row in the file); training records add
    `start_positions, end_positions` (0 = `[CLS]`: no answer in this window) and `is_impossible`.
    """
    seq = dict(length=max_seq_length, flag="max_seq_length")
    features = [Feature("unique_ids", length=1), Feature("input_ids", **seq),
                Feature("input_mask", **seq), Feature("segment_ids", **seq)]
    if is_training:
        features += [Feature("start_positions", length=1), Feature("end_positions", length=1),
                     Feature("is_impossible", length=1)]
    return Schema("squad_train" if is_training else "squad_predict", features)


# ------------------------------------------------------------------ tagging (run_ner.py)
def tagging_schema(max_seq_length: int) -> Schema:
    """Token-tagging (NER) window records.

    `label_ids` holds the word's label at the first WordPiece of each word and 0 elsewhere;
    `label_weights` is 1 where that label counts (the first piece of each word this window
    predicts) and 0 at other pieces, special tokens, padding and padding rows.
    """
    seq = dict(length=max_seq_length, flag="max_seq_length")
    return Schema("tagging", [
        Feature("input_ids", **seq),
        Feature("input_mask", **seq),
        Feature("segment_ids", **seq),
        Feature("label_ids", **seq),
        Feature("label_weights", **seq),
    ])
