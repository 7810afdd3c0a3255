"""Classification examples -> fixed-length features, cached as TFRecords, read back with tf.data.

Features follow the original: `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, segment id 0 up to
and including the first `[SEP]` and 1 after it, the longer side trimmed from its end one token at
a time. Each split's records are cached in the output directory under the original's names
(`train.tf_record`, `eval.tf_record`, `predict.tf_record`) with a JSON sidecar holding a
fingerprint of everything that shapes them, so changing the input file, vocabulary, sequence
length or casing rebuilds them.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Callable, Iterable, NamedTuple, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import filesystem
from bert_tf.errors import UserError
from bert_tf.records import datasets, file_checks
from bert_tf.records import features as record_schemas
from bert_tf.tasks.classifier.processors import InputExample, TaskSpec, read_examples
from bert_tf.text.long_text import LongText, truncate, window_spans
from bert_tf.text.pairs import truncate_pair_lengths

# Bump when the record layout or the conversion changes, so old caches are rebuilt.
FEATURE_VERSION = 1
RECORD_NAMES = {"train": "train.tf_record", "dev": "eval.tf_record", "test": "predict.tf_record"}


def _label_id(task: TaskSpec, label) -> int | float | np.ndarray:
    if task.multi_label:  # one 0/1 per label
        return np.isin(task.labels, label or ()).astype(np.int32)
    if task.regression:
        return 0.0 if label is None else float(label)
    return 0 if label is None else task.labels.index(label)


def convert_examples(examples: Sequence[InputExample], task: TaskSpec, max_seq_length: int,
                     tokenizer, long_text: LongText = LongText()) -> dict[str, np.ndarray]:
    """Tokenizes and packs examples.

    Args:
      examples: from `read_examples`.
      task: gives the label order (or regression).
      max_seq_length: S, at least 3 for pairs and 2 for single sentences.
      tokenizer: has `tokenize(text) -> list[str]` and `convert_tokens_to_ids`.
      long_text: which pieces of a long single text a row keeps, or its windows
        (`bert_tf.text.long_text`); pairs are always cut longest first.

    Returns:
      `input_ids`, `input_mask`, `segment_ids` int32 [N, S] (zero-padded); `label_ids` [N]
      (int32 class index, or float32 score for regression; 0 for unlabeled examples), or
      int32 [N, num_labels] 0/1 for a multi-label task;
      `is_real_example` int32 [N] (all ones). With chunks, N counts windows, each labelled as
      its text, and `text_index` int32 [N] is the example each window comes from.
    """
    if max_seq_length < 3:
        raise UserError(f"max_seq_length must be at least 3, got {max_seq_length}")
    if not task.regression:
        task.num_labels  # raises a clear error if the label list is unknown
    cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    window = max_seq_length - 2
    rows: list[tuple[list[int], int]] = []  # (ids, pieces of segment 0 with [CLS] and [SEP])
    text_index: list[int] = []
    for i, example in enumerate(examples):
        ids_a = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(example.text_a))
        ids_b = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(example.text_b)) if example.text_b else []
        if ids_b:
            keep_a, keep_b = truncate_pair_lengths(len(ids_a), len(ids_b), max_seq_length - 3)
            rows.append(([cls_id, *ids_a[:keep_a], sep_id, *ids_b[:keep_b], sep_id], keep_a + 2))
            text_index.append(i)
            continue
        # the original's `if tokens_b`: an empty second text packs as a single one
        if long_text.chunks:
            pieces = [ids_a[start:end] for start, end in window_spans(
                len(ids_a), window, long_text.window_stride(window))]
        else:
            pieces = [truncate(ids_a, window, long_text)]
        for kept in pieces:
            rows.append(([cls_id, *kept, sep_id], len(kept) + 2))
            text_index.append(i)
    n = len(rows)
    input_ids = np.zeros((n, max_seq_length), np.int32)
    segment_ids = np.zeros((n, max_seq_length), np.int32)
    lengths = np.zeros(n, np.int32)
    for row, (ids, len_first) in enumerate(rows):
        input_ids[row, :len(ids)] = ids
        segment_ids[row, len_first:len(ids)] = 1
        lengths[row] = len(ids)
    positions = np.arange(max_seq_length, dtype=np.int32)
    labels = np.array([_label_id(task, ex.label) for ex in examples],
                      np.float32 if task.regression else np.int32
                      ).reshape((len(examples), len(task.labels)) if task.multi_label
                                else (len(examples),))
    features = {
        "input_ids": input_ids,
        "input_mask": (positions[None, :] < lengths[:, None]).astype(np.int32),
        "segment_ids": segment_ids,
        "label_ids": labels[np.array(text_index, np.int64)],
        "is_real_example": np.ones(n, np.int32),
    }
    if long_text.chunks:
        features["text_index"] = np.array(text_index, np.int32)
    return features


def _sha256_file(path: str, digest=None):
    digest = digest or hashlib.sha256()
    with filesystem.open_read(path) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest


def fingerprint(task: TaskSpec, split: str, data_dir: str, max_seq_length: int,
                tokenizer_files: Iterable[str], do_lower_case: bool, chinese_conversion: str = "none",
                examples: Sequence[InputExample] | None = None,
                long_text: LongText = LongText()) -> str:
    """A hex digest of everything that shapes a split's features.

    Covers the input file's bytes (or, when given, the `examples` a user's processor read), the
    split layout and label list, the tokenizer's files (vocab.txt or the SentencePiece model),
    max_seq_length, do_lower_case, the long-text options (--truncation, --long_text, ...) and
    FEATURE_VERSION.
    """
    layout = task.splits.get(split)
    digest = hashlib.sha256(json.dumps({
        "version": FEATURE_VERSION, "layout": repr(layout), "labels": task.labels,
        "regression": task.regression, "aliases": sorted(task.label_aliases.items()),
        **({"multi_label": task.label_separator} if task.multi_label else {}),
        "max_seq_length": max_seq_length, "do_lower_case": do_lower_case,
        # only when set, so that the caches of earlier runs stay valid
        **({"chinese_conversion": chinese_conversion} if chinese_conversion != "none" else {}),
        **({"long_text": _long_text_key(long_text)} if not long_text.is_default else {}),
    }, sort_keys=True).encode())
    if examples is None:
        _sha256_file(os.path.join(data_dir, layout.filename), digest)
    else:
        digest.update(json.dumps([[e.guid, e.text_a, e.text_b, e.label] for e in examples]).encode())
    for path in tokenizer_files:
        _sha256_file(path, digest)
    return digest.hexdigest()


def _long_text_key(long_text: LongText) -> dict:
    """The long-text options that shape the records (pooling is applied to logits later)."""
    if long_text.chunks:
        return {"mode": long_text.mode, "stride": long_text.stride}
    return {"mode": long_text.mode, "truncation": long_text.truncation,
            **({"head_tokens": long_text.head_tokens} if long_text.truncation == "head+tail"
               else {})}


def padding_count(num_examples: int, batch_size: int) -> int:
    """How many all-zero rows make `num_examples` a whole number of batches."""
    return -num_examples % batch_size


def log_examples(examples: Sequence[InputExample], features: dict[str, np.ndarray], tokenizer,
                 count: int = 3) -> None:
    """Logs the first few packed examples, as the original does, to eyeball the packing."""
    text_index = features.get("text_index", np.arange(len(examples)))  # windows: their text
    for i in range(min(count, len(features["input_ids"]))):
        length = int(features["input_mask"][i].sum())
        tokens = tokenizer.convert_ids_to_tokens(features["input_ids"][i, :length].tolist())
        example = examples[text_index[i]]
        logging.info("example %s: %s | segments %s | label %s", example.guid, " ".join(tokens),
                     features["segment_ids"][i, :length].tolist(), example.label)


class CachedSplit(NamedTuple):
    """A split's records on disk: the TFRecord path, its number of (real) records and of the
    texts they come from (more records than texts with --long_text=chunks: one per window)."""

    path: str
    num_examples: int
    num_texts: int


class FeatureCache:
    """Builds each split's records once per change of its inputs, and reads them back.

    Args:
      task: the task (label list known).
      data_dir: where the task's files are.
      output_dir: where the records and their `.json` sidecars are written.
      max_seq_length: S.
      tokenizer: turns text into tokens and ids.
      tokenizer_files: the files that define the tokenizer (vocab.txt or the SentencePiece
        model), hashed into the fingerprint.
      do_lower_case: part of the fingerprint.
      read_split: `read_split(data_dir, split) -> examples` in place of the task's file layout
        (a user's processor, see compat.py); its examples are fingerprinted.
      long_text: what a single text longer than one row becomes (`bert_tf.text.long_text`).
    """

    def __init__(self, task: TaskSpec, data_dir: str, output_dir: str, max_seq_length: int,
                 tokenizer, tokenizer_files: Sequence[str], do_lower_case: bool,
                 read_split: Callable[[str, str], list[InputExample]] | None = None,
                 long_text: LongText = LongText()):
        self.read_split, self.long_text = read_split, long_text
        self.task, self.data_dir, self.output_dir = task, data_dir, output_dir
        self.max_seq_length, self.tokenizer = max_seq_length, tokenizer
        self.tokenizer_files, self.do_lower_case = list(tokenizer_files), do_lower_case
        self.schema = record_schemas.classifier_schema(
            max_seq_length, task.regression, task.num_labels if task.multi_label else 0,
            windows=long_text.chunks)

    def records(self, split: str) -> CachedSplit:
        """The split's cached records, rebuilt when the fingerprint of its inputs changed."""
        path = os.path.join(self.output_dir, RECORD_NAMES[split])
        examples = None if self.read_split is None else self.read_split(self.data_dir, split)
        key = fingerprint(self.task, split, self.data_dir, self.max_seq_length,
                          self.tokenizer_files, self.do_lower_case,
                          getattr(self.tokenizer, "conversion", "none"), examples, self.long_text)
        meta_path = path + ".json"
        meta = file_checks.read_cache_meta(path, key)
        if meta is not None:
            logging.info("Reusing %s (%d examples, size and CRC-32 checked)", path, meta["num_examples"])
            return CachedSplit(path, meta["num_examples"],
                               meta.get("num_texts", meta["num_examples"]))
        if examples is None:
            examples = read_examples(self.task, self.data_dir, split)
        packed = convert_examples(examples, self.task, self.max_seq_length, self.tokenizer,
                                  self.long_text)
        num_records = len(packed["input_ids"])
        log_examples(examples, packed, self.tokenizer)
        filesystem.makedirs(self.output_dir)
        written = record_schemas.write_records(path, packed, self.schema)
        filesystem.write_atomically(meta_path, json.dumps(
            {"fingerprint": key, "num_examples": num_records, "num_texts": len(examples),
             "split": split,
             "task": self.task.name, "max_seq_length": self.max_seq_length,
             "files": {os.path.basename(path): written}}, indent=1))
        logging.info("Wrote %d %s examples (%d records) to %s", len(examples), split,
                     num_records, path)
        return CachedSplit(path, num_records, len(examples))

    def input_fn(self, split: CachedSplit, is_training: bool, seed: int = 12345,
                 trim_features: Sequence[str] = (), length_groups: int = 1) -> Callable:
        """The loop's input function over a split's records.

        Training: `datasets.record_dataset`, seeded (an exact resume replays the same batches),
        with a shuffle buffer holding the whole split up to `datasets.MAX_SHUFFLE_BUFFER`
        records, since a user's file may be sorted by label. Eval/predict: file order, then all-zero rows with
        is_real_example 0 up to a whole number of global batches, so every batch is full
        (TPU-friendly) and the padding counts in no metric. `trim_features` and `length_groups`:
        see `datasets.record_dataset` (length groups apply to training only).

        Returns:
          `input_fn(input_context, batch_size) -> tf.data.Dataset` of dicts: int32
          `input_ids, input_mask, segment_ids` [b,S], `label_ids` [b,1] (int32 or float32),
          `is_real_example` [b,1], b the per-replica batch size; the `trim_features` [b,None].
        """
        if is_training:
            buffer = max(1, min(split.num_examples, datasets.MAX_SHUFFLE_BUFFER))
            return lambda context, batch_size: datasets.record_dataset(
                split.path, self.schema, batch_size, is_training=True, input_context=context,
                seed=seed, shuffle_buffer=buffer, trim_features=trim_features,
                length_groups=length_groups)
        padding = self.schema.encode({f.name: np.zeros(f.length) for f in self.schema.features})

        def input_fn(context, batch_size: int):
            dataset = tf.data.TFRecordDataset(split.path)
            global_batch = batch_size * (context.num_replicas_in_sync if context else 1)
            extra = padding_count(split.num_examples, global_batch)
            dataset = dataset.concatenate(tf.data.Dataset.from_tensors(padding).repeat(extra))
            if context and context.num_input_pipelines > 1:
                dataset = dataset.shard(context.num_input_pipelines, context.input_pipeline_id)
            dataset = dataset.batch(batch_size, drop_remainder=True)
            dataset = dataset.map(self.schema.parse_fn(), num_parallel_calls=tf.data.AUTOTUNE,
                                  deterministic=True)
            if trim_features:
                dataset = datasets.trim_padding(dataset, trim_features)
            return dataset.prefetch(tf.data.AUTOTUNE)

        return input_fn
