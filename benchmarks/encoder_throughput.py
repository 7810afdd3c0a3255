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
import platform
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
flags.DEFINE_integer("inter_op_threads", 1, "TensorFlow inter-op threads (0 = TF's default). "
                     "One avoids two ops competing for the same cores.")

CONFIGS = {
    "small": dict(num_hidden_layers=4, hidden_size=256, num_attention_heads=4,
                  intermediate_size=1024),
    "base": dict(num_hidden_layers=12, hidden_size=768, num_attention_heads=12,
                 intermediate_size=3072),
}
POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def machine_info(tf) -> dict:
    """What decides CPU speed: oneDNN, bf16/AMX instructions, threads."""
    try:
        from tensorflow.python.util import _pywrap_util_port
        onednn = bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):
        onednn = None
    cpu_flags = _cpu_flags()
    return {
        "machine": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "tensorflow": tf.__version__,
        "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "(unset)"),
        "onednn_enabled": onednn,
        "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
        "cpu_bf16_flags": sorted(cpu_flags & {"avx512_bf16", "amx_bf16", "amx_tile"}),
        "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        "load_average_1min": os.getloadavg()[0],
    }


def encoder_flops_per_sequence(layers: int, hidden: int, intermediate: int, seq: int) -> int:
    """Matmul FLOPs of one forward: projections and feed-forward 2·S·(4H² + 2HI) plus the two
    attention products 2·2·S²·H, per layer (embeddings, LayerNorm, softmax are not counted)."""
    return layers * (2 * seq * (4 * hidden * hidden + 2 * hidden * intermediate)
                     + 4 * seq * seq * hidden)


def measure(tf, forward, features, batch_size: int) -> list[float]:
    """Sequences/s of each repeat."""
    for _ in range(FLAGS.warmup):
        forward(features).numpy()
    rates = []
    for _ in range(FLAGS.repeats):
        calls, start = 0, time.perf_counter()
        while calls < FLAGS.min_iterations or time.perf_counter() - start < FLAGS.min_seconds:
            forward(features).numpy()  # .numpy() waits for the result
            calls += 1
        rates.append(batch_size * calls / (time.perf_counter() - start))
    return rates


def run_one(tf, name: str, dtype: str, xla: bool, peak: float | None) -> dict:
    import numpy as np

    from bert_tf.model.config import BertConfig
    from bert_tf.model.encoder import BertEncoder

    sizes = CONFIGS[name]
    config = BertConfig(vocab_size=30522, type_vocab_size=2, **sizes)
    encoder = BertEncoder(config, dtype=POLICIES[dtype])
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
    first_call = time.perf_counter() - start
    rates = measure(tf, forward, features, b)
    flops = encoder_flops_per_sequence(sizes["num_hidden_layers"], sizes["hidden_size"],
                                       sizes["intermediate_size"], s)
    best = max(rates)
    gflops = best * flops / 1e9
    return {
        "benchmark": "encoder_inference", "config": name, **sizes, "dtype": dtype, "xla": xla,
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
    for name in FLAGS.configs:
        for dtype in FLAGS.dtypes:
            for xla in xla_modes:
                print(json.dumps(run_one(tf, name, dtype, xla, peaks[dtype])), flush=True)


def run():
    app.run(main)


if __name__ == "__main__":
    run()
