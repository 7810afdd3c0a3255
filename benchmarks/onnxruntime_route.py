"""ONNX Runtime beside OpenVINO and TensorFlow on the model alone (token ids in, logits out, the
same ids for every runtime): the route docs/serving.md chose against the one it left out.

    pip install onnxruntime==1.31.1 onnx==1.23.2 onnxscript==0.7.2
    flock /tmp/bert_tf_bench.lock python benchmarks/onnxruntime_route.py --model=minilm \
        --checkpoint=/tmp/int8_accuracy/classifier --sentences=/tmp/real/sections --rounds=3
    flock /tmp/bert_tf_bench.lock python benchmarks/onnxruntime_route.py --model=base \
        --sentences=/tmp/real/sections --agreement_rows=640 --rounds=3

The ONNX model comes the way a user of bert_tf gets one: the classifier written as a Hugging
Face directory by bert_tf's own export (`hf_export.export_hf_directory`, what --export_hf_dir
and export_hf.py write), loaded by transformers (eager attention) and exported by
torch.onnx.export's TorchScript exporter (opset 17, batch and length dynamic), then fused by
ONNX Runtime's transformers optimizer (EmbedLayerNormalization, Attention,
SkipLayerNormalization, BiasGelu; on torch's default dynamo export it fuses no attention).
tf2onnx 1.17 on the ids-in TensorFlow function is no route: Keras 3's exact GELU (`Erfc`) has no
conversion rule. Routes, each on --threads threads (TensorFlow: intra-op threads, one inter-op;
OpenVINO: INFERENCE_NUM_THREADS; ONNX Runtime: intra_op_num_threads, one inter-op, sequential):

  tf                 TensorFlow float32 (the Keras model traced, as the exports trace it)
  ov_int8, ov_bf16, ov_f32   the OpenVINO model the export writes (`openvino.convert`, NNCF int8)
  ort_f32            the fused ONNX model
  ort_int8_dynamic   quantize_dynamic of it: per-channel int8 weights, activations per call
  ort_int8_static    quantize_static of the unfused model (quant_pre_process first): QDQ,
                     per-channel weights, MinMax-calibrated activations

--model=minilm with --checkpoint: a bert_tf classifier run directory (its bert_config.json,
label_list.txt, checkpoint); otherwise random weights, seeded as benchmarks/openvino_profile.py
seeds them. Sentences: --sentences' dev.tsv in a seeded order, [CLS] text [SEP] by
FullTokenizer (at most 128 tokens); the first --calibration calibrate both int8 routes (one row
each), the rest (or their first --agreement_rows) are compared with TensorFlow's logits (batches
of 32 padded to their longest row). Timed: `arrived`, the first 32 of those as they come (short
and long rows, padded to the longest), `bucketed`, the 32 held-out rows nearest the median
length (little padding), and `one`, the first row alone.

Prints the machine line, `onnx` (the optimizer's fused nodes), `agreement` (per route: the
largest logit difference to TensorFlow float32 and the fraction of argmaxes unchanged), then one
line per timed batch (`length`: its padded length, `real_tokens`: its unpadded ones): each
route's milliseconds per call per round (the calls alternate within a round) and
`<route>_vs_tf`, TensorFlow float32's ms / the route's, the median over the rounds (above 1 the
route is faster), with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from typing import Callable

import keras
import numpy as np
import openvino as ov
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from finetune_vs_transformers import DEMO, MODEL_DIR, read_tsv  # noqa: E402
from machine import machine_info  # noqa: E402
from openvino_profile import (logits_function, milliseconds, model_config,  # noqa: E402
                              seeded_vectors)

from bert_tf.checkpoints import hf_export  # noqa: E402
from bert_tf.checkpoints.name_map import init_from_checkpoint  # noqa: E402
from bert_tf.model import models  # noqa: E402
from bert_tf.model.config import BertConfig  # noqa: E402
from bert_tf.serving import openvino  # noqa: E402
from bert_tf.text.tokenizers import FullTokenizer  # noqa: E402

INSTALL = "pip install onnxruntime==1.31.1 onnx==1.23.2 onnxscript==0.7.2"
_MAX_SEQ_LENGTH = 128
_HF_INPUTS = {"input_ids": "input_ids", "attention_mask": "input_mask",
              "token_type_ids": "segment_ids"}
Features = dict[str, np.ndarray]
# A route: (the batch as the runtime takes it, the call on that -> float32 logits).
Route = tuple[Callable[[Features], object], Callable[[object], np.ndarray]]


def _classifier(args) -> tuple[keras.Model, BertConfig]:
    """The timed model: --checkpoint's classifier, or seeded random weights."""
    if args.checkpoint:
        config = BertConfig.from_json_file(os.path.join(args.checkpoint, "bert_config.json"))
        with open(os.path.join(args.checkpoint, "label_list.txt"), encoding="utf-8") as f:
            labels = [line for line in f.read().splitlines() if line]
        model = models.classifier_model(config, len(labels))
        init_from_checkpoint(model, args.checkpoint)
        return model, config
    keras.utils.set_random_seed(0)
    config = model_config(args.model)
    model = models.classifier_model(config, 2)
    seeded_vectors(model)
    return model, config


