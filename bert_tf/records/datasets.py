"""tf.data input pipelines over TFRecord files, sharded per input pipeline (one per worker/host).

Training: files are shuffled and repeated, read in parallel (interleaved), records shuffled,
batched with `drop_remainder`, parsed a batch at a time, prefetched. Every random choice is seeded,
and the interleave is deterministic, so the same seed gives the same batches: the training loop
relies on that to resume exactly (it skips the batches that finished steps consumed).

Eval/predict: files in the given order, records in file order, no shuffle, no repeat.

Fine-tuning batches can be trimmed to their longest real sequence (`trim_padding`): padded
positions get -10000 in attention, so their exp underflows to exactly 0 and every real position's
output is the same without them. Training batches can also be drawn from groups of similar length
(`length_groups`), so that trimming saves more.
"""

from __future__ import annotations

import os
from typing import Mapping, Sequence

import tensorflow as tf

from bert_tf import filesystem
from bert_tf.errors import MissingFileError
from bert_tf.records.features import Schema

# Records held for shuffling (serialized, ~1.5 kB each at max_seq_length 128).
DEFAULT_SHUFFLE_BUFFER = 10000
# Records held for shuffling a fine-tuning training split (~1.5 kB each at max_seq_length 128).
MAX_SHUFFLE_BUFFER = 100_000
# Files read at once in training.
DEFAULT_CYCLE_LENGTH = 8
# Trimmed lengths are rounded up to a multiple of this: few distinct shapes, fewer oneDNN plans.
LENGTH_MULTIPLE = 8
# Batches per group of similar lengths with `length_groups` (Hugging Face's group_by_length: 50).
LENGTH_GROUP_BATCHES = 20


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
        if filesystem.isdir(item):
            found = [os.path.join(item, name) for name in filesystem.listdir(item)
                     if not name.startswith(".") and not filesystem.isdir(os.path.join(item, name))]
        else:
            found = filesystem.glob(item)
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
                   cycle_length: int = DEFAULT_CYCLE_LENGTH,
                   trim_features: Sequence[str] = (), length_groups: int = 1,
                   repeat: bool = False) -> tf.data.Dataset:
    """Batches of parsed records for one input pipeline.

    Args:
        input_patterns: comma-separated globs, files or directories (see resolve_input_files).
        schema: the records' schema (`bert_tf.records.features`); the first record of every file is
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
        trim_features: the [B,S] features to trim to each batch's longest `input_mask` (see
            `trim_padding`); empty: batches keep the records' length S.
        length_groups: training only, > 1: each run of `length_groups` batches is drawn from
            `length_groups × batch_size` shuffled records sorted by length, in a seeded random
            order (see `group_by_length`).
        repeat: not training: read the records in order again and again, batches running on
            across the end (the original's pretraining eval, which stops after a number of
            batches).

    Returns:
        A dataset of dicts of int32/float32 tensors with leading dimension `batch_size`; the
        `trim_features` have shape [batch_size, None].
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
    if repeat and not is_training:
        dataset = dataset.repeat()
    if is_training:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed + pipeline_id)
    if is_training and length_groups > 1:
        dataset = dataset.batch(batch_size * length_groups, drop_remainder=True)
        dataset = dataset.map(schema.parse_fn(), num_parallel_calls=tf.data.AUTOTUNE,
                              deterministic=True)
        dataset = group_by_length(dataset, length_groups, batch_size, seed)
    else:
        dataset = dataset.batch(batch_size, drop_remainder=is_training if drop_remainder is None
                                else drop_remainder)
        dataset = dataset.map(schema.parse_fn(), num_parallel_calls=tf.data.AUTOTUNE,
                              deterministic=True)
    if trim_features:
        dataset = trim_padding(dataset, trim_features)
    return dataset.prefetch(tf.data.AUTOTUNE)


def batch_length(input_mask: tf.Tensor, multiple: int = LENGTH_MULTIPLE) -> tf.Tensor:
    """The length a batch can be trimmed to: its last real position + 1, rounded up to a
    multiple of `multiple`, at least `multiple` and at most S.

    Args:
        input_mask: int [B,S], 1 on real tokens (a batch of padding rows only gives `multiple`).

    Returns:
        An int32 scalar.
    """
    seq_length = tf.shape(input_mask)[1]
    last = tf.reduce_max(tf.where(input_mask > 0, tf.range(1, seq_length + 1)[tf.newaxis], 0))
    rounded = (tf.maximum(last, 1) + multiple - 1) // multiple * multiple
    return tf.minimum(rounded, seq_length)


def trim_batch(features: Mapping[str, tf.Tensor], names: Sequence[str],
               multiple: int = LENGTH_MULTIPLE) -> dict[str, tf.Tensor]:
    """`features` with each of `names` ([B,S]) cut to [B, batch_length(input_mask)]."""
    length = batch_length(features["input_mask"], multiple)
    return {name: value[:, :length] if name in names else value
            for name, value in features.items()}


def trim_padding(dataset: tf.data.Dataset, names: Sequence[str],
                 multiple: int = LENGTH_MULTIPLE) -> tf.data.Dataset:
    """Batches of `dataset` with the [B,S] features `names` trimmed by `trim_batch`: same
    examples, same order, shape [B,None] (one trace of the steps for every length)."""
    missing = set(names) - set(dataset.element_spec) | ({"input_mask"} - set(dataset.element_spec))
    if missing:
        raise ValueError(f"trim_padding: the batches have no feature {sorted(missing)}")
    return dataset.map(lambda features: trim_batch(features, tuple(names), multiple),
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def group_by_length(groups: tf.data.Dataset, batches_per_group: int, batch_size: int,
                    seed: int) -> tf.data.Dataset:
    """Groups of `batches_per_group × B` parsed records → batches of B records of similar length.

    Each group is sorted by real length (stable, so ties keep their shuffled order), cut into
    batches, and those batches come out in an order drawn from (seed, group index): the same
    seed gives the same batches, which exact resume relies on.
    """
    def split(index, features):
        order = tf.argsort(tf.reduce_sum(tf.cast(features["input_mask"], tf.int32), axis=1),
                           stable=True)
        batches = {}
        for name, value in features.items():
            value = tf.gather(value, order)
            batches[name] = tf.reshape(value, tf.concat(
                [[batches_per_group, batch_size], tf.shape(value)[1:]], 0))  # [G,B,...]
        permutation = tf.random.experimental.stateless_shuffle(
            tf.range(batches_per_group), seed=tf.stack([tf.cast(index, tf.int32), seed]))
        return tf.data.Dataset.from_tensor_slices(
            {name: tf.gather(value, permutation) for name, value in batches.items()})

    return groups.enumerate().flat_map(split)
