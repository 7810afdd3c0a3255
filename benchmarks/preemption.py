"""Time from SIGTERM to exit, and steps lost, when a BERT-base pretraining run is preempted.

    flock /tmp/bert_tf_bench.lock python benchmarks/preemption.py
    python benchmarks/preemption.py --config small --steps_per_call 8

Starts `run_pretraining.py` (BERT-base, seq 128, batch 8, one device) on random records with
`--log_every_n_steps=--steps_per_call`, so that each compiled loop call runs that many steps and
logs when it ends. After two calls (tracing done, the step time known) it sends SIGTERM in the
middle of the first step of the next call and prints one JSON line:
{"config", "seconds_per_step", "signal_step", "saved_step", "steps_lost", "extra_steps",
 "sigterm_to_exit_seconds", "save_and_exit_seconds", "exit_status"}

signal_step is the step in flight when the signal came (from the log lines' times), saved_step
the one in the exit line; steps_lost = signal_step - 1 - saved_step when positive (steps finished
before the signal but not saved; the goal is 0), extra_steps = saved_step - signal_step (steps run
after the one in flight before saving). save_and_exit_seconds: from the handler starting the
checkpoint to the exit.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import tensorflow as tf

import training_throughput
from bert_tf.model.config import BertConfig
from bert_tf.records import features

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEP_LINE = re.compile(r"\] step (\d+)/")
EXIT_LINE = re.compile(r"preempted: saved \S+ at step (\d+);")
SAVE_START = "PreemptionCheckpointHandler: Starting saving a checkpoint."


def write_inputs(directory: str, config: str, batch: int) -> list[str]:
    """Random full-length records and the config; returns run_pretraining's data flags."""
    sizes, _ = training_throughput.CONFIGS[config]
    config_path = os.path.join(directory, "bert_config.json")
    with open(config_path, "w") as f:
        f.write(BertConfig(vocab_size=training_throughput.VOCAB_SIZE, **sizes).to_json_string())
    schema = features.pretraining_schema(training_throughput.SEQ, training_throughput.PREDICTIONS)
    rows = training_throughput.random_batch(batch * 16)
    records = os.path.join(directory, "train.tfrecord")
    with tf.io.TFRecordWriter(records) as writer:
        for i in range(batch * 16):
            writer.write(schema.encode({name: values[i] for name, values in rows.items()}))
    return [f"--input_file={records}", f"--bert_config_file={config_path}",
            f"--max_seq_length={training_throughput.SEQ}",
            f"--max_predictions_per_seq={training_throughput.PREDICTIONS}",
            f"--train_batch_size={batch}"]


def measure(config: str, steps_per_call: int) -> dict:
    directory = tempfile.mkdtemp(prefix="bert_tf_preemption_")
    try:
        _, batch = training_throughput.CONFIGS[config]
        flags = [*write_inputs(directory, config, batch), f"--output_dir={directory}/run",
                 "--do_train", "--num_train_steps=100000", "--num_warmup_steps=10",
                 f"--log_every_n_steps={steps_per_call}", "--save_checkpoints_steps=100000"]
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "",
               "PYTHONPATH": ROOT}
        process = subprocess.Popen([sys.executable, os.path.join(ROOT, "run_pretraining.py"),
                                    *flags], env=env, stderr=subprocess.PIPE, text=True)
        logged = []  # (step, time) of each call's log line
        lines = []
        while len(logged) < 3:
            line = process.stderr.readline()
            if not line:
                raise RuntimeError("".join(lines[-30:]))
            lines.append(line)
            if match := STEP_LINE.search(line):
                logged.append((int(match.group(1)), time.perf_counter()))
        seconds_per_step = (logged[2][1] - logged[1][1]) / steps_per_call
        time.sleep(seconds_per_step / 2)  # the middle of the next call's first step
        signalled = time.perf_counter()
        process.send_signal(signal.SIGTERM)
        signal_step = logged[2][0] + int((signalled - logged[2][1]) / seconds_per_step) + 1
        save_started = None
        for line in process.stderr:
            lines.append(line)
            if SAVE_START in line:
                save_started = time.perf_counter()
        status = process.wait()
        exited = time.perf_counter()
        output = "".join(lines)
        saved = EXIT_LINE.search(output)
        if saved is None:
            raise RuntimeError(output[-3000:])
        saved_step = int(saved.group(1))
        return {"config": config, "seconds_per_step": round(seconds_per_step, 3),
                "signal_step": signal_step, "saved_step": saved_step,
                "steps_lost": max(0, signal_step - 1 - saved_step),
                "extra_steps": saved_step - signal_step,
                "sigterm_to_exit_seconds": round(exited - signalled, 2),
                "save_and_exit_seconds": round(exited - save_started, 2) if save_started else None,
                "exit_status": status}
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="base", choices=sorted(training_throughput.CONFIGS))
    parser.add_argument("--steps_per_call", type=int, default=8)
    args = parser.parse_args()
    print(json.dumps(measure(args.config, args.steps_per_call)))


if __name__ == "__main__":
    main()
