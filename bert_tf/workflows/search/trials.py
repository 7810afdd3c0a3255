"""Runs a fine-tuning command once per trial of a grid and picks the best on the dev set.

Each trial is the user's command as a subprocess with `--output_dir=<output_dir>/<trial>` and
the trial's flags appended (absl takes the last value of a flag). Its score is the metric of
its `best_state.json` when it selected checkpoints (--best_metric, --eval_every_*; the figures in
`best/eval_results.txt`), else the key of its `eval_results.txt` that the command's
--best_metric names, or the script's family's default (`TaskFamily.search_metric`).

Files in --output_dir:
  <trial>/       the trial's run directory (checkpoints, eval_results.txt, best/, ...)
  trials.jsonl   one JSON line per finished trial, in grid order: trial, values, status
                 ("done" or "failed"), metric, mode, score, dev (its eval_results figures),
                 best_step, wall_seconds (of the attempt that finished it), output_dir,
                 checkpoint_dir, and for a failure exit_code and the output's last lines
  best.json      the trial with the best score: its record, and `output_dir` /
                 `checkpoint_dir` for --do_predict or --export_dir

Before any trial runs, every trial's command line is parsed by the fine-tuning script's own flag
definitions (`script_flags`): a grid value the script refuses is one error naming it.

Each trial is tied to the search (`parent_death`): when the search dies, however it dies, the
trial gets SIGTERM, saves the step in flight and exits. Running the same search again skips the
trials that are done; a failed or interrupted trial runs again in its directory, where the
fine-tuning script resumes from its last checkpoint; a trial of the killed search still holding
its directory is stopped and waited for first (`bert_tf.cli.run_lock.stop_orphaned_run`).
"""

from __future__ import annotations

import collections
import dataclasses
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any, Mapping, Sequence

from absl import flags, logging

from bert_tf import filesystem
from bert_tf.cli import run_lock
from bert_tf.errors import PREEMPTED_STATUS, UserError
from bert_tf.tasks import families
from bert_tf.training import best_checkpoint
from bert_tf.training.log import read_eval_results
from bert_tf.workflows.search import script_flags
from bert_tf.workflows.search.grid import DEFAULT_SEED, PAPER_GRID, Trial, expand, parse_grid
from bert_tf.workflows.search.parent_death import tied_command

TRIALS_FILE = "trials.jsonl"
BEST_FILE = "best.json"
OUTPUT_LINES_KEPT = 20


@dataclasses.dataclass(frozen=True)
class SearchOptions:
    """What search.py's flags describe: the fine-tuning `command` (argv list), where the trials
    go, the grid and the repetitions of each point."""

    command: Sequence[str]
    output_dir: str
    grid: str = PAPER_GRID
    seeds: int = 1


def command_flag(command: Sequence[str], name: str) -> str | None:
    """The value the command gives `--name` (the last one, as absl takes), or None."""
    value = None
    for i, arg in enumerate(command):
        if arg.startswith(f"--{name}="):
            value = arg.split("=", 1)[1]
        elif arg == f"--{name}" and i + 1 < len(command):
            value = command[i + 1]
    return value


def _family_of(program: str) -> families.TaskFamily | None:
    """The task family whose script `program` is: `path/run_ner.py`, `run_ner` or its console
    command `bert-run-ner`; None for another program."""
    name = os.path.basename(program).removesuffix(".py")
    return next((family for family in families.FAMILIES
                 if name in (family.script, family.console_script)), None)


def _command_family(command: Sequence[str]) -> families.TaskFamily | None:
    """The family of the fine-tuning script `command` runs (`python run_classifier.py ...`,
    `bert-run-classifier ...`), else None."""
    return next((family for family in map(_family_of, command) if family is not None), None)


def _python_script(command: Sequence[str]) -> int | None:
    """The index of the script in `python [options] script.py ...`, else None."""
    i = 1
    while i < len(command) and command[i].startswith("-"):
        if command[i] in ("-c", "-m"):
            return None
        i += 2 if command[i] in ("-W", "-X") else 1
    return i if i < len(command) else None


