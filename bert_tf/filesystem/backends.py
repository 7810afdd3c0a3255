"""The two back-ends of `scheme://` paths (gs://, s3://, hdfs://, ram://), imported only when such a
path is met; a path without a scheme is local and never comes here.

- `tf.io.gfile` (`TensorFlowGfile`): TensorFlow is a core dependency and its gfile knows `gs://`
  (and `ram://`, an in-memory file system). TensorFlow 2.21 has no `s3://` or `hdfs://` of its
  own (they left core TensorFlow in 2.6 for the `tensorflow-io` package, which registers them
  when imported: it is imported here when installed).
- Apache Beam's `FileSystems` (`BeamFileSystems`): `gs://` with `apache-beam[gcp]`, `s3://` with
  `apache-beam[aws]`, `hdfs://` with `apache-beam[hadoop]`, `azfs://` with `apache-beam[azure]`,
  configured by the pipeline options (credentials, endpoints).

Precedence: the first backend that knows the scheme. `tf.io.gfile` comes first, except under
`--runner=beam` (`prefer_beam()`, called by the launching process and by every Beam worker): a
Beam job is configured through Beam's pipeline options, its workers are provisioned for Beam's
file systems, and TensorFlow's GCS client would need credentials of its own. The other backend
is the fallback, so `s3://` works on the local runner with `apache-beam[aws]` installed, and a
`ram://` path under the DirectRunner. A scheme neither knows is refused by `check_path` with one
line naming the flag, the path and what to install.

This is the only module of bert_tf that calls `tf.io.gfile` (tests/test_import_contracts.py
checks it).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import posixpath
import re
from typing import IO

from bert_tf.errors import UserError

_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")
INSTALL_HINTS = {
    "gs": "pip install 'apache-beam[gcp]' for Beam (tf.io.gfile reads gs:// without it)",
    "s3": "pip install 'apache-beam[aws]' (TensorFlow has no s3:// of its own since 2.6; "
          "tensorflow-io adds it for the TensorFlow versions it is built for)",
    "hdfs": "pip install 'apache-beam[hadoop]' (TensorFlow has no hdfs:// of its own since 2.6; "
            "tensorflow-io adds it for the TensorFlow versions it is built for)",
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
    """Raises `UserError` (naming `flag`, the path and what to install) if no backend knows its
    scheme."""
    if scheme(path) is not None:
        backend_for(path, flag)


def backend_for(path: str, flag: str | None = None) -> type[TensorFlowGfile | BeamFileSystems]:
    """The backend of a scheme path (see the module docstring on precedence).

    Raises:
      UserError: no installed backend knows the scheme (naming `flag`, the path and what to
        install).
    """
    name = scheme(path)
    order = ((BeamFileSystems, TensorFlowGfile) if _beam_first
             else (TensorFlowGfile, BeamFileSystems))
    for backend in order:
        if backend.knows(name, path):
            return backend
    hint = INSTALL_HINTS.get(name,
                             "no tf.io.gfile or Apache Beam file system is installed for it")
    raise UserError(f"{flag + ': ' if flag else ''}{path}: no installed file system handles "
                    f"{name}://; {hint}")


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent package is missing
        return False


class TensorFlowGfile:
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
        return [posixpath.join(root, name) for root, _, names in _gfile().walk(directory)
                for name in names]

    @staticmethod
    def listdir(directory: str) -> list[str]:
        return [name.rstrip("/") for name in _gfile().listdir(directory)]

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
    def copy(source: str, target: str) -> None:
        gfile = _gfile()
        if gfile.exists(target):  # ram:// appends to it, even with overwrite=True
            gfile.remove(target)
        gfile.copy(source, target)

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
    """A GFile writer that also takes memoryviews and numpy buffers (GFile takes only bytes and
    str)."""

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
    if (getattr(FileSystems, "_pipeline_options", None) is None
            and RuntimeValueProvider.runtime_options is None):
        FileSystems.set_options(PipelineOptions([]))
    return FileSystems


class BeamFileSystems:
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
        return not BeamFileSystems.exists(path) and bool(BeamFileSystems.list_files(path))

    @staticmethod
    def glob(pattern: str) -> list[str]:
        beam_fs = _beam_filesystems()
        return [m.path for m in beam_fs.match([pattern])[0].metadata_list]

    @staticmethod
    def list_files(directory: str) -> list[str]:
        return BeamFileSystems.glob(directory.rstrip("/") + "/**")

    @staticmethod
    def listdir(directory: str) -> list[str]:
        # Beam's file systems list files only: a sub-directory is the first part of their names.
        return [path[len(directory.rstrip("/")) + 1:].split("/")[0]
                for path in BeamFileSystems.list_files(directory)]

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
        _beam_filesystems().rename([source], [BeamFileSystems._cleared(target)])

    @staticmethod
    def copy(source: str, target: str) -> None:
        _beam_filesystems().copy([source], [BeamFileSystems._cleared(target)])

    @staticmethod
    def _cleared(target: str) -> str:
        """`target`, deleted if it exists: not every Beam file system renames or copies over a
        file."""
        beam_fs = _beam_filesystems()
        if beam_fs.exists(target):
            beam_fs.delete([target])
        return target

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
