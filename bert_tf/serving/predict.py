"""Runs an exported SavedModel on a file of raw text: what `bert-predict` (predict.py) does.

Input formats (one example per line):
* `lines`: each line is the text of the signature's one string input (`text_a`, `text`, ...);
* `tsv`: a header row names the signature's inputs (`text_a\\ttext_b`, `question\\tcontext`);
  other columns are ignored;
* `jsonl`: each line is a JSON object with the inputs by name (other keys are ignored).

Each example gives one JSON line with the signature's outputs (floats, strings, lists), in input
order. Examples run in batches; a first line on stderr says the export's dtype (float32,
bfloat16 or int8, --export_dtype), a second what runs it (TensorFlow, or OpenVINO and the
precision it runs in on this CPU: `bert_tf.serving.openvino`), then a progress line counts them.
"""

from __future__ import annotations

import csv
import functools
import json
import os
import sys
import time
from typing import IO, Iterable, Iterator

import numpy as np
import tensorflow as tf

from bert_tf import filesystem
from bert_tf.errors import MissingFileError, UserError
from bert_tf.serving import precision

FORMATS = ("lines", "tsv", "jsonl")


def format_of(path: str, input_format: str | None) -> str:
    """The input format: `input_format`, else the file's extension (.tsv, .jsonl/.json), else lines."""
    if input_format:
        if input_format not in FORMATS:
            raise UserError(f"--input_format={input_format}: give one of {', '.join(FORMATS)}")
        return input_format
    extension = os.path.splitext(path)[1].lower()
    return {".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}.get(extension, "lines")


@functools.lru_cache(maxsize=2)
def _load(export_dir: str):
    """The SavedModel, loaded once per process (a caller may predict several files)."""
    return tf.saved_model.load(export_dir)


@functools.lru_cache(maxsize=2)
def _load_openvino(export_dir: str):
    from bert_tf.serving import openvino  # noqa: PLC0415

    return openvino.OpenVinoExport(export_dir)


def describe(export_dir: str) -> list[str]:
    """Two lines naming what runs the export: its dtype, and the runtime (for OpenVINO with the
    precision it runs the products outside int8 in on this CPU)."""
    from bert_tf.serving import openvino  # noqa: PLC0415

    if openvino.is_openvino_export(export_dir):
        export = _load_openvino(filesystem.absolute(export_dir))
        return [f"{export_dir}: {export.precision} weights and compute",
                f"{export_dir}: runs on OpenVINO {export.openvino_version.split('-')[0]} "
                f"(CPU, inference precision {export.inference_precision()})"]
    return [f"{export_dir}: {precision.saved_dtype(export_dir)} weights and compute",
            f"{export_dir}: runs on TensorFlow {tf.__version__}"]


def load_signature(export_dir: str, signature: str):
    """The signature's function (string tensors by input name -> outputs by name) and its
    input names, with clear errors; an OpenVINO export's too (`bert_tf.serving.openvino`)."""
    from bert_tf.serving import openvino  # noqa: PLC0415
    from bert_tf.serving.saved_model import require_tensorflow_text

    require_tensorflow_text()  # registers the tokenizer ops the exports use
    if not filesystem.isfile(filesystem.join(export_dir, "saved_model.pb")):
        raise MissingFileError(f"{export_dir}: no saved_model.pb here (check --export_dir)")
    if openvino.is_openvino_export(export_dir):
        export = _load_openvino(filesystem.absolute(export_dir))
        if signature not in export.signatures:
            raise UserError(f"--signature={signature}: {export_dir} has "
                            f"{', '.join(export.signatures)}")
        return export, export.signature(signature), export.input_names(signature)
    loaded = _load(filesystem.absolute(export_dir))
    if signature not in loaded.signatures:
        raise UserError(f"--signature={signature}: {export_dir} has {', '.join(sorted(loaded.signatures))}")
    function = loaded.signatures[signature]
    specs = function.structured_input_signature[1]
    not_text = sorted(name for name, spec in specs.items() if spec.dtype != tf.string)
    if not_text:
        raise UserError(f"--signature={signature} takes {', '.join(not_text)} (not text); "
                        "bert-predict runs the raw-text signatures")
    return loaded, function, sorted(specs)


def read_examples(path: str, input_format: str, names: list[str]) -> Iterator[dict[str, str]]:
    """Yields {input name: text} per example of `path`; errors name the file and line."""
    with filesystem.open_text(path, newline="") as f:
        if input_format == "lines":
            if len(names) != 1:
                raise UserError(f"{path}: the signature takes {', '.join(names)}; plain lines give "
                                "one text: use a .tsv with a header row or .jsonl")
            for line in f:
                yield {names[0]: line.rstrip("\r\n")}
        elif input_format == "tsv":
            yield from _tsv_examples(path, f, names)
        else:
            for number, line in enumerate(f, 1):
                if line.strip():
                    yield _json_example(path, number, line, names)


def _tsv_examples(path: str, f: IO[str], names: list[str]) -> Iterator[dict[str, str]]:
    rows = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
    header = next(rows, None)
    missing = sorted(set(names) - set(header or ()))
    if missing:
        raise UserError(f"{path}, line 1: the header names no column {', '.join(missing)} "
                        f"(the signature takes {', '.join(names)})")
    columns = [header.index(name) for name in names]
    for number, row in enumerate(rows, 2):
        if len(row) <= max(columns):
            raise UserError(f"{path}, line {number}: {len(row)} columns, the header has {len(header)}")
        yield {name: row[c] for name, c in zip(names, columns)}


def _json_example(path: str, number: int, line: str, names: list[str]) -> dict[str, str]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        raise UserError(f"{path}, line {number}: not JSON ({e.msg})") from None
    missing = [name for name in names if not isinstance(record, dict) or name not in record]
    if missing:
        raise UserError(f"{path}, line {number}: no {', '.join(missing)} "
                        f"(the signature takes {', '.join(names)})")
    wrong = [name for name in names if not isinstance(record[name], str)]
    if wrong:
        raise UserError(f"{path}, line {number}: {', '.join(wrong)} must be a string")
    return {name: record[name] for name in names}


def _batches(examples: Iterable[dict[str, str]], size: int) -> Iterator[list[dict[str, str]]]:
    batch = []
    for example in examples:
        batch.append(example)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _json_value(value):
    """One example's output (bytes, NumPy scalar or array) as JSON-ready Python values."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.ndarray) and value.dtype == object:  # strings
        return [_json_value(v) for v in value]
    return value.tolist()


def predict_file(export_dir: str, input_file: str, output: IO[str], input_format: str | None = None,
                 signature: str = "serving_default", batch_size: int = 32,
                 progress: IO[str] | None = sys.stderr) -> int:
    """Writes one JSON line of outputs per example of `input_file` to `output`.

    Returns:
      the number of examples.
    """
    if batch_size < 1:
        raise UserError(f"--batch_size={batch_size}: give a positive number")
    if not filesystem.isfile(input_file):
        raise MissingFileError(f"{input_file}: input file not found (check --input_file)")
    _, function, names = load_signature(export_dir, signature)
    if progress is not None:
        progress.write("".join(line + "\n" for line in describe(export_dir)))
    count, start = 0, time.monotonic()
    for batch in _batches(read_examples(input_file, format_of(input_file, input_format), names),
                          batch_size):
        outputs = function(**{name: tf.constant([e[name] for e in batch]) for name in names})
        arrays = {key: np.asarray(tensor) for key, tensor in sorted(outputs.items())}
        for row in range(len(batch)):
            output.write(json.dumps({key: _json_value(a[row]) for key, a in arrays.items()},
                                    ensure_ascii=False) + "\n")
        count += len(batch)
        if progress is not None:
            rate = count / max(time.monotonic() - start, 1e-9)
            progress.write(f"\r{count} examples, {rate:.1f}/s")
            progress.flush()
    if progress is not None:
        progress.write("\n")
    return count


def predict_to_file(export_dir: str, input_file: str, output_file: str, **options) -> int:
    """`predict_file` into `output_file`, which appears only when complete (written beside it,
    then renamed)."""
    directory = filesystem.dirname(filesystem.absolute(output_file))
    if not filesystem.isdir(directory):
        raise MissingFileError(f"{output_file}: its directory does not exist (check --output_file)")
    with filesystem.atomic_output(output_file) as f:
        return predict_file(export_dir, input_file, f, **options)
