"""How every script runs: one `error:` line for the user's mistakes, tracebacks for bugs.

Each script's `run()` calls `run_main(main)` instead of `absl.app.run(main)`:

- a `bert_tf.errors.UserError` (bad flag value, missing or malformed file, checkpoint that does
  not fit the config, ...), an `absl.app.UsageError`, or an operating-system refusal to read or
  write a file (permission denied, disk full, read-only file system) prints
  `error: <message>` on stderr and exits with status 1, without a traceback;
- a flag that does not parse (unknown flag, bad value, missing required flag) prints
  `error: <message>` and exits with status 2, the usual status of a command-line mistake;
- `bert_tf.errors.Preempted` (training saved a checkpoint on SIGTERM / SIGINT) prints its one
  line and exits with status 75 (PREEMPTED_STATUS): run the same command again to resume;
- anything else is a bug in bert_tf and keeps its traceback.

`--verbosity=1` (absl's flag) or the environment variable BERT_TF_TRACEBACK=1 shows the traceback
of user errors too, for bug reports.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import Any, Callable, NoReturn, Sequence

from absl import app, flags

from bert_tf.errors import PREEMPTED_STATUS, Preempted, UserError

TRACEBACK_ENV = "BERT_TF_TRACEBACK"
USER_ERROR_STATUS = 1
FLAG_ERROR_STATUS = 2
# Refusals of the file system that the user can fix (permissions, space, paths): not bugs.
_ENVIRONMENT_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EROFS,
                                 errno.EDQUOT, errno.ENOENT, errno.ENOTDIR, errno.EISDIR,
                                 errno.EEXIST, errno.ENAMETOOLONG})


def traceback_requested(flag_values: flags.FlagValues = flags.FLAGS) -> bool:
    """Whether user errors should keep their traceback (BERT_TF_TRACEBACK=1 or --verbosity>=1)."""
    if os.environ.get(TRACEBACK_ENV, "").strip() not in ("", "0"):
        return True
    return flag_values.is_parsed() and flag_values["verbosity"].value >= 1


def user_error_message(error: BaseException) -> str | None:
    """The one-line message of an error the user can fix, or None for a bug."""
    if isinstance(error, (UserError, app.UsageError)):
        message = str(error)
    elif isinstance(error, OSError) and error.errno in _ENVIRONMENT_ERRNOS:
        where = f"{error.filename}: " if error.filename else ""
        message = f"{where}{error.strerror}"
    else:
        message = _tensorflow_file_error(error)
    return None if message is None else " ".join(message.split())


def _tensorflow_file_error(error: BaseException) -> str | None:
    """tf.io.gfile's refusals (they name the path) as a message; None for other errors."""
    tf = sys.modules.get("tensorflow")  # only when the script imported it
    if tf is not None and isinstance(error, (tf.errors.PermissionDeniedError,
                                             tf.errors.NotFoundError)):
        return error.message
    return None


def fail(message: str, status: int = USER_ERROR_STATUS) -> NoReturn:
    """Prints `error: <message>` on stderr and exits with `status`."""
    sys.stderr.write(f"error: {message}\n")
    sys.stderr.flush()
    sys.exit(status)


def parse_flags(argv: Sequence[str], flag_values: flags.FlagValues = flags.FLAGS) -> list[str]:
    """absl's flag parsing with a one-line error and status 2 instead of its FATAL banner."""
    try:
        return flag_values(list(argv))
    except flags.Error as e:
        fail(f"{' '.join(str(e).split())} (--helpshort lists the flags)", FLAG_ERROR_STATUS)


def run_main(main: Callable[[list[str]], Any]) -> None:
    """`absl.app.run(main)` with the error handling of the module docstring."""

    def guarded_main(args: list[str]) -> Any:
        try:
            return main(args)
        except Preempted as e:
            sys.stderr.write(f"{e}\n")
            sys.stderr.flush()
            sys.exit(PREEMPTED_STATUS)
        except Exception as e:  # noqa: BLE001 (sorted into user errors and bugs just below)
            message = user_error_message(e)
            if message is None or traceback_requested():
                raise
            fail(message)

    app.run(guarded_main, flags_parser=parse_flags)
