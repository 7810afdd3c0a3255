"""What the multi-task mix (`bert_tf.workflows.multitask`) needs of a classifier task: its
tasks.json keys, its options from an entry, its files read up front, its training records."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from bert_tf import filesystem
from bert_tf.errors import UserError
from bert_tf.model.config import BertConfig
from bert_tf.tasks.classifier import features as classifier_features
from bert_tf.tasks.classifier import processors as classification
from bert_tf.tasks.classifier.task import ClassifierOptions, ClassifierTask, resolve_task
from bert_tf.tasks.family import MultitaskSupport, TrainingData
from bert_tf.training import loop as training

# run_classifier.py's flags that describe a task (the model and tokenizer are the run's).
KEYS = frozenset({"task_name", "data_dir", "task_spec", "xnli_language", "threshold",
                  "tune_thresholds"})
PATH_KEYS = frozenset({"data_dir", "task_spec"})


def entry_options(values: Mapping[str, Any], common: Mapping[str, Any],
                  where: str) -> ClassifierOptions:
    """The options of a tasks.json entry (`values`: its KEYS, paths resolved) and the run's."""
    values = dict(values)
    spec = values.pop("task_spec", None)
    if isinstance(spec, str):
        spec = classification.load_task_spec(spec)
    if "task_name" not in values:
        raise UserError(f"{where}: 'task_name' is required (a GLUE task, xnli or custom with a "
                        "'task_spec')")
    return ClassifierOptions(**common, **values, custom_spec=spec)


def check_files(options: ClassifierOptions, splits: Sequence[str]) -> None:
    """Reads the task's files of `splits` (rows, labels within its list), converting none."""
    spec = resolve_task(options)
    for split in splits:
        classification.read_examples(spec, options.data_dir, split)


def training_data(options: ClassifierOptions, directory: str, bert_config: BertConfig,
                  tokenizer, run_config: training.RunConfig) -> TrainingData:
    """The training records in `directory` (where run_classifier would write them)."""
    filesystem.makedirs(directory)
    spec = resolve_task(options)
    cache = classifier_features.FeatureCache(
        spec, options.data_dir, directory, options.max_seq_length, tokenizer,
        options.tokenizer_files, options.do_lower_case)
    split = cache.records("train")
    loop_task = ClassifierTask(bert_config, spec.num_labels, spec.regression, spec.multi_label)
    # Full-length batches: every task's batch has the same [B,S] inputs.
    return TrainingData(loop_task, split.num_examples,
                        cache.input_fn(split, is_training=True, seed=run_config.seed))


MULTITASK = MultitaskSupport(keys=KEYS, path_keys=PATH_KEYS, options=entry_options,
                             check_files=check_files, training_data=training_data)
