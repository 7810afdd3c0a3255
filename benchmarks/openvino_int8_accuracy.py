"""The int8 OpenVINO export under NNCF's accuracy settings, on two real tasks: per setting, the dev
figures against float32 and the speed at batch 32 against the float32 TensorFlow export.

    python benchmarks/real_text.py --classification_dir=/tmp/real/sections \
        --num_classes=5 --per_class=480 --dev_per_class=550
    flock /tmp/bert_tf_bench.lock python benchmarks/openvino_int8_accuracy.py \
        --classifier_dir=/tmp/real/sections --work_dir=/tmp/int8_accuracy

The models are benchmarks/openvino_serving.py's: all-MiniLM-L6-v2 fine-tuned on
--classifier_dir's sentences (`minilm_finetuned`) and on the demo SQuAD v1.1 set
(`minilm_squad`), trained once into --work_dir (a second run reuses them). Each setting exports
the trained model through the script's own path (run_classifier / run_squad with
--export_runtime=openvino --export_dtype=int8), the fields of `bert_tf.serving.openvino.
Quantization` that a setting gives replacing the flags' (`ignore:<regex>|...`: the float nodes,
as --int8_float_nodes), or with another --int8_calibration_examples.

Prints the machine line (CPU model and ISA flags), then one JSON line per model and setting:
the dev metric of float32 and int8, the relative change, the fraction of answers unchanged,
the export's seconds, and `int8_vs_tensorflow`: the median over --repeats rounds of int8 /
TensorFlow float32 examples/s at batch 32 (the two calls alternate within each round).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import re
import sys
import time
from typing import Callable

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from finetune_vs_transformers import DEMO, MODEL_DIR, bert_tf_run, read_tsv  # noqa: E402
from machine import machine_info  # noqa: E402
from openvino_serving import squad_run  # noqa: E402
from timing import examples_per_second  # noqa: E402

from bert_tf.serving import openvino, predict  # noqa: E402

# The settings measured: `Quantization` fields, or "calibration_examples".
SETTINGS = {
    "default": {},
    "smooth_quant_off": {"smooth_quant_alpha": -1.0},
    "smooth_quant_0.5": {"smooth_quant_alpha": 0.5},
    "bias_correction": {"fast_bias_correction": False},
    "preset_performance": {"preset": "performance"},
    "calibration_1000": {"calibration_examples": 1000},
}


def _settings(names: str) -> dict[str, dict]:
    chosen = {}
    for name in names.split(","):
        if name.startswith("ignore:"):  # ignore:<regex>[|<regex>...]: node names kept float
            chosen[name] = {"ignored_patterns": tuple(name[len("ignore:"):].split("|"))}
        elif name.startswith("accuracy_control:"):  # accuracy_control:<max relative drop>
            chosen[name] = {"max_relative_drop": float(name.split(":")[1])}
        else:
            chosen[name] = SETTINGS[name]
    return chosen


def _export_with(settings: dict, export: Callable) -> None:
    """Runs `export(calibration_examples)`, the script's settings (`openvino.quantization`)
    replaced by `settings`' fields."""
    fields = {k: v for k, v in settings.items() if k != "calibration_examples"}
    original = openvino.quantization
    openvino.quantization = lambda float_nodes: dataclasses.replace(original(float_nodes),
                                                                    **fields)
    try:
        export(settings.get("calibration_examples", openvino.DEFAULT_CALIBRATION_EXAMPLES))
    finally:
        openvino.quantization = original


def _speed(tensorflow_dir: str, int8_dir: str, inputs: list[dict[str, str]], args
           ) -> float | None:
    if not args.repeats:
        return None
    chunk = inputs[:32]
    tensors = {name: tf.constant([example[name] for example in chunk]) for name in chunk[0]}
    calls = {name: (lambda s=predict.load_signature(d, "serving_default")[1]: s(**tensors))
             for name, d in (("tensorflow", tensorflow_dir), ("int8", int8_dir))}
    rates = examples_per_second(calls, len(chunk), args.repeats, args.min_seconds)
    return round(float(np.median(np.divide(rates["int8"], rates["tensorflow"]))), 2)


