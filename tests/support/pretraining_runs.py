"""run_pretraining.py (through pretraining_subprocess.py) in a process of its own, forked by the
session's `script_runner`, and the values of the checkpoints it writes, for the tests that kill,
signal or starve a run and compare its end."""

import os

import tensorflow as tf

from support.script_runs import Batch, ScriptRunner

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))  # tests/support/..
HELPER = os.path.join(ROOT, "tests", "support", "pretraining_subprocess.py")
ENV = {"PYTHONPATH": os.pathsep.join([ROOT, os.path.join(ROOT, "tests")]),
       "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}


def start(runner: ScriptRunner, args: list[str], env: dict[str, str] | None = None) -> Batch:
    """pretraining_subprocess.py with `args` (its own flags and run_pretraining's) and ENV plus
    `env` in its environment, stderr to stdout; returns at once, the run goes on."""
    return runner.start([([HELPER, *args], ROOT, {**ENV, **(env or {})})], stderr_to_stdout=True)


def wait(run: Batch, returncode: int = 0) -> str:
    """Waits for `run`, checks its exit status; returns its output."""
    [done] = run.wait(timeout=600)
    assert done.returncode == returncode, done.stdout[-3000:]
    return done.stdout


def weights(prefix):
    """{name: value} of the model, optimizer, global step and dropout RNG of a checkpoint."""
    reader = tf.train.load_checkpoint(os.fspath(prefix))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name.startswith(("model/", "optimizer/", "global_step", "rng/"))}
