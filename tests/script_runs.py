"""Runs many script command lines in one process that imports TensorFlow once.

A test that checks what a user sees (exit status, the one `error:` line, stdout) needs each run
in its own process: absl's FLAGS, `sys.exit` and the file descriptors are per process. Starting
a fresh interpreter per run costs a TensorFlow import (several seconds) each time; instead,
`ScriptRunner` starts one server (this file run as a program) that imports TensorFlow and
bert_tf once and forks a child per command line. The child has its own FLAGS, exit status and
stdout/stderr (redirected to files), exactly as `python script.py ...` would; no TensorFlow op
runs in the server, so forking it is safe.

    with ScriptRunner() as runner:
        results = runner.run_all([(argv, cwd), ...])   # CompletedProcess-like, in order

A command may also carry environment changes and limits (e.g. a file-size limit, as
`ulimit -f`): `(argv, cwd, {"NAME": "value"}, {"file_size": bytes})`, see `run_all`.

The tests share one server (conftest's session fixture `script_runner`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
# Children in flight at once (the tests' machine has 2 cores).
PARALLEL = 2


@dataclasses.dataclass
class Run:
    """What one command line did: as subprocess.CompletedProcess's fields."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


class ScriptRunner:
    """A server process that runs `[script.py, flags...]` command lines, each in a forked child."""

    def __init__(self, env: dict[str, str] | None = None):
        env = dict(os.environ if env is None else env)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (os.path.dirname(HERE), env.get("PYTHONPATH")) if p)
        self._server = subprocess.Popen([sys.executable, os.path.abspath(__file__)], env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run_all(self, commands: list[tuple]) -> list[Run]:
        """Runs each (argv, cwd), (argv, cwd, environment changes) or (argv, cwd, environment
        changes, limits); argv[0] is the script's path. Results in the given order.

        `limits` sets the child's resource limits before the script runs; its one key,
        "file_size": bytes, is `ulimit -f`'s limit (RLIMIT_FSIZE) with SIGXFSZ ignored, so that a
        write past it fails with EFBIG as on a full disk. It holds for every file the child
        writes, the files that capture its stdout and stderr included."""
        for command in commands:
            unknown = set(command[3] if len(command) == 4 else ()) - {"file_size"}
            if unknown:
                raise ValueError(f"unknown limits: {sorted(unknown)}")
        self._server.stdin.write(json.dumps(commands) + "\n")
        self._server.stdin.flush()
        line = self._server.stdout.readline()
        if not line:
            raise RuntimeError(f"the script server died (status {self._server.wait()})")
        return [Run(**result) for result in json.loads(line)]

    def close(self) -> None:
        self._server.stdin.close()
        self._server.wait(timeout=60)

    def __enter__(self) -> "ScriptRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _limit(limits: dict) -> None:
    """In the forked child: the run_all `limits` (see ScriptRunner.run_all)."""
    import resource
    import signal

    if "file_size" in limits:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_size"], hard))


def _child(argv: list[str], cwd: str, env: dict, limits: dict, out_path: str,
           err_path: str) -> None:
    """In the forked child: runs the script as `python argv...` would; never returns."""
    import runpy

    status = 0
    os.environ.update(env)
    try:
        _limit(limits)
        for fd, path in ((1, out_path), (2, err_path)):
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(target, fd)
            os.close(target)
        sys.stdout = sys.__stdout__  # the server's print()s go to stderr; the script's to fd 1
        os.chdir(cwd)
        script = os.path.abspath(argv[0])
        sys.argv = [script, *argv[1:]]
        sys.path[0] = os.path.dirname(script)
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code
        if code is None:
            status = 0
        elif isinstance(code, int):
            status = code
        else:
            sys.stderr.write(f"{code}\n")
            status = 1
    except BaseException:  # noqa: BLE001 (as the interpreter: traceback on stderr, status 1)
        import traceback

        traceback.print_exc()
        status = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def _run_commands(commands: list[list]) -> list[dict]:
    results: list[dict | None] = [None] * len(commands)
    running: dict[int, tuple[int, str, str]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        pending = list(enumerate(commands))
        while pending or running:
            while pending and len(running) < PARALLEL:
                index, (argv, cwd, *options) = pending.pop(0)
                env, limits = (*options, {}, {})[:2]
                out, err = (os.path.join(scratch, f"{index}.{s}") for s in ("out", "err"))
                pid = os.fork()
                if pid == 0:
                    _child(argv, cwd, env, limits, out, err)
                running[pid] = (index, out, err)
            pid, wait_status = os.wait()
            index, out, err = running.pop(pid)
            with open(out, encoding="utf-8", errors="replace") as f_out, \
                    open(err, encoding="utf-8", errors="replace") as f_err:
                results[index] = dict(args=commands[index][0],
                                      returncode=os.waitstatus_to_exitcode(wait_status),
                                      stdout=f_out.read(), stderr=f_err.read())
    return results


def _serve() -> None:
    # What every script imports, once, before the first fork (no op runs: no thread pools yet).
    import tensorflow  # noqa: F401

    import bert_tf.tasks.classifier.task  # noqa: F401
    import bert_tf.tasks.features.extraction  # noqa: F401
    import bert_tf.tasks.ner.task  # noqa: F401
    import bert_tf.tasks.pretraining.pipeline  # noqa: F401
    import bert_tf.tasks.pretraining.task  # noqa: F401
    import bert_tf.tasks.squad.task  # noqa: F401

    replies = sys.stdout
    sys.stdout = sys.stderr  # nothing but replies on the pipe
    for line in sys.stdin:
        replies.write(json.dumps(_run_commands(json.loads(line))) + "\n")
        replies.flush()


if __name__ == "__main__":
    _serve()