def command_script(command: Sequence[str]) -> tuple[str, int] | None:
    """The file of the fine-tuning script (run_classifier, run_ner, run_squad) that `command`
    runs, `python path/run_ner.py ...` or `bert-run-ner ...`, and the index of its first
    flag; None for another program."""
    program = os.path.basename(command[0])
    index = _python_script(command) if program.startswith("python") else 0
    if index is None:
        return None
    family = _family_of(command[index])
    if family is None:
        return None
    if command[index].endswith(".py"):
        return command[index], index + 1
    spec = importlib.util.find_spec(family.script)  # a console script: its module
    return (spec.origin, index + 1) if spec is not None and spec.origin else None


def command_metric(command: Sequence[str]) -> best_checkpoint.Metric:
    """The metric a trial is scored by when it kept no best_state.json."""
    spec = command_flag(command, "best_metric")
    if spec is None:
        family = _command_family(command)
        if family is None:
            scripts = [f.script for f in families.FAMILIES]
            raise UserError(f"{' '.join(command[:2])}: not {', '.join(scripts[:-1])} or "
                            f"{scripts[-1]}; give the metric to compare as --best_metric=KEY in "
                            "the command")
        spec = family.search_metric
    return best_checkpoint.parse_metric(spec)


def check_command(command: Sequence[str]) -> None:
    if not command:
        raise UserError("no fine-tuning command: give it after --, e.g. bert-search "
                        "--output_dir=/tmp/search -- bert-run-classifier --task_name=MRPC ...")
    if command_flag(command, "output_dir") is not None:
        raise UserError("the fine-tuning command sets --output_dir: leave it out, the search "
                        "gives each trial its own directory under the search's --output_dir")
    if shutil.which(command[0]) is None:
        raise UserError(f"{command[0]}: no such program; give the fine-tuning command after --, "
                        "e.g. python run_classifier.py ... or bert-run-classifier ...")


def trial_argv(trial: Trial, options: SearchOptions) -> list[str]:
    """The trial's command line: the command, its directory and its grid values."""
    return [*options.command, f"--output_dir={os.path.join(options.output_dir, trial.name)}",
            *trial.flags()]


def check_trial_flags(options: SearchOptions, trials: Sequence[Trial],
                      flag_values: flags.FlagValues) -> None:
    """Parses the command and every trial's command line with the fine-tuning script's flags
    (types, enums, ranges, validators); nothing runs. Commands of other programs pass.

    Raises:
      script_flags.TrialFlagError: naming the command, or the grid entry (`learning_rate=abc`)
        or trial whose value the script refuses.
    """
    found = command_script(options.command)
    if found is None:
        return
    script, first = found
    definitions = script_flags.script_flags(script, flag_values)
    error = script_flags.parse_error(definitions, options.command[first:])
    if error:
        raise script_flags.TrialFlagError(f"the fine-tuning command: {error} (python {script} "
                                          "--helpshort lists its flags)")
    checked = set()
    for trial in trials:
        for value in trial.values:
            if value not in checked:
                checked.add(value)
                error = script_flags.parse_error(
                    definitions, [*options.command[first:], f"--{value[0]}={value[1]}"])
                if error:
                    raise script_flags.TrialFlagError(f"--grid: {value[0]}={value[1]}: {error}")
        error = script_flags.parse_error(definitions, trial_argv(trial, options)[first:])
        if error:
            raise script_flags.TrialFlagError(f"--grid: trial {trial.name}: {error}")


