"""A script's main() run in the test's own process, as `python <script> <flags>` runs it.

Many runs then share one TensorFlow start-up, and TensorFlow's in-memory `ram://` file system
(which lives inside one process) holds their inputs and outputs. The script is imported afresh
under a private name (its flags are defined at import), its flags are parsed from `argv`, and
they are removed again afterwards, so that the next run (of any script) defines its own.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from typing import Any, Sequence

from absl import app, flags, logging  # noqa: F401 (their flags are every script's: the baseline)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))  # tests/support/..


def run_script(script: str, argv: Sequence[str]) -> Any:
    """Runs `script`'s main() (e.g. "run_classifier.py") with the flags `argv`; returns what main
    returns. A user error is raised as its exception (not the one-line exit of the command)."""
    baseline = set(flags.FLAGS)
    name = "_in_process_" + re.sub(r"\W", "_", script)
    spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, script))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        flags.FLAGS([script, *argv])
        return module.main([script])
    finally:
        for flag_name in set(flags.FLAGS) - baseline:
            delattr(flags.FLAGS, flag_name)
        sys.modules.pop(name, None)
