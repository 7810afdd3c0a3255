"""SavedModel exports are whole or absent under their name: a crash while the previous export is
removed, and a disk without room (a file-size limit, as `ulimit -f`)."""

import os
import resource
import signal

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.filesystem import full_disk, writer
from bert_tf.serving import saved_model


class _Scale(tf.Module):
    def __init__(self, factor: float, size: int = 4):
        super().__init__()
        self.weights = tf.Variable(np.full([size], factor, np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def serve(self, x):
        return {"y": x * self.weights[0]}


def _export(export_dir, factor, size=4):
    module = _Scale(factor, size)
    return saved_model.save(module, export_dir, {"serving_default": module.serve})


def _served(export_dir) -> float:
    loaded = tf.saved_model.load(export_dir)
    return float(loaded.signatures["serving_default"](tf.constant([1.0]))["y"][0])


class _Killed(BaseException):
    """A process stopped at this point (nothing after it runs)."""


def test_a_crash_while_the_previous_export_is_removed_leaves_a_whole_export(tmp_path,
                                                                             monkeypatch):
    export_dir = _export(str(tmp_path / "export"), 2.0)

    def killed_while_removing(path, *args, **kwargs):
        os.remove(os.path.join(path, "saved_model.pb"))
        raise _Killed
    monkeypatch.setattr(writer, "delete_tree", killed_while_removing)
    with pytest.raises(_Killed):
        _export(export_dir, 3.0)
    assert _served(export_dir) == 3.0  # the new export, whole


def test_an_export_that_does_not_fit_is_one_error_and_leaves_the_previous(tmp_path):
    export_dir = _export(str(tmp_path / "export"), 2.0)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, hard))
    try:
        with pytest.raises(full_disk.DiskFullError, match=f"^{export_dir}: file too large"):
            _export(export_dir, 3.0, size=100_000)  # 400 kB of weights
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    assert sorted(os.listdir(tmp_path)) == ["export"] and _served(export_dir) == 2.0
