"""What the loop shows while it trains: a log line and TensorBoard summaries every N steps; and
the original's `eval_results.txt`, which every task writes after evaluating."""

from __future__ import annotations

import datetime
import os
from typing import Callable, Mapping, Sequence

import numpy as np
import tensorflow as tf
from absl import logging
from tensorflow.core.framework import summary_pb2

from bert_tf import filesystem

# What tf.summary.scalar writes, without needing the tensorboard package at training time.
_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"),
    data_class=summary_pb2.DATA_CLASS_SCALAR)


Figures = Mapping[str, float | np.ndarray]
MetricsFromCounts = Callable[[Mapping[str, np.ndarray]], Mapping[str, float]]


def host_values(figures: Mapping[str, tf.Tensor]) -> dict[str, float | np.ndarray]:
    """A step's figures on the host: scalars as floats, counts ("<name>/counts") as float64
    arrays."""
    return {name: np.asarray(value, np.float64) if name.endswith("/counts") else float(value)
            for name, value in figures.items()}


def summarize(totals: Figures, count: int,
              metrics_from_counts: MetricsFromCounts | None = None) -> dict[str, float]:
    """Figures summed over `count` steps (or eval batches) → their means.

    A pair "<name>/sum", "<name>/weight" becomes "<name>" = sum / weight (a weighted mean over
    every example seen, 0 when the weight is 0); the arrays "<name>/counts" go, as {name: sum},
    to `metrics_from_counts` (the task's), whose metrics join the results; any other figure is
    averaged over the steps.
    """
    results, counts = {}, {}
    for name, value in totals.items():
        if name.endswith("/weight"):
            base = name[: -len("/weight")]
            results[base] = totals[f"{base}/sum"] / value if value else 0.0
        elif name.endswith("/counts"):
            counts[name[: -len("/counts")]] = value
        elif not name.endswith("/sum"):
            results[name] = value / count
    if counts and metrics_from_counts is not None:
        results.update({name: float(value)
                        for name, value in metrics_from_counts(counts).items()})
    return results


class SummaryLog:
    """Collects the figures of the steps since the last log line; writes them on `flush`.

    Args:
        logdir: TensorBoard directory, or None for no summaries (non-chief workers).
        total_steps: the run's num_train_steps, for the time left.
        global_batch_size: sequences per step, for sequences/s.
        last_values: figures that are reported at their latest value, not averaged.
        metrics_from_counts: the task's, for the window's summed counts (see `summarize`).
    """

    def __init__(self, logdir: str | None, total_steps: int, global_batch_size: int,
                 last_values: Sequence[str] = (),
                 metrics_from_counts: MetricsFromCounts | None = None):
        self._last_value_names = frozenset(last_values)
        self._metrics_from_counts = metrics_from_counts
        self._writer = tf.summary.create_file_writer(logdir) if logdir else None
        self._total_steps = total_steps
        self._batch = global_batch_size
        self._reset()

    def _reset(self) -> None:
        self._totals: dict[str, float | np.ndarray] = {}
        self._last: dict[str, float] = {}
        self._steps = 0
        self._seconds = 0.0

    def add(self, totals: Figures, steps: int, seconds: float) -> None:
        """Adds `steps` steps whose figures sum to `totals`, run in `seconds`.

        Figures in `last_values` (the learning rate) are the last step's, not sums.
        """
        for name, value in totals.items():
            if name in self._last_value_names:
                self._last[name] = value
            else:
                self._totals[name] = self._totals.get(name, 0.0) + value
        self._steps += steps
        self._seconds += seconds

    def flush(self, step: int) -> dict[str, float]:
        """Logs and writes the window's figures at global step `step`; returns them."""
        if not self._steps:
            return {}
        figures = {**summarize(self._totals, self._steps, self._metrics_from_counts),
                   **self._last}
        figures["sequences_per_second"] = self._steps * self._batch / max(self._seconds, 1e-9)
        seconds_per_step = self._seconds / self._steps
        left = datetime.timedelta(seconds=round((self._total_steps - step) * seconds_per_step))
        logging.info("step %d/%d  %s  time left %s", step, self._total_steps,
                     "  ".join(f"{name} {_format(value)}" for name, value in sorted(figures.items())),
                     left)
        if self._writer is not None:
            _write(self._writer, step, figures)
        self._reset()
        return figures


def _write(writer, step: int, figures: Mapping[str, float]) -> None:
    with writer.as_default(step=step):
        for name, value in figures.items():
            tf.summary.write(name, tf.constant(value, tf.float32), metadata=_SCALAR_METADATA)
    writer.flush()


def write_scalars(logdir: str, step: int, figures: Mapping[str, float]) -> None:
    """Writes `figures` as TensorBoard scalars at `step` (e.g. eval results)."""
    writer = tf.summary.create_file_writer(logdir)
    _write(writer, step, figures)
    writer.close()


def _format(value: float) -> str:
    return f"{value:.3e}" if 0 < abs(value) < 1e-3 else f"{value:.4f}"


def format_eval_results(results: Mapping[str, object]) -> str:
    """The original's text: one `key = value` line per key, keys sorted, values via str()."""
    return "".join("%s = %s\n" % (key, str(results[key])) for key in sorted(results))


def write_eval_results(path: str, results: Mapping[str, object]) -> None:
    """Writes `format_eval_results(results)` to `path` atomically (temp name, then rename).

    Works for local paths and tf.io.gfile ones (gs://). Pass numpy scalars (np.float32 metrics,
    an int global_step) to get the original's digits.
    """
    directory = os.path.dirname(path)
    if directory:
        filesystem.makedirs(directory)
    filesystem.write_atomically(path, format_eval_results(results))


def read_eval_results(path: str) -> dict[str, float]:
    """The figures of an eval_results.txt (`format_eval_results`' lines) as floats; lines whose
    value is not a number are left out."""
    lines = filesystem.read_text(path).splitlines()
    results = {}
    for line in lines:
        key, _, value = line.partition(" = ")
        try:
            results[key.strip()] = float(value)
        except ValueError:
            continue
    return results
