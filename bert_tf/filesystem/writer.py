"""The one writer: every output file and directory of bert_tf appears whole under its name.

An output is written under a temporary name beside the final one (`.<name>.tmp-<pid>-<hex>`,
`TEMPORARY_NAME`; `atomic_output`, `write_atomically`, `atomic_directory`, `atomic_files`), then
renamed. Renames are atomic where the file system allows (local, HDFS, `ram://`); on object
stores (GCS, S3) both backends copy then delete, and an object appears only once it is complete,
so a reader never sees a partial file under its final name either way; a directory there is
renamed object by object (a reader may see it half-moved for that moment; the previous one is
moved aside whole first). A full disk is one `full_disk.DiskFullError` naming the final output,
and the temporary is removed.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from typing import Callable, Iterable, Iterator

from bert_tf.filesystem import full_disk
from bert_tf.filesystem.backends import scheme
from bert_tf.filesystem.paths import (basename, delete, delete_any, delete_tree, dirname, exists,
                                      isdir, join, listdir, makedirs, open_write, replace)

# The writer's temporaries; `run_lock` deletes dead runs' at the start of a run.
# `.<name>.tmp-…` is being written; `.<name>.old-…` is a replaced directory moved aside.
TEMPORARY_NAME = re.compile(r"^\.(.+)\.(tmp|old)-\d+-[0-9a-f]{8}$")


def temporary_beside(path: str, kind: str = "tmp") -> str:
    """A new temporary name in `path`'s directory (hidden; `TEMPORARY_NAME` matches it)."""
    path = path.rstrip("/")
    return join(dirname(path), f".{basename(path)}.{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def recover_interrupted_write(path: str) -> None:
    """After a kill while `path` was written: a directory moved aside (`atomic_directory`) whose
    replacement never took its name gets `path` back; the temporaries of `path` are deleted."""
    parent = dirname(path.rstrip("/"))
    names = listdir(parent or ".") if exists(parent or ".") else []
    found = [(name, TEMPORARY_NAME.match(name)) for name in names]
    mine = [name for name, match in found
            if match and match.group(1) == basename(path.rstrip("/"))]
    moved_aside = [name for name in mine if ".old-" in name]
    if moved_aside and not exists(path):
        replace(join(parent, moved_aside.pop()), path)
    for name in mine:
        delete_any(join(parent, name))


class AtomicFile:
    """An output file written under a temporary name beside `path` (str as UTF-8, or bytes);
    `commit()` renames it to `path`, `discard()` deletes it. A full disk is one `DiskFullError`
    naming `path` (and the temporary is deleted)."""

    def __init__(self, path: str):
        self.path, self._tmp = path, temporary_beside(path)
        with self._named():
            self._file = open_write(self._tmp)

    @contextlib.contextmanager
    def _named(self) -> Iterator[None]:
        with full_disk.named_when_full(self.path, self.discard), writing(self.path):
            yield

    def write(self, data) -> None:
        with self._named():
            self._file.write(data.encode("utf-8") if isinstance(data, str) else data)

    def writelines(self, lines: Iterable[str]) -> None:
        self.write("".join(lines))

    # A local file's descriptor, for copies inside the kernel (`os.copy_file_range`).
    def fileno(self) -> int:
        return self._file.fileno()

    def flush(self) -> None:
        self._file.flush()

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self._file.seek(offset, whence)

    def commit(self) -> None:
        with self._named():
            self._file.close()
            replace(self._tmp, self.path)

    def discard(self) -> None:
        with contextlib.suppress(Exception):
            self._file.close()
        delete(self._tmp)


@contextlib.contextmanager
def atomic_output(path: str) -> Iterator[AtomicFile]:
    """An `AtomicFile` for the body to write (the parent directory must exist: `makedirs`):
    committed when the body ends without an error, else discarded."""
    output = AtomicFile(path)
    try:
        with output._named():
            yield output
    except BaseException:
        output.discard()
        raise
    output.commit()


def write_atomically(path: str, data: bytes | str) -> None:
    """Writes `data` (str: as UTF-8) to `path` through `atomic_output`."""
    with atomic_output(path) as f:
        f.write(data)


@contextlib.contextmanager
def atomic_directory(path: str) -> Iterator[str]:
    """Yields a temporary directory name beside `path` for the body to fill (it may create it);
    then that directory takes `path`'s name. A previous `path` is moved aside whole first and
    deleted last, so a kill at any moment leaves a complete directory (between the two renames,
    only the moved-aside one: `run_lock` keeps a temporary whose final name is missing)."""
    tmp = temporary_beside(path)
    try:
        with full_disk.named_when_full(path, lambda: delete_tree(tmp)):
            yield tmp
    except BaseException:
        delete_tree(tmp)
        raise
    previous = None
    if exists(path):
        previous = temporary_beside(path, "old")
        replace(path, previous)
    replace(tmp, path)
    if previous:
        delete_tree(previous)


@contextlib.contextmanager
def atomic_files(directory: str, order: Callable[[str], object] = str, output: str | None = None
                 ) -> Iterator[str]:
    """Yields a temporary directory beside `directory` for the body to fill with files. A new
    local `directory` then takes the temporary's name whole; into an existing one, or on a scheme
    file system (which renames files, not directories), each file is renamed in `order` (e.g. a
    checkpoint's index last, so that no reader finds an index without its data). A full disk
    names `output` (the files' common prefix, say), else `directory`."""
    new = not scheme(directory) and not isdir(directory)
    if dirname(directory.rstrip("/")):
        makedirs(dirname(directory.rstrip("/")))
    tmp = temporary_beside(directory)
    try:
        with full_disk.named_when_full(output or directory, lambda: delete_tree(tmp)):
            makedirs(tmp)
            yield tmp
            if new:
                replace(tmp, directory)
                return
            makedirs(directory)
            for name in sorted(listdir(tmp), key=order):
                replace(join(tmp, name), join(directory, name))
    finally:
        delete_tree(tmp)


@contextlib.contextmanager
def writing(path: str) -> Iterator[None]:
    """Gives the `OSError`s raised inside it `path` as their file name when they have none.

    `write()` and `close()` report a full disk (ENOSPC) or a quota (EDQUOT) without a path;
    with the path, `bert_tf.cli` prints `error: <path>: No space left on device`.
    """
    try:
        yield
    except OSError as e:
        if e.filename is None and e.errno is not None:
            raise OSError(e.errno, e.strerror or str(e), path) from e
        raise
