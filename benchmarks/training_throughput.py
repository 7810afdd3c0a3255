"""Pretraining throughput (sequences/s) and MFU of the shared training loop, as JSON lines.

    flock /tmp/bert_tf_bench.lock python benchmarks/training_throughput.py
    python benchmarks/training_throughput.py --configs base --dtypes bfloat16 --xla on

Trains the pretraining task (masked LM + next sentence, the original's optimizer) through
`bert_tf.training.loop.train` on one fixed random batch repeated (so the figure is the model step's,
not the input pipeline's), for a warm-up window (tracing, compilation) and a measured window of
`--steps` steps. One line per set-up:
{"config", "batch_size", "dtype", "xla", "sequences_per_second", "model_tflops_per_second",
 "peak_tflops_per_second", "mfu", "flops_per_sequence"}.

MFU = model FLOPs per second / the measured peak of this machine in the same dtype
(`matmul_peak.py`: the best of plain large matmuls and the step's own GEMM shapes), measured right
after each run so that both see the same load. The batch here is one full-length random batch;
`train_vs_original.py` measures on real records beside the original's step. Model FLOPs per sequence (training =
forward + backward = 3 × forward; a multiply-add = 2 FLOPs):

    6·S·L·(4H² + 2HI)        the dense layers (Q, K, V, attention output, two feed-forward)
  + 12·L·S²·H                attention scores and their weighted sum
  + 6·P·(H² + VH)            the masked-LM head on the P predicted positions (transform, tied
                             output embedding)
  + 6·(H² + 2H)              pooler and next-sentence head
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time

import numpy as np
import tensorflow as tf

import baseline_encoder
import matmul_peak
from machine import machine_info
from bert_tf.model.config import BertConfig
from bert_tf.tasks.pretraining import task as pretraining_task
from bert_tf.training import loop as training

CONFIGS = {  # (config, batch size)
    "base": (dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                  intermediate_size=3072), 8),
    "small": (dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                   intermediate_size=1024), 32),
}
VOCAB_SIZE, SEQ, PREDICTIONS = 30522, 128, 20


def flops_per_sequence(config: BertConfig, seq: int = SEQ, predictions: int = PREDICTIONS) -> int:
    """Training FLOPs of one sequence (the formula of the module docstring)."""
    h, i, layers, v = (config.hidden_size, config.intermediate_size, config.num_hidden_layers,
                       config.vocab_size)
    return (6 * seq * layers * (4 * h * h + 2 * h * i) + 12 * layers * seq * seq * h
            + 6 * predictions * (h * h + v * h) + 6 * (h * h + 2 * h))


def random_batch(batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    """A pretraining batch of random ids, full length, 20 masked positions."""
    rng = np.random.default_rng(seed)
    return {
        "input_ids": rng.integers(1000, VOCAB_SIZE, (batch, SEQ), dtype=np.int32),
        "input_mask": np.ones((batch, SEQ), np.int32),
        "segment_ids": (np.arange(SEQ)[None] >= SEQ // 2).repeat(batch, 0).astype(np.int32),
        "masked_lm_positions": np.sort(rng.choice(np.arange(1, SEQ), (batch, PREDICTIONS)),
                                       axis=1).astype(np.int32),
        "masked_lm_ids": rng.integers(1000, VOCAB_SIZE, (batch, PREDICTIONS), dtype=np.int32),
        "masked_lm_weights": np.ones((batch, PREDICTIONS), np.float32),
        "next_sentence_labels": rng.integers(0, 2, (batch, 1), dtype=np.int32),
    }


def measure(name: str, dtype: str, xla: bool, steps: int, warmup: int) -> dict:
    """Sequences/s of the measured window for one set-up."""
    sizes, batch = CONFIGS[name]
    config = BertConfig(vocab_size=VOCAB_SIZE, **sizes)
    features = random_batch(batch)

    def input_fn(context, batch_size):
        return tf.data.Dataset.from_tensors(features).repeat()

    output_dir = tempfile.mkdtemp(prefix="bert_tf_bench_")
    try:
        run_config = training.RunConfig(
            output_dir=output_dir, train_batch_size=batch, num_train_steps=warmup + steps,
            num_warmup_steps=1, dtype=dtype, use_xla=xla, log_every_n_steps=warmup,
            save_checkpoints_steps=10 ** 9, iterations_per_loop=steps)
        # Windows: [0, warmup) with tracing and compilation, then [warmup, warmup + steps).
        started = time.perf_counter()
        figures = training.train(pretraining_task.PretrainingTask(config), run_config, input_fn)
        total_seconds = time.perf_counter() - started
    finally:
        shutil.rmtree(output_dir, ignore_errors=True)
    return {"config": name, "batch_size": batch, "dtype": dtype, "xla": xla,
            "sequences_per_second": round(figures["sequences_per_second"], 3),
            "run_seconds": round(total_seconds, 1), "loss": round(figures["loss"], 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", default="base,small")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--xla", choices=("on", "off", "both"), default="both")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--revisions", default=".", help="comma-separated git revisions whose "
                        "bert_tf/model/encoder.py is measured ('.' = the working tree; "
                        "baseline_encoder.py), alternately, with ratio lines between them")
    args = parser.parse_args()
    print(json.dumps({"benchmark": "training_throughput_machine", **machine_info(tf)}), flush=True)
    xla_modes = {"on": [True], "off": [False], "both": [False, True]}[args.xla]
    revisions = args.revisions.split(",")
    modules = {r: None if r == "." else baseline_encoder.encoder_at(r) for r in revisions}
    dtypes = args.dtypes.split(",")
    for name in args.configs.split(","):
        config = BertConfig(vocab_size=VOCAB_SIZE, **CONFIGS[name][0])
        for xla in xla_modes:
            rates = {}
            for dtype in dtypes:
                for revision, module in modules.items():
                    with baseline_encoder.using_encoder(module):
                        result = measure(name, dtype, xla, args.steps, args.warmup)
                    peak = matmul_peak.matmul_peak(matmul_peak.bert_shapes(
                        CONFIGS[name][1] * SEQ, config.hidden_size, config.intermediate_size),
                        dtype)
                    model_flops = result["sequences_per_second"] * flops_per_sequence(config)
                    result.update(revision=revision, flops_per_sequence=flops_per_sequence(config),
                                  model_tflops_per_second=round(model_flops / 1e12, 4),
                                  peak_tflops_per_second=round(peak / 1e12, 4),
                                  mfu=round(model_flops / peak, 3),
                                  threads=os.cpu_count())
                    rates[revision, dtype] = result["sequences_per_second"]
                    print(json.dumps(result), flush=True)
            print(json.dumps({"benchmark": "training_throughput_ratios", "config": name,
                              "xla": xla, **baseline_encoder.ratios(rates, revisions, dtypes)}), flush=True)


if __name__ == "__main__":
    main()
