"""Runs many script command lines in one process that imports TensorFlow once.

A test that checks what a user sees (exit status, the one `error:` line, stdout) needs each run
in its own process: absl's FLAGS, `sys.exit` and the file descriptors are per process. Starting
a fresh interpreter per run costs a TensorFlow import (several seconds) each time; instead,
`ScriptRunner` starts one server (this file run as a program) that imports TensorFlow and
bert_tf once and forks a child per command line. The child has its own FLAGS, environment,
signal handlers, exit status (-9 when it is killed with SIGKILL) and stdout/stderr (redirected
to files), exactly as `python script.py ...` would; no TensorFlow op runs in the server, so no
thread pool, device or gRPC server exists before the fork: each child creates its own (the
workers of a MultiWorkerMirroredStrategy cluster included).

    with ScriptRunner() as runner:
        results = runner.run_all([(argv, cwd), ...])   # CompletedProcess-like, in order
        batch = runner.start([(argv, cwd)])            # returns at once, the run goes on:
        other = runner.start([(argv, cwd)])            # e.g. the other worker of a cluster
        [result] = batch.wait(timeout=600)

A command may also carry environment changes and limits (e.g. a file-size limit, as
`ulimit -f`): `(argv, cwd, {"NAME": "value"}, {"file_size": bytes})`, see `start`.

The tests share one server (conftest's session fixture `script_runner`).
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))  # tests/support/..
# Children of one batch in flight at once (the tests' machine has 2 cores); batches started
# while others run go alongside them.
PARALLEL = 2


@dataclasses.dataclass
class Run:
    """What one command line did: as subprocess.CompletedProcess's fields."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


@dataclasses.dataclass
class Batch:
    """Command lines started by `ScriptRunner.start`, running in the server."""

    runner: ScriptRunner
    number: int

    def wait(self, timeout: float | None = None) -> list[Run]:
        """Their results in the given order, once all have exited (call it once); after
        `timeout` seconds, kills those still running and raises TimeoutError."""
        return self.runner._results(self.number, timeout)

    def kill(self) -> None:
        """Kills those still running (a test that will not wait for them)."""
        self.runner._send({"kill": self.number})


