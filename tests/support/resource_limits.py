"""Process resource limits for tests of what a full disk does."""

import contextlib
import resource
import signal


@contextlib.contextmanager
def file_size_limit(size: int):
    """This process's files may not grow past `size` bytes (writes fail with EFBIG)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
