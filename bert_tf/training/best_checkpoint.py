"""Evaluation during training: the best checkpoint, kept in `output_dir/best/`, early stopping.

`BestCheckpoint` is the evaluator that `training.train(..., evaluator=...)` calls on each
checkpoint it saves at an evaluation step (every N steps and/or every epoch, and the last step).
It evaluates the checkpoint with the task's own function (the figures of eval_results.txt),
compares `metric` with the best so far and, when better, replaces `output_dir/best/` at once:

  best/ckpt-N.index, best/ckpt-N.data-*, best/checkpoint   the best checkpoint (a whole run
                                                           directory: --init_checkpoint and
                                                           --predict_from=best read it)
  best/eval_results.txt                                    its figures
  best/label_list.txt, best/bert_config.json, ...          copied from output_dir
  best_state.json                                          best score and step, evaluations
                                                           without improvement, last step seen

The new best is assembled beside `best/` and swapped in by the one writer
(`filesystem.atomic_directory`: `best/` moved aside, the new one renamed in); an interrupted swap
is completed on the next start. `best_state.json` is written after each evaluation (temp name, then rename), so a
restarted run keeps its best score and patience count; a checkpoint saved but not yet evaluated
when the run stopped is evaluated first on restart.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Callable, Mapping, Sequence

import tensorflow as tf
from absl import logging

from bert_tf import filesystem
from bert_tf.errors import UserError
from bert_tf.training import log as training_log

BEST_DIR = "best"
STATE_FILE = "best_state.json"
PREDICT_FROM = ("best", "last")
# Beside the checkpoints, what makes best/ a run directory of its own (when present).
RUN_FILES = ("label_list.txt", "bert_config.json", "thresholds.json")


@dataclasses.dataclass(frozen=True)
class Metric:
    """A key of eval_results.txt and whether larger (`max`) or smaller (`min`) is better."""

    key: str
    mode: str

    def better(self, score: float, best: float | None) -> bool:
        if best is None:
            return True
        return score > best if self.mode == "max" else score < best


def parse_metric(spec: str) -> Metric:
    """`eval_f1` or `eval_f1:max` / `eval_loss:min` → Metric; without a direction, keys ending
    in `loss` are minimised and all others maximised."""
    key, _, mode = spec.partition(":")
    mode = mode or ("min" if key.endswith("loss") else "max")
    if not key or mode not in ("max", "min"):
        raise UserError(f"--best_metric={spec}: give a key of eval_results.txt, optionally with "
                         ":max or :min (e.g. eval_f1:max, eval_loss:min)")
    return Metric(key, mode)


@dataclasses.dataclass
class _State:
    best_score: float | None = None
    best_step: int = -1
    bad_evaluations: int = 0
    last_step: int = -1
    stopped: bool = False


class BestCheckpoint:
    """The evaluator hook of `training.train` (see the module docstring).

    Args:
      output_dir: the run's directory.
      evaluate: checkpoint path → the figures of eval_results.txt for that checkpoint.
      metric: what "best" means.
      periods: evaluate at every multiple of each (steps; empty: at the last step only).
      patience: stop after this many evaluations in a row without improvement (0: never).
      reported_keys: the keys `evaluate` reports, to refuse an unknown metric before training.
      chief: whether this process writes files (False on the other workers).
    """

    def __init__(self, output_dir: str, evaluate: Callable[[str], Mapping[str, float]],
                 metric: Metric, *, periods: Sequence[int] = (), patience: int = 0,
                 reported_keys: Sequence[str] | None = None, chief: bool = True):
        if reported_keys is not None and metric.key not in reported_keys:
            raise UserError(f"--best_metric={metric.key}: this task reports "
                             f"{', '.join(sorted(reported_keys))}; pick one of them")
        if patience < 0 or any(p < 1 for p in periods):
            raise UserError("--early_stopping_patience must be at least 0 and "
                             "--eval_every_n_steps at least 1")
        self.output_dir, self.evaluate, self.metric = output_dir, evaluate, metric
        self.periods, self.patience, self.chief = tuple(periods), patience, chief
        self.best_dir = os.path.join(output_dir, BEST_DIR)
        self.state = self._read_state()
        if chief:
            filesystem.recover_interrupted_write(self.best_dir)

    # ---------------------------------------------------------------- the loop's hook
    def steps_to_next(self, step: int) -> int:
        """Updates from `step` to the next periodic evaluation (a large number without one)."""
        return min((p - step % p for p in self.periods), default=1 << 62)

    def due(self, step: int, num_train_steps: int) -> bool:
        return step == num_train_steps or any(step % p == 0 for p in self.periods)

    def resume(self, step: int, num_train_steps: int, checkpoint: str) -> bool:
        """Called once before training from `step`: evaluates the restored checkpoint if it was
        due and not yet evaluated. Returns whether training must not continue (stopped early)."""
        if self.state.stopped:
            logging.info("early stopping at step %d (best %s = %s at step %d): not training on",
                         self.state.last_step, self.metric.key, self.state.best_score,
                         self.state.best_step)
            return True
        if step > 0 and step > self.state.last_step and self.due(step, num_train_steps):
            return self(step, checkpoint)
        return False

    def __call__(self, step: int, checkpoint: str) -> bool:
        """Evaluates the checkpoint of `step`; returns whether to stop training."""
        results = dict(self.evaluate(checkpoint))
        if self.metric.key not in results:
            raise UserError(f"--best_metric={self.metric.key}: the evaluation reports "
                             f"{', '.join(sorted(results))}; pick one of them")
        score = float(results[self.metric.key])
        state = self.state
        if self.metric.better(score, state.best_score):
            if self.chief:
                self._keep(checkpoint, results)
            state.best_score, state.best_step, state.bad_evaluations = score, step, 0
        else:
            state.bad_evaluations += 1
        state.last_step = step
        state.stopped = bool(self.patience) and state.bad_evaluations >= self.patience
        logging.info("step %d: %s = %.6g (best %.6g at step %d%s)", step, self.metric.key, score,
                     state.best_score, state.best_step,
                     ", stopping early" if state.stopped else "")
        if self.chief:
            self._write_state()
        return state.stopped

    # ---------------------------------------------------------------- files
    def _keep(self, checkpoint: str, results: Mapping[str, float]) -> None:
        name = os.path.basename(checkpoint)
        with filesystem.atomic_directory(self.best_dir) as staging:
            filesystem.makedirs(staging)
            for path in filesystem.glob(f"{checkpoint}.*"):
                filesystem.copy(path, os.path.join(staging, os.path.basename(path)))
            filesystem.write_atomically(os.path.join(staging, "checkpoint"),
                                        f'model_checkpoint_path: "{name}"\nall_model_checkpoint_paths: "{name}"\n')
            for file_name in RUN_FILES:
                source = os.path.join(self.output_dir, file_name)
                if filesystem.exists(source):
                    filesystem.copy(source, os.path.join(staging, file_name))
            training_log.write_eval_results(os.path.join(staging, "eval_results.txt"), results)
        logging.info("best checkpoint: %s -> %s", checkpoint, self.best_dir)

    def _state_path(self) -> str:
        return os.path.join(self.output_dir, STATE_FILE)

    def _read_state(self) -> _State:
        path = self._state_path()
        if not filesystem.exists(path):
            return _State()
        with filesystem.open_text(path) as f:
            saved = json.load(f)
        if (saved.pop("metric"), saved.pop("mode")) != (self.metric.key, self.metric.mode):
            raise UserError(f"{path} selects by another --best_metric; keep it or use another "
                             "--output_dir")
        return _State(**saved)

    def _write_state(self) -> None:
        filesystem.write_atomically(self._state_path(), json.dumps(
            {"metric": self.metric.key, "mode": self.metric.mode,
             **dataclasses.asdict(self.state)}, indent=1))


def prediction_checkpoint(output_dir: str, predict_from: str) -> str | None:
    """The checkpoint --predict_from names: `best` → best/'s when there is one (else the last,
    with a log line), `last` → None (the loop takes output_dir's latest)."""
    if predict_from not in PREDICT_FROM:
        raise UserError(f"--predict_from must be one of {', '.join(PREDICT_FROM)}, "
                         f"got {predict_from!r}")
    if predict_from == "last":
        return None
    best = tf.train.latest_checkpoint(os.path.join(output_dir, BEST_DIR))
    if best is None:
        logging.info("no %s/ checkpoint in %s (no evaluation during training): predicting "
                     "from the last checkpoint", BEST_DIR, output_dir)
    return best


def from_options(options, output_dir: str, evaluate: Callable[[str], Mapping[str, float]],
                 steps_per_epoch: int, default_metric: str,
                 reported_keys: Sequence[str] | None, chief: bool = True
                 ) -> BestCheckpoint | None:
    """The evaluator the options ask for (`finetuning.FinetuningOptions`' eval_every_n_steps,
    eval_every_epoch, best_metric, early_stopping_patience), or None when none of them is set."""
    if not (options.eval_every_n_steps or options.eval_every_epoch or options.best_metric
            or options.early_stopping_patience):
        return None
    periods = [options.eval_every_n_steps] if options.eval_every_n_steps else []
    if options.eval_every_epoch:
        periods.append(max(1, steps_per_epoch))
    return BestCheckpoint(output_dir, evaluate, parse_metric(options.best_metric or default_metric),
                          periods=periods, patience=options.early_stopping_patience,
                          reported_keys=reported_keys, chief=chief)
