"""What the multi-task mix (`bert_tf.workflows.multitask`) needs of a tagging task: its
tasks.json keys, its options from an entry, its files read up front, its training records."""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from bert_tf import filesystem
from bert_tf.model.config import BertConfig
from bert_tf.tasks.family import MultitaskSupport, TrainingData
from bert_tf.tasks.ner import data as tagging
from bert_tf.tasks.ner import task as ner
from bert_tf.training import loop as training

# run_ner.py's flags that describe a task (the model and tokenizer are the run's).
KEYS = frozenset({"data_dir", "data_format", "tag_scheme", "labels", "train_file", "dev_file",
                  "test_file", "window_overlap", "crf", "lstm_size", "crf_learning_rate",
                  "decode"})
PATH_KEYS = frozenset({"data_dir"})


def entry_options(values: Mapping[str, Any], common: Mapping[str, Any],
                  where: str) -> ner.NerOptions:
    """The options of a tasks.json entry (`values`: its KEYS, paths resolved) and the run's."""
    del where  # every key has a default but data_dir, which the mix requires of every task
    return ner.NerOptions(**common, **values)


def check_files(options: ner.NerOptions, splits: Sequence[str]) -> None:
    """Reads the task's files of `splits` (their rows and tags), converting none."""
    files = {"train": options.train_file, "dev": options.dev_file, "test": options.test_file}
    for split in splits:
        tagging.read_sentences(options.path(files[split]), options.data_format)


def training_data(options: ner.NerOptions, directory: str, bert_config: BertConfig, tokenizer,
                  run_config: training.RunConfig) -> TrainingData:
    """The training windows' records in `directory` (where run_ner would write them)."""
    filesystem.makedirs(directory)
    train = tagging.read_sentences(options.path(options.train_file), options.data_format)
    labels = ner.resolve_labels(options, directory, train)
    split = ner.prepare_split(options.path(options.train_file), train, options, labels,
                              tokenizer, os.path.join(directory, "train.tf_record"))
    loop_task = ner.make_task(options, bert_config, labels, run_config.learning_rate)
    return TrainingData(loop_task, split.features.num_windows,
                        ner.input_fn(split, options.max_seq_length, True, run_config.seed))


MULTITASK = MultitaskSupport(keys=KEYS, path_keys=PATH_KEYS, options=entry_options,
                             check_files=check_files, training_data=training_data)
