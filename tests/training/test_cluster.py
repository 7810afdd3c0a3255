"""Two MultiWorkerMirroredStrategy workers on loopback: an uninterrupted pair writes one
checkpoint per save (the chief's); SIGTERM to one worker saves the same step on both and exits
75; relaunched, they resume to the weights of the uninterrupted pair; a worker killed with
kill -9 makes the other stop within --worker_timeout_seconds, naming it. Each worker is a
process of its own, forked by `script_runner` (its gRPC server and collectives created after
the fork)."""

import json
import os
import re
import signal
import socket

import pytest

from support.pretraining_records import (PRED, SEQ, pretraining_arrays, write_records,
                                         write_tiny_config)
from support.pretraining_runs import start, wait, weights

pytestmark = pytest.mark.heavy  # scheduled first: see conftest.py

EXIT_LINE = re.compile(r"^preempted: saved (\S+) at step (\d+); resume with the same command: ",
                       re.M)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _start_pair(runner, flags: list[str], worker_1_flags: tuple[str, ...] = ()) -> list:
    """Both workers of a loopback cluster; worker 1 (not the chief) also gets `worker_1_flags`."""
    workers = [f"localhost:{_free_port()}", f"localhost:{_free_port()}"]
    processes = []
    for index in range(2):
        tf_config = json.dumps({"cluster": {"worker": workers},
                                "task": {"type": "worker", "index": index}})
        extra = list(worker_1_flags) if index == 1 else []
        processes.append(start(runner, [*flags, *extra], env={"TF_CONFIG": tf_config}))
    return processes


def _wait_pair(processes, returncodes) -> list[str]:
    return [wait(process, returncode) for process, returncode in zip(processes, returncodes)]


@pytest.fixture(scope="module")
def flags(tmp_path_factory):
    """One Transformer layer: what the workers save, resume and report does not depend on the
    depth, and each of the six worker processes traces half the graph of two layers."""
    directory = tmp_path_factory.mktemp("cluster_data")
    train = write_records(directory / "train.tfrecord", pretraining_arrays(64, 0))
    config = write_tiny_config(directory, num_hidden_layers=1)
    return lambda output_dir: [
        f"--input_file={train}", f"--output_dir={output_dir}",
        f"--bert_config_file={config}", f"--max_seq_length={SEQ}",
        f"--max_predictions_per_seq={PRED}", "--do_train", "--train_batch_size=8",
        "--num_train_steps=12", "--num_warmup_steps=2", "--learning_rate=1e-3",
        "--save_checkpoints_steps=6", "--log_every_n_steps=100", "--worker_timeout_seconds=5",
        "--distribution_strategy=multi_worker_mirrored"]


class _UninterruptedPair:
    """A pair started at once, waited for by the first test that reads its output_dir."""

    def __init__(self, runner, flags, output_dir: str):
        self.output_dir = output_dir
        self.processes = _start_pair(runner, flags(output_dir))
        self.runs = None

    def finished(self) -> str:
        """output_dir, once both workers exited with status 0."""
        if self.runs is None:
            self.runs = [process.wait(timeout=600)[0] for process in self.processes]
        for run in self.runs:
            assert run.returncode == 0, run.stdout[-3000:]
        return self.output_dir

    def stop(self) -> None:
        if self.runs is None:
            for process in self.processes:
                process.kill()


@pytest.fixture(scope="module")
def uninterrupted(flags, tmp_path_factory, script_runner):
    """12 steps with a checkpoint at steps 6 and 12: the resume test's reference and the run
    whose files the one-checkpoint test reads (it runs alongside the resume test's pairs)."""
    pair = _UninterruptedPair(script_runner, flags, str(tmp_path_factory.mktemp("straight")))
    yield pair
    pair.stop()


def test_sigterm_to_one_worker_then_a_lost_worker_resume_exactly(flags, uninterrupted, tmp_path,
                                                                  script_runner):
    resumed = str(tmp_path / "resumed")
    # SIGTERM reaches worker 1 during its 3rd step: both workers save one step after the step
    # in flight, the chief into output_dir, and exit 75 naming the same step.
    outputs = _wait_pair(_start_pair(script_runner, flags(resumed),
                                     ("--signal_at_micro_batch=3",)), (75, 75))
    saved = [EXIT_LINE.findall(output) for output in outputs]
    assert saved[0] == saved[1] and len(saved[0]) == 1, saved
    step = int(saved[0][0][1])
    assert step in (4, 5) and saved[0][0][0] == f"{resumed}/ckpt-{step}"
    assert sorted(n for n in os.listdir(resumed) if n.endswith(".index")) == [
        f"ckpt-{step}.index"]

    # Relaunched, the pair resumes; worker 1 then dies (kill -9) as it reaches step 6's
    # checkpoint, after the chief wrote it: the chief stops with one line naming the lost task.
    outputs = _wait_pair(_start_pair(script_runner, flags(resumed), ("--kill_at_checkpoint=6",)),
                         (1, -signal.SIGKILL))
    assert f"error: lost worker /job:worker/replica:0/task:1 (no heartbeat within " \
           f"--worker_timeout_seconds, or it failed); relaunch every worker with the same " \
           f"command to resume from {resumed}/ckpt-6\n" in outputs[0], outputs[0][-3000:]
    assert "Traceback" not in outputs[0]
    expected = weights(f"{uninterrupted.finished()}/ckpt-6")
    got = weights(f"{resumed}/ckpt-6")
    assert set(got) == set(expected) and any(name.startswith("optimizer/") for name in got)
    for name in expected:
        assert (got[name] == expected[name]).all(), name


def test_two_workers_on_loopback_write_one_checkpoint(uninterrupted):
    """Both workers save at every checkpoint step, the non-chief into a scratch directory: only
    the chief's checkpoints and summaries are in output_dir. (The pair runs run_pretraining.py
    through pretraining_subprocess.py: its main() with deterministic ops, no other change.)"""
    output_dir = uninterrupted.finished()
    assert sorted(name for name in os.listdir(output_dir) if name.endswith(".index")) == [
        "ckpt-12.index", "ckpt-6.index"]
    assert weights(f"{output_dir}/ckpt-12")["global_step/.ATTRIBUTES/VARIABLE_VALUE"] == 12
    assert os.listdir(os.path.join(output_dir, "train"))  # summaries: the chief's only
