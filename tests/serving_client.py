"""Runs exported SavedModels in a process where bert_tf cannot be imported: what a deployment has.

Tests call `run_client(directory, jobs)`; it runs this file as
`python -I serving_client.py JOBS_JSON OUTPUT_JSON` (isolated: no PYTHONPATH, no script
directory on the path).
JOBS_JSON is a list of {"export_dir", "signature", "inputs": {name: [str, ...]}}; OUTPUT_JSON
receives one {output name: nested list} per job (strings decoded as UTF-8).
"""

import importlib.abc
import json
import os
import subprocess
import sys


class _NoBertTf(importlib.abc.MetaPathFinder):
    """bert_tf may be installed in the environment (editable): refuse to import it here."""

    def find_spec(self, name, path=None, target=None):
        if name == "bert_tf" or name.startswith("bert_tf."):
            raise ImportError(f"{name} is not importable in a serving process")
        return None


def _plain(value):
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def main(jobs_path: str, output_path: str) -> None:
    sys.meta_path.insert(0, _NoBertTf())
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  registers the tokenizer ops

    assert not any(name.startswith("bert_tf") for name in sys.modules)
    with open(jobs_path, encoding="utf-8") as f:
        jobs = json.load(f)
    results, loaded = [], {}
    for job in jobs:
        if job["export_dir"] not in loaded:
            loaded[job["export_dir"]] = tf.saved_model.load(job["export_dir"])
        serve = loaded[job["export_dir"]].signatures[job["signature"]]
        outputs = serve(**{name: tf.constant(values, tf.string)  # [] too: an empty request
                           for name, values in job["inputs"].items()})
        results.append({name: _plain(tensor.numpy().tolist()) for name, tensor in outputs.items()})
    with open(output_path, "w", encoding="utf-8") as f:
        json.dump(results, f)


def run_client(directory, jobs: list[dict]) -> list[dict]:
    """The jobs' outputs, computed by this file in an isolated process (bert_tf imports
    refused); `directory` holds the job and output files and is the process's working directory."""
    jobs_path = os.path.join(os.fspath(directory), "jobs.json")
    out_path = os.path.join(os.fspath(directory), "out.json")
    with open(jobs_path, "w", encoding="utf-8") as f:
        json.dump(jobs, f)
    done = subprocess.run([sys.executable, "-I", os.path.abspath(__file__), jobs_path, out_path],
                          cwd=os.fspath(directory), capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise AssertionError(f"the serving client failed:\n{done.stderr[-3000:]}")
    with open(out_path, encoding="utf-8") as f:
        return json.load(f)


if __name__ == "__main__":
    main(*sys.argv[1:])
