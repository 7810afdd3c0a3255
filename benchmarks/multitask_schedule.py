"""Time to draw a multi-task run's schedule (`bert_tf.workflows.multitask.sampling.schedule`),
which every start and resume of run_multitask.py does before its first step.

Prints the machine, then one JSON line per --task_sampling: seconds for --steps steps over
--tasks tasks (the best of --repeats).

  python benchmarks/multitask_schedule.py --steps=1000000
"""

from __future__ import annotations

import json
import time

import tensorflow as tf
from absl import app, flags

from bert_tf.workflows.multitask import sampling
from machine import machine_info

flags.DEFINE_integer("steps", 1_000_000, "Training steps the schedule covers.")
flags.DEFINE_integer("tasks", 4, "Tasks in the mix (sizes 1000, 2000, ...; weights 1).")
flags.DEFINE_integer("repeats", 3, "Timed draws per sampling; the best is printed.")
FLAGS = flags.FLAGS


def main(argv) -> None:
    del argv
    print(json.dumps(machine_info(tf)))
    sizes = [1000 * (k + 1) for k in range(FLAGS.tasks)]
    weights = [1.0] * FLAGS.tasks
    for name in sampling.SAMPLINGS:
        seconds = []
        for _ in range(FLAGS.repeats):
            start = time.perf_counter()
            sampling.schedule(sizes, weights, name, FLAGS.steps, seed=1)
            seconds.append(time.perf_counter() - start)
        print(json.dumps({"task_sampling": name, "steps": FLAGS.steps, "tasks": FLAGS.tasks,
                          "seconds": round(min(seconds), 3)}))


if __name__ == "__main__":
    app.run(main)
