"""SQuAD's (span extraction) declaration: what the scripts and workflows need of it."""

from __future__ import annotations

from bert_tf.checkpoints import hf_export
from bert_tf.tasks.family import TaskFamily
from bert_tf.tasks.squad import flags, task

SQUAD = TaskFamily(
    name="squad", script="run_squad",
    define_flags=flags.define_flags, options_from_flags=flags.task_options, run=task.run_squad,
    prepare=task.prepare, default_metric=lambda options: task.DEFAULT_BEST_METRIC,
    export_head=hf_export.SPAN_HEAD, search_metric=task.DEFAULT_BEST_METRIC,
    data_labels=lambda options, output_dir: None,  # answers are spans: no label list
    evaluates_by_predicting=True)
