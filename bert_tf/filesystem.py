"""The file operations of the data step, for local paths and `scheme://` paths (gs://, s3://, hdfs://).

A path without a scheme is local and goes to the plain `os` / builtin calls: they are the fastest,
and `create_pretraining_data.py` then never imports TensorFlow (its start-up time is measured).
A path with a scheme goes to one of two backends, imported only when such a path is met:

- `tf.io.gfile`: TensorFlow is a core dependency and its gfile knows `gs://` (and `ram://`, an
  in-memory file system). TensorFlow 2.21 has no `s3://` or `hdfs://` of its own (they left core
  TensorFlow in 2.6 for the `tensorflow-io` package, which registers them when imported: it is
  imported here when installed).
- Apache Beam's `FileSystems`: `gs://` with `apache-beam[gcp]`, `s3://` with `apache-beam[aws]`,
  `hdfs://` with `apache-beam[hadoop]`, `azfs://` with `apache-beam[azure]`, configured by the
  pipeline options (credentials, endpoints).

Precedence: the first backend that knows the scheme. `tf.io.gfile` comes first, except under
`--runner=beam` (`prefer_beam()`, called by the launching process and by every Beam worker): a
Beam job is configured through Beam's pipeline options, its workers are provisioned for Beam's
file systems, and TensorFlow's GCS client would need credentials of its own. The other backend
is the fallback, so `s3://` works on the local runner with `apache-beam[aws]` installed, and a
`ram://` path under the DirectRunner. A scheme neither knows is refused by `check_path` with one
line naming the flag, the path and what to install.

Every output file and directory of bert_tf is written here, by one writer (`atomic_output`,
`write_atomically`, `atomic_directory`, `atomic_files`): under a temporary name beside the final
one (`.<name>.tmp-<pid>-<hex>`, `TEMPORARY_NAME`), then renamed. Renames are atomic where the file
system allows (local, HDFS, `ram://`); on object stores (GCS, S3) both backends copy then delete,
and an object appears only once it is complete, so a reader never sees a partial file under its
final name either way; a directory there is renamed object by object (a reader may see it
half-moved for that moment; the previous one is moved aside whole first). A full disk is one
`full_disk.DiskFullError` naming the final output, and the temporary is removed.
"""

from __future__ import annotations

import contextlib
import glob as _glob
import io
import importlib
import importlib.util
import os
import posixpath
import re
import shutil
import uuid
from typing import IO, Callable, Iterable, Iterator, Sequence

from bert_tf import full_disk
from bert_tf.errors import MissingFileError, UnreadableFileError, UserError

_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")
_INSTALL_HINTS = {
    "gs": "pip install 'apache-beam[gcp]' for Beam (tf.io.gfile reads gs:// without it)",
    "s3": "pip install 'apache-beam[aws]' (TensorFlow has no s3:// of its own since 2.6; tensorflow-io adds it "
          "for the TensorFlow versions it is built for)",
    "hdfs": "pip install 'apache-beam[hadoop]' (TensorFlow has no hdfs:// of its own since 2.6; tensorflow-io "
            "adds it for the TensorFlow versions it is built for)",
    "azfs": "pip install 'apache-beam[azure]'",
}
# Beam registers these file systems even when the client library they need is missing.
_BEAM_CLIENT_MODULES = {"s3": "boto3", "azfs": "azure.storage.blob"}
_beam_first = False


def prefer_beam(enabled: bool = True) -> bool:
    """Scheme paths go to Beam's FileSystems before tf.io.gfile (see the module docstring).

    Returns:
      The previous setting, for the caller to restore.
    """
    global _beam_first
    previous, _beam_first = _beam_first, enabled
    return previous


def scheme(path: str) -> str | None:
    """'gs' for 'gs://bucket/x', None for a local path."""
    found = _SCHEME.match(path)
    return found.group(1).lower() if found else None


def check_path(path: str, flag: str) -> None:
    """Raises `UserError` (naming `flag`, the path and what to install) if no backend knows its scheme."""
    if scheme(path) is not None:
        _backend(path, flag)


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
    return _backend(path).isdir(path) if scheme(path) else os.path.isdir(path)


def glob(pattern: str) -> list[str]:
    """Sorted files matching a pattern (`*` stays inside one directory level)."""
    if scheme(pattern):
        return sorted(_backend(pattern).glob(pattern))
    return sorted(p for p in _glob.glob(pattern) if os.path.isfile(p))


