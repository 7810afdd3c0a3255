"""Encoder inference throughput (sequences/s) of `bert_tf.modeling.BertEncoder`.

Prints one JSON line per measurement (config × dtype × XLA) and first lines describing the
machine: TensorFlow version, whether oneDNN is on (TF_ENABLE_ONEDNN_OPTS and what TensorFlow
reports), the CPU's bfloat16 support, the thread settings, and the matmul peak of the moment
per dtype (`matmul_peak.py`: the best of large squares and the configs' own GEMM shapes, a
ceiling the encoder cannot beat; on a shared machine it moves with the other work).

Example (quick smoke run, then the full table):

  python benchmarks/encoder_throughput.py --configs=small --dtypes=float32 --xla=off --min_seconds=2
  flock /tmp/bert_tf_bench.lock python benchmarks/encoder_throughput.py

Inputs are full-length random sequences (no padding) at --seq_length, batch --batch_size.
Timing: --warmup calls, then repeated calls until both --min_iterations and --min_seconds are
reached, repeated --repeats times; the best repeat is reported (the others are listed), since
on a shared machine other work can only slow a run down.
"""

from __future__ import annotations

import json
import os
import time

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_list("configs", ["small", "base"], "Model sizes to run: small (L4/H256/A4/I1024), "
                  "base (L12/H768/A12/I3072).")
flags.DEFINE_list("dtypes", ["float32", "bfloat16"], "float32, bfloat16 or float16 (mixed).")
flags.DEFINE_enum("xla", "both", ["on", "off", "both"], "Compile the forward with XLA.")
flags.DEFINE_integer("batch_size", 32, "Sequences per call.")
flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
flags.DEFINE_integer("warmup", 2, "Untimed calls first (tracing, compilation, oneDNN caches).")
flags.DEFINE_integer("min_iterations", 3, "Timed calls per repeat, at least.")
flags.DEFINE_float("min_seconds", 10.0, "Seconds per repeat, at least.")
flags.DEFINE_integer("repeats", 3, "Timed repeats; the best is reported.")
flags.DEFINE_integer("intra_op_threads", 0, "TensorFlow intra-op threads (0 = all cores).")
flags.DEFINE_bool("peak", True, "Measure the matmul peak per dtype before the encoder runs "
                  "(benchmarks/matmul_peak.py: best of large squares and the configs' GEMM shapes); "
                  "each result is also given as a fraction of it.")
flags.DEFINE_list("revisions", ["."], "Git revisions whose bert_tf/model/encoder.py is measured "
                  "('.' = the working tree; baseline_encoder.py), interleaved per measurement so "
                  "that before and after see the same load; ratios between them are printed.")
flags.DEFINE_integer("inter_op_threads", 1, "TensorFlow inter-op threads (0 = TF's default). "
                     "One avoids two ops competing for the same cores.")

CONFIGS = {
    "small": dict(num_hidden_layers=4, hidden_size=256, num_attention_heads=4,
                  intermediate_size=1024),
    "base": dict(num_hidden_layers=12, hidden_size=768, num_attention_heads=12,
                 intermediate_size=3072),
}
POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}


def encoder_flops_per_sequence(layers: int, hidden: int, intermediate: int, seq: int) -> int:
    """Matmul FLOPs of one forward: projections and feed-forward 2·S·(4H² + 2HI) plus the two
    attention products 2·2·S²·H, per layer (embeddings, LayerNorm, softmax are not counted)."""
    return layers * (2 * seq * (4 * hidden * hidden + 2 * hidden * intermediate)
                     + 4 * seq * seq * hidden)


def measure(forwards: dict, features: dict, batch_size: int) -> dict[object, list[float]]:
    """Sequences/s of each repeat of each forward ({key: forward}); the forwards take turns in
    every repeat, so that each sees the same load on a shared machine."""
    for forward in forwards.values():
        for _ in range(FLAGS.warmup):
            forward(features[forward]).numpy()
    rates = {key: [] for key in forwards}
    for _ in range(FLAGS.repeats):
        for key, forward in forwards.items():
            calls, start = 0, time.perf_counter()
            while calls < FLAGS.min_iterations or time.perf_counter() - start < FLAGS.min_seconds:
                forward(features[forward]).numpy()  # .numpy() waits for the result
                calls += 1
            rates[key].append(batch_size * calls / (time.perf_counter() - start))
    return rates


