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

Renames are atomic where the file system allows (local, HDFS); on object stores (GCS, S3) both
backends copy then delete, and an object appears only once it is complete, so a reader never
sees a partial output under its final name either way.
"""

from __future__ import annotations

import contextlib
import glob as _glob
import importlib
import importlib.util
import os
import posixpath
import re
import shutil
from typing import IO, Iterator, Sequence

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


# --------------------------------------------------------------------------- reading and writing
def open_read(path: str) -> IO[bytes]:
    """A seekable binary reader; FileNotFoundError names the path when it does not exist."""
    if not scheme(path):
        return open(path, "rb")
    backend = _backend(path)
    if not backend.exists(path):
        raise FileNotFoundError(2, "No such file or directory", path)
    return backend.open_read(path)


def open_write(path: str) -> IO[bytes]:
    """A binary writer that replaces `path`; the parent directory must exist (`makedirs`)."""
    return _backend(path).open_write(path) if scheme(path) else open(path, "wb")


def replace(source: str, target: str) -> None:
    """Renames `source` to `target`, replacing it (see the module docstring on atomicity)."""
    if scheme(source):
        _backend(source).replace(source, target)
    else:
        os.replace(source, target)


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
        gfile = _gfile()
        for path in paths:
            (gfile.rmtree if gfile.isdir(path) else gfile.remove)(path)


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
