"""The path API: the same calls for local paths and `scheme://` ones (gs://, s3://, ram://, ...).

A path without a scheme is local and goes to the plain `os` / builtin calls: they are the fastest,
and `create_pretraining_data.py` then never imports TensorFlow (its start-up time is measured).
A path with a scheme goes to its backend (`bert_tf.filesystem.backends`). Outputs are written
through the writer (`bert_tf.filesystem.writer`), not with `open_write` or `replace` directly.
"""

from __future__ import annotations

import glob as _glob
import io
import os
import posixpath
import shutil
from typing import IO

from bert_tf.filesystem.backends import backend_for, scheme


# --------------------------------------------------------------------------- path names
def join(directory: str, name: str) -> str:
    return posixpath.join(directory, name) if scheme(directory) else os.path.join(directory, name)


def dirname(path: str) -> str:
    return posixpath.dirname(path) if scheme(path) else os.path.dirname(path)


def basename(path: str) -> str:
    return posixpath.basename(path) if scheme(path) else os.path.basename(path)


def absolute(path: str) -> str:
    """`os.path.abspath` for local paths; a scheme path is already absolute."""
    return path if scheme(path) else os.path.abspath(path)


# --------------------------------------------------------------------------- listing and metadata
def isdir(path: str) -> bool:
    return backend_for(path).isdir(path) if scheme(path) else os.path.isdir(path)


def glob(pattern: str) -> list[str]:
    """Sorted files matching a pattern (`*` stays inside one directory level)."""
    if scheme(pattern):
        return sorted(backend_for(pattern).glob(pattern))
    return sorted(p for p in _glob.glob(pattern) if os.path.isfile(p))


def list_files(directory: str) -> list[str]:
    """Every file under a directory, recursively, sorted."""
    if scheme(directory):
        return sorted(backend_for(directory).list_files(directory))
    return sorted(os.path.join(root, name) for root, _, names in os.walk(directory)
                  for name in names if os.path.isfile(os.path.join(root, name)))


def readable(path: str) -> bool:
    """Local files: the permission bits allow reading; remote files are found out by reading."""
    return True if scheme(path) else os.access(path, os.R_OK)


def exists(path: str) -> bool:
    return backend_for(path).exists(path) if scheme(path) else os.path.exists(path)


def stat(path: str) -> tuple[int, int]:
    """(size in bytes, modification time in ns; 0 where the file system keeps none)."""
    if scheme(path):
        return backend_for(path).stat(path)
    info = os.stat(path)
    return info.st_size, info.st_mtime_ns


def size(path: str) -> int:
    return stat(path)[0]


def isfile(path: str) -> bool:
    return exists(path) and not isdir(path)


def listdir(directory: str) -> list[str]:
    """The names in a directory, sorted (sub-directories without their trailing slash)."""
    if not scheme(directory):
        return sorted(os.listdir(directory))
    return sorted(set(backend_for(directory).listdir(directory)))


# --------------------------------------------------------------------------- reading
def open_read(path: str) -> IO[bytes]:
    """A seekable binary reader; FileNotFoundError names the path when it does not exist."""
    if not scheme(path):
        return open(path, "rb")
    backend = backend_for(path)
    if not backend.exists(path):
        raise FileNotFoundError(2, "No such file or directory", path)
    return backend.open_read(path)


def read_bytes(path: str) -> bytes:
    with open_read(path) as f:
        return f.read()


def read_text(path: str) -> str:
    """A UTF-8 file's text (a leading byte-order mark is kept, as `open(..., encoding="utf-8")`
    does)."""
    return read_bytes(path).decode("utf-8")


def open_text(path: str, encoding: str = "utf-8", newline: str | None = None) -> IO[str]:
    """A text reader of a local or scheme path (`newline` as `open`'s)."""
    if not scheme(path):
        return open(path, encoding=encoding, newline=newline)
    return io.TextIOWrapper(io.BufferedReader(_ReadableRaw(open_read(path))), encoding=encoding,
                            newline=newline)


class _ReadableRaw(io.RawIOBase):
    """A backend's reader as an `io.RawIOBase`, for `io.TextIOWrapper`."""

    def __init__(self, file):
        self._file = file

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._file.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def close(self) -> None:
        self._file.close()
        super().close()


def open_write(path: str) -> IO[bytes]:
    """A binary writer that replaces `path` in place (the writer's own; outputs go through
    `atomic_output`); the parent directory must exist (`makedirs`)."""
    return backend_for(path).open_write(path) if scheme(path) else open(path, "wb")


def replace(source: str, target: str) -> None:
    """Renames `source` to `target`, replacing it (atomicity: `bert_tf.filesystem.writer`).

    A scheme directory is renamed file by file (object stores, and `ram://`, have no directory
    to rename: its name is a prefix of its files')."""
    if not scheme(source):
        os.replace(source, target)
        return
    backend = backend_for(source)
    if not backend.isdir(source):
        backend.replace(source, target)
        return
    prefix = source.rstrip("/") + "/"
    for path in backend.list_files(source):
        destination = join(target, path[len(prefix):])
        backend.makedirs(dirname(destination))
        backend.replace(path, destination)
    delete_tree(source)


def copy(source: str, target: str) -> None:
    """Copies the file `source` to `target` on the same file system, replacing it (an object
    store copies on its side). Outputs go through the writer: copy into its temporary."""
    if scheme(source):
        backend_for(source).copy(source, target)
    else:
        shutil.copyfile(source, target)


def makedirs(directory: str) -> None:
    if scheme(directory):
        backend_for(directory).makedirs(directory)
    else:
        os.makedirs(directory, exist_ok=True)


def delete(path: str) -> None:
    """Deletes a file; no error if it is already gone."""
    if scheme(path):
        backend = backend_for(path)
        if backend.exists(path):
            backend.delete_files([path])
    elif os.path.exists(path):
        os.remove(path)


def delete_tree(directory: str) -> None:
    """Deletes a directory and everything under it; no error if it is gone."""
    if not scheme(directory):
        shutil.rmtree(directory, ignore_errors=True)
        return
    backend = backend_for(directory)
    files = backend.list_files(directory)
    if files:
        backend.delete_files(files)
    if backend.exists(directory):
        backend.delete_files([directory])


def delete_any(*paths: str) -> None:
    """Deletes each file or directory tree of `paths` that exists."""
    for path in paths:
        if isdir(path):
            delete_tree(path)
        else:
            delete(path)
