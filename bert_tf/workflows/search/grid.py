"""The search's grid: `name=v1,v2;name=v1,...` -> the trials, each a set of flag values.

The default is the BERT paper's (Devlin et al. 2019, appendix A.3): learning rate 5e-5, 3e-5,
2e-5, batch 16, 32 and 2, 3, 4 epochs, 18 runs. With `--seeds=N` each point runs N times with
--seed = the command's seed (12345 when it sets none) + 0, 1, ..., N - 1.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Sequence

from bert_tf.errors import UserError

PAPER_GRID = "learning_rate=5e-5,3e-5,2e-5;train_batch_size=16,32;num_train_epochs=2,3,4"
DEFAULT_SEED = 12345  # the fine-tuning scripts' --seed default
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.+-]+$")  # what may appear in a trial's directory name


@dataclasses.dataclass(frozen=True)
class Trial:
    """One run of the command: its flag values (as typed in the grid) in grid order."""

    values: tuple[tuple[str, str], ...]

    @property
    def name(self) -> str:
        """The trial's sub-directory: `learning_rate=5e-5__train_batch_size=16__...` (no comma:
        the scripts read comma-separated file lists from paths in the run directory)."""
        return "__".join(f"{flag}={value}" for flag, value in self.values)

    def flags(self) -> list[str]:
        return [f"--{flag}={value}" for flag, value in self.values]


def parse_grid(spec: str) -> list[tuple[str, list[str]]]:
    """`learning_rate=5e-5,3e-5;num_train_epochs=2,3` -> [(flag, [values]), ...] in order."""
    grid: list[tuple[str, list[str]]] = []
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        flag, sep, values = part.partition("=")
        flag = flag.strip().lstrip("-")
        choices = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not _NAME.match(flag) or not choices:
            raise UserError(f"--grid: {part!r}: write flag=value,value,... with ';' between "
                            f"flags, e.g. --grid='{PAPER_GRID}'")
        if flag in ("seed", "output_dir"):
            raise UserError(f"--grid: {flag} is the search's own (--seeds; each trial's "
                            "directory under --output_dir)")
        if flag in (name for name, _ in grid):
            raise UserError(f"--grid: {flag} appears twice")
        bad = [v for v in choices if not _SAFE_VALUE.match(v)]
        if bad:
            raise UserError(f"--grid: {flag}={bad[0]}: values may hold letters, digits and "
                            "'_.+-' only (they name the trial's directory)")
        grid.append((flag, choices))
    if not grid:
        raise UserError(f"--grid is empty; e.g. --grid='{PAPER_GRID}'")
    return grid


def expand(grid: Sequence[tuple[str, Sequence[str]]], seeds: int = 1,
           base_seed: int = DEFAULT_SEED) -> list[Trial]:
    """Every combination of the grid's values (the last flag varying fastest), each `seeds`
    times; with more than one seed, `seed` is the last value of each trial."""
    if seeds < 1:
        raise UserError(f"--seeds={seeds}: run each point at least once")
    names = [flag for flag, _ in grid]
    trials = []
    for point in itertools.product(*(values for _, values in grid)):
        for repetition in range(seeds):
            seed = (("seed", str(base_seed + repetition)),) if seeds > 1 else ()
            trials.append(Trial(tuple(zip(names, point)) + seed))
    return trials
