"""What the multi-task mix (`bert_tf.workflows.multitask`) needs of a multiple-choice task: its
tasks.json keys, its options from an entry, its files read up front, its training records."""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from bert_tf import filesystem
from bert_tf.model.config import BertConfig
from bert_tf.tasks.family import MultitaskSupport, TrainingData
from bert_tf.tasks.multiple_choice import data
from bert_tf.tasks.multiple_choice import task as multiple_choice
from bert_tf.training import loop as training

# run_swag.py's flags that describe a task (the model and tokenizer are the run's).
KEYS = frozenset({"data_dir", "train_file", "dev_file", "test_file"})
PATH_KEYS = frozenset({"data_dir"})


def entry_options(values: Mapping[str, Any], common: Mapping[str, Any],
                  where: str) -> multiple_choice.MultipleChoiceOptions:
    """The options of a tasks.json entry (`values`: its KEYS, paths resolved) and the run's."""
    del where  # every key has a default but data_dir, which the mix requires of every task
    return multiple_choice.MultipleChoiceOptions(**common, **values)


def check_files(options: multiple_choice.MultipleChoiceOptions, splits: Sequence[str]) -> None:
    """Reads the task's files of `splits` (their questions and labels), converting none."""
    files = {"train": options.train_file, "dev": options.dev_file, "test": options.test_file}
    for split in splits:
        data.read_examples(options.path(files[split]))


def training_data(options: multiple_choice.MultipleChoiceOptions, directory: str,
                  bert_config: BertConfig, tokenizer, run_config: training.RunConfig
                  ) -> TrainingData:
    """The training questions' records in `directory` (where run_swag would write them)."""
    filesystem.makedirs(directory)
    path = options.path(options.train_file)
    split = multiple_choice.prepare_split(path, data.read_examples(path), options.max_seq_length,
                                          tokenizer, os.path.join(directory, "train.tf_record"))
    return TrainingData(multiple_choice.MultipleChoiceTask(bert_config, options.max_seq_length),
                        len(split.examples),
                        multiple_choice.input_fn(split, True, run_config.seed))


MULTITASK = MultitaskSupport(keys=KEYS, path_keys=PATH_KEYS, options=entry_options,
                             check_files=check_files, training_data=training_data)
