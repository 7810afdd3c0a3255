"""Wall time from the end of training to the process's exit, for every training script.

    python benchmarks/run_end.py
    python benchmarks/run_end.py --checkout=/tmp/before --scripts=run_classifier,run_ner

Runs run_classifier, run_ner, run_squad, run_pretraining, run_multitask and run_distillation
(the scripts of --checkout, by default this one) one after the other on the demo's data and
its tiny model (hidden 128, 2 layers, trained from scratch; the vocabulary built by
build_vocab.py), each long enough (--train_seconds, roughly) for tf.data's autotuning to have
stretched its period, and timestamps their log lines as they come. Prints the machine, then one
line per script:

    run_ner steps=900 train_seconds=31.2 end_to_exit_seconds=3.1 after_last_save_seconds=[0.2] \
        longest_silence_seconds=0.9 silent_after="saved /tmp/.../ckpt-900"

end_to_exit_seconds: from the log line of the checkpoint that ends training (the last
`saved .../ckpt-N` in --output_dir; run_distillation: its prediction stage's) to the process's
exit, evaluation, predictions and exports included. after_last_save_seconds: the time from that
line to the next, for each training (run_distillation: each stage) in order.
longest_silence_seconds: the longest time without a log line after training's first checkpoint,
and silent_after the line before it. Each script's log lines, with the seconds since its start,
are written to --work_dir/<script>.log.

--input_speed measures instead what reading without autotuning costs: batches/s of
run_pretraining's training input (the demo's records, static and --dynamic_masking, batch 32)
with autotuning on and off, taking turns, and the ratio of the best of each.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = ("run_classifier", "run_ner", "run_squad", "run_pretraining", "run_multitask",
           "run_distillation")
SAVED = re.compile(r"\] saved (\S+/ckpt-(\d+))$")
# Training steps per second of the tiny model on 2 cores (measured once), for --train_seconds.
STEPS_PER_SECOND = {"run_classifier": 50, "run_ner": 60, "run_squad": 8, "run_pretraining": 35,
                    "run_multitask": 50, "run_distillation": 30}
LOOP_FLAGS = ["--save_checkpoints_steps=1000000", "--iterations_per_loop=100",
              "--log_every_n_steps=100"]


def _run(command: list[str], checkout: str, env: dict) -> list[tuple[float, str]]:
    """Runs `command` in `checkout`; returns its stderr lines with their arrival times (and the
    exit as a last line)."""
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=checkout, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    lines = [(time.monotonic() - started, line.rstrip("\n")) for line in process.stderr]
    status = process.wait()
    lines.append((time.monotonic() - started, f"exit {status}"))
    if status:
        raise RuntimeError(f"{command[1]} failed:\n" + "\n".join(text for _, text in lines[-30:]))
    return lines


def _figures(lines: list[tuple[float, str]], last_stage_dir: str) -> dict:
    saved = [(i, SAVED.search(text)) for i, (_, text) in enumerate(lines)]
    saved = [(i, match) for i, match in saved if match]
    end, end_match = [(i, match) for i, match in saved
                      if os.path.dirname(match.group(1)) == last_stage_dir][-1]
    # The checkpoint that ends each train() call: the last one of its directory.
    stage_ends = sorted({os.path.dirname(match.group(1)): i for i, match in saved}.values())
    start = next(at for at, text in lines if "] step " in text)
    gaps = [(lines[i + 1][0] - lines[i][0], lines[i][1])
            for i in range(saved[0][0], len(lines) - 1)]
    silence, before = max(gaps)
    return {"steps": int(end_match.group(2)), "train_seconds": round(lines[end][0] - start, 1),
            "end_to_exit_seconds": round(lines[-1][0] - lines[end][0], 1),
            "after_last_save_seconds": [round(lines[i + 1][0] - lines[i][0], 1)
                                        for i in stage_ends],
            "longest_silence_seconds": round(silence, 1),
            "silent_after": re.sub(r"^.*\] ", "", before)[:100]}


def _prepare(python: str, checkout: str, work: str, env: dict) -> None:
    """The demo's vocabulary, tiny config, pretraining records and a two-task tasks file."""
    data = os.path.join(checkout, "demo", "data")
    _run([python, "build_vocab.py", f"--input_file={data}/corpus.txt",
          f"--output_file={work}/vocab.txt", "--vocab_size=3000", "--num_unused=20"],
         checkout, env)
    with open(f"{work}/vocab.txt", encoding="utf-8") as f:
        vocab_size = sum(1 for _ in f)
    config = {"vocab_size": vocab_size, "hidden_size": 128, "num_hidden_layers": 2,
              "num_attention_heads": 4, "intermediate_size": 256, "hidden_act": "gelu",
              "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
              "max_position_embeddings": 128, "type_vocab_size": 2, "initializer_range": 0.02}
    with open(f"{work}/bert_config.json", "w", encoding="utf-8") as f:
        json.dump(config, f)
    with open(f"{work}/student_config.json", "w", encoding="utf-8") as f:
        json.dump({**config, "hidden_size": 64, "intermediate_size": 128}, f)
    with open(f"{work}/tasks.json", "w", encoding="utf-8") as f:
        json.dump({"tasks": [
            {"name": "sst", "type": "classifier", "task_name": "sst-2",
             "data_dir": f"{data}/classification"},
            {"name": "ner", "type": "ner", "data_dir": f"{data}/ner"}]}, f)
    _run([python, "create_pretraining_data.py", f"--input_file={data}/corpus.txt",
          f"--output_file={work}/pretrain.tfrecord", f"--vocab_file={work}/vocab.txt",
          "--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=1"],
         checkout, env)
    _run([python, "create_pretraining_data.py", f"--input_file={data}/corpus.txt",
          f"--output_file={work}/pretrain_dynamic.tfrecord", f"--vocab_file={work}/vocab.txt",
          "--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=1",
          "--dynamic_masking"], checkout, env)


