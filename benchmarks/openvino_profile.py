"""Where an OpenVINO call spends its time against TensorFlow's, on the same token ids (no text
part): the model as the OpenVINO export converts and compiles it (the encoder skips the padding;
its LayerNorms and erf GELUs rewritten into `MVN` and `Gelu`, `bert_tf/serving/openvino_fusion.py`;
compiled with the export's CPU properties, `openvino.compile_properties`), the same model
compiled with OpenVINO's default properties (`_pinned`: threads pinned to cores), and the model
as the converter left it (`_unfused`), in int8, bfloat16 and float32; then OpenVINO's per-node
counters of both int8 models, summed by node and kernel type.

    python benchmarks/openvino_profile.py --model=minilm
    python benchmarks/openvino_profile.py --model=base --rounds=3
    python benchmarks/openvino_profile.py --model=minilm --threads=1  # the kernels alone

Prints the machine line, `ops` (per variant: the converted graph's LayerNorm and GELU nodes,
and the kernels OpenVINO compiled it to), the largest output difference to TensorFlow, one
line of milliseconds per call (each variant's rounds, the calls alternating) with
`<variant>_vs_tf` (TensorFlow ms / OpenVINO ms, the median over the rounds: above 1 OpenVINO is
faster) and `<variant>_cpu` (the process's CPU seconds per second of its calls, the median over
the rounds: how much of the 2 cores a variant got), and `int8_counters`. Random weights
(seeded; biases, LayerNorm scales and shifts drawn too, as a trained model has them: zero
biases would be folded away by the converter); int8 calibrated on the timed batch's rows.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time

import keras
import numpy as np
import openvino as ov
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from finetune_vs_transformers import MODEL_DIR  # noqa: E402
from machine import machine_info  # noqa: E402

from bert_tf.checkpoints import name_map as checkpoints  # noqa: E402
from bert_tf.model import models  # noqa: E402
from bert_tf.model.config import BertConfig  # noqa: E402
from bert_tf.serving import openvino  # noqa: E402
from bert_tf.serving.saved_model import model_inputs_spec  # noqa: E402

# The converted graph's nodes that say whether LayerNorm and GELU were fused.
_GRAPH_OPS = ("MVN", "Gelu", "ReduceMean", "Power", "Erf", "FakeQuantize")
# The compiled model's kernels that say where the element-wise work went.
_RUNTIME_OPS = ("FullyConnected", "MVN", "Eltwise", "Reduce", "FakeQuantize", "Subgraph",
                "Transpose")
_PRECISIONS = {"int8": "int8", "bf16": "bfloat16", "f32": "float32"}  # variant: export's
# variant suffix: (the LayerNorm/GELU rewrite, the export's CPU properties; else OpenVINO's)
_VARIANTS = {"": (True, True), "_pinned": (True, False), "_unfused": (False, True)}


def model_config(name: str) -> BertConfig:
    """all-MiniLM-L6-v2's config (`minilm`), or BERT-base's shape with its vocabulary (`base`)."""
    config = checkpoints.bert_config_from_hf(MODEL_DIR)  # all-MiniLM-L6-v2
    if name == "base":
        config = BertConfig(vocab_size=config.vocab_size, hidden_size=768, num_hidden_layers=12,
                            num_attention_heads=12, intermediate_size=3072,
                            max_position_embeddings=512, type_vocab_size=2)
    return config


def _batch(batch: int, seq: int) -> dict[str, np.ndarray]:
    """Token ids [B,S] of rows S/4..S long (the first S), as a padded batch of real texts."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(seq // 4, seq + 1, batch)
    lengths[0] = seq
    mask = (np.arange(seq)[None] < lengths[:, None]).astype(np.int32)
    ids = rng.integers(1000, 20000, (batch, seq)).astype(np.int32) * mask
    return {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}


