"""A preemption notice (SIGTERM, or SIGINT = Ctrl-C) while training: a checkpoint at the step
reached, `Preempted` with one line naming it and the command (the scripts exit with status 75:
tests/training/test_cluster.py), the caller's hooks back, and the same command resumes to
the weights of an uninterrupted run (one device with dynamic masking and gradient accumulation;
MirroredStrategy on two CPU devices, with a second signal during the save)."""

from support.distribute_utils import configure_two_cpus, two_cpu_strategy

configure_two_cpus()  # before TensorFlow starts (pytest imports every test module first)

import http.server  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from support import preemption_signals  # noqa: E402
from bert_tf import cli  # noqa: E402
from bert_tf.tasks.pretraining import task as pretraining_task  # noqa: E402
from bert_tf.training import loop as training, preemption  # noqa: E402
from support.pretraining_records import PRED, SEQ, pretraining_arrays, write_records, \
    write_tiny_config, write_unmasked_records  # noqa: E402
from support.pretraining_runs import weights  # noqa: E402

pytestmark = pytest.mark.heavy  # scheduled first: see conftest.py

EXIT_LINE = re.compile(r"^preempted: saved (\S+) at step (\d+); resume with the same command: "
                       r"(.+)$", re.M)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """One Transformer layer: a resume is exact or not whatever the depth, and each run traces
    and optimizes half the graph of two layers."""
    directory = tmp_path_factory.mktemp("preemption_data")
    return {"static": write_records(directory / "train.tfrecord", pretraining_arrays(64, 0)),
            "unmasked": write_unmasked_records(directory / "unmasked.tfrecord", 40, 2),
            "config": write_tiny_config(directory, num_hidden_layers=1)}


@pytest.fixture
def unhandled_signals_fail():
    """Without the loop's handling a notice would end pytest itself: make it fail the test."""
    def fail(number, frame):
        raise AssertionError(f"signal {number} reached the default handling")
    previous = {number: signal.signal(number, fail) for number in preemption.NOTICE_SIGNALS}
    yield fail
    preemption_signals.restore()
    for number, handler in previous.items():
        signal.signal(number, handler)


def _train(data, output_dir, input_file, strategy=None, accumulation=2):
    """12 steps of 8 sequences (in `accumulation` micro-batches); no periodic checkpoint before
    the end."""
    options = pretraining_task.PretrainingOptions(
        input_file=data[input_file], bert_config_file=data["config"], max_seq_length=SEQ,
        max_predictions_per_seq=PRED, do_train=True)
    config = training.RunConfig(output_dir=str(output_dir), train_batch_size=8,
                                num_train_steps=12, num_warmup_steps=2, learning_rate=1e-3,
                                save_checkpoints_steps=100, log_every_n_steps=100,
                                gradient_accumulation_steps=accumulation)
    return pretraining_task.run_pretraining(options, config,
                                            strategy or tf.distribute.get_strategy())


def _preempted(capsys, data, output_dir, input_file, strategy=None, accumulation=2) -> int:
    """Runs until the notice; checks the exception's line and that the process's hooks are the
    caller's again; returns the step saved."""
    excepthook = threading.excepthook
    with pytest.raises(preemption.Preempted) as preempted:
        _train(data, output_dir, input_file, strategy, accumulation)
    assert threading.excepthook is excepthook
    assert "preempted" not in capsys.readouterr().err  # the script prints it, not the library
    lines = EXIT_LINE.findall(str(preempted.value))
    assert len(lines) == 1, lines
    path, step, command = lines[0]
    assert path == f"{output_dir}/ckpt-{step}" and command == preemption.resume_command()
    assert tf.train.latest_checkpoint(str(output_dir)) == path
    # The traceback holds train()'s frame: free its model and input iterator now, not at a
    # later full collection that a tf.data iterator can hold up for seconds.
    traceback.clear_frames(preempted.tb)
    return int(step)


