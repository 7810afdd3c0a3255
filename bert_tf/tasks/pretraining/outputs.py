"""Pretraining output files: per-block parts, their merge into the final files, and file names.

Each block writes one part per output file (`PartWriter`), noting where every run of `PIECE`
records ends and the part's size and CRC-32. When all blocks are done, `merge_parts` builds each
output from all blocks' runs in a seeded random order, under a temporary name renamed when
complete.

Resume: a block counts as done only if its marker reads back and every part it lists has the size
and CRC-32 noted in it (`finished_block`); otherwise the block is redone. The work directory is
renamed away before it is deleted (`remove_work_dir`), so a kill during the deletion never
leaves markers whose parts are gone.
"""

from __future__ import annotations

import errno
import glob as _glob
import io
import json
import os
import random
from typing import Sequence

import numpy as np
from absl import logging

from bert_tf import filesystem
from bert_tf.errors import UserError
from bert_tf.records import file_checks

# Output files interleave runs of this many records from all blocks in a random order, so that
# a reader's shuffle buffer sees many blocks at once (the original shuffles the whole corpus).
PIECE = 256


def expand_output_files(output_file: str) -> list[str]:
    """Comma-separated output files; `path@N` stands for N shards `path-0000i-of-0000N`."""
    out: list[str] = []
    for item in (p.strip() for p in output_file.split(",")):
        if not item:
            continue
        base, _, shards = item.rpartition("@")
        if base and shards.isdigit() and int(shards) > 0:
            out += [f"{base}-{i:05d}-of-{int(shards):05d}" for i in range(int(shards))]
        else:
            out.append(item)
    if not out:
        raise UserError("--output_file: no output file given")
    if len(set(out)) != len(out):
        raise UserError(f"--output_file: a file is named twice in {output_file}")
    return out


class PartWriter:
    """A block's records for one output file, noting the byte offset after every `PIECE` records."""

    def __init__(self, path: str | None):
        """`path=None` keeps the records in memory (`file.getvalue()`), for runners that move them."""
        self.path = path
        self.file = filesystem.AtomicFile(path) if path else io.BytesIO()
        self.records = 0
        self.bytes = 0
        self.pieces = [0]
        self.summary = file_checks.Summary()

    def write(self, framed: np.ndarray, sizes: np.ndarray) -> None:
        ends = self.bytes + np.cumsum(sizes)
        numbers = self.records + np.arange(1, len(sizes) + 1)
        self.pieces += ends[numbers % PIECE == 0].tolist()
        self.summary.update(framed, len(sizes))
        self.file.write(memoryview(framed))
        self.records += len(sizes)
        self.bytes = int(ends[-1]) if len(ends) else self.bytes

    def finish(self) -> list[int]:
        """Closes the part under its final name; returns the piece boundaries (byte offsets)."""
        if self.path:
            self.file.commit()
        return self.pieces if self.pieces[-1] == self.bytes else self.pieces + [self.bytes]

    def discard(self) -> None:
        """Drops an unfinished part (nothing appears under its name)."""
        if self.path:
            self.file.discard()


def make_output_directories(outputs: Sequence[str]) -> None:
    """Creates the directories the output files go into (local or `scheme://`)."""
    for path in outputs:
        filesystem.makedirs(filesystem.dirname(filesystem.absolute(path)))


def part_path(work_dir: str, block: int, output: int) -> str:
    return filesystem.join(work_dir, f"block-{block:06d}.output-{output:05d}.tfrecord")


def done_path(work_dir: str, block: int) -> str:
    return filesystem.join(work_dir, f"block-{block:06d}.done.json")


def read_json(path: str):
    with filesystem.open_read(path) as f:
        return json.loads(f.read())


def finished_block(work_dir: str, block: int, num_outputs: int) -> dict | None:
    """The counts of a block an earlier run finished, if its marker and parts are intact.

    Returns:
      The marker's counts, or None (the block must be redone; a damaged marker is deleted and one
      log line says why).
    """
    done = done_path(work_dir, block)
    if not filesystem.exists(done):
        return None
    try:
        counts = read_json(done)
        parts = counts["parts"]
        pieces = counts["pieces"]
        if len(parts) != num_outputs or len(pieces) != num_outputs:
            raise ValueError(f"{len(parts)} parts listed, expected {num_outputs}")
        reason = next(((k, why) for k in range(num_outputs)
                       if (why := file_checks.mismatch(part_path(work_dir, block, k), parts[k]))), None)
        if reason is not None:
            raise ValueError(f"{part_path(work_dir, block, reason[0])}: {reason[1]}")
        if any(p[-1] != parts[k]["bytes"] for k, p in enumerate(pieces)):
            raise ValueError("piece boundaries do not end at the part's size")
    except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError, OSError) as e:
        logging.warning("Redoing block %d: %s is not a finished block (%s)", block, done, e)
        filesystem.delete(done)
        return None
    return counts


