"""Runs run_pretraining.py with deterministic ops, optionally killing or signalling itself.

  python tests/support/pretraining_subprocess.py [--kill_at_checkpoint=N] [--kill_while_saving=N]
      [--signal_at_micro_batch=K] [--signal=SIGTERM|SIGINT] [--signal_again_while_saving]
      <run_pretraining flags>

--kill_at_checkpoint=N: SIGKILL (no clean-up of any kind) when the loop is about to write
checkpoint N: the steps since the previous checkpoint are lost, as when a machine dies. A
non-chief worker (its checkpoints go to a scratch directory) first waits until --output_dir names
the chief's checkpoint N: the chief is then past the step's collectives, which would otherwise
still be pulling the last buffers from this worker.
--kill_while_saving=N: SIGKILL in the middle of checkpoint N's save, its files written but not
yet named in output_dir/checkpoint.

--signal_at_micro_batch=K: sends --signal (default SIGTERM) to itself from inside the compiled
training step, while the K-th (micro-)batch's loss is computed; --signal_again_while_saving: the
same signal again as the preemption checkpoint is written (see preemption_signals.py).
"""

import os
import signal
import sys
import time

import tensorflow as tf

# The checkout (its run_pretraining.py) and tests/ (the `support` package).
TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.dirname(TESTS), TESTS]
import run_pretraining  # noqa: E402
from support import preemption_signals  # noqa: E402


def _wait_for_checkpoint(output_dir: str, checkpoint_number: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        latest = tf.train.latest_checkpoint(output_dir)
        if latest and latest.endswith(f"-{checkpoint_number}"):
            return
        time.sleep(0.05)


def _kill_at(checkpoint_number: int, output_dir: str) -> None:
    save = tf.train.CheckpointManager.save

    def save_or_die(self, *args, **kwargs):
        if kwargs.get("checkpoint_number", args[0] if args else None) == checkpoint_number:
            if os.path.abspath(self.directory) != os.path.abspath(output_dir):
                _wait_for_checkpoint(output_dir, checkpoint_number)
            os.kill(os.getpid(), signal.SIGKILL)
        return save(self, *args, **kwargs)
    tf.train.CheckpointManager.save = save_or_die


def _kill_while_saving(checkpoint_number: int) -> None:
    """SIGKILL once checkpoint N's files are complete but before `checkpoint` names it."""
    from tensorflow.python.checkpoint import checkpoint_management  # noqa: PLC0415
    update = checkpoint_management.update_checkpoint_state_internal

    def update_or_die(save_dir, model_checkpoint_path, *args, **kwargs):
        if model_checkpoint_path.endswith(f"-{checkpoint_number}"):
            os.kill(os.getpid(), signal.SIGKILL)
        return update(save_dir, model_checkpoint_path, *args, **kwargs)
    checkpoint_management.update_checkpoint_state_internal = update_or_die


def _take(argv: list, name: str) -> str | None:
    for arg in argv[1:]:
        if arg == f"--{name}" or arg.startswith(f"--{name}="):
            argv.remove(arg)
            return arg.split("=", 1)[1] if "=" in arg else "1"
    return None


if __name__ == "__main__":
    argv = list(sys.argv)
    kill_at = _take(argv, "kill_at_checkpoint")
    kill_while = _take(argv, "kill_while_saving")
    signal_at = _take(argv, "signal_at_micro_batch")
    number = getattr(signal, _take(argv, "signal") or "SIGTERM")
    if kill_at:
        output_dir = next(arg.split("=", 1)[1] for arg in argv if arg.startswith("--output_dir="))
        _kill_at(int(kill_at), output_dir)
    if kill_while:
        _kill_while_saving(int(kill_while))
    if signal_at:
        preemption_signals.signal_at_micro_batch(int(signal_at), number)
    if _take(argv, "signal_again_while_saving"):
        preemption_signals.signal_again_while_saving(number)
    tf.config.experimental.enable_op_determinism()
    sys.argv = argv
    run_pretraining.run()
