"""tf.data input pipelines over TFRecord files, sharded per input pipeline (one per worker/host).

Training: files are shuffled and repeated, read in parallel (interleaved), records shuffled,
batched with `drop_remainder`, parsed a batch at a time, prefetched. Every random choice is seeded,
and the interleave is deterministic, so the same seed gives the same batches: the training loop
relies on that to resume exactly (it skips the batches that finished steps consumed).

Eval/predict: files in the given order, records in file order, no shuffle, no repeat.
"""

from __future__ import annotations

import os
from typing import Sequence

import tensorflow as tf

from bert_tf.data.features import Schema
from bert_tf.errors import MissingFileError

# Records held for shuffling (serialized, ~1.5 kB each at max_seq_length 128).
DEFAULT_SHUFFLE_BUFFER = 10000
# Files read at once in training.
DEFAULT_CYCLE_LENGTH = 8


def resolve_input_files(patterns: str | Sequence[str], flag: str = "input_file") -> list[str]:
    """Comma-separated globs, files or directories → the sorted list of files.

    Args:
        patterns: "a.tfrecord,shards/*.tfrecord,dir/" (a string) or a list of such items.
        flag: the flag the patterns came from, for the error message.

    Raises:
        FileNotFoundError: an item matches no file (each such item is named).
    """
    items = patterns.split(",") if isinstance(patterns, str) else list(patterns)
    items = [item.strip() for item in items if item.strip()]
    if not items:
        raise MissingFileError(f"--{flag} is empty: give files, globs or directories")
    files, unmatched = set(), []
    for item in items:
        if tf.io.gfile.isdir(item):
            found = [os.path.join(item, name) for name in tf.io.gfile.listdir(item)
                     if not name.startswith(".") and not tf.io.gfile.isdir(os.path.join(item, name))]
        else:
            found = tf.io.gfile.glob(item)
        if not found:
            unmatched.append(item)
        files.update(found)
    if unmatched:
        raise MissingFileError(f"--{flag}: nothing matches {', '.join(map(repr, unmatched))}")
    return sorted(files)


def check_records(files: Sequence[str], schema: Schema) -> None:
    """Parses the first record of every file; a wrong length raises an error naming the file.

    tf.data would only fail later, deep inside the pipeline and without the file name.
    """
    for path in files:
        for record in tf.data.TFRecordDataset(path).take(1):
            schema.decode(record.numpy(), source=path)


def record_dataset(input_patterns: str | Sequence[str], schema: Schema, batch_size: int, *,
                   is_training: bool, input_context: tf.distribute.InputContext | None = None,
                   seed: int = 12345, drop_remainder: bool | None = None,
                   shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER,
                   cycle_length: int = DEFAULT_CYCLE_LENGTH) -> tf.data.Dataset:
    """Batches of parsed records for one input pipeline.

    Args:
        input_patterns: comma-separated globs, files or directories (see resolve_input_files).
        schema: the records' schema (`bert_tf.data.features`); the first record of every file is
            checked against it.
        batch_size: examples per batch (the per-replica batch under a strategy).
        is_training: shuffle + repeat forever (True), or one pass in order (False).
        input_context: this pipeline's place among `num_input_pipelines`; with at least as many
            files as pipelines each pipeline reads its own files, otherwise its own records.
        seed: seeds the shuffles (each pipeline adds its id for the record shuffle).
        drop_remainder: drop a last partial batch; default `is_training` (TPU eval/predict
            needs True, with padding examples).
        shuffle_buffer: records in the shuffle buffer (training).
        cycle_length: files read in parallel (training).

    Returns:
        A dataset of dicts of int32/float32 tensors with leading dimension `batch_size`.
    """
    files = resolve_input_files(input_patterns)
    check_records(files, schema)
    pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    shard_files = pipelines > 1 and len(files) >= pipelines
    dataset = tf.data.Dataset.from_tensor_slices(files)
    if shard_files:
        dataset = dataset.shard(pipelines, pipeline_id)
    if is_training:
        # The same file order on every pipeline, so that sharding by record splits one stream.
        dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True).repeat()
        dataset = dataset.interleave(
            tf.data.TFRecordDataset, cycle_length=min(cycle_length, len(files)),
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    else:
        dataset = dataset.flat_map(tf.data.TFRecordDataset)
    if pipelines > 1 and not shard_files:
        dataset = dataset.shard(pipelines, pipeline_id)
    if is_training:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed + pipeline_id)
    dataset = dataset.batch(batch_size, drop_remainder=is_training if drop_remainder is None
                            else drop_remainder)
    dataset = dataset.map(schema.parse_fn(), num_parallel_calls=tf.data.AUTOTUNE,
                          deterministic=True)
    return dataset.prefetch(tf.data.AUTOTUNE)