def remove_work_dir(work_dir: str) -> None:
    """Deletes the work directory so that a kill at any moment leaves no marker without its parts.

    Local: the directory is renamed away first (atomic), then deleted. Object stores have no
    atomic rename of a directory: the markers are deleted first, then the parts.
    """
    if filesystem.scheme(work_dir):
        for path in filesystem.list_files(work_dir):
            if path.endswith(".done.json"):
                filesystem.delete(path)
        filesystem.delete_tree(work_dir)
        return
    if not os.path.isdir(work_dir):
        return
    trash = f"{work_dir}.deleting-{os.getpid()}"
    filesystem.replace(work_dir, trash)
    filesystem.delete_tree(trash)


def remove_leftovers(outputs: Sequence[str], work_dir: str) -> None:
    """Deletes what killed runs for the same outputs left (call with the outputs' lock held):
    the temporaries of an unfinished merge, work directories being deleted, and parts or
    markers under a temporary name."""
    for path in outputs:
        filesystem.recover_interrupted_write(path)
    if filesystem.scheme(work_dir):
        return
    for trash in _glob.glob(_glob.escape(work_dir.rsplit(".parts-", 1)[0]) + ".parts-*.deleting-*"):
        logging.info("Deleting %s, left by a killed run", trash)
        filesystem.delete_tree(trash)
    if filesystem.isdir(work_dir):
        for name in filesystem.listdir(work_dir):
            if filesystem.TEMPORARY_NAME.match(name):
                filesystem.delete(filesystem.join(work_dir, name))


def merge_parts(work_dir: str, pieces: dict[int, list[list[int]]], outputs: Sequence[str],
                 random_seed: int) -> None:
    """Each output = runs of `PIECE` records from all blocks' parts in a seeded random order,
    written under a temporary name and renamed when complete."""
    for k, path in enumerate(outputs):
        runs = merge_order({block: boundaries[k] for block, boundaries in pieces.items()}, random_seed, k)
        with filesystem.atomic_output(path) as out:
            for block, start, end in runs:
                with filesystem.open_read(part_path(work_dir, block, k)) as part:
                    _copy_range(part, out, start, end - start)


def merge_order(boundaries: dict[int, list[int]], random_seed: int, output: int) -> list[tuple[int, int, int]]:
    """The runs of output file number `output`, in the order they are written.

    Args:
      boundaries: block index -> that block's piece boundaries (byte offsets) in its part.
    Returns:
      (block, start byte, end byte) runs of the blocks' parts, in a seeded random order.
    """
    runs = [(block, start, end) for block in sorted(boundaries)
            for start, end in zip(boundaries[block][:-1], boundaries[block][1:])]
    random.Random(f"merge/{random_seed}/{output}").shuffle(runs)
    return runs


def _copy_range(source, target, start: int, size: int) -> None:
    """Appends source[start:start + size] to target, inside the kernel where both are local files."""
    if _is_local_file(source) and _is_local_file(target):
        target.flush()
        start, size = _copy_in_kernel(source, target, start, size)
        target.seek(0, os.SEEK_END)  # the kernel moved the descriptor, not the Python file
    if size > 0:
        source.seek(start)
        target.write(source.read(size))


def _is_local_file(file) -> bool:
    """An operating-system file (tf.io.gfile and Beam streams have no descriptor)."""
    try:
        file.fileno()
    except (AttributeError, OSError):  # io.UnsupportedOperation is an OSError
        return False
    return True


def _copy_in_kernel(source, target, start: int, size: int) -> tuple[int, int]:
    """Copies what `os.copy_file_range` can; returns the (start, size) left to copy."""
    while size > 0 and hasattr(os, "copy_file_range"):
        try:
            copied = os.copy_file_range(source.fileno(), target.fileno(), size, start)
        except OSError as e:
            if e.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                raise
            break  # this file system cannot: the caller copies through Python
        if copied == 0:
            raise UserError(f"{source.name}: ended early while merging (was it changed?)")
        start, size = start + copied, size - copied
    return start, size