def trial_result(trial_dir: str, metric: best_checkpoint.Metric) -> dict[str, Any]:
    """The finished trial's score: from best_state.json and best/ when it selected checkpoints,
    else from eval_results.txt.

    Raises:
      UserError: naming the file when the trial wrote no figures or not the metric.
    """
    state_path = os.path.join(trial_dir, best_checkpoint.STATE_FILE)
    if filesystem.exists(state_path):
        with filesystem.open_text(state_path) as f:
            state = json.load(f)
        best_dir = os.path.join(trial_dir, best_checkpoint.BEST_DIR)
        dev = read_eval_results(os.path.join(best_dir, "eval_results.txt"))
        return {"metric": state["metric"], "mode": state["mode"], "score": state["best_score"],
                "dev": dev, "best_step": state["best_step"], "checkpoint_dir": best_dir}
    path = os.path.join(trial_dir, "eval_results.txt")
    if not filesystem.exists(path):
        raise UserError(f"{path}: the trial wrote no dev figures; add --do_eval (or "
                        "--best_metric) to the fine-tuning command")
    dev = read_eval_results(path)
    if metric.key not in dev:
        raise UserError(f"{path} has no {metric.key} (it has {', '.join(sorted(dev))}); set "
                        "--best_metric in the fine-tuning command")
    step = dev.get("global_step")
    return {"metric": metric.key, "mode": metric.mode, "score": dev[metric.key], "dev": dev,
            "best_step": None if step is None else int(step), "checkpoint_dir": trial_dir}


def read_trials(output_dir: str) -> dict[str, dict[str, Any]]:
    """trials.jsonl's records by trial name (an empty dict before the first finished trial)."""
    path = os.path.join(output_dir, TRIALS_FILE)
    if not filesystem.exists(path):
        return {}
    records = {}
    with filesystem.open_text(path) as f:
        for number, line in enumerate(f.read().splitlines(), 1):
            try:
                record = json.loads(line)
                records[record["trial"]] = record
            except (ValueError, KeyError, TypeError):
                raise UserError(f"{path}, line {number}: not a trial record; move the file away "
                                "to run every trial again") from None
    return records


def _write_trials(output_dir: str, records: Mapping[str, Mapping[str, Any]]) -> None:
    filesystem.write_atomically(os.path.join(output_dir, TRIALS_FILE), "".join(
        json.dumps(record, sort_keys=True) + "\n" for record in records.values()))