def _commands(script: str, work: str, data: str, steps: int) -> tuple[list[str], str]:
    """The flags of `script` for about `steps` training steps, and its last stage's directory."""
    out = f"{work}/{script}"
    model = [f"--vocab_file={work}/vocab.txt", f"--bert_config_file={work}/bert_config.json",
             "--max_seq_length=64", "--train_batch_size=32", "--learning_rate=2e-4",
             f"--output_dir={out}", *LOOP_FLAGS]
    classifier = ["--task_name=sst-2", f"--data_dir={data}/classification"]
    epochs = lambda examples: f"--num_train_epochs={max(1, steps * 32 // examples)}"  # noqa: E731
    if script == "run_classifier":
        return [*classifier, *model, "--do_train", "--do_eval", epochs(800)], out
    if script == "run_ner":
        return [f"--data_dir={data}/ner", *model, "--do_train", "--do_eval", epochs(680)], out
    if script == "run_squad":
        return [f"--train_file={data}/squad/train-v2.0.json",
                f"--predict_file={data}/squad/dev-v2.0.json", "--version_2_with_negative",
                *model, "--max_seq_length=128", "--doc_stride=64", "--max_query_length=32",
                "--do_train", "--do_predict", epochs(2700)], out
    if script == "run_pretraining":
        return [f"--input_file={work}/pretrain.tfrecord", *model, "--max_predictions_per_seq=10",
                "--do_train", "--do_eval", f"--num_train_steps={steps}",
                "--num_warmup_steps=10", "--max_eval_steps=20"], out
    if script == "run_multitask":
        return [f"--tasks={work}/tasks.json", *model, "--do_train", "--do_eval",
                epochs(1480)], out
    teacher = f"{work}/run_classifier"
    flags = [*classifier, f"--vocab_file={work}/vocab.txt", f"--teacher_dir={teacher}",
             f"--student_config={work}/student_config.json", "--stages=intermediate,prediction",
             "--max_seq_length=64", "--train_batch_size=32", "--learning_rate=5e-4",
             "--intermediate_learning_rate=1e-3", f"--output_dir={out}", *LOOP_FLAGS,
             "--do_eval", f"--intermediate_epochs={max(1, steps * 16 // 800)}",
             f"--num_train_epochs={max(1, steps * 16 // 800)}"]
    return flags, out


