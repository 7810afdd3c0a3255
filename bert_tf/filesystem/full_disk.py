"""A full disk (or a file-size limit) while an output is written: one error naming the output.

TensorFlow reports ENOSPC from its file writers as `tf.errors.ResourceExhaustedError` with the
path of a temporary file in the message; Python's writers raise OSError. `named_when_full`
turns both into one `DiskFullError` that names the final output, after removing what the write
left under that name, so that a rerun after freeing space writes it again from scratch.

TensorFlow is not imported here: an error can only be TensorFlow's once TensorFlow is loaded,
and the data step (`create_pretraining_data.py` on local paths) runs without it.
"""

from __future__ import annotations

import contextlib
import errno
import sys
from typing import Callable, Iterator

from bert_tf.errors import UserError

_FULL_ERRNOS = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
                errno.EFBIG: "file too large (a file-size limit, e.g. ulimit -f)"}
_FULL_MESSAGES = {"No space left on device": errno.ENOSPC, "Disk quota exceeded": errno.EDQUOT,
                  "File too large": errno.EFBIG}


class DiskFullError(UserError, OSError):
    """The file system had no room for an output (or refused a file that large)."""


def _is_tensorflow_error(error: BaseException) -> bool:
    tensorflow = sys.modules.get("tensorflow")
    return tensorflow is not None and isinstance(error, tensorflow.errors.OpError)


def full_errno(error: BaseException) -> int | None:
    """ENOSPC, EDQUOT or EFBIG if `error` is a file system running out of room, else None."""
    if isinstance(error, OSError) and error.errno in _FULL_ERRNOS:
        return error.errno
    if isinstance(error, DiskFullError):  # an inner file's, named again by an outer write
        return full_errno(error.__cause__) if error.__cause__ is not None else None
    if _is_tensorflow_error(error):
        return next((code for text, code in _FULL_MESSAGES.items() if text in error.message),
                    None)
    return None


@contextlib.contextmanager
def named_when_full(path: str, remove_partial: Callable[[], None]) -> Iterator[None]:
    """Runs the write of output `path`; if the disk is full, calls `remove_partial()` and raises
    DiskFullError naming `path`."""
    try:
        yield
    except Exception as error:  # OSError or tf.errors.OpError; anything else goes on unchanged
        code = full_errno(error)
        if code is None:
            raise
        remove_partial()
        raise DiskFullError(f"{path}: {_FULL_ERRNOS[code]} while writing it (nothing was left "
                            f"under that name); free space and run the same command again"
                            ) from error