def list_files(directory: str) -> list[str]:
    """Every file under a directory, recursively, sorted."""
    if scheme(directory):
        return sorted(_backend(directory).list_files(directory))
    return sorted(os.path.join(root, name) for root, _, names in os.walk(directory) for name in names
                  if os.path.isfile(os.path.join(root, name)))


def readable(path: str) -> bool:
    """Local files: the permission bits allow reading; remote files are found out by reading."""
    return True if scheme(path) else os.access(path, os.R_OK)


def exists(path: str) -> bool:
    return _backend(path).exists(path) if scheme(path) else os.path.exists(path)


def stat(path: str) -> tuple[int, int]:
    """(size in bytes, modification time in ns; 0 where the file system keeps none)."""
    if scheme(path):
        return _backend(path).stat(path)
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
    if _backend(directory) is _TensorFlowGfile:
        return sorted({name.rstrip("/") for name in _gfile().listdir(directory)})
    # Beam's file systems list files only: a sub-directory is the first part of their names.
    return sorted({p[len(directory.rstrip("/")) + 1:].split("/")[0]
                   for p in _backend(directory).list_files(directory)})


# --------------------------------------------------------------------------- reading
def open_read(path: str) -> IO[bytes]:
    """A seekable binary reader; FileNotFoundError names the path when it does not exist."""
    if not scheme(path):
        return open(path, "rb")
    backend = _backend(path)
    if not backend.exists(path):
        raise FileNotFoundError(2, "No such file or directory", path)
    return backend.open_read(path)


def read_bytes(path: str) -> bytes:
    with open_read(path) as f:
        return f.read()


def read_text(path: str) -> str:
    """A UTF-8 file's text (a leading byte-order mark is kept, as `open(..., encoding="utf-8")` does)."""
    return read_bytes(path).decode("utf-8")


def open_text(path: str, encoding: str = "utf-8", newline: str | None = None) -> IO[str]:
    """A text reader of a local or scheme path (`newline` as `open`'s)."""
    if not scheme(path):
        return open(path, encoding=encoding, newline=newline)
    return io.TextIOWrapper(io.BufferedReader(_ReadableRaw(open_read(path))), encoding=encoding, newline=newline)


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


# --------------------------------------------------------------------------- writing: the one writer
# The writer's temporaries; `run_lock` deletes dead runs' at the start of a run.
# `.<name>.tmp-…` is being written; `.<name>.old-…` is a replaced directory moved aside.
TEMPORARY_NAME = re.compile(r"^\.(.+)\.(tmp|old)-\d+-[0-9a-f]{8}$")


def temporary_beside(path: str, kind: str = "tmp") -> str:
    """A new temporary name in `path`'s directory (hidden; `TEMPORARY_NAME` matches it)."""
    path = path.rstrip("/")
    return join(dirname(path), f".{basename(path)}.{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def recover_interrupted_write(path: str) -> None:
    """After a kill while `path` was written: a directory moved aside (`atomic_directory`) whose replacement never
    took its name gets `path` back; the temporaries of `path` are deleted."""
    parent = dirname(path.rstrip("/"))
    found = [(name, TEMPORARY_NAME.match(name)) for name in (listdir(parent or ".") if exists(parent or ".") else [])]
    mine = [name for name, match in found if match and match.group(1) == basename(path.rstrip("/"))]
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


def open_write(path: str) -> IO[bytes]:
    """A binary writer that replaces `path` in place (the writer's own; outputs go through
    `atomic_output`); the parent directory must exist (`makedirs`)."""
    return _backend(path).open_write(path) if scheme(path) else open(path, "wb")


def replace(source: str, target: str) -> None:
    """Renames `source` to `target`, replacing it (see the module docstring on atomicity).

    A scheme directory is renamed file by file (object stores, and `ram://`, have no directory
    to rename: its name is a prefix of its files')."""
    if not scheme(source):
        os.replace(source, target)
        return
    backend = _backend(source)
    if not backend.isdir(source):
        backend.replace(source, target)
        return
    prefix = source.rstrip("/") + "/"
    for path in backend.list_files(source):
        destination = join(target, path[len(prefix):])
        backend.makedirs(dirname(destination))
        backend.replace(path, destination)
    delete_tree(source)


def makedirs(directory: str) -> None:
    if scheme(directory):
        _backend(directory).makedirs(directory)
    else:
        os.makedirs(directory, exist_ok=True)


def delete(path: str) -> None:
    """Deletes a file; no error if it is already gone."""
    if scheme(path):
        backend = _backend(path)
        if backend.exists(path):
            backend.delete_files([path])
    elif os.path.exists(path):
        os.remove(path)


def delete_tree(directory: str) -> None:
    """Deletes a directory and everything under it; no error if it is gone."""
    if not scheme(directory):
        shutil.rmtree(directory, ignore_errors=True)
        return
    backend = _backend(directory)
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


# Byte-order marks of the encodings that UTF-8 decoding would turn into other text; UTF-32's come
# first (UTF-32-LE's starts with UTF-16-LE's).
_WIDE_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32-LE"), (b"\x00\x00\xfe\xff", "UTF-32-BE"),
              (b"\xff\xfe", "UTF-16-LE"), (b"\xfe\xff", "UTF-16-BE"))


