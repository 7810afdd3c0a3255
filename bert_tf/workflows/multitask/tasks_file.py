"""tasks.json: the tasks of a multi-task run, each of a task family that offers the mix
(`TaskFamily.multitask`: a classifier or a tagging (NER) task).

    {"tasks": [
      {"name": "sst", "type": "classifier", "task_name": "sst-2", "data_dir": "glue/SST-2"},
      {"name": "reviews", "type": "classifier", "task_name": "custom", "data_dir": "reviews",
       "task_spec": {"text_a": "text", "label": "stars", "regression": true}, "weight": 0.5},
      {"name": "ner", "type": "ner", "data_dir": "conll2003", "tag_scheme": "bioes"}]}

Each entry takes the flags of its single-task script that describe the task (its family's
`MultitaskSupport.keys`; run_classifier.py: task_name, data_dir, task_spec (an object or a spec
file's path), xnli_language, threshold, tune_thresholds; run_ner.py: data_dir, data_format,
tag_scheme, labels, train_file, dev_file, test_file, window_overlap, crf, lstm_size,
crf_learning_rate, decode), plus `name` (its output files' name), `type` (the family's name) and
`weight` (sampling, default 1). Relative paths are relative to the
file's directory. The model, tokenizer and sequence length are the run's, shared by all tasks.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from bert_tf import filesystem
from bert_tf.errors import MissingFileError, UserError
from bert_tf.tasks import families
from bert_tf.tasks.family import TaskFamily
from bert_tf.tasks.finetuning import FinetuningOptions

_ENTRY_KEYS = {"name", "type", "weight"}
_SELECTION_FIELDS = {"eval_every_n_steps", "eval_every_epoch", "best_metric",
                     "early_stopping_patience", "predict_from"}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclasses.dataclass(frozen=True)
class TaskEntry:
    """One task of the mix: its name, family, sampling weight and the options its single-task
    script would run with."""
    name: str
    family: TaskFamily
    weight: float
    options: FinetuningOptions


def read_tasks_file(path: str, shared: FinetuningOptions) -> list[TaskEntry]:
    """The tasks of `path`, with the run's shared options (`shared`: model, tokenizer, sequence
    length, epochs) in each task's options."""
    try:
        content = json.loads(filesystem.read_text(path))
    except FileNotFoundError:
        raise MissingFileError(f"--tasks: {path}: file not found") from None
    except json.JSONDecodeError as e:
        raise UserError(f"--tasks: {path}:{e.lineno}: not valid JSON ({e.msg})") from None
    entries = content.get("tasks") if isinstance(content, dict) else content
    if not isinstance(entries, list) or not entries:
        raise UserError(f"--tasks: {path}: expected {{\"tasks\": [...]}} with at least one task "
                        "(see docs/multitask.md)")
    base = filesystem.dirname(filesystem.absolute(path))
    tasks = [_entry(raw, number, path, base, shared) for number, raw in enumerate(entries)]
    names = [task.name for task in tasks]
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise UserError(f"--tasks: {path}: task names must differ; {duplicated} appear twice")
    return tasks


def _entry(raw: Any, number: int, path: str, base: str, shared: FinetuningOptions) -> TaskEntry:
    where = f"--tasks: {path}: task {number}"
    if not isinstance(raw, dict):
        raise UserError(f"{where}: expected an object, got {type(raw).__name__}")
    kind = raw.get("type")
    offered = families.multitask_families()
    if kind not in families.names(offered):
        raise UserError(f"{where}: 'type' must be one of {families.names(offered)}, got {kind!r}")
    family = families.family_named(kind, families=offered)
    task_keys = family.multitask.keys
    unknown = set(raw) - _ENTRY_KEYS - task_keys
    if unknown:
        raise UserError(f"{where}: unknown key(s) {sorted(unknown)} for a {kind} task; known: "
                        f"{sorted(_ENTRY_KEYS | task_keys)}")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise UserError(f"{where}: 'name' must be a short name of letters, digits, '_', '-' or "
                        f"'.' (it names the task's outputs), got {name!r}")
    weight = raw.get("weight", 1.0)
    if not isinstance(weight, (int, float)) or weight <= 0:
        raise UserError(f"{where} ('{name}'): 'weight' must be a positive number, got {weight!r}")
    if "data_dir" not in raw:
        raise UserError(f"{where} ('{name}'): 'data_dir' (the task's files) is required")
    values = {key: value for key, value in raw.items() if key in task_keys}
    for key in family.multitask.path_keys:
        if isinstance(values.get(key), str) and not filesystem.scheme(values[key]):
            values[key] = filesystem.join(base, values[key])
    # Evaluation during training and the best checkpoint are the mix's (see run.py), not a task's.
    common = {field.name: getattr(shared, field.name)
              for field in dataclasses.fields(FinetuningOptions)
              if field.name not in _SELECTION_FIELDS}
    return TaskEntry(name, family, float(weight),
                     family.multitask.options(values, common, f"{where} ('{name}')"))
