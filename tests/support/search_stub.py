"""A stand-in for a fine-tuning script in the search's tests: no TensorFlow, a few milliseconds.

Takes the flags the search passes (--output_dir, the grid's, --seed) and writes what the real
scripts write: eval_results.txt (`key = value` lines, sorted) and, with --best_metric, the
best_state.json and best/eval_results.txt of bert_tf.training.best_checkpoint. Its dev score is
a known function of the flags: eval_accuracy = 0.5 + 100 * learning_rate + num_train_epochs / 100
+ (seed - 12345) / 1000. Like a real run it resumes: progress.json counts the attempts, and
attempts.txt gets one line per start. --kill_at_learning_rate=X kills the first attempt of the
trial with that rate (SIGKILL, as a preemption) after it has written its progress.

As the scripts, it holds its directory's run lock (bert_tf.cli.run_lock, no TensorFlow) and turns
SIGTERM into a checkpoint: checkpoint.json, written while the lock is still held (after a pause,
as a real save takes), then exit status 75. --wait_at_learning_rate=X makes the first attempt of
the trial with that rate write waiting.txt and wait for that signal (at most a minute) instead
of finishing: a trial in flight for a test that kills its search.
"""

import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
from bert_tf.cli import run_lock  # noqa: E402 (this checkout's, not an installed copy)
from bert_tf.errors import PREEMPTED_STATUS  # noqa: E402

WAIT_SECONDS = 60
SAVE_SECONDS = 1.0


def flag(name, default=None):
    value = default
    for arg in sys.argv[1:]:
        if arg.startswith(f"--{name}="):
            value = arg.split("=", 1)[1]
    return value


def write_results(path, results):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write("".join(f"{key} = {results[key]}\n" for key in sorted(results)))
    os.replace(path + ".tmp", path)


class Preempted(Exception):
    """SIGTERM arrived: save and exit as the scripts do."""


def preempt(signum, frame):
    del frame
    signal.signal(signum, signal.SIG_IGN)  # as the scripts: a second notice while saving
    # is absorbed
    raise Preempted()


def main():
    output_dir = flag("output_dir")
    signal.signal(signal.SIGTERM, preempt)
    try:
        with run_lock.output_lock(output_dir):
            train(output_dir)
    except Preempted:
        sys.exit(PREEMPTED_STATUS)


def save_checkpoint(output_dir, attempts):
    time.sleep(SAVE_SECONDS)
    with open(os.path.join(output_dir, "checkpoint.json"), "w", encoding="utf-8") as f:
        json.dump({"attempt": attempts}, f)


def train(output_dir):
    progress_path = os.path.join(output_dir, "progress.json")
    attempts = 1
    if os.path.exists(progress_path):
        with open(progress_path, encoding="utf-8") as f:
            attempts = json.load(f)["attempts"] + 1
    with open(progress_path, "w", encoding="utf-8") as f:
        json.dump({"attempts": attempts}, f)
    with open(os.path.join(output_dir, "attempts.txt"), "a", encoding="utf-8") as f:
        f.write(" ".join(sys.argv[1:]) + "\n")
    learning_rate = float(flag("learning_rate", "5e-5"))
    print(f"stub run, attempt {attempts}")
    sys.stdout.flush()
    kill_at = flag("kill_at_learning_rate")
    if attempts == 1 and kill_at is not None and kill_at == flag("learning_rate"):
        os.kill(os.getpid(), signal.SIGKILL)
    wait_at = flag("wait_at_learning_rate")
    if attempts == 1 and wait_at is not None and wait_at == flag("learning_rate"):
        try:
            with open(os.path.join(output_dir, "waiting.txt"), "w", encoding="utf-8") as f:
                f.write("waiting for SIGTERM\n")
            time.sleep(WAIT_SECONDS)
        except Preempted:
            save_checkpoint(output_dir, attempts)
            raise
        sys.exit("nobody stopped this trial")
    epochs = float(flag("num_train_epochs", "3"))
    accuracy = (0.5 + 100 * learning_rate + epochs / 100
                + (int(flag("seed", "12345")) - 12345) / 1000)
    steps = int(10 * epochs)
    final = {"eval_accuracy": accuracy, "eval_loss": 1 - accuracy, "global_step": steps}
    metric = flag("best_metric")
    if metric:  # the best checkpoint was at the middle of training, 0.01 better than the end
        best = {**final, "eval_accuracy": accuracy + 0.01, "global_step": steps // 2}
        write_results(os.path.join(output_dir, "best", "eval_results.txt"), best)
        key, _, mode = metric.partition(":")
        with open(os.path.join(output_dir, "best_state.json"), "w", encoding="utf-8") as f:
            json.dump({"metric": key, "mode": mode or "max", "best_score": best[key],
                       "best_step": steps // 2, "bad_evaluations": 1, "last_step": steps,
                       "stopped": False}, f)
    write_results(os.path.join(output_dir, "eval_results.txt"), final)


if __name__ == "__main__":
    main()
