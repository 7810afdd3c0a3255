"""The encoder graph's speed choices, as figures: which weight matrices it multiplies by, whether
a `Transpose` op is left, and what moving the attention heads costs with each op.

Prints one JSON line describing the machine (CPU, oneDNN, AVX-512/AMX flags; see
encoder_throughput.py), then one per (mode, output_positions) with the output widths of the
[H,·] weight matrices the traced graph multiplies by (inference multiplies by each attention
kernel, training by the query/key/value kernels side by side: widths H and 3H) and whether the
graph holds a `Transpose` op (oneDNN builds turn it into a reorder: the encoder uses einsum), then
the time of swapping the head axes of one short text's [1,9,12,32] with `tf.transpose` and with
`tf.einsum`, and their ratio (one run, same machine).

  python benchmarks/encoder_graph.py
"""

from __future__ import annotations

import json
import time

import tensorflow as tf

from bert_tf.model.config import BertConfig
from bert_tf.model.encoder import BertEncoder
from machine import machine_info

CONFIG = BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=37, max_position_embeddings=64, type_vocab_size=2)


def _graph_ops(fn, *args) -> list[tf.Operation]:
    return tf.function(fn).get_concrete_function(*args).graph.get_operations()


def _matmul_weight_widths(ops) -> list[int]:
    """The output widths of the [H,·] weight matrices a graph multiplies by."""
    return sorted({int(op.inputs[1].shape[1]) for op in ops
                   if op.type == "MatMul" and op.inputs[1].shape.rank == 2})


def _best_microseconds(fn, x, calls: int = 2000, repeats: int = 5) -> float:
    fn(x)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn(x)
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def _cpu() -> dict:
    """The CPU's model name and its AVX-512 / AMX flags, from /proc/cpuinfo."""
    model, flags = "unknown", []
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown":
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = sorted(flag for flag in line.split(":", 1)[1].split()
                                   if flag.startswith(("avx512", "amx")))
    except OSError:
        pass
    return {"cpu_model": model, "cpu_avx512_amx_flags": flags}


def main() -> None:
    print(json.dumps({**machine_info(tf), **_cpu()}))
    encoder = BertEncoder(CONFIG)
    ids = tf.constant([[2, 5, 7, 9, 3, 0, 0]] * 3, tf.int32)
    features = {"input_ids": ids, "input_mask": tf.cast(ids > 0, tf.int32),
                "segment_ids": tf.zeros_like(ids)}
    h = CONFIG.hidden_size
    for positions in (None, tf.zeros([3, 1], tf.int32)):
        for training in (False, True):
            ops = _graph_ops(lambda f: encoder(f, training=training, output_positions=positions),
                             features)
            print(json.dumps({"mode": "training" if training else "inference",
                              "output_positions": positions is not None, "hidden_size": h,
                              "intermediate_size": CONFIG.intermediate_size,
                              "matmul_weight_widths": _matmul_weight_widths(ops),
                              "transpose_ops": sum(op.type == "Transpose" for op in ops),
                              "einsum_ops": sum(op.type == "Einsum" for op in ops)}))
    heads = tf.random.normal([1, 9, 12, 32])
    transpose = tf.function(lambda x: tf.transpose(x, [0, 2, 1, 3]))
    einsum = tf.function(lambda x: tf.einsum("abcd->acbd", x))
    times = {"transpose_us": _best_microseconds(transpose, heads),
             "einsum_us": _best_microseconds(einsum, heads)}
    print(json.dumps({"head_swap_shape": [1, 9, 12, 32],
                      **{k: round(v, 2) for k, v in times.items()},
                      "transpose_over_einsum": round(times["transpose_us"] / times["einsum_us"], 2)}))


if __name__ == "__main__":
    main()
