"""Every trial's command line parsed by the fine-tuning script's own flag definitions, before any
trial runs: a grid value the script would refuse (`learning_rate=abc`, an enum's unknown
choice, a value out of a flag's range, a flag the script does not have) is reported at once,
naming its grid entry, instead of after the trials before it have run.

The scripts define their flags in absl's global `FLAGS` when imported, and the search's own
flags live there too (`--output_dir` is both). So the flags defined at that moment (but absl's
own) are set aside, the script is imported afresh under a private name (its DEFINE_* lines run;
TensorFlow and the task modules it imports are shared with this process), the flags it defined
are taken out, and the set-aside flags are put back. Each parse then works on a deep copy of
those flags, so nothing of this process's flags changes. Nothing of the script runs but its
definitions.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import itertools
import os
import re
import sys
from typing import Collection, Iterator, Mapping, Sequence

from absl import flags

from bert_tf.errors import UserError

# absl's own flags (--verbosity, --logtostderr, --flagfile, ...) are defined once per process by
# absl itself, not by the script: they are copied from the process's flags.
_ABSL_MODULES = ("absl.app", "absl.logging", "absl.flags")
_counter = itertools.count()


class TrialFlagError(UserError):
    """A grid value (or a flag of the command) that the fine-tuning script's flags refuse; the
    search exits with the status of a flag that does not parse."""


@contextlib.contextmanager
def _set_aside(flag_values: flags.FlagValues, keep: Collection[str]) -> Iterator[None]:
    """Takes the flags of `flag_values` but those named in `keep` out for the body's life, then
    puts them back (and removes what the body defined)."""
    saved = {name: flag for name, flag in _by_name(flag_values).items() if name not in keep}
    _remove(flag_values, keep)
    try:
        yield
    finally:
        _remove(flag_values, keep)
        _register(flag_values, saved)


def _remove(flag_values: flags.FlagValues, keep: Collection[str]) -> None:
    for name in list(flag_values):
        if flag_values[name].name not in keep:
            delattr(flag_values, name)


def _by_name(flag_values: flags.FlagValues) -> dict[str, flags.Flag]:
    """The flags of `flag_values` under their long names (a short name is the same flag)."""
    return {name: flag_values[name] for name in flag_values
            if name != flag_values[name].short_name}


def _register(flag_values: flags.FlagValues, definitions: Mapping[str, flags.Flag]) -> None:
    """Adds each flag under its name (absl adds its short name with it)."""
    for name, flag in definitions.items():
        flag_values[name] = flag


def script_flags(script_path: str, flag_values: flags.FlagValues) -> dict[str, flags.Flag]:
    """The flags `script_path` defines (absl's own included), by name, read by importing it.

    Args:
      script_path: a fine-tuning script (run_classifier.py, ...).
      flag_values: the registry the scripts define into (absl's FLAGS); left as it was.
    """
    # Left in place: absl's own logging reads them, even while the script is imported.
    absl_flags = {flag.name: flag
                  for module, defined in flag_values.flags_by_module_dict().items()
                  if module in _ABSL_MODULES for flag in defined}
    name = f"_search_flags_{next(_counter)}_" + re.sub(r"\W", "_", os.path.basename(script_path))
    spec = importlib.util.spec_from_file_location(name, script_path)
    module = importlib.util.module_from_spec(spec)
    with _set_aside(flag_values, keep=absl_flags):
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        finally:
            sys.modules.pop(name, None)
        defined = {flag_name: flag for flag_name, flag in _by_name(flag_values).items()
                   if flag_name not in absl_flags}
    return copy.deepcopy({**absl_flags, **defined})


def parse_error(definitions: Mapping[str, flags.Flag], argv: Sequence[str]) -> str | None:
    """absl's message when `argv` (flags after the script's name) does not parse with
    `definitions` (unknown flag, bad value, failed validator), else None."""
    flag_values = flags.FlagValues()
    _register(flag_values, copy.deepcopy(dict(definitions)))
    try:
        flag_values(["script", *argv])
    except flags.Error as error:
        return " ".join(str(error).split())
    return None
