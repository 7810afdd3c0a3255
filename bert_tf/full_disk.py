"""A full disk (or a file-size limit) while an output is written: one error naming the output.

TensorFlow reports ENOSPC from its file writers as `tf.errors.ResourceExhaustedError` with the
path of a temporary file in the message; Python's writers raise OSError. `named_when_full`
turns both into one `DiskFullError` that names the final output, after removing what the write
left under that name, so that a rerun after freeing space writes it again from scratch.
"""

from __future__ import annotations

import contextlib
import errno
import os
import uuid
from typing import Any, Callable, Iterator, Mapping

import tensorflow as tf

from bert_tf.errors import UserError

_FULL_ERRNOS = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
                errno.EFBIG: "file too large (a file-size limit, e.g. ulimit -f)"}
_FULL_MESSAGES = {"No space left on device": errno.ENOSPC, "Disk quota exceeded": errno.EDQUOT,
                  "File too large": errno.EFBIG}


class DiskFullError(UserError, OSError):
    """The file system had no room for an output (or refused a file that large)."""


def full_errno(error: BaseException) -> int | None:
    """ENOSPC, EDQUOT or EFBIG if `error` is a file system running out of room, else None."""
    if isinstance(error, OSError) and error.errno in _FULL_ERRNOS:
        return error.errno
    if isinstance(error, tf.errors.OpError):
        return next((code for text, code in _FULL_MESSAGES.items() if text in error.message),
                    None)
    return None


def remove_if_exists(*paths: str) -> None:
    """Removes each file or directory tree of `paths` that exists (local or tf.io.gfile)."""
    for path in paths:
        if tf.io.gfile.isdir(path):
            tf.io.gfile.rmtree(path)
        elif tf.io.gfile.exists(path):
            tf.io.gfile.remove(path)


@contextlib.contextmanager
def named_when_full(path: str, remove_partial: Callable[[], None]) -> Iterator[None]:
    """Runs the write of output `path`; if the disk is full, calls `remove_partial()` and raises
    DiskFullError naming `path`."""
    try:
        yield
    except (OSError, tf.errors.OpError) as error:
        code = full_errno(error)
        if code is None:
            raise
        remove_partial()
        raise DiskFullError(f"{path}: {_FULL_ERRNOS[code]} while writing it (nothing was left "
                            f"under that name); free space and run the same command again"
                            ) from error


def write_text_atomically(path: str, text: str) -> None:
    """Writes `text` to `path` (local or tf.io.gfile) under a temporary name, then renames it, so
    that no reader sees half a file; a full disk is one DiskFullError naming `path`."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with named_when_full(path, lambda: remove_if_exists(tmp)):
        with tf.io.gfile.GFile(tmp, "w") as writer:
            writer.write(text)
    tf.io.gfile.rename(tmp, path, overwrite=True)


def write_directory_atomically(directory: str, write_into: Callable[[str], None],
                               name_in_errors: str | None = None,
                               order: Callable[[str], Any] = lambda name: 0) -> None:
    """Fills a temporary directory beside `directory` with `write_into(tmp)`, then moves it in.

    A new local `directory` is renamed into place whole. An existing one, or one on a `scheme://`
    file system (object stores and ram:// rename objects, not directories), receives the files
    by rename in `order(name)` order (e.g. a checkpoint's data before its index), so a reader
    never finds a file without the ones it needs. A full disk is one DiskFullError naming
    `name_in_errors` (default: `directory`), with the temporary directory removed.
    """
    directory = directory.rstrip("/") or "."
    new_directory = not tf.io.gfile.isdir(directory) and "://" not in directory
    parent = os.path.dirname(directory) if new_directory else directory
    if parent:
        tf.io.gfile.makedirs(parent)
    tmp = os.path.join(parent, f".tmp-{os.path.basename(directory)}-{uuid.uuid4().hex[:8]}")
    tf.io.gfile.makedirs(tmp)
    with named_when_full(name_in_errors or directory, lambda: remove_if_exists(tmp)):
        write_into(tmp)
    if new_directory:
        tf.io.gfile.rename(tmp, directory)
        return
    for name in sorted(tf.io.gfile.listdir(tmp), key=lambda n: (order(n), n)):
        tf.io.gfile.rename(os.path.join(tmp, name), os.path.join(directory, name), overwrite=True)
    tf.io.gfile.rmtree(tmp)


def write_files(directory: str, files: Mapping[str, str | bytes]) -> None:
    """Writes each `name: text or bytes` of `files` into `directory` (local or tf.io.gfile)."""
    for name, content in files.items():
        mode = "wb" if isinstance(content, bytes) else "w"
        with tf.io.gfile.GFile(os.path.join(directory, name), mode) as f:
            f.write(content)