def check_text_encoding(path: str, head: bytes, flag: str) -> None:
    """Raises `UserError` if a text file's first bytes say UTF-16 or UTF-32 rather than UTF-8.

    A UTF-16/32 byte-order mark, or NUL bytes (ASCII text in UTF-16/32 without a mark), mean the
    text would be decoded as other words (UTF-8 decoding drops or garbles them without an error).

    Args:
      path: the file, named in the message.
      head: its first bytes (a few KB are enough).
      flag: the flag that named the file.
    """
    encoding = next((name for bom, name in _WIDE_BOMS if head.startswith(bom)), None)
    if encoding is None and b"\x00" in head:
        encoding = "UTF-16 or UTF-32 (it holds NUL bytes)"
    if encoding is not None:
        raise UserError(f"{flag}: {path}: the text is {encoding}, not UTF-8; convert it first, "
                        f"e.g. iconv -f UTF-16 -t UTF-8 {path} > {path}.utf8")


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


# --------------------------------------------------------------------------- backends
def expand_input_patterns(patterns: str | Sequence[str]) -> list[str]:
    """Comma-separated globs and directories (local or `scheme://`) -> sorted regular files; errors
    name the pattern."""
    if isinstance(patterns, str):
        patterns = [p for p in patterns.split(",")]
    files: list[str] = []
    for pattern in (p.strip() for p in patterns):
        if not pattern:
            continue
        check_path(pattern, "--input_file")
        if isdir(pattern):
            found = list_files(pattern)
            if not found:
                raise MissingFileError(f"--input_file: directory {pattern} holds no files")
        else:
            found = glob(pattern)
            if not found:
                what = "no file matches" if _glob.has_magic(pattern) else "file not found:"
                raise MissingFileError(f"--input_file: {what} {pattern}")
        files.extend(found)
    if not files:
        raise MissingFileError("--input_file: no input files given")
    for path in files:
        if not readable(path):
            raise UnreadableFileError(f"--input_file: {path} is not readable (check its permissions)")
    return files


def _backend(path: str, flag: str | None = None):
    name = scheme(path)
    order = (_BeamFileSystems, _TensorFlowGfile) if _beam_first else (_TensorFlowGfile, _BeamFileSystems)
    for backend in order:
        if backend.knows(name, path):
            return backend
    hint = _INSTALL_HINTS.get(name, "no tf.io.gfile or Apache Beam file system is installed for it")
    raise UserError(f"{flag + ': ' if flag else ''}{path}: no installed file system handles {name}://; {hint}")


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent package is missing
        return False


class _TensorFlowGfile:
    """Scheme paths through tf.io.gfile (TensorFlow imported on first use)."""

    @staticmethod
    def knows(name: str, path: str) -> bool:
        if not _installed("tensorflow"):
            return False
        gfile = _gfile()
        if name not in gfile.get_registered_schemes() and _installed("tensorflow_io"):
            importlib.import_module("tensorflow_io")  # registers s3://, hdfs://, az:// with gfile
        return name in gfile.get_registered_schemes()

    @staticmethod
    def isdir(path: str) -> bool:
        return _gfile().isdir(path)

    @staticmethod
    def glob(pattern: str) -> list[str]:
        gfile = _gfile()
        return [p for p in gfile.glob(pattern) if not gfile.isdir(p)]

    @staticmethod
    def list_files(directory: str) -> list[str]:
        return [posixpath.join(root, name) for root, _, names in _gfile().walk(directory) for name in names]

    @staticmethod
    def exists(path: str) -> bool:
        return _gfile().exists(path)

    @staticmethod
    def stat(path: str) -> tuple[int, int]:
        info = _gfile().stat(path)
        return info.length, info.mtime_nsec

    @staticmethod
    def open_read(path: str) -> IO[bytes]:
        return _gfile().GFile(path, "rb")

    @staticmethod
    def open_write(path: str) -> IO[bytes]:
        return _BytesOnlyWriter(_gfile().GFile(path, "wb"))

    @staticmethod
    def replace(source: str, target: str) -> None:
        _gfile().rename(source, target, overwrite=True)

    @staticmethod
    def makedirs(directory: str) -> None:
        _gfile().makedirs(directory)

    @staticmethod
    def delete_files(paths: list[str]) -> None:
        import tensorflow as tf

        for path in paths:
            # ram:// may list a directory before the files under it, or report a prefix of
            # deleted files as a directory: what is gone already is no error.
            with contextlib.suppress(tf.errors.NotFoundError):
                (tf.io.gfile.rmtree if tf.io.gfile.isdir(path) else tf.io.gfile.remove)(path)