def build_forward(tf, name: str, dtype: str, xla: bool, module=None):
    """(the encoder's forward as a tf.function, its features, seconds of its first call)."""
    import numpy as np

    from bert_tf.model import encoder as encoder_lib
    from bert_tf.model.config import BertConfig

    config = BertConfig(vocab_size=30522, type_vocab_size=2, **CONFIGS[name])
    encoder = (module or encoder_lib).BertEncoder(config, dtype=POLICIES[dtype])
    b, s = FLAGS.batch_size, FLAGS.seq_length
    rng = np.random.default_rng(0)
    features = {
        "input_ids": tf.constant(rng.integers(1000, config.vocab_size, (b, s)), tf.int32),
        "input_mask": tf.ones([b, s], tf.int32),
        "segment_ids": tf.constant(np.repeat((np.arange(s) >= s // 2)[None], b, 0), tf.int32),
    }
    forward = tf.function(lambda f: encoder(f, training=False)["sequence_output"],
                          jit_compile=xla, reduce_retracing=True)
    start = time.perf_counter()
    forward(features).numpy()
    return forward, features, time.perf_counter() - start


def result_line(name: str, dtype: str, xla: bool, revision: str, rates: list[float],
                first_call: float, peak: float | None) -> dict:
    sizes = CONFIGS[name]
    b, s = FLAGS.batch_size, FLAGS.seq_length
    flops = encoder_flops_per_sequence(sizes["num_hidden_layers"], sizes["hidden_size"],
                                       sizes["intermediate_size"], s)
    best = max(rates)
    gflops = best * flops / 1e9
    return {
        "benchmark": "encoder_inference", "revision": revision, "config": name, **sizes,
        "dtype": dtype, "xla": xla,
        "batch_size": b, "seq_length": s, "sequences_per_sec": round(best, 2),
        "repeats": [round(r, 2) for r in rates], "ms_per_batch": round(1000 * b / best, 1),
        "matmul_gflops_per_sec": round(gflops, 1),
        "matmul_peak_gflops_per_sec": round(peak, 1) if peak else None,
        "fraction_of_matmul_peak": round(gflops / peak, 3) if peak else None,
        "first_call_sec": round(first_call, 1), "load_average_1min": os.getloadavg()[0],
    }


def main(argv):
    del argv
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(FLAGS.intra_op_threads)
    tf.config.threading.set_inter_op_parallelism_threads(FLAGS.inter_op_threads)
    from machine import machine_info  # noqa: PLC0415

    print(json.dumps({"benchmark": "encoder_inference_machine", **machine_info(tf)}), flush=True)
    xla_modes = {"on": [True], "off": [False], "both": [False, True]}[FLAGS.xla]
    for name in FLAGS.configs:
        if name not in CONFIGS:
            raise app.UsageError(f"--configs: unknown {name!r}; choose from {', '.join(CONFIGS)}")
    for dtype in FLAGS.dtypes:
        if dtype not in POLICIES:
            raise app.UsageError(f"--dtypes: unknown {dtype!r}; choose from {', '.join(POLICIES)}")
    import matmul_peak  # noqa: PLC0415 (imports TensorFlow)

    # The shared peak: best of large squares and every config's own GEMM shapes, per dtype.
    shapes = sorted({shape for name in FLAGS.configs for shape in matmul_peak.bert_shapes(
        FLAGS.batch_size * FLAGS.seq_length, CONFIGS[name]["hidden_size"], CONFIGS[name]["intermediate_size"])})
    peaks = {}
    for dtype in FLAGS.dtypes:
        peaks[dtype] = matmul_peak.matmul_peak(shapes, dtype) / 1e9 if FLAGS.peak else None
        print(json.dumps({"benchmark": "matmul_peak", "dtype": dtype, "shapes": shapes,
                          "gflops_per_sec": peaks[dtype] and round(peaks[dtype], 1)}), flush=True)
    import baseline_encoder  # noqa: PLC0415

    modules = {r: None if r == "." else baseline_encoder.encoder_at(r) for r in FLAGS.revisions}
    for name in FLAGS.configs:
        for xla in xla_modes:
            forwards, features, first_calls = {}, {}, {}
            for dtype in FLAGS.dtypes:
                for revision, module in modules.items():
                    forward, inputs, first_calls[revision, dtype] = build_forward(
                        tf, name, dtype, xla, module)
                    forwards[revision, dtype], features[forward] = forward, inputs
            rates = measure(forwards, features, FLAGS.batch_size)
            for (revision, dtype), values in rates.items():
                print(json.dumps(result_line(name, dtype, xla, revision, values,
                                             first_calls[revision, dtype], peaks[dtype])),
                      flush=True)
            best = {key: max(values) for key, values in rates.items()}
            print(json.dumps({"benchmark": "encoder_inference_ratios", "config": name, "xla": xla,
                              **baseline_encoder.ratios(best, list(modules), FLAGS.dtypes)}),
                  flush=True)


def run():
    app.run(main)


if __name__ == "__main__":
    run()
