"""SQuAD features cached as TFRecords in the output directory, rebuilt when their inputs change.

`train.tf_record` and `eval.tf_record` (the original's names) hold the windows in the records of
`features.squad_schema`. Next to each, a JSON sidecar stores a fingerprint of everything that
shapes the records (the SQuAD file's bytes, the tokenizer files, the feature settings, the
shuffling seed, FEATURE_VERSION) and the read/feature counts for the run summary; the prediction
file also keeps, in an `.npz` sidecar, what post-processing needs (window → example, token →
word, max-context flags). All files are written under a temporary name, then renamed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import random
from typing import Any, Iterable, Sequence

import numpy as np
from absl import logging

from bert_tf import filesystem
from bert_tf.records import features as record_schemas
from bert_tf.records import file_checks, tfrecord
from bert_tf.tasks.squad import (examples as squad, features as squad_features,
                                 postprocess as squad_postprocess)

# Bump when the record layout or the feature construction changes, so old caches are rebuilt.
FEATURE_VERSION = 1
RECORD_NAMES = {True: "train.tf_record", False: "eval.tf_record"}


@dataclasses.dataclass(frozen=True)
class FeatureSettings:
    """What shapes the windows (the flags of the same names)."""

    max_seq_length: int = 384
    doc_stride: int = 128
    max_query_length: int = 64
    do_lower_case: bool = True
    version_2_with_negative: bool = False
    chinese_conversion: str = "none"


@dataclasses.dataclass
class CachedRecords:
    """A SQuAD file's features on disk.

    Attributes:
      path: the TFRecord file.
      num_examples: questions kept (training: after skipping unusable answers).
      num_features: windows (records).
      counts: the read and feature counts ({"questions", "skipped_answer_mismatch", ...}).
    """

    path: str
    num_examples: int
    num_features: int
    counts: dict[str, int]

    @property
    def metadata_path(self) -> str:
        return self.path + ".npz"


def fingerprint(input_file: str, tokenizer_files: Sequence[str], settings: FeatureSettings,
                is_training: bool, seed: int) -> str:
    """A hex digest of the SQuAD file, the tokenizer files and every setting of the features."""
    digest = hashlib.sha256(json.dumps({
        "version": FEATURE_VERSION, "is_training": is_training,
        "seed": seed if is_training else None,
        # chinese_conversion only when set, so that the caches of earlier runs stay valid
        **{k: v for k, v in dataclasses.asdict(settings).items()
           if k != "chinese_conversion" or v != "none"}}, sort_keys=True).encode())
    for path in (input_file, *tokenizer_files):
        with filesystem.open_read(path) as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _record_values(features: squad_features.SquadFeatures, first_row: int,
                   is_training: bool) -> dict[str, np.ndarray]:
    """The schema's columns of a chunk of windows ([R, length] each)."""
    n = len(features)
    values = {"unique_ids": np.arange(first_row, first_row + n, dtype=np.int64)[:, None],
              "input_ids": features.input_ids, "input_mask": features.input_mask,
              "segment_ids": features.segment_ids}
    if is_training:
        values.update({name: getattr(features, name)[:, None]
                       for name in ("start_positions", "end_positions", "is_impossible")})
    return values


def write_records(path: str, chunks: Iterable[squad_features.SquadFeatures], is_training: bool,
                  max_seq_length: int) -> tuple[list[squad_features.SquadFeatures], dict]:
    """Streams chunks of windows into a TFRecord file (atomically).

    Returns:
      (the chunks (prediction only; empty for training, whose chunks are not kept), the file's
       `file_checks.Summary` as a dict, to check it on reuse).
    """
    schema = record_schemas.squad_schema(max_seq_length, is_training)
    kept, rows = [], 0
    summary = file_checks.Summary()
    with filesystem.atomic_output(path) as f:
        for chunk in chunks:
            data, offsets = schema.encode_batch(_record_values(chunk, rows, is_training))
            framed = tfrecord.frame_records(data, offsets)[0]
            summary.update(framed, len(chunk))
            f.write(framed.tobytes())
            rows += len(chunk)
            if not is_training:
                kept.append(chunk)
    return kept, summary.as_dict()


def _save_metadata(path: str, features: squad_features.SquadFeatures) -> dict:
    """Writes the `.npz` sidecar atomically; returns its `file_checks` summary."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **features.columns())
    filesystem.write_atomically(path, buffer.getvalue())
    summary = file_checks.Summary()
    summary.update(buffer.getvalue(), len(features))
    return summary.as_dict()


def load_metadata(cached: CachedRecords) -> squad_features.SquadFeatures:
    """The prediction windows saved next to `eval.tf_record` (all SquadFeatures columns)."""
    with np.load(io.BytesIO(filesystem.read_bytes(cached.metadata_path))) as arrays:
        return squad_features.SquadFeatures(**{name: arrays[name] for name in arrays.files})


def cached_records(input_file: str, output_dir: str, is_training: bool, tokenizer: Any,
                   tokenizer_files: Sequence[str], settings: FeatureSettings,
                   seed: int = 12345) -> CachedRecords:
    """The features of a SQuAD file, built now or reused from an earlier run with the same inputs.

    Training examples are shuffled (random.Random(seed), as the original pre-shuffles) before
    their windows are written; prediction examples keep the file's order.
    """
    path = os.path.join(output_dir, RECORD_NAMES[is_training])
    key = fingerprint(input_file, tokenizer_files, settings, is_training, seed)
    meta_path = path + ".json"
    meta = file_checks.read_cache_meta(path, key)
    if meta is not None:
        logging.info("Reusing %s (%d questions, %d windows, size and CRC-32 checked)", path,
                     meta["num_examples"], meta["num_features"])
        return CachedRecords(path, meta["num_examples"], meta["num_features"], meta["counts"])
    examples, read_stats = squad.read_squad_examples(input_file, is_training,
                                                     settings.version_2_with_negative)
    if is_training:
        random.Random(seed).shuffle(examples)
    stats = squad_features.FeatureStats()
    chunks = squad_features.iter_features(examples, tokenizer, settings.max_seq_length,
                                          settings.doc_stride, settings.max_query_length,
                                          is_training, stats)
    filesystem.makedirs(output_dir)
    kept, written = write_records(path, chunks, is_training, settings.max_seq_length)
    files = {os.path.basename(path): written}
    cached = CachedRecords(path, len(examples), stats.features,
                           {**dataclasses.asdict(read_stats), **dataclasses.asdict(stats)})
    if not is_training:
        files[os.path.basename(cached.metadata_path)] = _save_metadata(
            cached.metadata_path, squad_features.SquadFeatures.concatenate(kept, settings.max_seq_length))
    squad_postprocess.write_json_atomic(meta_path, {
        "fingerprint": key, "input_file": os.path.abspath(input_file), "files": files,
        "num_examples": cached.num_examples, "num_features": cached.num_features,
        "counts": cached.counts, "settings": dataclasses.asdict(settings)})
    logging.info("Wrote %d windows of %d questions to %s", cached.num_features,
                 cached.num_examples, path)
    return cached
