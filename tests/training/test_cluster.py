"""Two MultiWorkerMirroredStrategy workers on loopback: SIGTERM to one of them saves the same
step on both and exits 75; relaunched, they resume to the weights of an uninterrupted pair; a
worker killed with kill -9 makes the other stop within --worker_timeout_seconds, naming it.
Each worker is a process of its own, forked by `script_runner` (its gRPC server and collectives
created after the fork)."""

import json
import os
import re
import signal
import socket

import pytest

from pretraining_records import PRED, SEQ, pretraining_arrays, write_records, write_tiny_config
from pretraining_runs import start, wait, weights

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
    directory = tmp_path_factory.mktemp("cluster_data")
    train = write_records(directory / "train.tfrecord", pretraining_arrays(64, 0))
    return lambda output_dir: [
        f"--input_file={train}", f"--output_dir={output_dir}",
        f"--bert_config_file={write_tiny_config(directory)}", f"--max_seq_length={SEQ}",
        f"--max_predictions_per_seq={PRED}", "--do_train", "--train_batch_size=8",
        "--num_train_steps=12", "--num_warmup_steps=2", "--learning_rate=1e-3",
        "--save_checkpoints_steps=6", "--log_every_n_steps=100", "--worker_timeout_seconds=10",
        "--distribution_strategy=multi_worker_mirrored"]


def test_sigterm_to_one_worker_then_a_lost_worker_resume_exactly(flags, tmp_path,
                                                                  script_runner):
    straight, resumed = str(tmp_path / "straight"), str(tmp_path / "resumed")
    uninterrupted = _start_pair(script_runner, flags(straight))
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
    _wait_pair(uninterrupted, (0, 0))
    expected, got = weights(f"{straight}/ckpt-6"), weights(f"{resumed}/ckpt-6")
    assert set(got) == set(expected) and any(name.startswith("optimizer/") for name in got)
    for name in expected:
        assert (got[name] == expected[name]).all(), name