def _rows(sentences_dir: str) -> list[list[int]]:
    """dev.tsv's sentences in a seeded order, as [CLS] text [SEP] ids."""
    sentences = [sentence for sentence, _ in read_tsv(sentences_dir, "dev")]
    random.Random(0).shuffle(sentences)
    tokenizer = FullTokenizer(os.path.join(MODEL_DIR, "vocab.txt"), do_lower_case=True)
    return [tokenizer.convert_tokens_to_ids(
        ["[CLS]", *tokenizer.tokenize(text)[:_MAX_SEQ_LENGTH - 2], "[SEP]"])
        for text in sentences]


def _batch(rows: list[list[int]]) -> Features:
    """`rows` padded to the longest, as the export's packing gives them (int32)."""
    length = max(map(len, rows))
    ids = np.array([row + [0] * (length - len(row)) for row in rows], np.int32)
    return {"input_ids": ids, "input_mask": (ids != 0).astype(np.int32),
            "segment_ids": np.zeros_like(ids)}


def _bucket(rows: list[list[int]], size: int) -> list[list[int]]:
    """The `size` rows nearest the median length: a batch of like lengths, as a server that
    groups requests by length sends it."""
    by_length = sorted(rows, key=len)
    start = max(0, len(by_length) // 2 - size // 2)
    return by_length[start:start + size]


def _hf_inputs(features: Features) -> dict[str, np.ndarray]:
    return {hf: features[ours].astype(np.int64) for hf, ours in _HF_INPUTS.items()}


def _onnx_files(model: keras.Model, config: BertConfig, work_dir: str,
                calibration: list[Features]) -> tuple[dict[str, str], dict[str, int]]:
    """The ONNX models by route ({route: path}) and the optimizer's fused nodes."""
    import torch
    import transformers
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quant_pre_process, quantize_dynamic, quantize_static)
    from onnxruntime.transformers import optimizer

    hf_dir, exported = os.path.join(work_dir, "hf"), os.path.join(work_dir, "model.onnx")
    hf_export.export_hf_directory(model, hf_dir, hf_export.TokenizerFiles(
        os.path.join(MODEL_DIR, "vocab.txt"), max_seq_length=_MAX_SEQ_LENGTH))
    torch_model = transformers.AutoModelForSequenceClassification.from_pretrained(
        hf_dir, attn_implementation="eager").eval()
    # forward(input_ids, attention_mask, token_type_ids): _HF_INPUTS' order.
    example = tuple(torch.from_numpy(value) for value in _hf_inputs(calibration[0]).values())
    torch.onnx.export(torch_model, example, exported, dynamo=False,
                      input_names=list(_HF_INPUTS), output_names=["logits"], opset_version=17,
                      dynamic_axes={name: {0: "batch", 1: "length"} for name in _HF_INPUTS})
    files = {name: os.path.join(work_dir, f"{name}.onnx")
             for name in ("ort_f32", "ort_int8_dynamic", "ort_int8_static")}
    fused = optimizer.optimize_model(exported, model_type="bert",
                                     num_heads=config.num_attention_heads,
                                     hidden_size=config.hidden_size)
    fused.save_model_to_file(files["ort_f32"])
    # The contrib ops defeat the quantizer's shape inference: their outputs are float32.
    float_outputs = {"DefaultTensorType": 1}  # onnx.TensorProto.FLOAT
    quantize_dynamic(files["ort_f32"], files["ort_int8_dynamic"], per_channel=True,
                     weight_type=QuantType.QInt8, extra_options=float_outputs)

    class Calibration(CalibrationDataReader):
        def __init__(self):
            self.items = iter(_hf_inputs(item) for item in calibration)

        def get_next(self):
            return next(self.items, None)

    prepared = os.path.join(work_dir, "prepared.onnx")
    quant_pre_process(exported, prepared, skip_symbolic_shape=True)
    quantize_static(prepared, files["ort_int8_static"], Calibration(),
                    quant_format=QuantFormat.QDQ, per_channel=True,
                    extra_options=float_outputs)
    counts = {name: count for name, count in fused.get_fused_operator_statistics().items()
              if count}
    return files, counts