def _input_speed(work: str, batches: int, rounds: int) -> None:
    """Prints batches/s of run_pretraining's training input (the demo's records, static and
    --dynamic_masking, batch 32) with tf.data autotuning on and off, the two taking turns."""
    import tensorflow as tf  # noqa: PLC0415
    from bert_tf.records import features  # noqa: PLC0415
    from bert_tf.tasks.pretraining import dynamic_masking  # noqa: PLC0415
    schema = features.pretraining_schema(64, 10)
    for records in ("pretrain.tfrecord", "pretrain_dynamic.tfrecord"):
        speeds = {True: [], False: []}
        for _ in range(rounds):
            for autotune in (True, False):
                options = tf.data.Options()
                options.autotune.enabled = autotune
                dataset = dynamic_masking.pretraining_dataset(
                    f"{work}/{records}", schema, 32, is_training=True, input_context=None,
                    seed=12345, drop_remainder=True).with_options(options)
                iterator = iter(dataset)
                for _ in range(20):  # warm-up: buffers filled, functions traced
                    next(iterator)
                started = time.perf_counter()
                for _ in range(batches):
                    next(iterator)
                speeds[autotune].append(batches / (time.perf_counter() - started))
        best = {autotune: max(values) for autotune, values in speeds.items()}
        print(json.dumps({"input": records, "batches_per_second_autotune_on": speeds[True],
                          "batches_per_second_autotune_off": speeds[False],
                          "best_off_over_best_on": round(best[False] / best[True], 3)}),
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", default=ROOT, help="the bert_tf checkout whose scripts run")
    parser.add_argument("--scripts", default=",".join(SCRIPTS))
    parser.add_argument("--train_seconds", type=float, default=30.0,
                        help="about how long each script trains (its number of steps from a "
                             "measured speed)")
    parser.add_argument("--input_speed", action="store_true",
                        help="instead: batches/s of the pretraining input, autotuning on and off")
    parser.add_argument("--work_dir", default=None, help="kept when given (default: a temporary "
                                                         "directory, removed)")
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import tensorflow as tf  # noqa: PLC0415 (after the arguments: --help stays fast)
    from machine import machine_info  # noqa: PLC0415
    print(json.dumps(machine_info(tf)), flush=True)
    checkout = os.path.abspath(args.checkout)
    sys.path.insert(0, checkout)  # --input_speed's bert_tf: the checkout's
    work = args.work_dir or tempfile.mkdtemp(prefix="bert_tf_run_end_")
    os.makedirs(work, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": checkout, "TF_CPP_MIN_LOG_LEVEL": "2",
           "CUDA_VISIBLE_DEVICES": ""}
    try:
        _prepare(sys.executable, checkout, work, env)
        if args.input_speed:
            _input_speed(work, batches=300, rounds=3)
            return
        scripts = args.scripts.split(",")
        if "run_distillation" in scripts and "run_classifier" not in scripts:
            scripts.insert(0, "run_classifier")  # the teacher
        for script in scripts:
            steps = int(args.train_seconds * STEPS_PER_SECOND[script])
            flags, last_stage = _commands(script, work, os.path.join(checkout, "demo", "data"),
                                          steps)
            shutil.rmtree(f"{work}/{script}", ignore_errors=True)
            lines = _run([sys.executable, f"{script}.py", *flags], checkout, env)
            with open(f"{work}/{script}.log", "w", encoding="utf-8") as f:
                f.writelines(f"{at:9.3f} {text}\n" for at, text in lines)
            figures = _figures(lines, last_stage)
            print(script, " ".join(f"{name}={json.dumps(value)}" for name, value in
                                   figures.items()), flush=True)
    finally:
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
