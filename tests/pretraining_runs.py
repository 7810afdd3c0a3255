"""run_pretraining.py in a subprocess (through pretraining_subprocess.py) and the values of the
checkpoints it writes, for the tests that kill, signal or starve a run and compare its end."""

import os
import subprocess
import sys

import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HELPER = os.path.join(ROOT, "tests", "pretraining_subprocess.py")
ENV = {"PYTHONPATH": os.pathsep.join([ROOT, os.path.join(ROOT, "tests")]),
       "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}


def start(args, **popen_args):
    """pretraining_subprocess.py with `args` (its own flags and run_pretraining's), output piped;
    `popen_args` (e.g. env, preexec_fn) go to subprocess.Popen."""
    popen_args.setdefault("env", {**os.environ, **ENV})
    return subprocess.Popen([sys.executable, HELPER, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **popen_args)


def wait(process, returncode=0) -> str:
    """Waits for `process`, checks its exit status; returns its output."""
    output, _ = process.communicate(timeout=600)
    assert process.returncode == returncode, output[-3000:]
    return output


def weights(prefix):
    """{name: value} of the model, optimizer, global step and dropout RNG of a checkpoint."""
    reader = tf.train.load_checkpoint(os.fspath(prefix))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name.startswith(("model/", "optimizer/", "global_step", "rng/"))}
