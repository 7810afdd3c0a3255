"""One run per output directory: a lock held for the run's life, and the cleanup of dead runs' files.

`output_lock(path)` takes an exclusive `filelock` lock (flock(2) on Unix) on `<dir>/.bert_tf.lock`
and notes the holder (host, pid, start time, command line) in `<dir>/.bert_tf.lock.owner.json`;
both are deleted when the run ends.
A second run on the same directory stops at once with one `error:` line naming the holder. The
operating system releases the lock when its process dies however it dies (kill -9, power loss
of a local disk), so a lock left by a dead run is taken over: the owner file it left says who it
was, in one log line. Once the lock is held, the temporaries that dead runs left in the
directory are deleted (`remove_dead_temporaries`).

Paths with a scheme (gs://, s3://): object stores have no locks. The lock is then a local file
named after the path (under the system's temporary directory), which keeps out a second run on
the same machine only; runs on other machines are not seen (one log line says so).

Multi-worker training (TF_CONFIG): only the chief takes the lock; the other workers share the
chief's output directory by design.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import hashlib
import json
import os
import re
import signal
import socket
import sys
import tempfile
from typing import ContextManager, Iterator

import filelock
from absl import logging

from bert_tf import filesystem
from bert_tf.errors import UserError
from bert_tf.training.cluster import tf_config

LOCK_NAME = ".bert_tf.lock"
OWNER_SUFFIX = ".owner.json"
# Temporaries: the one writer's (`filesystem.TEMPORARY_NAME`) and TensorFlow's sharded
# checkpoint save (`ckpt-N_temp/`).
_CHECKPOINT_TEMPORARY = re.compile(r"^ckpt-\d+_temp$")

def is_chief_process() -> bool:
    """False on the non-chief tasks of a TF_CONFIG cluster (they share the chief's directory)."""
    try:
        config = tf_config()
    except ValueError:
        return True
    task = config.get("task") or {}
    kind, index = task.get("type"), int(task.get("index", 0) or 0)
    if not kind:
        return True
    return kind == "chief" or (kind == "worker" and index == 0 and "chief" not in config.get("cluster", {}))


def lock_path(directory: str, name: str = LOCK_NAME) -> str:
    """The local lock file for `directory` (see the module docstring for scheme paths)."""
    if filesystem.scheme(directory):
        digest = hashlib.sha256(filesystem.join(directory, name).encode()).hexdigest()[:24]
        return os.path.join(tempfile.gettempdir(), "bert_tf-locks", digest + ".lock")
    return os.path.join(directory, name)


@contextlib.contextmanager
def output_lock(directory: str, flag: str = "--output_dir", name: str = LOCK_NAME,
                clean: bool = True) -> Iterator[None]:
    """Holds the lock of `directory` (created if needed) for the body's life.

    Args:
      directory: the run's output directory (local or scheme://).
      flag: the flag that named it, for the error message.
      name: the lock file's name in the directory (`create_pretraining_data` locks per output).
      clean: delete the temporaries of dead runs at the top of `directory` once the lock is held
        (False where the directory may be shared with runs under other locks).

    Raises:
      UserError: another live run holds it (the message names its host, pid, start and command).
    """
    if not is_chief_process():
        yield
        return
    path = lock_path(directory, name)
    if not filesystem.scheme(directory) and os.path.exists(directory) and not os.path.isdir(directory):
        raise UserError(f"{flag}={directory} is an existing file, not a directory: give a "
                        "directory (created if missing)")
    if filesystem.scheme(directory) and not _local_lock_noted:
        _note_local_lock(flag, directory, path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    # No soft (existence) lock where flock(2) is missing: it would outlive a killed run.
    lock = filelock.FileLock(path, timeout=0, fallback_to_soft=False)
    owner = path + OWNER_SUFFIX
    try:
        lock.acquire()
    except filelock.Timeout:
        raise UserError(f"{flag}={directory} is in use by another run ({_describe(owner)}); wait for "
                        f"it to end or give another {flag}") from None
    except OSError as e:
        if e.errno not in (errno.ENOSYS, errno.ENOTSUP, errno.ENOLCK):
            raise
        logging.warning("%s: the file system of %s has no file locks (%s); this run is not "
                        "protected from a second one", flag, path, e.strerror)
        yield
        return
    try:
        if os.path.exists(owner):
            logging.warning("%s: taking over the lock left by a run that is no longer running (%s)",
                            directory, _describe(owner))
        _write_owner(owner)
        if clean and not filesystem.scheme(directory):
            remove_dead_temporaries(directory)
        yield
    finally:
        # Unlinked while still held: a contender that opened the old file finds it unlinked once
        # it gets the flock and starts over (filelock checks the inode), so nothing is left behind.
        for leftover in (owner, path):
            with contextlib.suppress(OSError):
                os.remove(leftover)
        lock.release()


def output_file_lock(path: str, flag: str) -> ContextManager[None]:
    """The lock of a run that writes the file `path` rather than a whole directory (e.g.
    create_pretraining_data.py's first output): `.<name>.lock` beside it, and no cleaning, since
    the directory may hold other runs' outputs, each under its own lock."""
    return output_lock(filesystem.dirname(path), flag, f".{filesystem.basename(path)}.lock",
                       clean=False)


_local_lock_noted = False


def _note_local_lock(flag: str, directory: str, path: str) -> None:
    """Says once per process that the lock of an object-store directory is a local file."""
    global _local_lock_noted
    _local_lock_noted = True
    logging.info("%s: %s is on a file system without locks (an object store): the run lock stays "
                 "on this machine (%s), so runs on other machines are not kept out", flag, directory, path)


def _write_owner(owner: str) -> None:
    # parent_pid: a run whose parent has since died is an orphan (`stop_orphaned_run`).
    info = {"host": socket.gethostname(), "pid": os.getpid(), "parent_pid": os.getppid(),
            "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(sys.argv)}
    filesystem.write_atomically(owner, json.dumps(info))


def _describe(owner: str) -> str:
    """'pid 123 on host h since <time>: <command>' from the owner file, or what is known."""
    try:
        info = _read_owner(owner)
        return (f"pid {info['pid']} on host {info['host']} since {info['started']}: "
                f"{info['command']}")
    except (OSError, ValueError, KeyError, TypeError):
        return f"holder not recorded in {owner} yet"


def _read_owner(owner: str) -> dict:
    with open(owner, encoding="utf-8") as f:
        return json.load(f)


def _parent_of(pid: int) -> int | None:
    """The parent pid of a live process (Linux's /proc), or None when unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            # "pid (command) state ppid ...": the command may hold spaces and parentheses.
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _is_orphan(info: dict) -> bool:
    """Whether the holder described by an owner file runs on this host and its parent process
    (the one that started it, e.g. a search) has died since."""
    if info.get("host") != socket.gethostname() or "parent_pid" not in info:
        return False
    parent = _parent_of(int(info["pid"]))
    if parent is not None:
        return parent != int(info["parent_pid"])  # re-parented: the first parent is gone
    try:
        os.kill(int(info["parent_pid"]), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def stop_orphaned_run(directory: str, name: str = LOCK_NAME) -> bool:
    """Ends the run holding the lock of `directory` if it is an orphan: a run on this host whose
    parent has died (the trial of a search that was killed). It is sent SIGTERM, on which the
    training loop saves the step in flight and exits, and this call waits until the lock is
    free. A lock that is free, or held by a run whose parent lives (a run started by hand), is
    left alone.

    Returns:
      Whether an orphan held the lock (and has released it now).
    """
    path = lock_path(directory, name)
    if not os.path.exists(path):
        return False
    lock = filelock.FileLock(path, timeout=0, fallback_to_soft=False)
    try:
        lock.acquire()
    except filelock.Timeout:
        pass
    except OSError:
        return False  # no file locks here: nothing can be known of a holder
    else:
        lock.release()  # free: whoever comes next takes it (over) as usual
        return False
    try:
        info = _read_owner(path + OWNER_SUFFIX)
    except (OSError, ValueError):
        return False
    if not _is_orphan(info):
        return False
    logging.warning("%s is held by pid %s, whose parent (pid %s, e.g. a killed search) is gone: "
                    "sending it SIGTERM (a training run saves the step in flight) and waiting "
                    "for it to end", directory, info["pid"], info["parent_pid"])
    with contextlib.suppress(ProcessLookupError):
        os.kill(int(info["pid"]), signal.SIGTERM)
    lock.acquire(timeout=-1)
    try:
        # Unlinked while held, as output_lock leaves it: the next run creates its own.
        with contextlib.suppress(OSError):
            os.remove(path)
    finally:
        lock.release()
    logging.info("%s: pid %s has ended", directory, info["pid"])
    return True


def remove_dead_temporaries(directory: str) -> list[str]:
    """Deletes the temporaries at the top of `directory`; call with its lock
    held, when no live run can be writing them. Returns what was deleted (each is logged)."""
    removed = []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return removed
    for name in sorted(names):
        temporary = filesystem.TEMPORARY_NAME.match(name)
        if not (temporary or _CHECKPOINT_TEMPORARY.match(name)):
            continue
        path = os.path.join(directory, name)
        if temporary and temporary.group(2) == "old" and not os.path.exists(os.path.join(directory, temporary.group(1))):
            # A kill between a replacement's two renames leaves the previous copy only here.
            logging.warning("Keeping %s: %s is missing, so it may be that output's only copy",
                            path, temporary.group(1))
            continue
        logging.info("Deleting %s, left by a run that did not finish", path)
        filesystem.delete_any(path)
        removed.append(path)
    return removed
