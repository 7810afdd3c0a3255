"""Multiple-choice files read and packed as the BERT paper packs SWAG.

Two forms, told apart by the file's name:
  *.csv               SWAG's released CSV: `sent1` (the context), `sent2` (the stem the
                      endings continue), `ending0` .. `ending3` and `label`; other columns
                      (`video-id`, `fold-ind`, `startphrase`, `gold-source`) are ignored; the
                      unlabelled test file has no `label` column.
  *.jsonl / *.json    one object a line: {"context": str, "stem": str (optional),
                      "choices": [str, ...], "label": int (optional)}; every line of a file
                      has the same number of choices.

Each choice is packed `[CLS] context [SEP] stem ending [SEP]` (segments 0 / 1), the pair cut
longest first as the original's `_truncate_seq_pair` (transformers' run_swag does the same).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from typing import Sequence

import numpy as np

from bert_tf import filesystem
from bert_tf.errors import UserError
from bert_tf.text.pairs import truncate_pair_lengths

SWAG_CHOICES = 4
SWAG_COLUMNS = ("sent1", "sent2", *(f"ending{i}" for i in range(SWAG_CHOICES)))
JSON_SUFFIXES = (".jsonl", ".json")


@dataclasses.dataclass(frozen=True)
class Example:
    """One question: `endings` continue `stem` after `context`; `label` the right one's
    index (None: unlabelled)."""

    guid: str
    context: str
    stem: str
    endings: tuple[str, ...]
    label: int | None


def read_examples(path: str) -> list[Example]:
    """The questions of a SWAG CSV or a JSON-lines file (see the module docstring).

    Raises:
      UserError: one line naming the file (and line) and what is wrong.
    """
    if not filesystem.exists(path):
        raise UserError(f"{path}: no such file")
    text = filesystem.read_text(path)
    examples = (_read_jsonl(path, text) if path.endswith(JSON_SUFFIXES)
                else _read_swag_csv(path, text))
    if not examples:
        raise UserError(f"{path}: no questions")
    return examples


def _label(value: str, num_choices: int, where: str) -> int:
    try:
        label = int(value)
    except (TypeError, ValueError):
        raise UserError(f"{where}: label {value!r} is not a choice index") from None
    if not 0 <= label < num_choices:
        raise UserError(f"{where}: label {label} is outside 0..{num_choices - 1}")
    return label


def _read_swag_csv(path: str, text: str) -> list[Example]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    missing = [c for c in SWAG_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise UserError(f"{path}:1: SWAG CSV without column(s) {', '.join(missing)} (its "
                        f"header must name {', '.join(SWAG_COLUMNS)} and, labelled, label)")
    labelled = "label" in reader.fieldnames
    examples = []
    for row in reader:
        where = f"{path}:{reader.line_num}"
        if any(row.get(c) is None for c in SWAG_COLUMNS):
            raise UserError(f"{where}: fewer fields than the header's")
        examples.append(Example(
            str(len(examples)), row["sent1"], row["sent2"],
            tuple(row[f"ending{i}"] for i in range(SWAG_CHOICES)),
            _label(row["label"], SWAG_CHOICES, where) if labelled else None))
    return examples


def _read_jsonl(path: str, text: str) -> list[Example]:
    examples: list[Example] = []
    num_choices = None
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as e:
            raise UserError(f"{where}: not JSON ({e.msg})") from None
        choices = item.get("choices") if isinstance(item, dict) else None
        if (not isinstance(choices, list) or len(choices) < 2
                or not all(isinstance(c, str) for c in choices)
                or not isinstance(item.get("context"), str)
                or not isinstance(item.get("stem", ""), str)):
            raise UserError(f"{where}: expected {{\"context\": str, \"stem\": str (optional), "
                            "\"choices\": [at least 2 str], \"label\": int (optional)}")
        if num_choices is None:
            num_choices = len(choices)
        elif len(choices) != num_choices:
            raise UserError(f"{where}: {len(choices)} choices where the file's first question "
                            f"has {num_choices}; every question of a file has as many")
        label = item.get("label")
        examples.append(Example(str(item.get("id", len(examples))), item["context"],
                                item.get("stem", ""), tuple(choices),
                                None if label is None else _label(label, num_choices, where)))
    return examples


def num_choices(examples: Sequence[Example], source: str) -> int:
    """N, the same for every question of `examples` (read from `source`)."""
    counts = {len(example.endings) for example in examples}
    if len(counts) != 1:
        raise UserError(f"{source}: questions with {sorted(counts)} choices; one count per file")
    return counts.pop()


def convert_examples(examples: Sequence[Example], max_seq_length: int, tokenizer,
                     pad_to_multiple: int = 1) -> dict[str, np.ndarray]:
    """Packs every choice of every question.

    Args:
      examples: with the same number N of endings each.
      max_seq_length: S, at least 3.
      tokenizer: has `tokenize(text) -> list[str]` and `convert_tokens_to_ids`.
      pad_to_multiple: all-zero questions (is_real_example 0) are added up to a multiple of it.

    Returns:
      int32 `input_ids, input_mask, segment_ids` [Q,N,S], `label_ids` [Q] (0 unlabelled) and
      `is_real_example` [Q], Q the questions with padding.
    """
    if max_seq_length < 3:
        raise UserError(f"--max_seq_length must be at least 3, got {max_seq_length}")
    choices = num_choices(examples, "the questions")
    total = len(examples) + (-len(examples) % pad_to_multiple)
    input_ids = np.zeros((total, choices, max_seq_length), np.int32)
    segment_ids = np.zeros_like(input_ids)
    input_mask = np.zeros_like(input_ids)
    cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])

    def ids(text: str) -> list[int]:
        return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text)) if text else []

    for q, example in enumerate(examples):
        context, stem = ids(example.context), ids(example.stem)
        for c, ending in enumerate(example.endings):
            second = stem + ids(ending)
            if second:
                keep_a, keep_b = truncate_pair_lengths(len(context), len(second),
                                                       max_seq_length - 3)
                row = [cls_id, *context[:keep_a], sep_id, *second[:keep_b], sep_id]
            else:  # the original's `if tokens_b`: no second segment, no second [SEP]
                keep_a = min(len(context), max_seq_length - 2)
                row = [cls_id, *context[:keep_a], sep_id]
            input_ids[q, c, :len(row)] = row
            input_mask[q, c, :len(row)] = 1
            segment_ids[q, c, keep_a + 2:len(row)] = 1
    labels = np.zeros(total, np.int32)
    labels[:len(examples)] = [example.label or 0 for example in examples]
    is_real = np.zeros(total, np.int32)
    is_real[:len(examples)] = 1
    return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids,
            "label_ids": labels, "is_real_example": is_real}
