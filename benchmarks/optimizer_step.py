"""Time of one optimizer update on BERT-base's variables (110M parameters), as JSON lines.

    python benchmarks/optimizer_step.py --optimizer adamw --jit both --fuse_update both --steps 5

Measures `optimizer.apply(grads, variables)` alone (all-reduce, clipping, update) inside a
tf.function (`--jit on`: compiled whole with XLA), with random gradients, on the default device.
`--fuse_update` is the optimizer's own per-variable XLA update. Prints one JSON line per set-up:
{"optimizer", "jit_compile", "fuse_update", "parameters", "ms_per_update"} (median of --repeats
timings of --steps updates each).
"""

import argparse
import json
import time

import keras
import numpy as np
import tensorflow as tf

from bert_tf.training import optimizers

HIDDEN, INTERMEDIATE, LAYERS, VOCAB, POSITIONS = 768, 3072, 12, 30522, 512


def bert_base_shapes() -> dict[str, tuple[int, ...]]:
    """Variable name -> shape of BERT-base with its pretraining heads."""
    h, i = HIDDEN, INTERMEDIATE
    shapes = {"word_embeddings": (VOCAB, h), "position_embeddings": (POSITIONS, h),
              "token_type_embeddings": (2, h), "pooler_kernel": (h, h), "pooler_bias": (h,),
              "transform_kernel": (h, h), "transform_bias": (h,), "mlm_output_bias": (VOCAB,),
              "nsp_output_weights": (2, h), "nsp_output_bias": (2,)}
    norms = ["embeddings_LayerNorm", "transform_LayerNorm"]
    for layer in range(LAYERS):
        for name, shape in [("query", (h, h)), ("key", (h, h)), ("value", (h, h)),
                            ("attention_output", (h, h)), ("intermediate", (h, i)),
                            ("output", (i, h))]:
            shapes[f"layer_{layer}_{name}_kernel"] = shape
            shapes[f"layer_{layer}_{name}_bias"] = shape[-1:]
        norms += [f"layer_{layer}_attention_LayerNorm", f"layer_{layer}_output_LayerNorm"]
    for norm in norms:
        shapes[f"{norm}_gamma"] = shapes[f"{norm}_beta"] = (h,)
    return shapes


def time_updates(optimizer_type: str, jit_compile: bool, fuse_update: bool, steps: int,
                 repeats: int) -> dict:
    rng = np.random.default_rng(0)
    shapes = bert_base_shapes()
    variables = [keras.Variable(rng.standard_normal(s, np.float32) * 0.02, name=n)
                 for n, s in shapes.items()]
    grads = [tf.constant(rng.standard_normal(s, np.float32) * 1e-3) for s in shapes.values()]
    optimizer = optimizers.build_optimizer(1e-4, 1000, 100, optimizer_type=optimizer_type,
                                              fuse_update=fuse_update)
    optimizer.build(variables)

    @tf.function(jit_compile=jit_compile)
    def update(grads):
        optimizer.apply(grads, variables)

    update(grads)  # Trace and compile.
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            update(grads)
        float(optimizer.iterations.numpy())  # Wait for the last update.
        timings.append((time.perf_counter() - start) / steps)
    return {"optimizer": optimizer_type, "jit_compile": jit_compile, "fuse_update": fuse_update,
            "parameters": int(sum(np.prod(s) for s in shapes.values())),
            "ms_per_update": round(float(np.median(timings)) * 1e3, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--optimizer", choices=["adamw", "lamb", "both"], default="both")
    parser.add_argument("--jit", choices=["on", "off", "both"], default="both")
    parser.add_argument("--fuse_update", choices=["on", "off", "both"], default="on")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    optimizers = ["adamw", "lamb"] if args.optimizer == "both" else [args.optimizer]
    choices = {"on": [True], "off": [False], "both": [False, True]}
    for optimizer_type in optimizers:
        for jit_compile in choices[args.jit]:
            for fuse_update in choices[args.fuse_update]:
                print(json.dumps(time_updates(optimizer_type, jit_compile, fuse_update,
                                              args.steps, args.repeats)), flush=True)


if __name__ == "__main__":
    main()
