"""Milliseconds of two encoder ops, a git revision's against the working tree's, as JSON lines:
`TokenLayout.pad` (the real-token rows back on the [B,S] grid) and `LayerNorm` (forward, and
forward + backward), on BERT-base's shapes.

    python benchmarks/encoder_ops.py --baseline=b088cdc

Both versions come from `bert_tf/model/encoder.py` (the baseline through
`baseline_encoder.encoder_at`). Prints the machine, then per op and set-up one line
{"op", "rows", "real_fraction", "baseline_ms", "ms", "speedup"} (baseline / working tree: each
the best of --repeats rounds in which the two take turns, every round at least --min_seconds).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import tensorflow as tf

import baseline_encoder
from bert_tf.model import encoder as current_encoder
from machine import machine_info


def best_ms(functions: list, repeats: int, min_seconds: float) -> list[float]:
    """Each function's best mean milliseconds per call over `repeats` rounds taking turns."""
    for function in functions:
        function()  # tracing and oneDNN's first-call work
    best = [float("inf")] * len(functions)
    for _ in range(repeats):
        for i, function in enumerate(functions):
            calls, started = 0, time.perf_counter()
            while time.perf_counter() - started < min_seconds:
                function()
                calls += 1
            best[i] = min(best[i], (time.perf_counter() - started) / calls * 1e3)
    return best


def pad_function(module, mask: tf.Tensor, rows: tf.Tensor):
    layout = module.TokenLayout(mask, remove_padding=True)
    return tf.function(lambda: tf.reduce_sum(layout.pad(rows)))


def layer_norm_functions(module, x: tf.Variable, upstream: tf.Tensor):
    norm = module.LayerNorm(x.shape[-1])
    forward = tf.function(lambda: tf.reduce_sum(norm(x)))

    @tf.function
    def forward_backward():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(norm(x) * upstream)
        return tape.gradient(loss, [x, norm.gamma, norm.beta])

    return forward, forward_backward


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="HEAD", help="git revision of the baseline")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--hidden_size", type=int, default=768)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--min_seconds", type=float, default=0.5)
    args = parser.parse_args()
    print(json.dumps({"benchmark": "encoder_ops_machine", **machine_info(tf)}), flush=True)
    baseline = baseline_encoder.encoder_at(args.baseline)
    rng = np.random.default_rng(0)
    batch, seq, width = args.batch_size, args.seq_length, args.hidden_size

    def report(op: str, rows: int, real: float, baseline_ms: float, ms: float) -> None:
        print(json.dumps({"op": op, "baseline": args.baseline, "rows": rows,
                          "real_fraction": round(real, 2), "baseline_ms": round(baseline_ms, 3),
                          "ms": round(ms, 3), "speedup": round(baseline_ms / ms, 2)}),
              flush=True)

    for lengths in (np.full(batch, seq), rng.integers(10, seq, batch)):
        mask = tf.constant(np.arange(seq)[None] < lengths[:, None], tf.int32)  # [B,S]
        real_rows = int(lengths.sum())
        rows = tf.constant(rng.normal(size=[real_rows, width]), tf.float32)
        timings = best_ms([pad_function(m, mask, rows) for m in (baseline, current_encoder)],
                          args.repeats, args.min_seconds)
        report("pad", real_rows, real_rows / (batch * seq), *timings)
    x = tf.Variable(rng.normal(1.0, 3.0, [batch * seq, width]), dtype=tf.float32)
    upstream = tf.constant(rng.normal(size=[batch * seq, width]), tf.float32)
    functions = [layer_norm_functions(m, x, upstream) for m in (baseline, current_encoder)]
    for i, op in enumerate(("layer_norm_forward", "layer_norm_forward_backward")):
        timings = best_ms([pair[i] for pair in functions], args.repeats, args.min_seconds)
        report(op, batch * seq, 1.0, *timings)


if __name__ == "__main__":
    main()
