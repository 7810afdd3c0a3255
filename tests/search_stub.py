"""A stand-in for a fine-tuning script in the search's tests: no TensorFlow, a few milliseconds.

Takes the flags the search passes (--output_dir, the grid's, --seed) and writes what the real
scripts write: eval_results.txt (`key = value` lines, sorted) and, with --best_metric, the
best_state.json and best/eval_results.txt of bert_tf.training.best_checkpoint. Its dev score is
a known function of the flags: eval_accuracy = 0.5 + 100 * learning_rate + num_train_epochs / 100
+ (seed - 12345) / 1000. Like a real run it resumes: progress.json counts the attempts, and
attempts.txt gets one line per start. --kill_at_learning_rate=X kills the first attempt of the
trial with that rate (SIGKILL, as a preemption) after it has written its progress.
"""

import json
import os
import signal
import sys


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


def main():
    output_dir = flag("output_dir")
    os.makedirs(output_dir, exist_ok=True)
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
