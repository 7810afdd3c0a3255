"""A preemption notice (SIGTERM, or SIGINT = Ctrl-C) → a checkpoint at the current step → Preempted.

The training loop (`bert_tf.training.loop.train`) opens a `PreemptionWatch` around its steps:

- TensorFlow's `tf.distribute.experimental.PreemptionCheckpointHandler` watches for SIGTERM and,
  for MultiWorkerMirroredStrategy, agrees through the coordination service on the loop call
  after which every worker saves; its `TerminationConfig` calls back `save` (a checkpoint of the
  loop, numbered by the global step, as the periodic ones) and `exit` (raises
  `bert_tf.errors.Preempted`, whose one line the scripts print before exiting with status
  PREEMPTED_STATUS). SIGINT is routed to the same handler.
- A loop call may hold many steps (--iterations_per_loop), and Python runs signal handlers only
  between calls. So the signal also wakes a thread (Python's wakeup fd) that raises `notice`, a
  variable the compiled loop reads after every step: the call ends after the step in flight
  (`bert_tf.training.steps.make_train_loop` sums the notices of all workers, so all stop
  together), and the handler's protocol then runs one more step and saves: no finished step is
  lost.
- Where the handler does not watch SIGTERM (it is documented as inert on GCP CPU and TPU VMs), the
  notice is handled here the same way: save after the call the notice ended, raise.

The signal handlers, the wakeup fd and `threading.excepthook` are the caller's again when the
watch closes.

A second notice while saving is absorbed (the handler only records it); SIGKILL remains the way
to stop at once, and a checkpoint interrupted by it is never chosen on resume (see
docs/cluster.md).
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import shlex
import signal
import socket
import sys
import threading
from typing import Callable, Iterator

import tensorflow as tf
from absl import logging

from bert_tf.errors import PREEMPTED_STATUS, Preempted, UserError

__all__ = ["PREEMPTED_STATUS", "Preempted", "LostWorkerError", "PreemptionWatch",
           "lost_workers_named", "resume_command"]
NOTICE_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_TASK = re.compile(r"/job:\w+/replica:\d+/task:\d+")


class LostWorkerError(UserError):
    """Another worker of a multi-worker job stopped (killed, crashed, its host gone)."""


@contextlib.contextmanager
def lost_workers_named(output_dir: str):
    """Turns the errors collectives fail with when a worker is gone into one LostWorkerError
    naming it and saying how to resume. The coordination service reports a worker silent for
    --worker_timeout_seconds to every other worker, which then ends up here."""
    try:
        yield
    except (tf.errors.UnavailableError, tf.errors.AbortedError,
            tf.errors.DeadlineExceededError) as error:
        tasks = sorted(set(_TASK.findall(error.message)))
        if not tasks:
            raise
        checkpoint = tf.train.latest_checkpoint(output_dir) or "the start (no checkpoint yet)"
        raise LostWorkerError(
            f"lost worker {', '.join(tasks)} (no heartbeat within --worker_timeout_seconds, or "
            f"it failed); relaunch every worker with the same command to resume from "
            f"{checkpoint}") from error


@contextlib.contextmanager
def _quiet_lost_peer_watcher() -> Iterator[None]:
    """TensorFlow's handler watches its peers from a thread that dies with a traceback when the
    coordination service goes away with a lost worker; the main thread reports that worker in
    one line (`lost_workers_named`), so that thread's end is logged in one line too. The
    previous `threading.excepthook` is back on leaving."""
    previous = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        if (args.thread is not None and args.thread.name.startswith("PeerTerminationWatcher")
                and isinstance(args.exc_value, tf.errors.UnavailableError)):
            logging.info("%s stopped: %s", args.thread.name,
                         args.exc_value.message.splitlines()[0])
            return
        previous(args)
    threading.excepthook = hook
    try:
        yield
    finally:
        threading.excepthook = previous


def resume_command() -> str:
    """The command line of this process, to run again (the same command resumes)."""
    return shlex.join([os.path.basename(sys.executable), *sys.argv])


class PreemptionWatch:
    """Watches for a preemption notice while the loop trains; use as a context manager.

    Args:
        strategy: the run's strategy (its `cluster_resolver`, if any, names this worker).
        save: `save(step)` writes the loop's checkpoint at global step `step` (once per step).
        output_dir: where the chief's checkpoints go (named in the exit line).
    """

    def __init__(self, strategy: tf.distribute.Strategy, save: Callable[[int], None],
                 output_dir: str):
        self._save_checkpoint = save
        self._output_dir = output_dir
        self._saved_step: int | None = None
        self._step: int | None = None
        # Read by the compiled loop after every step; this process's own (not mirrored).
        self.notice = tf.Variable(0.0, trainable=False, name="preemption_notice")
        # Python delivers signals to the main thread only: a loop run from another thread (a
        # notebook's worker, a server) leaves them to its caller.
        self._active = threading.current_thread() is threading.main_thread()
        self._received: list[int] = []
        if not self._active:
            return
        self._previous = {number: signal.getsignal(number) for number in NOTICE_SIGNALS}
        self._quiet_watcher = _quiet_lost_peer_watcher()
        self._quiet_watcher.__enter__()
        self._handler = tf.distribute.experimental.PreemptionCheckpointHandler(
            getattr(strategy, "cluster_resolver", None),
            # The handler restores and counts loop calls in a checkpoint of its own; ours are
            # written by `save` (save_fn), so this one stays empty and is never written.
            tf.train.CheckpointManager(tf.train.Checkpoint(),
                                       os.path.join(output_dir, "preemption_handler"), 1),
            termination_config=tf.distribute.experimental.TerminationConfig(
                exit_fn=self._exit, save_fn=self._save))
        # The handler asks GCP's metadata server where it runs; off GCP the failed request
        # leaves a reference cycle (exceptions and their frames) whose frames reach this call's
        # callers through f_back, so train()'s model and optimizer slots would outlive train()
        # until the next full collection. The cycle is young: collecting the two young
        # generations frees it in well under a millisecond.
        gc.collect(1)
        sigterm = signal.getsignal(signal.SIGTERM)
        self._tf_watches = sigterm is not self._previous[signal.SIGTERM]
        handler = sigterm if self._tf_watches else _absorb
        for number in NOTICE_SIGNALS:
            signal.signal(number, handler)
        self._start_wakeup_thread()

    def __enter__(self) -> "PreemptionWatch":
        return self

    def __exit__(self, error_type, *_) -> None:
        if self._active:
            self._record(self._pending_signals())
        if error_type is None and self._received:
            # The notice came as the last steps ran: their checkpoint is the final one. Exit as
            # for any notice; the same command then runs what follows training (eval, export).
            self._saved_step = self._step
            self._exit()
        self.close()

    def close(self) -> None:
        """Gives the signals (and threading.excepthook) back to their previous handlers."""
        if not self._active or self._wakeup_write.fileno() < 0:
            return
        signal.set_wakeup_fd(self._previous_wakeup_fd)
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._wakeup_write.close()
        self._quiet_watcher.__exit__(None, None, None)

    def after_call(self, step: int, stopped: bool) -> None:
        """After each loop call: saves and exits if a notice (of any worker) asks for it.

        Args:
            step: the global step reached.
            stopped: whether the call ended early on a notice (the same on every worker).
        """
        if not self._active:
            return
        self._step = step
        if self._tf_watches:
            self._handler.save_checkpoint_if_preempted(step)
        elif stopped:
            self._save(step)
            self._exit()

    def _start_wakeup_thread(self) -> None:
        # The C-level handler writes the signal number to this socket even while the main
        # thread runs a compiled loop; the thread then raises the variable that loop reads.
        self._wakeup_read, self._wakeup_write = socket.socketpair()
        self._wakeup_write.setblocking(False)
        self._previous_wakeup_fd = signal.set_wakeup_fd(self._wakeup_write.fileno(),
                                                        warn_on_full_buffer=False)

        def watch() -> None:
            with self._wakeup_read:
                while data := self._wakeup_read.recv(16):
                    self._record(data)
        threading.Thread(target=watch, name="PreemptionNotice", daemon=True).start()

    def _pending_signals(self) -> bytes:
        """Signal numbers written but not yet read by the thread (it may not have run yet)."""
        try:
            return self._wakeup_read.recv(64, socket.MSG_DONTWAIT)
        except (BlockingIOError, OSError):
            return b""

    def _record(self, data: bytes) -> None:
        received = [number for number in NOTICE_SIGNALS if number in data]
        if received:
            self._received.extend(received)
            self.notice.assign(1.0)

    def _save(self, step: int) -> None:
        self._save_checkpoint(step)
        self._saved_step = step

    def _exit(self) -> None:
        step = self._saved_step
        path = os.path.join(self._output_dir, f"ckpt-{step}")
        message = (f"preempted: saved {path} at step {step}; resume with the same command: "
                   f"{resume_command()}")
        logging.info(message)
        self.close()
        self._received.clear()  # handled: saved
        raise Preempted(message)


def _absorb(signum: int, frame) -> None:
    """A notice where TensorFlow's handler does not watch: the wakeup thread acts on it."""
    del signum, frame
