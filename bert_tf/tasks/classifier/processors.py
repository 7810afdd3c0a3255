"""Sentence and sentence-pair classification tasks as data, around one TSV/CSV reader.

A task is a `TaskSpec`: its label list (or regression), the metrics GLUE reports for it, and one
`SplitLayout` per split (file name, header or not, which columns hold text and label). Every
GLUE task and XNLI is an entry in `GLUE_TASKS` / `get_task`; a user's own files become a TaskSpec
through `custom_task` (flags or a small JSON spec). `read_examples` is the one reader.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import sys
from typing import Any, Mapping, Sequence

from absl import logging

from bert_tf import filesystem
from bert_tf.errors import EmptyInputError, MissingFileError, UserError
from bert_tf.text.columns import Column, parse_column, resolve_column

SPLITS = ("train", "dev", "test")


@dataclasses.dataclass(frozen=True)
class SplitLayout:
    """Where one split's text and label live in its file.

    Attributes:
      filename: path relative to the data directory.
      text_a: the first sentence's column.
      text_b: the second sentence's column, or None for single-sentence tasks.
      label: the label column, or None for an unlabeled split (test sets).
      header: whether the first row names the columns (it is skipped).
      delimiter: "\\t" or ",".
      quoting: honour "..." quoting (CSV). GLUE's TSVs are read without it, as the original does:
        their sentences contain stray quote characters.
      filter_column/filter_value: keep only rows whose column equals the value (XNLI's language).
      label_columns: a multi-label task's 0/1 columns, one per label (instead of `label`).
    """

    filename: str
    text_a: Column
    text_b: Column | None = None
    label: Column | None = None
    header: bool = True
    delimiter: str = "\t"
    quoting: bool = False
    filter_column: Column | None = None
    filter_value: str | None = None
    label_columns: tuple[Column, ...] | None = None


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """A classification (or regression) task.

    Attributes:
      name: task name as given to --task_name.
      labels: label strings in output order (test_results.tsv columns); None for regression, and
        for a custom task whose labels are still to be inferred from its training file.
      splits: {"train"|"dev"|"test": SplitLayout}.
      regression: one float output trained with mean squared error (STS-B).
      metrics: names from `bert_tf.tasks.classifier.metrics.METRIC_NAMES`, as GLUE reports them.
      label_aliases: label spellings mapped before lookup (XNLI's "contradictory").
      multi_label: each example has a set of labels (a tuple), read from `label` split at
        `label_separator` or from the layout's `label_columns`.
    """

    name: str
    labels: tuple[str, ...] | None
    splits: Mapping[str, SplitLayout]
    regression: bool = False
    metrics: tuple[str, ...] = ("accuracy",)
    label_aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)
    multi_label: bool = False
    label_separator: str = "|"

    @property
    def num_labels(self) -> int:
        """Output width of the classifier head: 1 for regression."""
        if self.regression:
            return 1
        if self.labels is None:
            raise UserError(f"task '{self.name}': the label list is not known yet "
                             "(give it, or call infer_labels on the training file)")
        return len(self.labels)


@dataclasses.dataclass(frozen=True)
class InputExample:
    """One row: `label` is a label string, a float (regression), a tuple of label strings
    (multi-label), or None (unlabeled).

    Also the original run_classifier.py's `InputExample(guid, text_a, text_b=None, label=None)`.
    """

    guid: str
    text_a: str
    text_b: str | None = None
    label: str | float | tuple[str, ...] | None = None


# --- GLUE and XNLI --------------------------------------------------------------------------

_NLI3 = ("contradiction", "entailment", "neutral")
_BINARY = ("0", "1")
_ENTAIL2 = ("entailment", "not_entailment")


def _pair_task(name, labels, a, b, label, test_a, test_b, metrics=("accuracy",), header=True):
    """A task whose train/dev files share one layout and whose test file drops the label."""
    layout = SplitLayout("", text_a=a, text_b=b, label=label, header=header)
    return TaskSpec(name, labels, {
        "train": dataclasses.replace(layout, filename="train.tsv"),
        "dev": dataclasses.replace(layout, filename="dev.tsv"),
        "test": SplitLayout("test.tsv", text_a=test_a, text_b=test_b),
    }, metrics=metrics)


def _mnli(name: str, suffix: str) -> TaskSpec:
    # Columns: index promptID pairID genre s1_binary_parse s2_binary_parse s1_parse s2_parse
    # sentence1 sentence2 [label1 .. label5 gold_label]; test files stop after sentence2.
    labeled = SplitLayout("train.tsv", text_a=8, text_b=9, label=-1)
    return TaskSpec(name, _NLI3, {
        "train": labeled,
        "dev": dataclasses.replace(labeled, filename=f"dev_{suffix}.tsv"),
        "test": SplitLayout(f"test_{suffix}.tsv", text_a=8, text_b=9),
    })


def _xnli(language: str) -> TaskSpec:
    # dev/test columns: language gold_label s1_binary_parse s2_binary_parse s1_parse s2_parse
    # sentence1 sentence2 ...; train is the machine-translated MultiNLI: premise hypo label.
    dev = SplitLayout("xnli.dev.tsv", text_a=6, text_b=7, label=1, filter_column=0,
                      filter_value=language)
    return TaskSpec("xnli", _NLI3, {
        "train": SplitLayout(f"multinli/multinli.train.{language}.tsv", text_a=0, text_b=1,
                             label=2),
        "dev": dev,
        "test": dataclasses.replace(dev, filename="xnli.test.tsv", label=None),
    }, label_aliases={"contradictory": "contradiction"})


def _stsb() -> TaskSpec:
    # Columns: index genre filename year old_index source1 source2 sentence1 sentence2 score.
    labeled = SplitLayout("train.tsv", text_a=7, text_b=8, label=9)
    return TaskSpec("sts-b", None, {
        "train": labeled,
        "dev": dataclasses.replace(labeled, filename="dev.tsv"),
        "test": SplitLayout("test.tsv", text_a=7, text_b=8),
    }, regression=True, metrics=("pearson", "spearman"))


GLUE_TASKS: dict[str, TaskSpec] = {
    # CoLA train/dev: source, label, original judgement, sentence -- no header row.
    "cola": _pair_task("cola", _BINARY, 3, None, 1, 1, None, ("accuracy", "mcc"), header=False),
    "sst-2": _pair_task("sst-2", _BINARY, 0, None, 1, 1, None),
    # MRPC: Quality, #1 ID, #2 ID, #1 String, #2 String (test: index instead of Quality).
    "mrpc": _pair_task("mrpc", _BINARY, 3, 4, 0, 3, 4, ("accuracy", "f1")),
    # QQP train/dev: id qid1 qid2 question1 question2 is_duplicate; test: id question1 question2.
    "qqp": _pair_task("qqp", _BINARY, 3, 4, 5, 1, 2, ("accuracy", "f1")),
    # QNLI/RTE/WNLI: index sentence1 sentence2 label; test: index sentence1 sentence2.
    "qnli": _pair_task("qnli", _ENTAIL2, 1, 2, 3, 1, 2),
    "rte": _pair_task("rte", _ENTAIL2, 1, 2, 3, 1, 2),
    "wnli": _pair_task("wnli", _BINARY, 1, 2, 3, 1, 2),
    "mnli": _mnli("mnli", "matched"),
    "mnli-mm": _mnli("mnli-mm", "mismatched"),
    "sts-b": _stsb(),
}
TASK_NAMES = tuple(GLUE_TASKS) + ("xnli", "custom")
_TASK_ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "sts": "sts-b", "mnli-m": "mnli",
                 "mnli_mm": "mnli-mm", "generic": "custom"}


def get_task(name: str, *, xnli_language: str = "zh",
             custom_spec: Mapping[str, Any] | None = None) -> TaskSpec:
    """Looks up a task by its --task_name (case-insensitive).

    Args:
      name: a GLUE task, "xnli", or "custom" (the user's own files).
      xnli_language: XNLI's language code (the original fixed it to "zh").
      custom_spec: the custom task's spec, see `custom_task`.
    """
    key = name.lower()
    key = _TASK_ALIASES.get(key, key)
    if key == "xnli":
        return _xnli(xnli_language)
    if key == "custom":
        if custom_spec is None:
            raise UserError("--task_name=custom needs a spec: --task_spec=spec.json or the "
                             "--text_a_column/--label_column flags")
        return custom_task(custom_spec)
    if key not in GLUE_TASKS:
        raise UserError(f"unknown --task_name '{name}'; known: {', '.join(TASK_NAMES)}")
    return GLUE_TASKS[key]


# --- custom tasks ---------------------------------------------------------------------------

_SPEC_KEYS = {"format", "header", "text_a", "text_b", "label", "labels", "regression", "metrics",
              "multi_label", "label_separator", "label_columns", "train_file", "dev_file",
              "test_file", "train", "dev", "test", "name"}
_LAYOUT_KEYS = {"text_a", "text_b", "label", "header"}
_CLASSIFICATION_METRICS = ("accuracy", "f1", "mcc")
MULTI_LABEL_METRICS = ("micro_f1", "macro_f1", "subset_accuracy")
_REGRESSION_METRICS = ("pearson", "spearman")


def custom_task(spec: Mapping[str, Any]) -> TaskSpec:
    """Builds a TaskSpec for the user's own TSV/CSV files.

    Args:
      spec: a dict (e.g. a parsed JSON file) with keys
        `text_a` (required), `text_b`, `label` (column names need `header: true`; ints are
        0-based indices), `format` ("tsv" default, or "csv"), `header` (default true), `labels`
        (list; inferred from the training file when absent), `regression` (bool), `metrics`
        (default accuracy, or pearson+spearman for regression), `train_file`/`dev_file`/
        `test_file` (default train.tsv, dev.tsv, test.tsv with the format's extension), and
        per-split overrides `"test": {"text_a": ..., "text_b": ..., "header": ...}`.
        The test split is read without labels.
    """
    unknown = set(spec) - _SPEC_KEYS
    if unknown:
        raise UserError(f"task spec: unknown key(s) {sorted(unknown)}; known: {sorted(_SPEC_KEYS)}")
    if "text_a" not in spec:
        raise UserError("task spec: 'text_a' (the text column, a name or 0-based index) is required")
    fmt = spec.get("format", "tsv").lower()
    if fmt not in ("tsv", "csv"):
        raise UserError(f"task spec: format must be 'tsv' or 'csv', not '{fmt}'")
    regression = bool(spec.get("regression", False))
    label_columns = spec.get("label_columns")
    multi_label = bool(spec.get("multi_label", False)) or label_columns is not None
    if multi_label and regression:
        raise UserError("task spec: a task is either multi_label or regression, not both")
    base = SplitLayout("", text_a=spec["text_a"], text_b=spec.get("text_b"),
                       label=None if label_columns is not None else spec.get("label"),
                       header=bool(spec.get("header", True)),
                       delimiter="\t" if fmt == "tsv" else ",", quoting=fmt == "csv",
                       label_columns=None if label_columns is None else tuple(label_columns))
    splits = {}
    for split in SPLITS:
        overrides = dict(spec.get(split, {}))
        if set(overrides) - _LAYOUT_KEYS:
            raise UserError(f"task spec: '{split}' may only override {sorted(_LAYOUT_KEYS)}")
        if split == "test":
            overrides.update(label=None, label_columns=None)
        filename = spec.get(f"{split}_file", f"{split}.{fmt}")
        splits[split] = dataclasses.replace(base, filename=filename, **overrides)
    if base.label is None and base.label_columns is None:
        raise UserError("task spec: 'label' (the label column) is required")
    labels = spec.get("labels")
    if labels is None and label_columns is not None:
        if not all(isinstance(c, str) for c in label_columns):
            raise UserError("task spec: label_columns given by index need 'labels' (--label_list)"
                             ", one name per column")
        labels = list(label_columns)
    if label_columns is not None and len(labels) != len(label_columns):
        raise UserError(f"task spec: {len(label_columns)} label_columns but {len(labels)} labels")
    if multi_label:
        metrics = MULTI_LABEL_METRICS
    else:
        allowed = _REGRESSION_METRICS if regression else _CLASSIFICATION_METRICS
        metrics = tuple(spec.get("metrics", _REGRESSION_METRICS if regression else ("accuracy",)))
        if not metrics or set(metrics) - set(allowed):
            raise UserError(f"task spec: metrics {list(metrics)} must be among {list(allowed)} "
                             f"for a {'regression' if regression else 'classification'} task")
    return TaskSpec(spec.get("name", "custom"), None if labels is None else tuple(map(str, labels)),
                    splits, regression=regression, metrics=metrics, multi_label=multi_label,
                    label_separator=spec.get("label_separator", "|"))


def spec_from_flags(text_a_column: str, label_column: str | None,
                    text_b_column: str | None = None, has_header: bool = True,
                    file_format: str = "tsv", label_list: Sequence[str] | None = None,
                    regression: bool = False, multi_label: bool = False,
                    label_separator: str = "|",
                    label_columns: Sequence[str] | None = None) -> dict:
    """The custom task's spec from run_classifier.py's column flags (see `custom_task`)."""
    if not text_a_column or not (label_column or label_columns):
        raise UserError("--task_name=custom needs --text_a_column and --label_column (or "
                         "--multi_label --label_columns) (or --task_spec=spec.json)")
    spec: dict[str, Any] = {"format": file_format, "header": has_header,
                            "text_a": parse_column(text_a_column), "regression": regression}
    if multi_label or label_columns:
        spec.update(multi_label=True, label_separator=label_separator)
    if label_columns:
        spec["label_columns"] = [parse_column(c) for c in label_columns]
    else:
        spec["label"] = parse_column(label_column)
    if text_b_column:
        spec["text_b"] = parse_column(text_b_column)
    if label_list:
        spec["labels"] = list(label_list)
    return spec


def load_task_spec(path: str) -> dict[str, Any]:
    """Reads a custom task's JSON spec file."""
    try:
        return json.loads(filesystem.read_text(path))
    except FileNotFoundError:
        raise MissingFileError(f"{path}: task spec not found (check --task_spec)") from None
    except json.JSONDecodeError as e:
        raise UserError(f"{path}:{e.lineno}: not valid JSON: {e.msg}") from None


# --- the reader ------------------------------------------------------------------------------

def _rows(path: str, layout: SplitLayout):
    """Yields (line number, row) for every non-empty data row, and the header (or None) first.

    The file must be UTF-8 (a BOM is skipped), as for the original's reader: text in another
    encoding would silently become other words.
    """
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # MNLI's parse-tree columns are long
    with filesystem.open_text(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f, delimiter=layout.delimiter,
                            quotechar='"' if layout.quoting else None,
                            quoting=csv.QUOTE_MINIMAL if layout.quoting else csv.QUOTE_NONE)
        try:
            header = next(reader, None) if layout.header else None
            yield header
            for row in reader:
                if row:
                    yield reader.line_num, row
        except UnicodeDecodeError as e:
            raise UserError(f"{path}: near line {reader.line_num + 1}: not UTF-8 ({e.reason}); "
                            "convert the file to UTF-8") from None


def read_examples(task: TaskSpec, data_dir: str, split: str) -> list[InputExample]:
    """Reads one split of a task into examples.

    Raises:
      FileNotFoundError: the split's file is missing (message names the path and the task).
      ValueError: a short row, an unknown label or a non-numeric regression score, with file:line;
        a file without examples (EmptyInputError).
    """
    if split not in task.splits:
        raise UserError(f"task '{task.name}' has no '{split}' split")
    layout = task.splits[split]
    path = os.path.join(data_dir, layout.filename)
    if not filesystem.isfile(path):
        raise MissingFileError(f"{path}: file not found (task '{task.name}' reads its {split} "
                                f"split from {layout.filename} under --data_dir)")
    rows = _rows(path, layout)
    header = next(rows)
    cols = {role: resolve_column(getattr(layout, role), header, path, role)
            for role in ("text_a", "text_b", "label", "filter_column")}
    label_cols = [resolve_column(c, header, path, "label") for c in layout.label_columns or ()]
    needed = 1 + max(c if c >= 0 else -c - 1
                     for c in [*cols.values(), *label_cols] if c is not None)
    examples = []
    for line, row in rows:
        if len(row) < needed:
            raise UserError(f"{path}:{line}: expected at least {needed} columns, found "
                             f"{len(row)} (is the delimiter right, and the task '{task.name}'?)")
        if cols["filter_column"] is not None and row[cols["filter_column"]] != layout.filter_value:
            continue
        if label_cols:
            label = _parse_label_columns(task, [row[c] for c in label_cols], path, line)
        elif cols["label"] is None:
            label = None
        elif task.multi_label:
            label = _parse_label_set(task, row[cols["label"]], path, line)
        else:
            label = _parse_label(task, row[cols["label"]], path, line)
        text_b = None if cols["text_b"] is None else row[cols["text_b"]]
        examples.append(InputExample(f"{split}-{line}", row[cols["text_a"]], text_b, label))
    if not examples:
        raise EmptyInputError(f"{path}: no examples; expected {layout.filename} to hold one "
                              f"example per row{' after its header' if layout.header else ''} "
                              f"(task '{task.name}', {split} split)")
    logging.info("Read %d %s examples from %s", len(examples), split, path)
    return examples


def _parse_label(task: TaskSpec, raw: str, path: str, line: int) -> str | float:
    raw = raw.strip()
    if task.regression:
        try:
            return float(raw)
        except ValueError:
            raise UserError(f"{path}:{line}: the score '{raw}' is not a number "
                             f"(task '{task.name}' is a regression task)") from None
    label = task.label_aliases.get(raw, raw)
    if task.labels is not None and label not in task.labels:
        raise UserError(f"{path}:{line}: unknown label '{raw}'; task '{task.name}' has labels "
                         f"{list(task.labels)}")
    return label


def _parse_label_set(task: TaskSpec, raw: str, path: str, line: int) -> tuple[str, ...]:
    """A multi-label cell, e.g. `politics|science` → ("politics", "science"); empty: no label."""
    found = tuple(dict.fromkeys(p.strip() for p in raw.split(task.label_separator) if p.strip()))
    unknown = [label for label in found if task.labels is not None and label not in task.labels]
    if unknown:
        raise UserError(f"{path}:{line}: unknown label '{unknown[0]}' in '{raw.strip()}'; task "
                         f"'{task.name}' has labels {list(task.labels)} (separator "
                         f"'{task.label_separator}', --label_separator)")
    return found


def _parse_label_columns(task: TaskSpec, cells: Sequence[str], path: str,
                         line: int) -> tuple[str, ...]:
    """One 0/1 cell per label → the labels whose cell is 1."""
    for label, cell in zip(task.labels, cells):
        if cell.strip() not in ("0", "1"):
            raise UserError(f"{path}:{line}: label column '{label}' holds '{cell.strip()}'; "
                             "a label column holds 0 or 1")
    return tuple(label for label, cell in zip(task.labels, cells) if cell.strip() == "1")


def infer_labels(task: TaskSpec, data_dir: str) -> TaskSpec:
    """Returns `task` with its label list read from the training file when not given.

    Labels are sorted (numerically when every label is a number), so the order, and hence the
    columns of test_results.tsv, do not depend on the order of the rows.
    """
    if task.regression or task.labels is not None:
        return task
    examples = read_examples(task, data_dir, "train")
    if task.multi_label:
        found = {label for ex in examples for label in ex.label}
    else:
        found = {ex.label for ex in examples}
    try:
        labels = sorted(found, key=float)
    except ValueError:
        labels = sorted(found)
    if len(labels) < 2:
        raise UserError(f"{os.path.join(data_dir, task.splits['train'].filename)}: found "
                         f"{len(labels)} distinct label(s) {labels}; classification needs two or more")
    return dataclasses.replace(task, labels=tuple(labels))