def run_trial(trial: Trial, options: SearchOptions, metric: best_checkpoint.Metric
              ) -> dict[str, Any]:
    """Runs one trial to its end (its output echoed on stderr) and returns its record."""
    trial_dir = os.path.join(options.output_dir, trial.name)
    command = trial_argv(trial, options)
    run_lock.stop_orphaned_run(trial_dir)  # a trial of a killed search may still hold it
    logging.info("trial %s: %s", trial.name, " ".join(command))
    start = time.monotonic()
    tail: collections.deque[str] = collections.deque(maxlen=OUTPUT_LINES_KEPT)
    # Tied to this process: it gets SIGTERM (and checkpoints) when the search dies.
    with subprocess.Popen(tied_command(command), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace") as process:
        for line in process.stdout:
            sys.stderr.write(line)
            tail.append(line.rstrip("\n"))
    record: dict[str, Any] = {"trial": trial.name, "values": dict(trial.values),
                              "output_dir": trial_dir,
                              "wall_seconds": round(time.monotonic() - start, 3)}
    if process.returncode != 0:
        return {**record, "status": "failed", "exit_code": process.returncode,
                "output": list(tail)}
    try:
        return {**record, "status": "done", **trial_result(trial_dir, metric)}
    except UserError as error:
        return {**record, "status": "failed", "exit_code": 0, "output": [str(error)]}


def best_record(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The done trial with the best score (the first of equal ones), or None."""
    best = None
    for record in records:
        if record.get("status") != "done":
            continue
        metric = best_checkpoint.Metric(record["metric"], record["mode"])
        if best is None or metric.better(record["score"], best["score"]):
            best = record
    return None if best is None else dict(best)


def format_table(records: Sequence[Mapping[str, Any]], best: Mapping[str, Any] | None) -> str:
    """The trials as a text table, the best marked with `*`."""
    names = list(dict.fromkeys(name for r in records for name in r["values"]))
    metric = best["metric"] if best else "score"
    header = ["", *names, metric, "best_step", "seconds", "status"]
    rows = [header]
    for r in records:
        score = r.get("score")
        rows.append(["*" if best and r["trial"] == best["trial"] else "",
                     *(r["values"].get(name, "") for name in names),
                     "" if score is None else f"{score:.4f}", str(r.get("best_step", "")),
                     f"{r['wall_seconds']:.0f}", r["status"]])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() + "\n"
                   for row in rows)


def interrupted(record: Mapping[str, Any]) -> bool:
    """Whether a failed trial was stopped from outside (killed by a signal, or preempted after
    a checkpoint): the same command resumes it. Any other failure would only fail again."""
    code = record.get("exit_code")
    return code is not None and (code < 0 or code == PREEMPTED_STATUS)


def _error_line(record: Mapping[str, Any]) -> str:
    """What a failed trial said last: its `error:` line, else its last line or exit status."""
    lines = [line for line in record.get("output", []) if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    if errors:
        return errors[-1].removeprefix("error: ")
    return lines[-1] if lines else f"exit status {record.get('exit_code')}"


def failure_message(failed: Sequence[Mapping[str, Any]]) -> str:
    """The search's error line for its failed trials: interrupted ones resume when the same
    command runs again; for another failure it names what to fix first."""
    message = (f"{len(failed)} trial(s) failed: {', '.join(r['trial'] for r in failed)} "
               "(trials.jsonl holds their last output lines)")
    broken = [r for r in failed if not interrupted(r)]
    if not broken:
        return f"{message}; run the same command again to resume them"
    return (f"{message}; {broken[0]['trial']} stopped on an error that running it again does "
            f"not fix ({_error_line(broken[0])}): fix the command or --grid, then run the same "
            "command again")


def plan_search(options: SearchOptions, flag_values: flags.FlagValues = flags.FLAGS
                ) -> list[Trial]:
    """The search's trials, everything checked that can be before any runs: the command, the
    grid, and every trial's flags by the script's own definitions (`flag_values`: the registry
    the scripts define their flags into, left as it was). Writes nothing.

    Raises:
      UserError (script_flags.TrialFlagError for a value the script refuses): naming what to fix.
    """
    check_command(options.command)
    command_metric(options.command)
    seed = command_flag(options.command, "seed") or str(DEFAULT_SEED)
    if not seed.lstrip("-").isdigit():
        raise UserError(f"the fine-tuning command's --seed={seed} is not an integer")
    trials = expand(parse_grid(options.grid), options.seeds, int(seed))
    check_trial_flags(options, trials, flag_values)
    return trials


def run_search(options: SearchOptions, trials: Sequence[Trial] | None = None
               ) -> dict[str, Any]:
    """Runs the trials not yet done, then writes trials.jsonl, best.json and prints the table.

    Args:
      options: the search.
      trials: `plan_search(options)`'s trials when the caller planned already.

    Returns:
      {"trials": the records in grid order, "best": the best record (None when none is done),
       "failed": the names of the failed trials}.
    """
    if trials is None:
        trials = plan_search(options)
    metric = command_metric(options.command)
    filesystem.makedirs(options.output_dir)
    records = read_trials(options.output_dir)
    for number, trial in enumerate(trials, 1):
        if records.get(trial.name, {}).get("status") == "done":
            logging.info("trial %d/%d %s: done before (%s = %s)", number, len(trials),
                         trial.name, records[trial.name]["metric"], records[trial.name]["score"])
            continue
        logging.info("trial %d/%d", number, len(trials))
        records[trial.name] = run_trial(trial, options, metric)
        _write_trials(options.output_dir, records)
    current = [records[trial.name] for trial in trials]
    best = best_record(current)
    if best is not None:
        filesystem.write_atomically(os.path.join(options.output_dir, BEST_FILE),
                                        json.dumps(best, indent=1, sort_keys=True) + "\n")
    sys.stdout.write(format_table(current, best))
    if best is not None:
        sys.stdout.write(f"best: {best['trial']} ({best['metric']} = {best['score']:.4f}): "
                         f"--output_dir={best['output_dir']}\n")
    return {"trials": current, "best": best,
            "failed": [r["trial"] for r in current if r["status"] != "done"]}
