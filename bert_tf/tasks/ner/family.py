"""The token tagger's (NER) declaration: what the scripts and workflows need of it."""

from __future__ import annotations

from bert_tf.checkpoints import hf_export
from bert_tf.tasks.family import TaskFamily
from bert_tf.tasks.ner import flags, multitask, task

NER = TaskFamily(
    name="ner", script="run_ner",
    define_flags=flags.define_flags, options_from_flags=flags.task_options, run=task.run_ner,
    prepare=task.prepare, default_metric=lambda options: task.DEFAULT_BEST_METRIC,
    export_head=hf_export.TAGGER_HEAD, search_metric=task.DEFAULT_BEST_METRIC,
    data_labels=lambda options, output_dir: task.resolve_labels(options, output_dir, None),
    multitask=multitask.MULTITASK)
