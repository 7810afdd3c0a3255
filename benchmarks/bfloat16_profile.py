"""Where a BERT-base step's time goes, per op class, in float32 and mixed bfloat16, as JSON lines.

    flock /tmp/bert_tf_bench.lock python benchmarks/bfloat16_profile.py
    python benchmarks/bfloat16_profile.py --revisions main,HEAD --steps 2

Runs, for each encoder revision (`--revisions`: git revisions whose `bert_tf/model/encoder.py`
is used, `baseline_encoder.py`; "." is the working tree) and each dtype, under `tf.profiler`:

- `inference`: the encoder's forward, BERT-base shape (L12/H768/A12/I3072, random weights: op
  times do not depend on them), batch --inference_batch × 128 full-length random sequences;
- `training`: the shared loop's fine-tuning step (`make_train_step`: forward, classifier loss,
  gradients, the original's AdamW with clipping), batch --training_batch × 128;
- `pretraining`: the same loop's step on the pretraining task (masked LM on 20 positions a
  sequence + next sentence, `training_throughput.py`'s random batch), batch --training_batch.

Prints the machine line (CPU model, ISA flags: avx512_bf16, amx_*), then per run one line
{"revision", "dtype", "mode", "wall_ms_per_step", "op_ms_per_step", "classes": {class: share},
"top_ops": [[op, ms per step], ...]}. Op times are summed over every op event of TensorFlow's
compute threads. The ops run one at a time (`--inter_op_threads`, 1 by default), each on every
core, so that an op's event holds its own work: side by side, as TensorFlow runs a training
step's independent ops by default, an event also holds the time its op waited for the cores its
neighbours held (a BERT-base training step's op time came to 1.35-1.55× its wall time, its
gradient norm's `L2Loss` to 7-12× what it takes alone), while the wall time was 0-13% shorter
than one at a time.

With both dtypes, per mode and revision one more line estimates what a CPU whose bfloat16
products run at --products_speedup × float32's (AMX: 4.5×, the matmul peaks of a 2-core
Sapphire Rapids Xeon) would give, by Amdahl's law: {"benchmark": "bfloat16_estimate",
"estimated_speedup": float32 op time / (bfloat16's op time outside the dense products +
float32's dense products / products_speedup), "with_the_rest_as_float32": the same with
float32's time outside the dense products, "from_wall_time": the same from the wall times,
whose time outside the op events (the executor, Python) stays as it is}. The dense products
are `DENSE_PRODUCTS` (oneDNN's MatMul kernels, bias and GELU fused in; not the attention's
batch matmuls). An estimate from this machine's op times, to be checked on a CPU with matrix
units: on one of the AMX generation with its tiles hidden, every op but the products runs as it
would with them.

The classes (`OP_CLASSES`) group op types: matmul (every MatMul/BatchMatMul/Einsum-as-matmul
and oneDNN's fused forms, GELU and bias fused in), cast, layer_norm (moments and the
normalization), softmax, elementwise, dropout (random numbers and the mask), gather/scatter
(embeddings, padding removal), layout (transposes and reshapes), optimizer (the update and the
gradient norm), other.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baseline_encoder  # noqa: E402
from machine import machine_info  # noqa: E402
from span_step_profile import op_times  # noqa: E402
from training_throughput import random_batch as pretraining_batch  # noqa: E402
from bert_tf.model import models  # noqa: E402
from bert_tf.model.config import BertConfig  # noqa: E402
from bert_tf.tasks.classifier import task as classifier_task  # noqa: E402
from bert_tf.tasks.pretraining import task as pretraining_task  # noqa: E402
from bert_tf.training import optimizers, steps as training_steps  # noqa: E402

BASE = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
            intermediate_size=3072, type_vocab_size=2)
SEQ = 128
POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16"}
# Op type (or its prefix) → class; the first match wins.
OP_CLASSES = [
    ("matmul", ("MatMul", "BatchMatMul", "_MklMatMul", "_MklFusedMatMul", "_FusedMatMul",
                "_MklNativeFusedMatMul", "_MklNativeMatMul", "_MklNativeBatchMatMul",
                "_MklBatchMatMul", "_MklFusedBatchMatMul", "_MklEinsum", "Einsum")),
    ("cast", ("Cast", "_MklCast")),
    ("layer_norm", ("_MklLayerNorm", "Mean", "SquaredDifference", "Rsqrt", "RsqrtGrad",
                    "FusedBatchNorm")),
    ("softmax", ("Softmax", "_MklSoftmax", "Max", "Exp")),
    ("dropout", ("StatelessRandom", "RandomUniform", "GreaterEqual", "SelectV2", "Select")),
    ("gather_scatter", ("Gather", "ScatterNd", "UnsortedSegmentSum", "TensorScatter", "Where")),
    ("layout", ("Transpose", "_MklTranspose", "Reshape", "ConcatV2", "Split", "Pack", "Slice",
                "StridedSlice", "Tile", "Identity", "BroadcastTo")),
    ("optimizer", ("ResourceApply", "AssignSub", "AssignAdd", "AssignVariable", "ReadVariable",
                   "L2Loss", "Sqrt", "ClipByValue")),
    ("elementwise", ("AddV2", "_MklAdd", "_MklAddV2", "Add", "Mul", "_MklMul", "Sub", "RealDiv",
                     "Tanh", "TanhGrad", "Pow", "Square", "Erf", "Neg", "Maximum", "Minimum",
                     "BiasAdd", "BiasAddGrad", "Sum", "AddN", "_MklAddN", "Relu", "Gelu",
                     "_MklFusedMish", "Reciprocal", "Sign", "SquaredDifference")),
]


# The dense layers' products, which matrix units speed up (op types, exact).
DENSE_PRODUCTS = ("MatMul", "_MklMatMul", "_FusedMatMul", "_MklFusedMatMul",
                  "_MklNativeMatMul", "_MklNativeFusedMatMul")


def amdahl_estimate(float32_ops: dict[str, float], bfloat16_ops: dict[str, float],
                    products_speedup: float, float32_wall: float,
                    bfloat16_wall: float) -> dict[str, float]:
    """float32 / bfloat16 step time where the dense products run `products_speedup` × float32's
    and everything else takes what it took here (op times and walls per step, in one unit)."""
    def dense(ops: dict[str, float]) -> float:
        return sum(t for op, t in ops.items() if op in DENSE_PRODUCTS)

    float32_total, products = sum(float32_ops.values()), dense(float32_ops) / products_speedup
    bfloat16_rest = sum(bfloat16_ops.values()) - dense(bfloat16_ops)
    return {"estimated_speedup": round(float32_total / (bfloat16_rest + products), 2),
            "with_the_rest_as_float32": round(
                float32_total / (float32_total - dense(float32_ops) + products), 2),
            "from_wall_time": round(
                float32_wall / (bfloat16_wall - dense(bfloat16_ops) + products), 2)}


def op_class(op_type: str) -> str:
    for name, prefixes in OP_CLASSES:
        if any(op_type.startswith(p) for p in prefixes):
            return name
    return "other"


def random_features(batch: int, labels: bool) -> dict[str, tf.Tensor]:
    rng = np.random.default_rng(0)
    features = {"input_ids": tf.constant(rng.integers(1000, 30000, (batch, SEQ)), tf.int32),
                "input_mask": tf.ones([batch, SEQ], tf.int32),
                "segment_ids": tf.constant(np.repeat((np.arange(SEQ) >= SEQ // 2)[None], batch, 0),
                                           tf.int32)}
    if labels:
        features["label_ids"] = tf.constant(rng.integers(0, 2, batch), tf.int32)
        features["is_real_example"] = tf.ones([batch], tf.int32)
    return features


def build_runner(mode: str, dtype: str, batch: int):
    """A function running one step of `mode` (built under the dtype's Keras policy)."""
    config = BertConfig(**BASE)
    features = random_features(batch, labels=mode == "training")
    if mode == "inference":
        model = models.classifier_model(config, 2, dtype=POLICIES[dtype]).encoder
        forward = tf.function(lambda f: model(f, training=False)["sequence_output"],
                              autograph=False)
        return lambda: forward(features).numpy()
    if mode == "pretraining":
        task = pretraining_task.PretrainingTask(config)
        model = models.pretraining_model(config, dtype=POLICIES[dtype])
        features = {k: tf.constant(v) for k, v in pretraining_batch(batch).items()}
    else:
        task = classifier_task.ClassifierTask(config, 2)
        model = models.classifier_model(config, 2, dtype=POLICIES[dtype])
    optimizer = optimizers.build_optimizer(2e-5, 1000, 100)
    optimizer.build(model.trainable_variables)
    step = training_steps.make_train_step(task, model, optimizer, accumulation_steps=1,
                                          loss_scale=False, jit_compile=False)
    return lambda: tf.nest.map_structure(lambda t: t.numpy(), step(features))


def profile(run, steps: int) -> tuple[float, dict[str, float]]:
    run()  # tracing and oneDNN's first-call work
    started = time.perf_counter()
    for _ in range(steps):  # timed without the profiler, which slows the step
        run()
    wall = (time.perf_counter() - started) / steps
    log_dir = tempfile.mkdtemp(prefix="bf16_profile_")
    try:
        tf.profiler.experimental.start(log_dir)
        for _ in range(steps):
            run()
        tf.profiler.experimental.stop()
        return wall, {op: us for op, (us, _) in op_times(log_dir).items()}
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--revisions", default=".", help="comma-separated git revisions of the "
                        "encoder ('.' = the working tree), profiled in this order")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--modes", default="inference,training",
                        help="comma-separated: inference, training, pretraining")
    parser.add_argument("--inference_batch", type=int, default=8)
    parser.add_argument("--training_batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=2, help="profiled steps (after 1 warm-up)")
    parser.add_argument("--top", type=int, default=12, help="op types listed per run")
    parser.add_argument("--products_speedup", type=float, default=4.5,
                        help="bfloat16 dense products' speed over float32's for the estimate")
    parser.add_argument("--inter_op_threads", type=int, default=1,
                        help="ops run side by side (0: TensorFlow's default, one per core); 1 "
                        "gives each op's own time")
    args = parser.parse_args()
    tf.config.threading.set_inter_op_parallelism_threads(args.inter_op_threads)
    print(json.dumps({"benchmark": "bfloat16_profile_machine", **machine_info(tf)}), flush=True)
    encoders = {r: None if r == "." else baseline_encoder.encoder_at(r)
                for r in args.revisions.split(",")}
    for mode in args.modes.split(","):
        batch = args.inference_batch if mode == "inference" else args.training_batch
        runs = {}  # (dtype, revision) → (wall ms, {op type: ms}) per step
        for dtype in args.dtypes.split(","):
            for revision, module in encoders.items():
                with baseline_encoder.using_encoder(module):
                    run = build_runner(mode, dtype, batch)
                wall, totals = profile(run, args.steps)
                runs[dtype, revision] = (wall * 1e3, {op: us / 1e3 / args.steps
                                                      for op, us in totals.items()})
                total = sum(totals.values())
                classes = collections.defaultdict(float)
                for op, us in totals.items():
                    classes[op_class(op)] += us
                print(json.dumps({
                    "revision": revision, "dtype": dtype, "mode": mode, "batch_size": batch,
                    "seq_length": SEQ, "wall_ms_per_step": round(wall * 1e3, 1),
                    "op_ms_per_step": round(total / 1e3 / args.steps, 1),
                    "classes": {c: round(us / total, 3) for c, us in
                                sorted(classes.items(), key=lambda kv: -kv[1])},
                    "top_ops": [[op, round(us / 1e3 / args.steps, 1)] for op, us in
                                sorted(totals.items(), key=lambda kv: -kv[1])[:args.top]],
                    "load_average_1min": os.getloadavg()[0]}), flush=True)
        for revision in encoders:
            if ("float32", revision) in runs and ("bfloat16", revision) in runs:
                (float32_wall, float32_ops), (bfloat16_wall, bfloat16_ops) = (
                    runs["float32", revision], runs["bfloat16", revision])
                print(json.dumps({
                    "benchmark": "bfloat16_estimate", "revision": revision, "mode": mode,
                    "batch_size": batch, "products_speedup": args.products_speedup,
                    **amdahl_estimate(float32_ops, bfloat16_ops, args.products_speedup,
                                      float32_wall, bfloat16_wall)}), flush=True)


if __name__ == "__main__":
    main()
