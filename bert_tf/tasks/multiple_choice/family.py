"""Multiple choice's (SWAG) declaration: what the scripts and workflows need of it."""

from __future__ import annotations

from bert_tf.checkpoints import hf_export
from bert_tf.tasks.family import TaskFamily
from bert_tf.tasks.multiple_choice import flags, multitask, task

MULTIPLE_CHOICE = TaskFamily(
    name="multiple_choice", script="run_swag",
    define_flags=flags.define_flags, options_from_flags=flags.task_options,
    run=task.run_multiple_choice, prepare=task.prepare,
    default_metric=lambda options: task.DEFAULT_BEST_METRIC,
    export_head=hf_export.ExportHead("multiple_choice", lambda config, labels, crf:
                                     task.MultipleChoiceModel(config)),
    search_metric=task.DEFAULT_BEST_METRIC,
    data_labels=lambda options, output_dir: None,  # the answers are choice indices
    multitask=multitask.MULTITASK)
