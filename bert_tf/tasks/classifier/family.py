"""The sentence (pair) classifier's declaration: what the scripts and workflows need of it."""

from __future__ import annotations

from bert_tf.tasks.classifier import augmented, flags, multitask, task
from bert_tf.checkpoints import hf_export
from bert_tf.tasks.family import TaskFamily

CLASSIFIER = TaskFamily(
    name="classifier", script="run_classifier",
    define_flags=flags.define_flags, options_from_flags=flags.task_options,
    run=task.run_classifier, prepare=task.prepare, default_metric=task.best_metric_default,
    export_head=hf_export.CLASSIFIER_HEAD, search_metric="eval_accuracy",
    data_labels=lambda options, output_dir: task.output_labels(options),
    multitask=multitask.MULTITASK, augment=augmented.augment)