class ScriptRunner:
    """A server process that runs `[script.py, flags...]` command lines, each in a forked child."""

    def __init__(self, env: dict[str, str] | None = None):
        env = dict(os.environ if env is None else env)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (REPO, env.get("PYTHONPATH")) if p)
        self._server = subprocess.Popen([sys.executable, os.path.abspath(__file__)], env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._numbers = itertools.count()
        self._replies: dict[int, list[Run]] = {}
        self._received = b""

    def start(self, commands: list[tuple], stderr_to_stdout: bool = False) -> Batch:
        """Starts each (argv, cwd), (argv, cwd, environment changes) or (argv, cwd, environment
        changes, limits), at most PARALLEL at once; argv[0] is the script's path. Returns at
        once. With `stderr_to_stdout`, a run's stderr goes to its stdout (as `2>&1`).

        `limits` sets the child's resource limits before the script runs; its one key,
        "file_size": bytes, is `ulimit -f`'s limit (RLIMIT_FSIZE) with SIGXFSZ ignored, so that a
        write past it fails with EFBIG as on a full disk. It holds for every file the child
        writes, the files that capture its stdout and stderr included."""
        for command in commands:
            unknown = set(command[3] if len(command) == 4 else ()) - {"file_size"}
            if unknown:
                raise ValueError(f"unknown limits: {sorted(unknown)}")
        number = next(self._numbers)
        self._send({"batch": number, "commands": commands, "stderr_to_stdout": stderr_to_stdout})
        return Batch(self, number)

    def run_all(self, commands: list[tuple]) -> list[Run]:
        """`start(commands)` and waits for their results, in the given order."""
        return self.start(commands).wait()

    def _send(self, request: dict) -> None:
        self._server.stdin.write(json.dumps(request).encode() + b"\n")
        self._server.stdin.flush()

    def _results(self, number: int, timeout: float | None) -> list[Run]:
        deadline = None if timeout is None else time.monotonic() + timeout
        replies = self._server.stdout.fileno()
        while number not in self._replies:
            if deadline is not None and not select.select(
                    [replies], [], [], max(0.0, deadline - time.monotonic()))[0]:
                self._send({"kill": number})
                raise TimeoutError(f"the script runs of batch {number} took more than "
                                   f"{timeout} s (killed)")
            received = os.read(replies, 1 << 16)
            if not received:
                raise RuntimeError(f"the script server died (status {self._server.wait()})")
            *lines, self._received = (self._received + received).split(b"\n")
            for line in lines:
                reply = json.loads(line)
                self._replies[reply["batch"]] = [Run(**result) for result in reply["results"]]
        return self._replies.pop(number)

    def close(self) -> None:
        """Stops the server; runs still going (of a test that failed before waiting) are
        killed."""
        self._server.stdin.close()
        self._server.wait(timeout=60)

    def __enter__(self) -> ScriptRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _limit(limits: dict) -> None:
    """In the forked child: the `start` limits (see ScriptRunner.start)."""
    import resource

    if "file_size" in limits:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_size"], hard))


def _child(argv: list[str], cwd: str, env: dict, limits: dict, out_path: str,
           err_path: str | None) -> None:
    """In the forked child: runs the script as `python argv...` would (stderr to stdout when
    `err_path` is None); never returns."""
    import runpy

    status = 0
    os.environ.update(env)
    try:
        _limit(limits)
        target = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(target, 1)
        os.close(target)
        if err_path is None:
            os.dup2(1, 2)
        else:
            target = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(target, 2)
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


@dataclasses.dataclass
class _Started:
    """A request's commands in the server: those not yet forked and the results so far."""

    commands: list[list]
    stderr_to_stdout: bool
    pending: list[int]
    results: list[dict | None]
    running: int = 0


@dataclasses.dataclass
class _Child:
    """A forked child: its request, command and the files capturing its output."""

    pid: int
    batch: int
    index: int
    out: str
    err: str | None


def _read_and_remove(path: str | None) -> str:
    """A child's captured output; "" if there is none (stderr sent to stdout, or a child
    killed before it opened its files)."""
    if path is None or not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8", errors="replace") as f:
        output = f.read()
    os.remove(path)
    return output


class _Server:
    """Reads requests from stdin, forks their children, replies per batch when all have exited.

    One thread (no thread may hold a lock at a fork): `select` over stdin and a pidfd per child
    (readable when it exits), no SIGCHLD handler for the children to inherit."""

    def __init__(self, scratch: str):
        self.scratch = scratch
        self.batches: dict[int, _Started] = {}
        self.children: dict[int, _Child] = {}  # by pidfd
        self.replies = sys.stdout

    def serve(self) -> None:
        received, reading = b"", True
        while reading or self.children:
            self._fork_what_fits()
            ready = select.select(([0] if reading else []) + list(self.children), [], [])[0]
            for fd in ready:
                if fd != 0:
                    self._reap(fd)
                    continue
                data = os.read(0, 1 << 16)
                if not data:  # the tests are done: runs they did not wait for are killed
                    reading = False
                    for number in list(self.batches):
                        self._kill(number)
                    continue
                *lines, received = (received + data).split(b"\n")
                for line in lines:
                    self._request(json.loads(line))

    def _request(self, request: dict) -> None:
        if "kill" in request:
            self._kill(request["kill"])
            return
        commands = request["commands"]
        self.batches[request["batch"]] = _Started(
            commands, request["stderr_to_stdout"], list(range(len(commands))),
            [None] * len(commands))

    def _fork_what_fits(self) -> None:
        for number, batch in self.batches.items():
            while batch.pending and batch.running < PARALLEL:
                index = batch.pending.pop(0)
                argv, cwd, *options = batch.commands[index]
                env, limits = (*options, {}, {})[:2]
                out = os.path.join(self.scratch, f"{number}.{index}.out")
                err = None if batch.stderr_to_stdout else out[:-len("out")] + "err"
                pid = os.fork()
                if pid == 0:
                    for fd in self.children:  # the other children's pidfds
                        os.close(fd)
                    _child(argv, cwd, env, limits, out, err)
                self.children[os.pidfd_open(pid)] = _Child(pid, number, index, out, err)
                batch.running += 1

    def _reap(self, pidfd: int) -> None:
        child = self.children.pop(pidfd)
        os.close(pidfd)
        wait_status = os.waitpid(child.pid, 0)[1]
        outputs = [_read_and_remove(child.out), _read_and_remove(child.err)]
        batch = self.batches.get(child.batch)
        if batch is None:  # killed: nobody waits for it
            return
        batch.running -= 1
        batch.results[child.index] = dict(
            args=batch.commands[child.index][0],
            returncode=os.waitstatus_to_exitcode(wait_status), stdout=outputs[0],
            stderr=outputs[1])
        if not batch.pending and not batch.running:
            del self.batches[child.batch]
            self.replies.write(json.dumps({"batch": child.batch, "results": batch.results}) + "\n")
            self.replies.flush()

    def _kill(self, number: int) -> None:
        self.batches.pop(number, None)
        for child in self.children.values():
            if child.batch == number:
                os.kill(child.pid, signal.SIGKILL)


def _serve() -> None:
    # What every script imports, once, before the first fork (no op runs: no thread pools yet).
    import tensorflow  # noqa: F401

    import bert_tf.tasks.classifier.task  # noqa: F401
    import bert_tf.tasks.features.extraction  # noqa: F401
    import bert_tf.tasks.ner.task  # noqa: F401
    import bert_tf.tasks.pretraining.pipeline  # noqa: F401
    import bert_tf.tasks.pretraining.task  # noqa: F401
    import bert_tf.tasks.squad.task  # noqa: F401

    # The children's full garbage collections need not walk what the imports made (it lives as
    # long as they do); untouched by the collector, those pages also stay shared after a fork.
    gc.freeze()
    import collector  # noqa: PLC0415  (beside this program, its sys.path[0])

    collector.collect_less_often()
    with tempfile.TemporaryDirectory() as scratch:
        server = _Server(scratch)
        sys.stdout = sys.stderr  # nothing but replies on the pipe
        server.serve()


if __name__ == "__main__":
    _serve()
