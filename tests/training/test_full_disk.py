"""A file system out of room (a file-size limit, as `ulimit -f`) while checkpoints, the Google
export or eval_results.txt are written: one `error:` line naming the output, nothing left under
its name, and a rerun with room ends with the same weights as a run that always had it."""

import os

import pytest
import tensorflow as tf

from bert_tf.filesystem import full_disk
from bert_tf.checkpoints import name_map as checkpoints
from bert_tf.model import models
from bert_tf.model.config import BertConfig
from bert_tf.training import log as training_log
from support.pretraining_records import TINY_CONFIG, pretraining_arrays, write_records, \
    write_tiny_config
from support.pretraining_runs import ENV, HELPER, weights
from support.resource_limits import file_size_limit

LIMIT = 64 * 1024  # bytes: the tiny model's checkpoint data (weights + Adam slots) is larger


def _flags(directory, output_dir):
    return [f"--input_file={directory}/train.tfrecord", f"--output_dir={output_dir}",
            f"--bert_config_file={directory}/bert_config.json", "--max_seq_length=13",
            "--max_predictions_per_seq=5", "--do_train", "--train_batch_size=8",
            "--num_train_steps=4", "--num_warmup_steps=2", "--learning_rate=1e-3",
            "--save_checkpoints_steps=4", "--log_every_n_steps=4"]


def _run(directory, output_dir, limits=None):
    """run_pretraining.py through pretraining_subprocess.py (deterministic ops), as a forked
    `script_runner` command; `limits` as in ScriptRunner.run_all (files may not grow past
    {"file_size": bytes}: writes past it fail with EFBIG)."""
    return ([HELPER, *_flags(directory, output_dir)], str(directory), ENV, limits or {})


def test_a_checkpoint_that_does_not_fit_is_one_error_line_and_a_rerun_finishes(tmp_path,
                                                                              script_runner):
    write_records(tmp_path / "train.tfrecord", pretraining_arrays(64, 0))
    write_tiny_config(tmp_path)
    straight, limited = tmp_path / "straight", tmp_path / "limited"
    uninterrupted, starved = script_runner.run_all([
        _run(tmp_path, straight), _run(tmp_path, limited, {"file_size": LIMIT})])
    assert starved.returncode == 1, (starved.stdout + starved.stderr)[-3000:]
    assert starved.stderr.endswith(
        f"error: {limited}/ckpt-4: file too large (a file-size limit, e.g. ulimit -f) while "
        f"writing it (nothing was left under that name); free space and run the same command "
        f"again\n"), starved.stderr[-3000:]
    assert not [name for name in os.listdir(limited) if name.startswith("ckpt-4")]
    assert tf.train.latest_checkpoint(str(limited)) is None
    [rerun] = script_runner.run_all([_run(tmp_path, limited)])  # room again: the same command
    for run in (rerun, uninterrupted):
        assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    expected, got = weights(f"{straight}/ckpt-4"), weights(f"{limited}/ckpt-4")
    assert set(got) == set(expected)
    for name in expected:
        assert (got[name] == expected[name]).all(), name


def test_exports_and_eval_results_that_do_not_fit_leave_nothing(tmp_path):
    model = models.pretraining_model(BertConfig(**TINY_CONFIG))
    prefix = str(tmp_path / "google_checkpoint" / "bert_model.ckpt")
    results = str(tmp_path / "eval_results.txt")
    with file_size_limit(1024):
        with pytest.raises(full_disk.DiskFullError, match=f"^{prefix}: file too large"):
            checkpoints.export_google_checkpoint(model, prefix)
        with pytest.raises(full_disk.DiskFullError, match=f"^{results}: file too large"):
            training_log.write_eval_results(results, {"loss": 1.0, "x" * 2000: 2.0})
    assert os.listdir(tmp_path) == []
    checkpoints.export_google_checkpoint(model, prefix)  # room again
    assert sorted(os.listdir(tmp_path / "google_checkpoint")) == [
        "bert_config.json", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index"]