def _assert_same_weights(straight, resumed):
    expected, got = weights(f"{straight}/ckpt-12"), weights(f"{resumed}/ckpt-12")
    assert set(got) == set(expected) and any(name.startswith("optimizer/") for name in got)
    assert any(name.startswith("rng/") for name in got)  # dropout RNG states
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


def test_sigterm_mid_accumulation_window_saves_and_resumes_exactly(
        data, tmp_path, capsys, unhandled_signals_fail):
    """Dynamic masking; SIGTERM during the first of step 6's two micro-batches."""
    _train(data, tmp_path / "straight", "unmasked")
    preemption_signals.signal_at_micro_batch(11, signal.SIGTERM)
    step = _preempted(capsys, data, tmp_path / "resumed", "unmasked")
    # The step in flight ends the compiled loop; TensorFlow's handler saves one step later.
    assert step in (7, 8)
    preemption_signals.restore()
    _train(data, tmp_path / "resumed", "unmasked")  # the same command again
    _assert_same_weights(tmp_path / "straight", tmp_path / "resumed")


def test_sigint_twice_under_mirrored_strategy_saves_once_and_resumes_exactly(
        data, tmp_path, capsys, unhandled_signals_fail):
    """Two replicas: the 7th loss is step 4's; Ctrl-C again during the save does not interrupt
    it."""
    strategy = two_cpu_strategy()
    _train(data, tmp_path / "straight", "static", strategy, accumulation=1)
    preemption_signals.signal_at_micro_batch(7, signal.SIGINT)
    preemption_signals.signal_again_while_saving(signal.SIGINT)
    step = _preempted(capsys, data, tmp_path / "resumed", "static", strategy, accumulation=1)
    assert step in (5, 6)
    preemption_signals.restore()
    _train(data, tmp_path / "resumed", "static", strategy, accumulation=1)
    _assert_same_weights(tmp_path / "straight", tmp_path / "resumed")
    # After training the signals are the caller's again (eval and export may follow).
    assert signal.getsignal(signal.SIGINT) is unhandled_signals_fail
    assert signal.getsignal(signal.SIGTERM) is unhandled_signals_fail


class _MetadataServer(http.server.BaseHTTPRequestHandler):
    """Answers as Google Cloud's metadata server does to TensorFlow's "am I on GCP?" request."""

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"a-gce-vm")

    def log_message(self, *args):
        pass


def test_where_tensorflows_handler_is_inert_the_loop_saves_and_exits_itself(
        data, tmp_path, capsys, unhandled_signals_fail, monkeypatch):
    """On a Google Cloud CPU or TPU VM TensorFlow's handler does nothing (its documented
    limitation); the notice still ends the loop after the step in flight, which is saved."""
    server = http.server.HTTPServer(("127.0.0.1", 0), _MetadataServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("GCE_METADATA_IP", f"127.0.0.1:{server.server_port}")
    try:
        preemption_signals.signal_at_micro_batch(6, signal.SIGTERM)
        step = _preempted(capsys, data, tmp_path / "gce", "static", accumulation=1)
    finally:
        server.shutdown()
    assert step in (6, 7)  # no extra step: saved right after the call the notice ended
    assert weights(tmp_path / f"gce/ckpt-{step}")["global_step/.ATTRIBUTES/VARIABLE_VALUE"] == step


def test_scripts_print_the_preempted_line_and_exit_75(monkeypatch, capsys):
    """`cli.run_main` (every script's `run`) turns the library's Preempted into status 75."""
    line = "preempted: saved /out/ckpt-7 at step 7; resume with the same command: python x.py"

    def main(argv):
        raise preemption.Preempted(line)
    monkeypatch.setattr("sys.argv", ["x.py"])
    with pytest.raises(SystemExit) as exit_info:
        cli.run_main(main)
    assert exit_info.value.code == preemption.PREEMPTED_STATUS == 75
    assert capsys.readouterr().err.splitlines() == [line]
