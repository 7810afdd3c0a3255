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
from typing import Callable, Iterator

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
