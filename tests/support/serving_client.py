"""Runs exported SavedModels in a process where bert_tf cannot be imported: what a deployment has.

Tests call `run_client(directory, jobs)`. The first call starts this file as a server,
`python -I serving_client.py` (isolated: no PYTHONPATH, no script directory on the path), which
imports TensorFlow and tensorflow_text once, with bert_tf imports refused. Each call then gets a
child forked from it: a fresh process that loads the call's exports (no other model was ever
loaded in it), runs the jobs and exits. The server reads one line per call, the JSON list
[JOBS_JSON, OUTPUT_JSON], and answers with the child's exit status. JOBS_JSON is a list of
{"export_dir", "signature", "inputs": {name: [str, ...]}}; OUTPUT_JSON receives one
{output name: nested list} per job (strings decoded as UTF-8).
"""

import atexit
import gc
import importlib.abc
import json
import os
import select
import subprocess
import sys
import threading
import traceback

TIMEOUT_SECONDS = 600


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


def _run_jobs(jobs_path: str, output_path: str) -> None:
    """In a forked child: every job of `jobs_path`, each export loaded once."""
    import tensorflow as tf

    assert not any(name.startswith("bert_tf") for name in sys.modules)
    with open(jobs_path, encoding="utf-8") as f:
        jobs = json.load(f)
    results, loaded = [], {}
    for job in jobs:
        if job["export_dir"] not in loaded:
            loaded[job["export_dir"]] = tf.saved_model.load(job["export_dir"])
        inputs = {name: tf.constant(values, tf.string)  # [] too: an empty request
                  for name, values in job["inputs"].items()}
        if os.path.exists(os.path.join(job["export_dir"], "openvino.json")):
            outputs = _openvino_outputs(job["export_dir"], loaded[job["export_dir"]],
                                        job["signature"], inputs)
        else:
            outputs = loaded[job["export_dir"]].signatures[job["signature"]](**inputs)
        results.append({name: _plain(tensor.numpy().tolist()) for name, tensor in outputs.items()})
    with open(output_path, "w", encoding="utf-8") as f:
        json.dump(results, f)


def _openvino_outputs(export_dir: str, text, signature: str, inputs: dict) -> dict:
    """An OpenVINO export's signature, as docs/serving.md calls it: the text part's `prepare`,
    the model on OpenVINO, then `finish`."""
    import openvino

    with open(os.path.join(export_dir, "openvino.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    model = openvino.Core().compile_model(os.path.join(export_dir, "model.xml"), "CPU",
                                          manifest["compile_properties"])
    names = manifest["signatures"][signature]
    prepared = text.signatures[names["prepare"]](**inputs)
    result = model({name: prepared[name].numpy() for name in manifest["model_inputs"]})
    outputs = {name: result[name] for name in manifest["model_outputs"]}
    state = {k: v for k, v in prepared.items() if k not in manifest["model_inputs"]}
    return text.signatures[names["finish"]](**outputs, **state)


def _child(jobs_path: str, output_path: str) -> None:
    """The forked child's whole life: its stdout and stderr go to a file beside the jobs (the
    server's stdout carries only its answers)."""
    status = 1
    try:
        directory = os.path.dirname(jobs_path)
        os.chdir(directory)
        errors = os.open(os.path.join(directory, "client_stderr.txt"),
                         os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(errors, 1)
        os.dup2(errors, 2)
        _run_jobs(jobs_path, output_path)
        status = 0
    except BaseException:  # noqa: BLE001 (any failure: a traceback in its stderr file, status 1)
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def _serve() -> None:
    sys.meta_path.insert(0, _NoBertTf())
    # Imported once, before the first fork (no op runs here: no thread pools yet).
    import tensorflow  # noqa: F401
    import tensorflow_text  # noqa: F401  registers the tokenizer ops

    assert not any(name.startswith("bert_tf") for name in sys.modules)
    gc.freeze()  # the children's collections skip the imported heap; its pages stay shared
    for line in sys.stdin:
        assert threading.active_count() == 1, "a thread would not survive the fork"
        jobs_path, output_path = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(jobs_path, output_path)
        _, status = os.waitpid(pid, 0)
        sys.stdout.write(f"{os.waitstatus_to_exitcode(status)}\n")
        sys.stdout.flush()


_server: subprocess.Popen | None = None


def _started_server() -> subprocess.Popen:
    global _server
    if _server is None or _server.poll() is not None:
        _server = subprocess.Popen([sys.executable, "-I", os.path.abspath(__file__)],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        atexit.register(_server.stdin.close)
    return _server


def _child_errors(directory: str) -> str:
    path = os.path.join(directory, "client_stderr.txt")
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8") as f:
        return f.read()


def run_client(directory, jobs: list[dict]) -> list[dict]:
    """The jobs' outputs, computed by a child of the server (bert_tf imports refused);
    `directory` holds the job and output files and is the child's working directory."""
    directory = os.path.abspath(os.fspath(directory))
    jobs_path = os.path.join(directory, "jobs.json")
    out_path = os.path.join(directory, "out.json")
    with open(jobs_path, "w", encoding="utf-8") as f:
        json.dump(jobs, f)
    server = _started_server()
    server.stdin.write(json.dumps([jobs_path, out_path]) + "\n")
    server.stdin.flush()
    if not select.select([server.stdout], [], [], TIMEOUT_SECONDS)[0]:
        server.kill()
        raise AssertionError(f"the serving client ran over {TIMEOUT_SECONDS} s")
    status = server.stdout.readline().strip()
    if status != "0":
        raise AssertionError(f"the serving client failed (exit status "
                             f"{status or 'unknown: the server is gone'}):\n"
                             f"{_child_errors(directory)[-3000:]}")
    with open(out_path, encoding="utf-8") as f:
        return json.load(f)


if __name__ == "__main__":
    _serve()