def _onnxruntime_route(path: str, threads: int) -> Route:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return _hf_inputs, lambda inputs: session.run(["logits"], inputs)[0]


def _openvino_routes(tf_model, calibration: list[Features], threads: int) -> dict[str, Route]:
    converted = openvino.convert(tf_model, ["logits"])
    quantized = openvino.quantize(converted, calibration)
    core, routes = ov.Core(), {}
    for name, ov_model, precision in (("ov_int8", quantized, "f32"),
                                      ("ov_bf16", converted, "bf16"),
                                      ("ov_f32", converted, "f32")):
        request = core.compile_model(ov_model, "CPU", {
            "INFERENCE_PRECISION_HINT": precision, "INFERENCE_NUM_THREADS": threads,
        }).create_infer_request()
        routes[name] = (lambda features: features,
                        lambda features, r=request: np.array(r.infer(features)["logits"]))
    return routes


def _agreement(routes: dict[str, Route], batches: list[Features]) -> dict:
    """Per route, against TensorFlow's float32 logits on `batches`."""
    logits = {name: np.concatenate([run(feed(batch)) for batch in batches])
              for name, (feed, run) in routes.items()}
    reference = logits.pop("tf")
    return {"rows": len(reference), **{name: {
        "max_abs_logit_difference": float(np.abs(values - reference).max()),
        "argmax_unchanged": round(float(np.mean(values.argmax(-1) == reference.argmax(-1))), 5),
    } for name, values in logits.items()}}


def _timed(routes: dict[str, Route], features: Features, args) -> dict:
    fed = {name: feed(features) for name, (feed, _) in routes.items()}
    ms, _ = milliseconds({name: (lambda r=run, x=fed[name]: r(x))
                          for name, (_, run) in routes.items()}, args.rounds, args.seconds)
    return {
        "model": args.model, "batch": len(features["input_ids"]),
        "length": features["input_ids"].shape[1],
        "real_tokens": int(features["input_mask"].sum()),
        **{f"{name}_ms": [round(x, 1) for x in values] for name, values in ms.items()},
        **{f"{name}_vs_tf": round(float(np.median(np.divide(ms["tf"], values))), 2)
           for name, values in ms.items() if name != "tf"},
        "load_average_1min": os.getloadavg()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("minilm", "base"), default="minilm")
    parser.add_argument("--checkpoint", help="a classifier run directory (--model=minilm)")
    parser.add_argument("--sentences", default=os.path.join(DEMO, "classification"),
                        help="a directory with a dev.tsv of sentences")
    parser.add_argument("--calibration", type=int, default=openvino.DEFAULT_CALIBRATION_EXAMPLES,
                        help="calibration sentences")
    parser.add_argument("--agreement_rows", type=int, default=None,
                        help="the held-out sentences compared (default: all)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--work_dir", help="where the ONNX files go (default: a temporary one)")
    args = parser.parse_args()
    try:
        import onnx
        import onnxruntime
    except ImportError:
        sys.exit(f"error: this benchmark needs ONNX Runtime: {INSTALL}")
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    print(json.dumps({"benchmark": "onnxruntime_route", "onnxruntime": onnxruntime.__version__,
                      "onnx": onnx.__version__, "openvino": ov.get_version(),
                      **machine_info(tf)}), flush=True)
    model, config = _classifier(args)
    rows = _rows(args.sentences)
    calibration = [_batch([row]) for row in rows[:args.calibration]]
    held_out = rows[args.calibration:]
    tf_model = logits_function(model)
    routes: dict[str, Route] = {
        "tf": (lambda f: {k: tf.constant(v) for k, v in f.items()},
               lambda tensors: tf_model(tensors)["logits"].numpy()),
        **_openvino_routes(tf_model, calibration, args.threads)}
    with tempfile.TemporaryDirectory() as scratch:
        files, fused = _onnx_files(model, config, args.work_dir or scratch, calibration)
        routes.update({name: _onnxruntime_route(path, args.threads)
                       for name, path in files.items()})
    print(json.dumps({"onnx": {"export": "transformers + torch.onnx.export (TorchScript)",
                               "fused_nodes": fused}}), flush=True)
    compared = held_out[:args.agreement_rows]
    batches = [_batch(compared[i:i + 32]) for i in range(0, len(compared), 32)]
    print(json.dumps({"agreement": _agreement(routes, batches)}), flush=True)
    timed = {"arrived": batches[0], "bucketed": _batch(_bucket(held_out, 32)),
             "one": _batch(held_out[:1])}
    for name, features in timed.items():
        print(json.dumps({"timed": name, **_timed(routes, features, args)}), flush=True)


if __name__ == "__main__":
    main()
