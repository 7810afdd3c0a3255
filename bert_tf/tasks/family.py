"""`TaskFamily`: what a fine-tuning task family declares, in its own folder's `family.py`.

`bert_tf.tasks.families` is the one list of them. The scripts, the workflows (distillation,
multi-task, search) and the Hugging Face export look a family up there by the name a user gives
(`--task=ner`, `"type": "ner"` in tasks.json, the script a search runs); none of them asks which
family a task is. A new family is its folder (data, features, head, loop task, `run_*`, export,
flags, `family.py`), its script, and one line in `families.FAMILIES` (docs/architecture.md).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Protocol, Sequence

import tensorflow as tf
from absl import flags

from bert_tf.checkpoints import hf_export
from bert_tf.tasks import finetuning

InputFn = Callable[[tf.distribute.InputContext | None, int], tf.data.Dataset]


class Prepared(Protocol):
    """A run's task prepared as its script prepares it (labels written, tokenizer and loop task
    built): `evaluate(checkpoint)` gives --do_eval's figures for a checkpoint, keeping the model
    and traced steps for later calls."""

    def evaluate(self, checkpoint: str | None = None) -> dict[str, float]: ...


@dataclasses.dataclass(frozen=True)
class TrainingData:
    """A task's training records as its script writes them: its loop task (head, loss,
    metrics), how many examples (windows, questions) an epoch has, and the input function of
    full-length training batches."""

    loop_task: finetuning.EncoderTask
    num_examples: int
    input_fn: InputFn


@dataclasses.dataclass(frozen=True)
class MultitaskSupport:
    """What the multi-task mix (`bert_tf.workflows.multitask`) needs of a family.

    Attributes:
      keys: the tasks.json keys of an entry of this type: the script's flags that describe the
        task (data, files, labels, head).
      path_keys: those of `keys` that name files, relative to tasks.json's directory.
      options: (the entry's values of `keys`, the run's shared option values, where the entry
        is for messages) → the task's options.
      check_files: (options, splits among "train", "dev", "test") → reads the task's files of
        those splits as its script would, raising the script's one-line errors, converting none.
      training_data: (options, run directory, config, tokenizer, run_config) → its training
        records, written where its single-task run would write them.
    """

    keys: frozenset[str]
    path_keys: frozenset[str]
    options: Callable[[Mapping[str, Any], Mapping[str, Any], str], finetuning.FinetuningOptions]
    check_files: Callable[[finetuning.FinetuningOptions, Sequence[str]], None]
    training_data: Callable[..., TrainingData]


# Beside an augmented copy of a task's files: the settings that made it (see TaskFamily.augment).
AUGMENTATION_SETTINGS = "augmentation.json"

# One example's texts → `copies` variants of them (each text varied, None kept), the variants of
# example `index` the same on every run (distillation's data augmentation).
TextVariants = Callable[[Sequence[str | None], int], list[tuple[str | None, ...]]]


@dataclasses.dataclass(frozen=True)
class TaskFamily:
    """What a fine-tuning task family declares.

    Attributes:
      name: how users name it: bert-distill's --task, tasks.json's "type" ("classifier").
      script: its script's module name ("run_classifier"); its console command is
        "bert-" + script with "_" as "-" (bert-run-classifier).
      define_flags: defines its script's flags (the shared ones too) on absl's FLAGS.
      options_from_flags: its options from parsed flag values.
      run: `run(options, run_config, strategy=None, training_task=None)`: trains, evaluates,
        predicts and exports as the options ask (its script's main); `training_task` is what
        --do_train trains in place of the family's loop task (given it).
      prepare: `prepare(options, run_config, strategy=None)` → a `Prepared`.
      default_metric: the eval_results key --best_metric defaults to for these options.
      search_metric: the key a search compares when the trial's command names none.
      data_labels: (options, output_dir) → the label list its data gives, read without
        converting anything, or None for a family without one (SQuAD).
      evaluates_by_predicting: its dev figures come from --do_predict on a file with answers
        (SQuAD), not from --do_eval.
      export_head: the head `bert-export-hf --head` writes for the family (its model, whether
        its outputs are labels); None: none.
      multitask: what the multi-task mix needs; None: not offered there.
      augment: distillation's --augment_checkpoint: (options, directory, make_variants,
        settings) → options reading a copy of the task's files in `directory` whose training
        examples are each followed by their variants. The copy is kept when
        `directory/AUGMENTATION_SETTINGS` holds `settings` (with the task's name added), else
        written (only then is `make_variants()` called) and the settings with it; None: the
        family's data cannot be augmented.
    """

    name: str
    script: str
    define_flags: Callable[[], None]
    options_from_flags: Callable[[flags.FlagValues], finetuning.FinetuningOptions]
    run: Callable[..., dict[str, Any]]
    prepare: Callable[..., Prepared]
    default_metric: Callable[[finetuning.FinetuningOptions], str]
    search_metric: str
    data_labels: Callable[[finetuning.FinetuningOptions, str], list[str] | None]
    evaluates_by_predicting: bool = False
    export_head: hf_export.ExportHead | None = None
    multitask: MultitaskSupport | None = None
    augment: Callable[..., finetuning.FinetuningOptions] | None = None

    @property
    def console_script(self) -> str:
        return "bert-" + self.script.replace("_", "-")
