"""An in-memory Apache Beam file system, `memfs://`, for tests: Beam finds `FileSystem` subclasses
by their scheme once they are imported, and only Beam knows this one (tf.io.gfile does not), so a
run that reads and writes `memfs://` paths proves that they went through Beam's `FileSystems`.

It behaves as an object store (GCS, S3): no directories, an object appears when its writer is
closed. The objects live in `FILES` of the importing process, so pipelines that use it must run
in that process (the DirectRunner's default in-memory mode).
"""

from __future__ import annotations

import io
import posixpath
import threading
import time

from apache_beam.io.filesystem import BeamIOError, FileMetadata, FileSystem

SCHEME = "memfs"
FILES: dict[str, tuple[bytes, float]] = {}  # path -> (content, last update in seconds)
_LOCK = threading.Lock()


class _Writer(io.BytesIO):
    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def close(self) -> None:
        if not self.closed:
            with _LOCK:
                FILES[self.path] = (self.getvalue(), time.time())
        super().close()


class MemoryFileSystem(FileSystem):
    """`memfs://bucket/name` objects in `FILES`."""

    @classmethod
    def scheme(cls) -> str:
        return SCHEME

    def join(self, basepath: str, *paths: str) -> str:
        return posixpath.join(basepath, *paths)

    def split(self, path: str) -> tuple[str, str]:
        return posixpath.split(path)

    def mkdirs(self, path: str) -> None:
        pass  # an object store has no directories

    def has_dirs(self) -> bool:
        return False

    def _list(self, dir_or_prefix: str):
        with _LOCK:
            items = [(path, value) for path, value in FILES.items() if path.startswith(dir_or_prefix)]
        for path, (data, updated) in items:
            yield FileMetadata(path, len(data), updated)

    def create(self, path, mime_type="application/octet-stream", compression_type=None):
        return _Writer(path)

    def open(self, path, mime_type="application/octet-stream", compression_type=None):
        return io.BytesIO(self._get(path)[0])

    def copy(self, source_file_names, destination_file_names):
        for source, target in zip(source_file_names, destination_file_names):
            FILES[target] = self._get(source)

    def rename(self, source_file_names, destination_file_names):
        self.copy(source_file_names, destination_file_names)
        self.delete(source_file_names)

    def exists(self, path: str) -> bool:
        return path in FILES

    def size(self, path: str) -> int:
        return len(self._get(path)[0])

    def last_updated(self, path: str) -> float:
        return self._get(path)[1]

    def checksum(self, path: str) -> str:
        return str(hash(self._get(path)[0]))

    def metadata(self, path: str) -> FileMetadata:
        data, updated = self._get(path)
        return FileMetadata(path, len(data), updated)

    def delete(self, paths) -> None:
        with _LOCK:
            for path in paths:
                if FILES.pop(path, None) is None:
                    raise BeamIOError("Delete operation failed", {path: FileNotFoundError(path)})

    @staticmethod
    def _get(path: str) -> tuple[bytes, float]:
        try:
            return FILES[path]
        except KeyError:
            raise BeamIOError("no such object", {path: FileNotFoundError(path)}) from None
