"""A classifier task's files with each training example followed by variants of its texts
(distillation's data augmentation, `bert_tf.workflows.distillation.augmentation`): written as
a custom task (`text_a`, `text_b`, `label` columns) that run_classifier reads as any other."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Callable, Mapping, Sequence

from bert_tf import filesystem
from bert_tf.tasks.classifier import processors as classification
from bert_tf.tasks.classifier.task import ClassifierOptions, resolve_task
from bert_tf.tasks.family import AUGMENTATION_SETTINGS, TextVariants

SPLITS = ("train", "dev", "test")


def augment_examples(examples: Sequence[classification.InputExample], variants: TextVariants
                     ) -> list[classification.InputExample]:
    """Each example, followed by its variants (text_a and text_b both varied)."""
    out = []
    for index, example in enumerate(examples):
        out.append(example)
        out.extend(classification.InputExample(f"{example.guid}-aug{c}", a, b, example.label)
                   for c, (a, b) in enumerate(variants((example.text_a, example.text_b), index)))
    return out


def _label_cell(task: classification.TaskSpec, label) -> str:
    if task.multi_label:
        return task.label_separator.join(label)
    return "" if label is None else str(label)


def _write_split(path: str, task: classification.TaskSpec,
                 examples: Sequence[classification.InputExample], pair: bool) -> None:
    header = "text_a\t" + ("text_b\t" if pair else "") + "label\n"
    lines = [f"{e.text_a}\t" + (f"{e.text_b or ''}\t" if pair else "")
             + _label_cell(task, e.label) + "\n" for e in examples]
    filesystem.write_atomically(path, header + "".join(lines))


def augment(options: ClassifierOptions, directory: str, make_variants: Callable[[], TextVariants],
            settings: Mapping[str, Any]) -> ClassifierOptions:
    """`options` reading `directory`/{train,dev,test}.tsv, the task's files with the training
    examples augmented; kept when `directory`/augmentation.json holds the same `settings` (and
    the task's name), else written again with them."""
    task = resolve_task(options)
    settings = {**settings, "task": task.name}
    settings_path = filesystem.join(directory, AUGMENTATION_SETTINGS)
    data_dir = options.data_dir
    splits = {split: classification.read_examples(task, data_dir, split) for split in SPLITS
              if filesystem.exists(os.path.join(data_dir, task.splits[split].filename))}
    pair = any(e.text_b is not None for examples in splits.values() for e in examples)
    spec = {"text_a": "text_a", "label": "label", "labels": list(task.labels or []),
            "regression": task.regression, "metrics": list(task.metrics), "name": task.name}
    if pair:
        spec["text_b"] = "text_b"
    if task.multi_label:
        spec = {**spec, "multi_label": True, "label_separator": task.label_separator}
        del spec["metrics"]
    if task.regression:
        del spec["labels"]
    if not (filesystem.exists(settings_path)
            and json.loads(filesystem.read_text(settings_path)) == settings):
        filesystem.makedirs(directory)
        variants = make_variants()
        for split, examples in splits.items():
            if split == "train":
                examples = augment_examples(examples, variants)
            _write_split(os.path.join(directory, f"{split}.tsv"), task, examples, pair)
        filesystem.write_atomically(settings_path, json.dumps(settings, sort_keys=True))
    return dataclasses.replace(options, task_name="custom", custom_spec=spec, data_dir=directory)
