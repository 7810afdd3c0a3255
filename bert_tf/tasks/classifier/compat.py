"""Users' own `DataProcessor` classes, written for the original run_classifier.py.

The original's most common customisation is a `DataProcessor` subclass whose
`get_train_examples(data_dir)`, `get_dev_examples`, `get_test_examples` return `InputExample`s
and whose `get_labels()` lists the labels. Such a class runs here unchanged but for its import
lines (`from run_classifier import DataProcessor, InputExample` and `from bert_tf import
tokenization`), named on the command line:

  python run_classifier.py --processor=my_processors.py:SentimentProcessor --data_dir=... ...

`load_processor` imports it (a module path `package.module:Class` or a file `path/to/file.py:Class`)
and checks that it has the methods the run needs; `processor_task` turns it into the TaskSpec
and example reader that the classifier's feature cache uses in place of a TSV layout.
"""

from __future__ import annotations

import csv
import importlib
import importlib.util
import os
import sys
from typing import Any, Callable

from bert_tf import filesystem
from bert_tf.errors import EmptyInputError, MissingFileError, UserError
from bert_tf.tasks.classifier.processors import InputExample, TaskSpec
from bert_tf.text.fast_basic import convert_to_unicode

__all__ = ["DataProcessor", "InputExample", "convert_to_unicode", "load_processor",
           "processor_task"]

SPLIT_METHODS = {"train": "get_train_examples", "dev": "get_dev_examples",
                 "test": "get_test_examples"}


class DataProcessor:
    """The original's base class: subclasses return the `InputExample`s of each split."""

    def get_train_examples(self, data_dir: str) -> list[InputExample]:
        """The training examples."""
        raise NotImplementedError()

    def get_dev_examples(self, data_dir: str) -> list[InputExample]:
        """The evaluation examples."""
        raise NotImplementedError()

    def get_test_examples(self, data_dir: str) -> list[InputExample]:
        """The examples to predict (their labels are not read)."""
        raise NotImplementedError()

    def get_labels(self) -> list[str]:
        """The labels, in the order of the output columns."""
        raise NotImplementedError()

    @classmethod
    def _read_tsv(cls, input_file: str, quotechar: str | None = None) -> list[list[str]]:
        """The rows of a tab-separated file (any tf.io.gfile path: local, gs://, ...)."""
        if not filesystem.exists(input_file):
            raise MissingFileError(f"{input_file}: file not found (read by the processor; "
                                   "check --data_dir)")
        with filesystem.open_text(input_file) as f:
            return list(csv.reader(f, delimiter="\t", quotechar=quotechar))


def _import_class(spec: str) -> type:
    """`module.path:Class` or `path/to/file.py:Class` → the class."""
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name.isidentifier():
        raise UserError(f"--processor={spec}: expected module:Class or path/to/file.py:Class")
    try:
        if where.endswith(".py"):
            if not os.path.isfile(where):
                raise MissingFileError(f"--processor={spec}: {where} not found")
            module_spec = importlib.util.spec_from_file_location(
                os.path.splitext(os.path.basename(where))[0], where)
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
        else:
            # Modules beside the user's working directory, as `python -m` would find them.
            if os.getcwd() not in sys.path:
                sys.path.append(os.getcwd())
            module = importlib.import_module(where)
    except ModuleNotFoundError as e:
        raise UserError(f"--processor={spec}: cannot import {where} ({e}); give a module on "
                        "the Python path or a path/to/file.py") from None
    except SyntaxError as e:
        raise UserError(f"--processor={spec}: {e.filename}:{e.lineno}: {e.msg}") from None
    cls = getattr(module, name, None)
    if not isinstance(cls, type):
        raise UserError(f"--processor={spec}: {where} has no class {name}")
    return cls


def load_processor(spec: str, splits: tuple[str, ...]) -> Any:
    """Imports and instantiates the processor named by `spec`.

    Args:
      spec: `module.path:Class` or `path/to/file.py:Class`.
      splits: the splits the run reads ("train", "dev", "test"); their methods must be
        implemented (not only inherited from `DataProcessor`).

    Raises:
      UserError: a bad spec, a module or class not found, or a method missing.
    """
    # A processor module's `from run_classifier import DataProcessor, InputExample` finds the
    # running script (run_classifier.py registers itself), else these same names (bert-distill).
    sys.modules.setdefault("run_classifier", sys.modules[__name__])
    cls = _import_class(spec)
    needed = ["get_labels"] + [SPLIT_METHODS[s] for s in splits]
    missing = [m for m in needed if not callable(getattr(cls, m, None))
               or getattr(cls, m) is getattr(DataProcessor, m)]
    if missing:
        raise UserError(f"--processor={spec}: {cls.__name__} does not implement "
                        f"{', '.join(missing)} (needed for this run)")
    try:
        return cls()
    except TypeError as e:
        raise UserError(f"--processor={spec}: {cls.__name__}() failed: {e}; the processor "
                        "must be constructible without arguments") from None


def _checked(example, labels: tuple[str, ...], split: str, where: str) -> InputExample:
    """The example as an InputExample, its text and label checked."""
    guid = getattr(example, "guid", None)
    text_a, text_b = getattr(example, "text_a", None), getattr(example, "text_b", None)
    label = getattr(example, "label", None)
    if not isinstance(text_a, str) or not (text_b is None or isinstance(text_b, str)):
        raise UserError(f"{where}: example {guid!r} has no text: text_a must be a str "
                        "(and text_b a str or None)")
    if split != "test" and label not in labels:
        raise UserError(f"{where}: example {guid!r} has label {label!r}, not one of "
                        f"get_labels() {list(labels)}")
    return InputExample(str(guid), text_a, text_b, label if label in labels else None)


def processor_task(processor: Any, name: str) -> tuple[TaskSpec, Callable[[str, str], list]]:
    """The TaskSpec of a processor (its labels, accuracy as the metric) and its reader.

    Returns:
      (task, read_split): `read_split(data_dir, split)` calls the processor's method for the
      split and returns checked InputExamples (test labels not read).
    """
    labels = tuple(processor.get_labels())
    if len(labels) < 2 or len(set(labels)) != len(labels):
        raise UserError(f"{type(processor).__name__}.get_labels() returned {list(labels)}; "
                        "classification needs two or more distinct labels")
    task = TaskSpec(name, labels, splits={})

    def read_split(data_dir: str, split: str) -> list[InputExample]:
        method = SPLIT_METHODS[split]
        where = f"{type(processor).__name__}.{method}({data_dir!r})"
        examples = [_checked(e, labels, split, where) for e in getattr(processor, method)(data_dir)]
        if not examples:
            raise EmptyInputError(f"{where} returned no examples")
        return examples

    return task, read_split
