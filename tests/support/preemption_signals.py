"""Signals sent at chosen moments of a training run, as a cluster's preemption notice arrives.

`signal_at_micro_batch(K, SIGTERM)` sends the signal to this process from inside the compiled
training step, while the K-th (micro-)batch's pretraining loss is computed (K counts from 1 over
the run; with gradient accumulation over A micro-batches, K % A != 1 lands in the middle of an
accumulation window). `signal_again_while_saving(SIGTERM)` sends it once more as each checkpoint
after that is written. Both patch classes: undo them with `restore()` (or run in a subprocess).
"""

import os
import time

import tensorflow as tf

from bert_tf.tasks.pretraining import task as pretraining_task

_ORIGINALS = {"losses": pretraining_task.PretrainingTask.losses,
              "save": tf.train.CheckpointManager.save}
_SENT: list[int] = []


def signal_at_micro_batch(micro_batch: int, number: int) -> None:
    calls = [0]

    def count_and_signal():
        calls[0] += 1
        if calls[0] == micro_batch:
            _SENT.append(number)
            os.kill(os.getpid(), number)
            # A step in flight longer than the notice's way to the loop, as BERT's steps are
            # (a loaded test machine may take a while to schedule the thread that carries it).
            time.sleep(1.0)
        return 0

    def losses(self, features, outputs):
        values = _ORIGINALS["losses"](self, features, outputs)
        done = tf.py_function(count_and_signal, [], tf.int32)
        with tf.control_dependencies([done]):
            return {name: tf.identity(value) for name, value in values.items()}
    pretraining_task.PretrainingTask.losses = losses


def signal_again_while_saving(number: int) -> None:
    def save(self, *args, **kwargs):
        if _SENT:  # the preemption checkpoint, not the periodic ones before the first signal
            os.kill(os.getpid(), number)
        return _ORIGINALS["save"](self, *args, **kwargs)
    tf.train.CheckpointManager.save = save


def restore() -> None:
    pretraining_task.PretrainingTask.losses = _ORIGINALS["losses"]
    tf.train.CheckpointManager.save = _ORIGINALS["save"]
    _SENT.clear()
