"""ALBERT-base vs BERT-base: parameter counts and encoder inference throughput (sequences/s).

Prints JSON lines: one per model with its parameter count (encoder alone, and with the
pretraining heads), then one per model with its float32 inference throughput. ALBERT shares one
Transformer block across its 12 layers, so it holds ~9x fewer parameters but does the same
per-layer work: its throughput is about BERT-base's (the block's matmuls dominate; the E=128
embedding projection is small).

Example (a short run; the timing flags are encoder_throughput.py's):

  python benchmarks/albert.py --warmup=1 --min_iterations=2 --min_seconds=0 --repeats=1

Sizes are the released albert_base_v2 and uncased_L-12_H-768_A-12 configs.
"""

from __future__ import annotations

import json
import os

from absl import app

# The timing loop and its flags (--batch_size 32, --seq_length 128, --warmup, --min_iterations,
# --min_seconds, --repeats) are encoder_throughput.py's.
from encoder_throughput import FLAGS, measure

BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
            max_position_embeddings=512, type_vocab_size=2)
MODELS = {
    "albert_base": dict(vocab_size=30000, embedding_size=128, num_hidden_groups=1,
                        inner_group_num=1, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0, **BASE),
    "bert_base": dict(vocab_size=30522, **BASE),
}


def _count(variables) -> int:
    return sum(int(v.numpy().size) for v in variables)


def parameter_counts(name: str) -> dict:
    """The parameter-count line of one model (no forward pass needed: weights exist at once)."""
    from bert_tf.model import models

    model = models.pretraining_model(_config(name))
    count = _count(model.encoder.weights)
    return {"benchmark": "albert_parameters", "model": name, "encoder_parameters": count,
            "encoder_millions": round(count / 1e6, 1),
            "pretraining_model_parameters": _count(model.weights)}


def throughput(tf, name: str) -> dict:
    """The float32 inference throughput line of one model's encoder."""
    import numpy as np

    from bert_tf.model.families import build_encoder

    config = _config(name)
    encoder = build_encoder(config, dtype="float32")
    b, s = FLAGS.batch_size, FLAGS.seq_length
    rng = np.random.default_rng(0)
    features = {"input_ids": tf.constant(rng.integers(1000, config.vocab_size, (b, s)), tf.int32),
                "input_mask": tf.ones([b, s], tf.int32), "segment_ids": tf.zeros([b, s], tf.int32)}
    forward = tf.function(lambda f: encoder(f, training=False)["sequence_output"])
    forward(features).numpy()  # trace
    rates = measure({name: forward}, {forward: features}, b)[name]
    return {"benchmark": "albert_encoder_inference", "model": name, "dtype": "float32",
            "batch_size": b, "seq_length": s, "sequences_per_sec": round(max(rates), 2),
            "repeats": [round(r, 2) for r in rates], "load_average_1min": os.getloadavg()[0]}


def _config(name: str):
    from bert_tf.model.albert.config import AlbertConfig
    from bert_tf.model.config import BertConfig

    return (AlbertConfig if "embedding_size" in MODELS[name] else BertConfig)(**MODELS[name])


def main(argv):
    del argv
    import tensorflow as tf

    counts, speeds = {}, {}
    for name in MODELS:
        line = parameter_counts(name)
        counts[name] = line["encoder_parameters"]
        print(json.dumps(line), flush=True)
    for name in MODELS:
        line = throughput(tf, name)
        speeds[name] = line["sequences_per_sec"]
        print(json.dumps(line), flush=True)
    print(json.dumps({"benchmark": "albert_vs_bert",
                      "parameter_ratio_bert_over_albert": round(
                          counts["bert_base"] / counts["albert_base"], 2),
                      "throughput_ratio_albert_over_bert": round(
                          speeds["albert_base"] / speeds["bert_base"], 3)}), flush=True)


if __name__ == "__main__":
    app.run(main)
