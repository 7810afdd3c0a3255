"""Starts a trial's command so that it gets SIGTERM when the search that started it dies.

A search killed with SIGKILL runs no code of its own, so nothing it does at exit can stop its
trial. Linux's parent-death signal (prctl(PR_SET_PDEATHSIG)) is armed in the child instead:
`tied_command(command)` runs this file (standard library only, `python -I -S`, a few
milliseconds) which arms SIGTERM, checks that the search is still its parent (it may have died
before the signal was armed) and then replaces itself with the command (execvp keeps the
signal). The fine-tuning scripts turn SIGTERM into a checkpoint of the step in flight and exit
(bert_tf/training/preemption.py), so the next search resumes that trial exactly. (The kernel
sends it when the thread that started the child ends: the search starts its trials from its
main thread, which lives as long as the search.)

Where prctl is missing (not Linux) the command runs untied; `bert_tf.cli.run_lock.stop_orphaned_run`
still ends such a trial when the next search finds it holding its directory.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from typing import Sequence

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# The status of a shell's "command not found", for a trial whose program does not exist.
NOT_FOUND_STATUS = 127


def tied_command(command: Sequence[str]) -> list[str]:
    """`command` run through this file: it receives SIGTERM when this process dies."""
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), str(os.getpid()), *command]


def arm_parent_death_signal(number: int = signal.SIGTERM) -> bool:
    """Asks the kernel to send `number` to this process when its parent dies; False where the
    system has no prctl (the process is then not tied to its parent)."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(_PR_SET_PDEATHSIG, int(number), 0, 0, 0) == 0


def main(argv: Sequence[str]) -> None:
    """`parent_death.py PARENT_PID COMMAND...`: arms the signal, then runs COMMAND in place."""
    parent, command = int(argv[1]), list(argv[2:])
    arm_parent_death_signal()
    if os.getppid() != parent:  # the search died before the signal was armed
        sys.exit(f"the search (pid {parent}) ended before its trial started")
    try:
        os.execvp(command[0], command)
    except OSError as error:
        sys.stderr.write(f"error: {command[0]}: {error.strerror}\n")
        sys.exit(NOT_FOUND_STATUS)


if __name__ == "__main__":
    main(sys.argv)