def classifier(args, work_dir: str):
    """Trains (once) and returns (export(calibration_examples, export_dir), the TensorFlow
    float32 export, the timed inputs)."""
    from bert_tf.tasks.classifier import task as classifier_task

    run_args = argparse.Namespace(**vars(args), dtype="float32", xla=False, dynamic_padding=True,
                                  group_by_length=False)
    tensorflow_dir = os.path.join(work_dir, "export_float32")
    if not os.path.isdir(tensorflow_dir):
        bert_tf_run("classifier", run_args, work_dir, export_dtypes=("float32",))
    # bert_tf_run's options, export only.
    from bert_tf.tasks.classifier import processors as classification
    from bert_tf.training import loop as training

    spec = classification.load_task_spec(os.path.join(args.classifier_dir, "custom_spec.json"))
    options = classifier_task.ClassifierOptions(
        task_name="custom", data_dir=args.classifier_dir, custom_spec=spec,
        bert_config_file=os.path.join(work_dir, "bert_config.json"),
        vocab_file=os.path.join(MODEL_DIR, "vocab.txt"), do_lower_case=True, max_seq_length=128,
        export_runtime="openvino", export_dtype="int8", export_max_relative_loss=1.0)
    run_config = training.RunConfig(output_dir=os.path.join(work_dir, "classifier"))

    def export(calibration_examples: int, export_dir: str) -> None:
        classifier_task.run_classifier(dataclasses.replace(
            options, int8_calibration_examples=calibration_examples, export_dir=export_dir),
            run_config)
    texts = [{"text_a": sentence} for sentence, _ in read_tsv(args.classifier_dir, "dev")]
    return export, tensorflow_dir, texts


def squad(args, work_dir: str):
    """As `classifier`, for all-MiniLM-L6-v2 fine-tuned on the demo SQuAD v1.1 set."""
    from bert_tf.tasks.squad import task as squad_task

    options, run_config, questions = squad_run(args, work_dir, 128)
    export_only = dataclasses.replace(options, do_train=False, do_predict=False)
    tensorflow_dir = os.path.join(work_dir, "squad_tensorflow")
    if not os.path.isdir(tensorflow_dir):
        squad_task.run_squad(options, run_config)
        squad_task.run_squad(dataclasses.replace(export_only, export_dir=tensorflow_dir),
                             run_config)

    def export(calibration_examples: int, export_dir: str) -> None:
        squad_task.run_squad(dataclasses.replace(
            export_only, export_runtime="openvino", export_dtype="int8",
            int8_calibration_examples=calibration_examples, export_max_relative_loss=1.0,
            export_dir=export_dir), run_config)
    return export, tensorflow_dir, questions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classifier_dir", default=os.path.join(DEMO, "classification"))
    parser.add_argument("--work_dir", required=True, help="trained models, kept for a rerun")
    parser.add_argument("--models", default="minilm_finetuned,minilm_squad")
    parser.add_argument("--settings", default=",".join(SETTINGS),
                        help=f"of {', '.join(SETTINGS)}, ignore:<regex>|..., "
                             "accuracy_control:<max relative drop>")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--batch_size", type=int, default=32, help="training batch")
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--window", type=int, default=5, help="steps per log window")
    parser.add_argument("--squad_epochs", type=float, default=1.0)
    parser.add_argument("--squad_learning_rate", type=float, default=1e-4)
    parser.add_argument("--repeats", type=int, default=3, help="0: no timing")
    parser.add_argument("--reuse_exports", action="store_true",
                        help="time the exports --work_dir has from an earlier run")
    parser.add_argument("--min_seconds", type=float, default=2.0)
    args = parser.parse_args()
    print(json.dumps({"benchmark": "openvino_int8_accuracy_machine", **machine_info(tf),
                      "classifier_dir": args.classifier_dir}), flush=True)
    os.makedirs(args.work_dir, exist_ok=True)
    models = {"minilm_finetuned": classifier, "minilm_squad": squad}
    for model in args.models.split(","):
        export, tensorflow_dir, inputs = models[model](args, args.work_dir)
        for name, settings in _settings(args.settings).items():
            export_dir = os.path.join(args.work_dir, "int8", model, re.sub(r"\W", "_", name))
            start, seconds = time.perf_counter(), None
            if not (args.reuse_exports and os.path.isdir(export_dir)):
                _export_with(settings, functools.partial(export, export_dir=export_dir))
                seconds = round(time.perf_counter() - start, 1)
            with open(os.path.join(export_dir, openvino.MANIFEST), encoding="utf-8") as f:
                dev = json.load(f)["dev"]
            with open(os.path.join(export_dir, "model.xml"), encoding="utf-8") as f:
                fake_quantize = f.read().count('type="FakeQuantize"')
            print(json.dumps({
                "model": model, "setting": name, "metric": dev["metric"],
                "float32": round(dev["float32"], 6), "int8": round(dev["int8"], 6),
                "relative_change": round(-openvino.relative_loss(dev["float32"], dev["int8"]), 5),
                "answers_unchanged": round(dev["answers_unchanged"], 5),
                "fake_quantize_nodes": fake_quantize, "export_seconds": seconds,
                "int8_vs_tensorflow": _speed(tensorflow_dir, export_dir, inputs, args),
                "load_average_1min": os.getloadavg()[0]}), flush=True)


if __name__ == "__main__":
    main()
