"""The machine's dense-matmul peak, the ceiling MFU is measured against (benchmarks only).

The best FLOP/s over several plain matmuls, large squares and the BERT step's own GEMM shapes
([B·S,H]×[H,4H], [B·S,4H]×[4H,H], [B·S,H]×[H,H], [B·S,H]×[H,3H]), each timed alone in a
tf.function with TensorFlow's default threading (the models' own), best of 5: a peak the model
code cannot beat on the same machine, unlike one chained matmul, which the original's graph
outruns.
"""

from __future__ import annotations

import time

import tensorflow as tf


def bert_shapes(rows: int, hidden: int, intermediate: int) -> list[tuple[int, int, int]]:
    """(m, k, n) of the step's GEMMs for `rows` = B·S tokens, plus two large squares."""
    return [(2048, 2048, 2048), (4096, 4096, 4096), (rows, hidden, intermediate),
            (rows, intermediate, hidden), (rows, hidden, hidden), (rows, hidden, 3 * hidden)]


def matmul_peak(shapes: list[tuple[int, int, int]], dtype: str = "float32",
                repeats: int = 5) -> float:
    """The best FLOP/s of `tf.matmul` over `shapes` in `dtype`."""
    best = 0.0
    for m, k, n in shapes:
        a = tf.cast(tf.random.normal([m, k]), dtype)
        b = tf.cast(tf.random.normal([k, n]), dtype)

        @tf.function
        def run(a, b):
            return tf.reduce_sum(tf.cast(tf.matmul(a, b), tf.float32))
        run(a, b).numpy()
        for _ in range(repeats):
            started = time.perf_counter()
            run(a, b).numpy()
            best = max(best, 2 * m * k * n / (time.perf_counter() - started))
    return best
