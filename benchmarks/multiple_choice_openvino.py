"""The multiple-choice OpenVINO exports (int8, bfloat16, float32) against the float32 TensorFlow
raw-text export of the same model, on the real task of multiple_choice_vs_transformers.py.

    flock /tmp/bert_tf_bench.lock python benchmarks/multiple_choice_openvino.py

all-MiniLM-L6-v2 fine-tuned on the Python-documentation questions as run_swag.py does
(`multiple_choice_vs_transformers.bert_tf_run`: --train questions, 2 epochs, max_seq_length 64,
one seed), then exported by run_multiple_choice: TensorFlow float32, and OpenVINO in each
precision (int8 calibrated on --calibration_questions training questions; every export compared
with float32 on the --dev questions, none refused). Prints the machine line (CPU model and ISA
flags), the run's eval_accuracy, `dev` (each export's accuracy against float32's, its relative
change and the questions whose prediction is unchanged, from `openvino.json`), then per batch
size the questions/s of each export's `serving_default` on raw dev questions (the calls
alternating within each of --repeats rounds) and `<precision>_vs_tensorflow`, the median over
the rounds of OpenVINO / TensorFlow questions/s (openvino_serving.py's `measure`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile

import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import machine_info  # noqa: E402
from multiple_choice_vs_transformers import MODEL_DIR, bert_tf_run, write_questions  # noqa: E402
from openvino_serving import PRECISIONS, measure, report_dev  # noqa: E402

from bert_tf.tasks.multiple_choice import task as multiple_choice  # noqa: E402
from bert_tf.training import loop as training  # noqa: E402


def export_all(args, data_dir: str, work_dir: str) -> dict[str, str]:
    """Fine-tunes, then writes every export of the run; {runtime or precision: export dir}."""
    result = bert_tf_run(args, data_dir, work_dir, args.seed)
    print(json.dumps({"model": "minilm_multiple_choice", "eval_accuracy":
                      result["dev_accuracy"], "steps": result["steps"]}), flush=True)
    options = multiple_choice.MultipleChoiceOptions(
        data_dir=data_dir, train_file="train.jsonl", dev_file="dev.jsonl",
        bert_config_file=os.path.join(work_dir, "bert_config.json"),  # bert_tf_run's
        vocab_file=os.path.join(MODEL_DIR, "vocab.txt"), do_lower_case=True,
        max_seq_length=args.max_seq_length,
        int8_calibration_examples=args.calibration_questions, export_max_relative_loss=1.0)
    run_config = training.RunConfig(output_dir=os.path.join(work_dir, f"run_{args.seed}"))
    exports = {"tensorflow": os.path.join(work_dir, "export_tensorflow")}
    multiple_choice.run_multiple_choice(
        dataclasses.replace(options, export_dir=exports["tensorflow"]), run_config)
    for precision in PRECISIONS:
        multiple_choice.run_multiple_choice(dataclasses.replace(
            options, export_dir=os.path.join(work_dir, f"export_openvino_{precision}"),
            export_runtime="openvino", export_dtype=precision), run_config)
    exports.update(report_dev("minilm_multiple_choice", work_dir, "export_openvino_"))
    return exports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=2000, help="training questions")
    parser.add_argument("--dev", type=int, default=500, help="dev questions")
    parser.add_argument("--max_seq_length", type=int, default=64)
    parser.add_argument("--batch_size", type=int, default=16, help="training batch")
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--window", type=int, default=20, help="steps per log window")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--calibration_questions", type=int, default=300)
    parser.add_argument("--batch_sizes", default="32,1", help="questions per timed call")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--min_seconds", type=float, default=3.0)
    args = parser.parse_args()
    args.batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    print(json.dumps({"benchmark": "multiple_choice_openvino", **machine_info(tf)}), flush=True)
    with tempfile.TemporaryDirectory() as work_dir:
        print(json.dumps({"questions": write_questions(work_dir, args.train, args.dev)}),
              flush=True)
        exports = export_all(args, work_dir, work_dir)
        dev = multiple_choice.serving_questions(os.path.join(work_dir, "dev.jsonl"), args.dev)
        measure("minilm_multiple_choice", exports, {"questions": dev}, args)


if __name__ == "__main__":
    main()
