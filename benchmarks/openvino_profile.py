"""Where an OpenVINO call spends its time against TensorFlow's, on the same token ids (no text
part): the model as the OpenVINO export converts it (the encoder skips the padding: gathers and
data-dependent shapes) and as a plain [B,S] graph (`static_shapes=True`: every position, all
keys), int8 and float32, with and without CPU pinning; then OpenVINO's per-node counters of the
int8 export's model, summed by node and kernel type.

    python benchmarks/openvino_profile.py --model=minilm
    python benchmarks/openvino_profile.py --model=base --rounds=3

Prints the machine line, `ops` (the converted graphs' padding ops and the kernels OpenVINO
picked), the largest output difference to TensorFlow, one line of milliseconds per call (each
variant's rounds, the calls alternating) with `<variant>_vs_tf` (TensorFlow ms / OpenVINO ms,
the median over the rounds: above 1 OpenVINO is faster), and `int8_counters`. Random weights
(seeded); int8 calibrated on the timed batch's rows.
"""

from __future__ import annotations

import argparse
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

_PADDING_OPS = {"GatherND", "NonZero", "ScatterNDUpdate", "MVN"}


def _config(name: str) -> BertConfig:
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


def _milliseconds(calls: dict, rounds: int, seconds: float) -> dict[str, list[float]]:
    for call in calls.values():
        call()
        call()
    ms = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            count, start = 0, time.perf_counter()
            while count < 3 or time.perf_counter() - start < seconds:
                call()
                count += 1
            ms[name].append((time.perf_counter() - start) / count * 1000)
    return ms


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("minilm", "base"), default="minilm")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=37, help="the batch's longest row")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    print(json.dumps({"benchmark": "openvino_profile", **machine_info(tf)}), flush=True)
    keras.utils.set_random_seed(0)
    model = models.classifier_model(_config(args.model), 2)

    def trace(**call_options):
        return tf.function(lambda f: {"logits": tf.cast(
            model(f, training=False, **call_options)["logits"], tf.float32)},
            input_signature=[model_inputs_spec()]).get_concrete_function()

    features = _batch(args.batch, args.seq)
    tensors = {name: tf.constant(value) for name, value in features.items()}
    calibration = [{k: v[i:i + 1] for k, v in features.items()} for i in range(args.batch)]
    tf_model = trace()
    calls = {"tf": lambda: tf_model(tensors)}
    outputs = {"tf": tf_model(tensors)["logits"].numpy()}
    ops, core, int8_export = {}, ov.Core(), None
    for graph, traced in (("unpad", tf_model), ("grid", trace(static_shapes=True))):
        converted = openvino.convert(traced, ["logits"])
        ops[graph] = sorted({op.get_type_name() for op in converted.get_ops()} & _PADDING_OPS)
        for precision, ov_model in (("int8", openvino.quantize(converted, calibration)),
                                    ("f32", converted)):
            pinning = [("", {})] + ([("_nopin", {"ENABLE_CPU_PINNING": False})]
                                    if graph == "unpad" else [])
            for suffix, options in pinning:
                compiled = core.compile_model(ov_model, "CPU", {
                    "INFERENCE_PRECISION_HINT": "f32", **options})
                name = f"{precision}_{graph}{suffix}"
                request = compiled.create_infer_request()
                calls[name] = lambda r=request: r.infer(features)
                outputs[name] = request.infer(features)["logits"]
            if (precision, graph) == ("int8", "unpad"):
                int8_export = ov_model
    print(json.dumps({"ops": ops, "max_abs_difference_to_tf": {
        name: float(np.abs(value - outputs["tf"]).max()) for name, value in outputs.items()}}),
        flush=True)
    ms = _milliseconds(calls, args.rounds, args.seconds)
    print(json.dumps({
        "model": args.model, "batch": args.batch, "seq": args.seq,
        "real_tokens": int(features["input_mask"].sum()), "load_average_1min": os.getloadavg()[0],
        **{f"{name}_ms": [round(x) for x in values] for name, values in ms.items()},
        **{f"{name}_vs_tf": round(float(np.median(np.divide(ms["tf"], values))), 2)
           for name, values in ms.items() if name != "tf"}}), flush=True)
    compiled = core.compile_model(int8_export, "CPU", {"INFERENCE_PRECISION_HINT": "f32",
                                                       "PERF_COUNT": True})
    print(json.dumps({"int8_counters": _counters(compiled, features)}), flush=True)


if __name__ == "__main__":
    main()
