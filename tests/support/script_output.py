"""What a script itself wrote to stderr, apart from the TensorFlow runtime's own log lines.

Some TensorFlow builds log oneDNN's notice from C++ at import whatever TF_CPP_MIN_LOG_LEVEL
says, preceded by absl's note that logging is not initialised yet. Those lines are
TensorFlow's, not the script's: tests of "one error line" leave them out.
"""

from __future__ import annotations

import re

# glog's prefix from a C++ source: severity and date, time, thread id, file.cc:line]. Python's
# absl logging has the same prefix with a .py file: the script's own log lines are kept.
_RUNTIME_LOG_LINE = re.compile(r"[IWEF]\d{4} [\d:.]+ +\d+ \S+\.(cc|h):\d+\] ")
_ABSL_UNINITIALISED_NOTE = ("WARNING: All log messages before absl::InitializeLog() "
                            "is called are written to STDERR")


def script_stderr_lines(stderr: str) -> list[str]:
    """The stderr lines the script wrote, in order, without TensorFlow's runtime log lines."""
    return [line for line in stderr.strip().splitlines()
            if line != _ABSL_UNINITIALISED_NOTE and not _RUNTIME_LOG_LINE.match(line)]
