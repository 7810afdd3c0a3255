"""Runs a fine-tuning command once per trial of a grid and picks the best on the dev set.

Each trial is the user's command as a subprocess with `--output_dir=<output_dir>/<trial>` and
the trial's flags appended (absl takes the last value of a flag). Its score is the metric of
its `best_state.json` when it selected checkpoints (--best_metric, --eval_every_*; the figures in
`best/eval_results.txt`), else the key of its `eval_results.txt` that the command's
--best_metric names, or the script's default (`DEFAULT_METRICS`).

Files in --output_dir:
  <trial>/       the trial's run directory (checkpoints, eval_results.txt, best/, ...)
  trials.jsonl   one JSON line per finished trial, in grid order: trial, values, status
                 ("done" or "failed"), metric, mode, score, dev (its eval_results figures),
                 best_step, wall_seconds (of the attempt that finished it), output_dir,
                 checkpoint_dir, and for a failure exit_code and the output's last lines
  best.json      the trial with the best score: its record, and `output_dir` /
                 `checkpoint_dir` for --do_predict or --export_dir

Running the same search again skips the trials that are done; a failed or interrupted trial
runs again in its directory, where the fine-tuning script resumes from its last checkpoint.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import subprocess
import sys
import time
from typing import Any, Mapping, Sequence

import tensorflow as tf
from absl import logging

from bert_tf import filesystem
from bert_tf.errors import UserError
from bert_tf.tasks.ner.task import DEFAULT_BEST_METRIC as NER_METRIC
from bert_tf.tasks.squad.task import DEFAULT_BEST_METRIC as SQUAD_METRIC
from bert_tf.training import best_checkpoint
from bert_tf.training.log import read_eval_results
from bert_tf.workflows.search.grid import DEFAULT_SEED, PAPER_GRID, Trial, expand, parse_grid

TRIALS_FILE = "trials.jsonl"
BEST_FILE = "best.json"
# --best_metric's default of each fine-tuning script (a regression classifier needs
# --best_metric=eval_pearson in its command: it has no accuracy).
DEFAULT_METRICS = {"run_classifier": "eval_accuracy", "run_ner": NER_METRIC,
                   "run_squad": SQUAD_METRIC}
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


def _script_name(command: Sequence[str]) -> str | None:
    """run_classifier / run_ner / run_squad for `python run_classifier.py ...` or
    `bert-run-classifier ...`, else None."""
    for arg in command:
        if arg.startswith("-"):
            continue
        name = os.path.basename(arg).removesuffix(".py").replace("bert-run-", "run_")
        name = name.replace("-", "_")
        if name in DEFAULT_METRICS:
            return name
    return None


def command_metric(command: Sequence[str]) -> best_checkpoint.Metric:
    """The metric a trial is scored by when it kept no best_state.json."""
    spec = command_flag(command, "best_metric")
    if spec is None:
        script = _script_name(command)
        if script is None:
            raise UserError(f"{' '.join(command[:2])}: not run_classifier, run_ner or run_squad; "
                            "give the metric to compare as --best_metric=KEY in the command")
        spec = DEFAULT_METRICS[script]
    return best_checkpoint.parse_metric(spec)


def check_command(command: Sequence[str]) -> None:
    if not command:
        raise UserError("no fine-tuning command: give it after --, e.g. bert-search "
                        "--output_dir=/tmp/search -- bert-run-classifier --task_name=MRPC ...")
    if command_flag(command, "output_dir") is not None:
        raise UserError("the fine-tuning command sets --output_dir: leave it out, the search "
                        "gives each trial its own directory under the search's --output_dir")


def trial_result(trial_dir: str, metric: best_checkpoint.Metric) -> dict[str, Any]:
    """The finished trial's score: from best_state.json and best/ when it selected checkpoints,
    else from eval_results.txt.

    Raises:
      UserError: naming the file when the trial wrote no figures or not the metric.
    """
    state_path = os.path.join(trial_dir, best_checkpoint.STATE_FILE)
    if filesystem.exists(state_path):
        with tf.io.gfile.GFile(state_path) as f:
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
    with tf.io.gfile.GFile(path) as f:
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
    command = [*options.command, f"--output_dir={trial_dir}", *trial.flags()]
    logging.info("trial %s: %s", trial.name, " ".join(command))
    start = time.monotonic()
    tail: collections.deque[str] = collections.deque(maxlen=OUTPUT_LINES_KEPT)
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace") as process:
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


def run_search(options: SearchOptions) -> dict[str, Any]:
    """Runs the trials not yet done, then writes trials.jsonl, best.json and prints the table.

    Returns:
      {"trials": the records in grid order, "best": the best record (None when none is done),
       "failed": the names of the failed trials}.
    """
    check_command(options.command)
    metric = command_metric(options.command)
    base_seed = int(command_flag(options.command, "seed") or DEFAULT_SEED)
    trials = expand(parse_grid(options.grid), options.seeds, base_seed)
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
