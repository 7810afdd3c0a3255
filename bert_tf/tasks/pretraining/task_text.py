"""A fine-tuning task's own files as pretraining documents (`--input_format`), for further
pretraining on within-task text without converting it by hand.

Each format gives documents as lists of sentences (the lines of the text format):

  tsv, csv  one document per row: its `--text_columns` cells, each a sentence (empty cells
            skipped). Columns are 0-based indices or, with a header row, names, as for
            run_classifier.py's custom task (`--has_header`); csv honours "..." quoting, tsv
            does not (GLUE's files hold stray quotes).
  squad     one document per article (`data[i]`): each paragraph's context a sentence.
  conll     one document per `-DOCSTART-` block (per file when it has none): each sentence's
            words (the first column) joined by spaces.

With `split_sentences` each of those sentences is cut further after `.`, `!` or `?` followed by
a space and a capital letter or digit (and after `。！？`), so that long paragraphs and reviews
give several sentences to pair for next-sentence prediction instead of one trimmed line.

Whitespace inside a sentence (line breaks in a CSV cell, say) becomes single spaces. Everything
here reads with Python only (no TensorFlow), a file at a time, into memory: task files are small.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
import sys
from typing import Iterator, Sequence

from bert_tf import filesystem
from bert_tf.errors import UnreadableFileError, UserError
from bert_tf.tasks.pretraining.inputs import Block
from bert_tf.text.columns import parse_column, resolve_column

INPUT_FORMATS = ("text", "tsv", "csv", "squad", "conll")
DOCSTART = "-DOCSTART-"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'“‘(\[]?[A-Z0-9])|(?<=[。！？])")

Document = list[str]  # its sentences, in order


@dataclasses.dataclass(frozen=True)
class TaskTextOptions:
    """How task files are read (create_pretraining_data.py's --input_format and its flags)."""
    input_format: str = "text"
    text_columns: tuple[str, ...] = ()
    has_header: bool = True
    split_sentences: bool = False

    def validate(self) -> None:
        if self.input_format not in INPUT_FORMATS:
            raise UserError(f"--input_format must be one of {', '.join(INPUT_FORMATS)}, "
                            f"got {self.input_format!r}")
        tabular = self.input_format in ("tsv", "csv")
        if tabular and not self.text_columns:
            raise UserError(f"--input_format={self.input_format} needs --text_columns: the "
                            "columns holding text, by 0-based index or header name (e.g. "
                            "--text_columns=sentence1,sentence2)")
        if self.text_columns and not tabular:
            raise UserError(f"--text_columns is for --input_format=tsv or csv, not "
                            f"{self.input_format}")
        if self.split_sentences and self.input_format == "text":
            raise UserError("--split_sentences is for task formats (tsv, csv, squad, conll); "
                            "text input already has one sentence per line")


def read_documents(path: str, options: TaskTextOptions) -> Iterator[Document]:
    """The documents of one task file, in file order (empty ones left out)."""
    readers = {"tsv": _tabular_documents, "csv": _tabular_documents,
               "squad": _squad_documents, "conll": _conll_documents}
    for document in readers[options.input_format](path, options):
        sentences = [" ".join(s.split()) for s in document]
        if options.split_sentences:
            sentences = [part for s in sentences for part in split_sentences(s)]
        sentences = [s for s in sentences if s]
        if sentences:
            yield sentences


def split_sentences(text: str) -> list[str]:
    """`text` cut after sentence-final punctuation (see the module docstring)."""
    return [part.strip() for part in _SENTENCE_END.split(text) if part.strip()]


def _read_text(path: str) -> str:
    try:
        with filesystem.open_read(path) as f:
            data = f.read()
    except OSError as e:
        raise UnreadableFileError(f"--input_file: cannot read {path}: {e.strerror or e}") from None
    filesystem.check_text_encoding(path, data[:4096], "--input_file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise UserError(f"--input_file: {path}:{line}: not UTF-8 ({e.reason}); convert the file "
                        "to UTF-8") from None


def _tabular_documents(path: str, options: TaskTextOptions) -> Iterator[Document]:
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    quoting = options.input_format == "csv"
    reader = csv.reader(io.StringIO(_read_text(path), newline=""),
                        delimiter="," if quoting else "\t", quotechar='"' if quoting else None,
                        quoting=csv.QUOTE_MINIMAL if quoting else csv.QUOTE_NONE)
    header = next(reader, None) if options.has_header else None
    columns = [resolve_column(parse_column(c), header, path, "text") for c in options.text_columns]
    needed = max(columns) + 1
    for row in reader:
        if not row:
            continue
        if len(row) < needed:
            raise UserError(f"--input_file: {path}:{reader.line_num}: {len(row)} columns, but "
                            f"--text_columns reads column {needed - 1} (0-based); is the "
                            f"delimiter right (--input_format={options.input_format})?")
        yield [row[c] for c in columns]


def _squad_documents(path: str, options: TaskTextOptions) -> Iterator[Document]:
    del options
    try:
        dataset = json.loads(_read_text(path))
    except json.JSONDecodeError as e:
        raise UserError(f"--input_file: {path}:{e.lineno}: not valid JSON ({e.msg}); "
                        "--input_format=squad reads SQuAD's train-v1.1.json layout") from None
    articles = dataset.get("data") if isinstance(dataset, dict) else None
    if not isinstance(articles, list):
        raise UserError(f"--input_file: {path}: no 'data' list of articles; --input_format=squad "
                        "reads SQuAD's layout: {\"data\": [{\"paragraphs\": [{\"context\": ...}]}]}")
    for number, article in enumerate(articles):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list) or not all(
                isinstance(p, dict) and isinstance(p.get("context"), str) for p in paragraphs):
            raise UserError(f"--input_file: {path}: article {number} ('data'[{number}]) has no "
                            "'paragraphs' list of objects with a 'context' string")
        yield [p["context"] for p in paragraphs]


def _conll_documents(path: str, options: TaskTextOptions) -> Iterator[Document]:
    del options
    document: Document = []
    words: list[str] = []
    for line in _read_text(path).splitlines():
        fields = line.split()
        if fields and fields[0] != DOCSTART:
            words.append(fields[0])
            continue
        if words:
            document.append(" ".join(words))
            words = []
        if fields and document:  # -DOCSTART- starts the next document
            yield document
            document = []
    if words:
        document.append(" ".join(words))
    if document:
        yield document


def plan_task_blocks(files: Sequence[str], options: TaskTextOptions,
                     document_buffer_size: int) -> list[Block]:
    """The documents of every file, in order, cut into blocks of `document_buffer_size` (as
    `plan_blocks` cuts text files); each block holds its sentences, a "" between documents."""
    if document_buffer_size < 1:
        raise UserError(f"--document_buffer_size must be positive, got {document_buffer_size}")
    blocks: list[Block] = []
    lines: list[str] = []
    count = 0
    for path in files:
        for document in read_documents(path, options):
            lines.extend(document)
            lines.append("")
            count += 1
            if count == document_buffer_size:
                blocks.append(Block(len(blocks), (), tuple(lines)))
                lines, count = [], 0
    if lines:
        blocks.append(Block(len(blocks), (), tuple(lines)))
    return blocks