def _cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def milliseconds(calls: dict, rounds: int, seconds: float
                 ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per call: its milliseconds per round (at least 3 calls, `seconds` long, the calls
    alternating within each round after two warm-up calls each), and the process's CPU
    seconds per wall second."""
    for call in calls.values():
        call()
        call()
    ms, cpu = {name: [] for name in calls}, {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            count, start, cpu_start = 0, time.perf_counter(), _cpu_seconds()
            while count < 3 or time.perf_counter() - start < seconds:
                call()
                count += 1
            wall = time.perf_counter() - start
            ms[name].append(wall / count * 1000)
            cpu[name].append((_cpu_seconds() - cpu_start) / wall)
    return ms, cpu


def _counters(compiled, features: dict[str, np.ndarray]) -> dict:
    request = compiled.create_infer_request()
    for _ in range(3):
        request.infer(features)
    by_kind: dict[str, float] = {}
    for node in request.profiling_info:
        kind = f"{node.node_type}:{node.exec_type}"
        by_kind[kind] = by_kind.get(kind, 0.0) + node.real_time.total_seconds() * 1000
    top = sorted(by_kind.items(), key=lambda item: -item[1])[:12]
    return {"total_ms": round(sum(by_kind.values()), 1),
            "by_kind_ms": [(kind, round(ms, 1)) for kind, ms in top]}


def _count(names, kept) -> dict[str, int]:
    counts = collections.Counter(names)
    return {name: counts[name] for name in kept}


def _op_counts(ov_model, compiled) -> dict[str, dict[str, int]]:
    """The converted graph's LayerNorm/GELU nodes and the compiled model's kernels, counted."""
    runtime = compiled.get_runtime_model().get_ops()
    return {"graph": _count((op.get_type_name() for op in ov_model.get_ops()), _GRAPH_OPS),
            "compiled": _count((op.get_rt_info()["layerType"].astype(str) for op in runtime),
                               _RUNTIME_OPS)}


def seeded_vectors(model: keras.Model) -> None:
    """Every bias and LayerNorm scale/shift of `model` moved by N(0, 0.1): trained, not zero."""
    rng = np.random.default_rng(1)
    for variable in model.weights:
        if len(variable.shape) == 1:
            variable.assign(variable.numpy() + rng.normal(0, 0.1, variable.shape))


def logits_function(model: keras.Model) -> tf.types.experimental.ConcreteFunction:
    """`model`'s float32 logits as a traced function of the model's inputs (ids in)."""
    return tf.function(lambda f: {"logits": tf.cast(
        model(f, training=False)["logits"], tf.float32)},
        input_signature=[model_inputs_spec()]).get_concrete_function()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("minilm", "base"), default="minilm")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=37, help="the batch's longest row")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--threads", type=int, default=0,
                        help="threads of TensorFlow's ops and of OpenVINO's calls (0: theirs)")
    args = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    threads = {"INFERENCE_NUM_THREADS": args.threads} if args.threads else {}
    print(json.dumps({"benchmark": "openvino_profile", "openvino": ov.get_version(),
                      **machine_info(tf)}), flush=True)
    keras.utils.set_random_seed(0)
    model = models.classifier_model(model_config(args.model), 2)
    seeded_vectors(model)
    tf_model = logits_function(model)
    features = _batch(args.batch, args.seq)
    tensors = {name: tf.constant(value) for name, value in features.items()}
    calibration = [{k: v[i:i + 1] for k, v in features.items()} for i in range(args.batch)]
    calls = {"tf": lambda: tf_model(tensors)}
    outputs = {"tf": tf_model(tensors)["logits"].numpy()}
    ops, core, int8_models = {}, ov.Core(), {}
    quantized = {}
    for suffix, (fuse, export_properties) in _VARIANTS.items():
        if fuse not in quantized:
            converted = openvino.convert(tf_model, ["logits"], fuse=fuse)
            quantized[fuse] = converted, openvino.quantize(converted, calibration)
        converted, int8_models[f"int8{suffix}"] = quantized[fuse]
        for precision, export_precision in _PRECISIONS.items():
            ov_model = int8_models[f"int8{suffix}"] if precision == "int8" else converted
            properties = openvino.compile_properties(export_precision)
            if not export_properties:
                properties = {"INFERENCE_PRECISION_HINT": properties["INFERENCE_PRECISION_HINT"]}
            compiled = core.compile_model(ov_model, "CPU", {**properties, **threads})
            name = f"{precision}{suffix}"
            ops[name] = _op_counts(ov_model, compiled)
            request = compiled.create_infer_request()
            calls[name] = lambda r=request: r.infer(features)
            outputs[name] = request.infer(features)["logits"]
    print(json.dumps({"ops": ops, "max_abs_difference_to_tf": {
        name: float(np.abs(value - outputs["tf"]).max()) for name, value in outputs.items()}}),
        flush=True)
    ms, cpu = milliseconds(calls, args.rounds, args.seconds)
    print(json.dumps({
        "model": args.model, "batch": args.batch, "seq": args.seq, "threads": args.threads,
        "real_tokens": int(features["input_mask"].sum()), "load_average_1min": os.getloadavg()[0],
        **{f"{name}_ms": [round(x) for x in values] for name, values in ms.items()},
        **{f"{name}_vs_tf": round(float(np.median(np.divide(ms["tf"], values))), 2)
           for name, values in ms.items() if name != "tf"},
        **{f"{name}_cpu": round(float(np.median(values)), 2) for name, values in cpu.items()}}),
        flush=True)
    for name in ("int8", "int8_unfused"):
        compiled = core.compile_model(int8_models[name], "CPU", {
            **openvino.compile_properties("int8"), "PERF_COUNT": True})
        print(json.dumps({f"{name}_counters": _counters(compiled, features)}), flush=True)


if __name__ == "__main__":
    main()
