"""The exceptions that mean "the user's input is wrong", as opposed to a bug in bert_tf.

Scripts started through `bert_tf.cli.run_main` print a `UserError` as one line,
`error: <message>`, and exit with status 1; any other exception keeps its traceback. A message
names the file (and line) or the flag at fault and says what to do.

`UserError` subclasses ValueError, and the file-flavoured ones FileNotFoundError and
PermissionError, so callers that catch the built-in types keep working. Every subclass takes a
single message, so the errors of worker processes pickle back to the parent unchanged.

`Preempted` is no user error: training stopped on a preemption notice after saving a
checkpoint; `run_main` prints its one line and exits with PREEMPTED_STATUS.
"""

# os.EX_TEMPFAIL: "temporary failure, retry": the job is not done, run the same command again.
PREEMPTED_STATUS = 75


class UserError(ValueError):
    """Bad input: a flag, a flag combination, a config, a data file or a checkpoint."""


class MissingFileError(UserError, FileNotFoundError):
    """A file or directory the user named does not exist (or a pattern matches nothing)."""


class UnreadableFileError(UserError, PermissionError):
    """A file the user named exists but cannot be read."""


class EmptyInputError(UserError):
    """An input holds nothing to work on (no documents, examples or questions)."""


class Preempted(Exception):
    """Training stopped on a preemption notice; a checkpoint of the step reached was saved.

    The message is the one line a script prints (which checkpoint, the command that resumes).
    """
