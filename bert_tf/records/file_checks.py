"""What a cached or intermediate file must hold, recorded when it is written and checked before reuse.

A cache (the fine-tuning `*.tf_record` files, SQuAD's `.npz` sidecar) or a part of
`create_pretraining_data` is reused only if its size and CRC-32 equal the ones noted when it was
written: a file cut at a record boundary or mid-record, or with flipped bytes, is rebuilt (one
log line says why) instead of being trained on, predicted from or copied into an output.

The check reads the file once and runs zlib's CRC-32 over it: a fraction of what writing the file
cost (`benchmarks/file_checks.py` prints the figures); the size check alone is a `stat`.
The caches keep the summaries in their `.json` sidecar (`read_cache_meta`), the parts in their
block's done marker (`bert_tf.tasks.pretraining.outputs.finished_block`).
"""

from __future__ import annotations

import json
import zlib
from typing import Iterable, Mapping

from absl import logging

from bert_tf import filesystem

_CHUNK = 1 << 22


class Summary:
    """A running (size, CRC-32, records) of bytes as they are written."""

    def __init__(self) -> None:
        self.bytes = 0
        self.crc32 = 0
        self.records = 0

    def update(self, data, records: int = 0) -> None:
        """Adds `data` (bytes, memoryview or a contiguous numpy buffer) holding `records` records."""
        view = memoryview(data).cast("B")
        self.crc32 = zlib.crc32(view, self.crc32)
        self.bytes += len(view)
        self.records += records

    def as_dict(self) -> dict[str, int]:
        return {"bytes": self.bytes, "crc32": self.crc32, "records": self.records}


def _chunks(path: str) -> Iterable[bytes]:
    with filesystem.open_read(path) as f:
        while True:
            chunk = f.read(_CHUNK)
            if not chunk:
                return
            yield chunk


def mismatch(path: str, expected: Mapping[str, int] | None) -> str | None:
    """Why `path` is not the file `expected` describes, or None when it is.

    Args:
      path: the file.
      expected: `Summary.as_dict()` of the file when it was written (None: nothing recorded,
        e.g. a cache of an earlier version).

    Returns:
      A short reason ("missing", "12 bytes, expected 40", "CRC-32 differs", ...), or None.
    """
    if not expected or not {"bytes", "crc32"} <= set(expected):
        return "no size and checksum recorded"
    if not filesystem.exists(path):
        return "missing"
    size = filesystem.size(path)
    if size != expected["bytes"]:
        return f"{size} bytes, expected {expected['bytes']} ({expected.get('records', '?')} records)"
    crc = 0
    for chunk in _chunks(path):
        crc = zlib.crc32(chunk, crc)
    if crc != expected["crc32"]:
        return "CRC-32 differs from the one recorded when it was written (bytes changed)"
    return None


def read_cache_meta(path: str, key: str) -> dict | None:
    """The `.json` sidecar of cached records `path` if it was written for fingerprint `key` and
    the records are intact (size and CRC-32 as written); else None, with one log line saying why
    the cache is rebuilt."""
    meta_path = path + ".json"
    if not (filesystem.exists(path) and filesystem.exists(meta_path)):
        return None
    try:
        with filesystem.open_read(meta_path) as f:
            meta = json.loads(f.read())
    except (ValueError, UnicodeDecodeError) as e:
        logging.warning("Rebuilding %s: its sidecar %s is unreadable (%s)", path, meta_path, e)
        return None
    if not isinstance(meta, dict) or meta.get("fingerprint") != key:
        return None
    for name, expected in meta.get("files", {path: None}).items():
        reason = mismatch(filesystem.join(filesystem.dirname(path), name), expected)
        if reason is not None:
            logging.warning("Rebuilding %s: %s: %s", path, name, reason)
            return None
    return meta