class _BytesOnlyWriter:
    """A GFile writer that also takes memoryviews and numpy buffers (GFile takes only bytes and str)."""

    def __init__(self, file):
        self._file = file

    def write(self, data) -> None:
        self._file.write(data if isinstance(data, bytes) else bytes(data))

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "_BytesOnlyWriter":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _gfile():
    import tensorflow as tf

    return tf.io.gfile


def _beam_filesystems():
    """Beam's `FileSystems`, with default pipeline options outside a Beam job: S3 and others refuse
    to work without options (credentials then come from their client's usual environment)."""
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.options.value_provider import RuntimeValueProvider

    # A Beam launcher sets the job's options first; Beam's workers have them as runtime options.
    if getattr(FileSystems, "_pipeline_options", None) is None and RuntimeValueProvider.runtime_options is None:
        FileSystems.set_options(PipelineOptions([]))
    return FileSystems


class _BeamFileSystems:
    """Scheme paths through apache_beam.io.filesystems.FileSystems (object stores have no
    directories: a directory is every object under `dir/`)."""

    @staticmethod
    def knows(name: str, path: str) -> bool:
        client = _BEAM_CLIENT_MODULES.get(name)
        if not _installed("apache_beam") or (client and not _installed(client)):
            return False
        beam_fs = _beam_filesystems()
        try:
            beam_fs.get_filesystem(path)
        except Exception:  # ValueError: no such scheme; BeamIOError: its client library is missing
            return False
        return True

    @staticmethod
    def isdir(path: str) -> bool:
        return not _BeamFileSystems.exists(path) and bool(_BeamFileSystems.list_files(path))

    @staticmethod
    def glob(pattern: str) -> list[str]:
        beam_fs = _beam_filesystems()
        return [m.path for m in beam_fs.match([pattern])[0].metadata_list]

    @staticmethod
    def list_files(directory: str) -> list[str]:
        return _BeamFileSystems.glob(directory.rstrip("/") + "/**")

    @staticmethod
    def exists(path: str) -> bool:
        beam_fs = _beam_filesystems()
        return beam_fs.exists(path)

    @staticmethod
    def stat(path: str) -> tuple[int, int]:
        beam_fs = _beam_filesystems()
        info = beam_fs.match([path])[0].metadata_list[0]
        return info.size_in_bytes, int(info.last_updated_in_seconds * 1e9)

    @staticmethod
    def open_read(path: str) -> IO[bytes]:
        from apache_beam.io.filesystem import CompressionTypes
        beam_fs = _beam_filesystems()
        # UNCOMPRESSED: byte offsets are the file's own (AUTO would inflate a .gz name)
        return beam_fs.open(path, compression_type=CompressionTypes.UNCOMPRESSED)

    @staticmethod
    def open_write(path: str) -> IO[bytes]:
        from apache_beam.io.filesystem import CompressionTypes
        beam_fs = _beam_filesystems()
        return beam_fs.create(path, compression_type=CompressionTypes.UNCOMPRESSED)

    @staticmethod
    def replace(source: str, target: str) -> None:
        beam_fs = _beam_filesystems()
        if beam_fs.exists(target):
            beam_fs.delete([target])
        beam_fs.rename([source], [target])

    @staticmethod
    def makedirs(directory: str) -> None:
        beam_fs = _beam_filesystems()
        if not beam_fs.exists(directory):
            try:
                beam_fs.mkdirs(directory)
            except OSError:  # object stores: a directory is a prefix, nothing to create
                pass

    @staticmethod
    def delete_files(paths: list[str]) -> None:
        beam_fs = _beam_filesystems()
        beam_fs.delete(paths)
