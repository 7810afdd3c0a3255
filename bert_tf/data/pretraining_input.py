"""Pretraining input: file patterns -> blocks of whole documents -> tokenized `DocumentBuffer`s.

A *block* is a run of at most `document_buffer_size` consecutive documents (byte ranges of one or
more files, cut only at blank lines). Blocks are the unit of work and of "random next" sampling:
each is tokenized, chunked, masked and written on its own, so memory depends on the block size,
not on the corpus size, and the plan depends only on the input, not on the number of workers.
"""

from __future__ import annotations

import dataclasses
import glob
import itertools
import re
from typing import Callable, Iterator, Sequence

import numpy as np

from bert_tf import filesystem
from bert_tf.data.pretraining import DocumentBuffer
from bert_tf.errors import MissingFileError, UnreadableFileError, UserError

# A whitespace-only line ends a document. Only ASCII whitespace is used to *plan* cuts (a
# line of other Unicode spaces still ends a document when the block is read, it just is not a cut).
_BLANK_LINE = re.compile(rb"\n[ \t\r\f\v]*\n")
_SCAN_BYTES = 1 << 20
_READ_BYTES = 4 << 20
_WORD_MEMO_SIZE = 200_000  # ~30 MB; memory stops growing once it is full
WORD_START_MARKER = "\u2581"  # SentencePiece's "▁"


def expand_input_patterns(patterns: str | Sequence[str]) -> list[str]:
    """Comma-separated globs and directories (local or `scheme://`) -> sorted regular files; errors
    name the pattern."""
    if isinstance(patterns, str):
        patterns = [p for p in patterns.split(",")]
    files: list[str] = []
    for pattern in (p.strip() for p in patterns):
        if not pattern:
            continue
        filesystem.check_path(pattern, "--input_file")
        if filesystem.isdir(pattern):
            found = filesystem.list_files(pattern)
            if not found:
                raise MissingFileError(f"--input_file: directory {pattern} holds no files")
        else:
            found = filesystem.glob(pattern)
            if not found:
                what = "no file matches" if glob.has_magic(pattern) else "file not found:"
                raise MissingFileError(f"--input_file: {what} {pattern}")
        files.extend(found)
    if not files:
        raise MissingFileError("--input_file: no input files given")
    for path in files:
        if not filesystem.readable(path):
            raise UnreadableFileError(f"--input_file: {path} is not readable (check its permissions)")
    return files


@dataclasses.dataclass(frozen=True)
class Block:
    """Consecutive documents: (path, start byte, end byte) ranges, each starting at a document start."""
    index: int
    ranges: tuple[tuple[str, int, int], ...]

    @property
    def num_bytes(self) -> int:
        return sum(end - start for _, start, end in self.ranges)


def plan_blocks(files: Sequence[str], document_buffer_size: int) -> list[Block]:
    """Cuts the input into blocks of at most `document_buffer_size` documents.

    Scans for blank lines at C speed (~1 GB/s); a file's start always starts a document.
    """
    if document_buffer_size < 1:
        raise UserError(f"--document_buffer_size must be positive, got {document_buffer_size}")
    blocks: list[Block] = []
    ranges: list[tuple[str, int, int]] = []
    count = 0
    for path in files:
        start = 0
        for boundary in _document_starts(path):
            count += 1
            if count >= document_buffer_size:
                ranges.append((path, start, boundary))
                blocks.append(Block(len(blocks), tuple(ranges)))
                ranges, count, start = [], 0, boundary
        size = filesystem.size(path)
        if size > start:
            ranges.append((path, start, size))
            count += 1  # the file's last document
    if ranges:
        blocks.append(Block(len(blocks), tuple(ranges)))
    return blocks


def _document_starts(path: str) -> Iterator[int]:
    """Byte offsets just after each blank line (the start of the next document)."""
    try:
        f = filesystem.open_read(path)
    except OSError as e:
        raise UnreadableFileError(f"--input_file: cannot read {path}: {e.strerror}") from None
    with f:
        base, tail = 0, b""
        while True:
            chunk = f.read(_SCAN_BYTES)
            if not chunk:
                return
            data = tail + chunk
            last_end = 0
            for match in _BLANK_LINE.finditer(data):
                last_end = match.end()
                yield base + last_end
            # keep the last newline on, so that a blank line split across two reads is still found
            newline = data.rfind(b"\n")
            keep_from = len(data) if newline < 0 else max(newline, last_end)
            base, tail = base + keep_from, data[keep_from:]


@dataclasses.dataclass
class ReadCounts:
    """What reading a block saw, for the summary."""
    bytes: int = 0
    lines: int = 0
    invalid_utf8_lines: int = 0
    overlong_lines: int = 0  # sentences longer than a whole sequence (trimmed, as in the original)

    def add(self, other: "ReadCounts") -> None:
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


class LineTokenizer:
    """Lines -> token ids and word-start flags, with the original's line rules.

    Args:
      tokenizer: `FullTokenizer` or `SentencePieceTokenizer` (`tokenize`, `vocab`).
      pre_segmented: words are separated by spaces (e.g. segmented Chinese); every token of one
        word belongs to one whole-word-masking group.
      max_num_tokens: sentences longer than this are counted as over-long.
      prepare_line: applied to each non-empty line before tokenizing (e.g. Chinese script
        conversion, then segmentation into space-separated words for `pre_segmented`).
    """

    def __init__(self, tokenizer, pre_segmented: bool = False, max_num_tokens: int = 125,
                 prepare_line: Callable[[str], str] | None = None):
        self.tokenizer = tokenizer
        self.pre_segmented = pre_segmented
        self.prepare_line = prepare_line
        self.max_num_tokens = max_num_tokens
        self.vocab = tokenizer.vocab
        tokens = list(self.vocab)
        is_sentencepiece = any(t.startswith(WORD_START_MARKER) for t in tokens)
        # WordPiece marks continuations with "##"; SentencePiece marks word starts with "▁".
        self.word_start_by_id = np.ones(max(self.vocab.values()) + 1, bool)
        for token, index in self.vocab.items():
            self.word_start_by_id[index] = (token.startswith(WORD_START_MARKER) if is_sentencepiece
                                            else not token.startswith("##"))

        self._split_words = _word_splitter(tokenizer)
        self._word_ids = _WordIds(lambda word: tuple(self._ids(self.tokenizer.tokenize(word))))

    def _ids(self, tokens: list[str]) -> list[int]:
        vocab = self.vocab
        return [vocab[t] for t in tokens]

    def _line_ids(self, line: str) -> list[int]:
        """Token ids of a line; with WordPiece, words are looked up in a memo of their ids."""
        if self._split_words is None:
            return self._ids(self.tokenizer.tokenize(line))
        return list(itertools.chain.from_iterable(map(self._word_ids.__getitem__, self._split_words(line))))

    def read_block(self, block: Block) -> tuple[DocumentBuffer, ReadCounts]:
        """Reads and tokenizes a block's documents (empty documents are dropped, as in the original)."""
        counts = ReadCounts()
        ids: list[int] = []
        starts: list[bool] = []
        sentence_ends: list[int] = []
        document_offsets = [0]

        def end_document():  # empty documents are dropped
            if len(sentence_ends) > document_offsets[-1]:
                document_offsets.append(len(sentence_ends))

        for path, start, end in block.ranges:
            for line in _read_lines(path, start, end, counts):
                if not line:
                    end_document()
                    continue
                if self.prepare_line is not None:
                    line = self.prepare_line(line)
                line_ids, line_starts = self._tokenize(line)
                if line_ids:
                    ids.extend(line_ids)
                    starts.extend(line_starts or ())
                    sentence_ends.append(len(ids))
                    counts.overlong_lines += len(line_ids) > self.max_num_tokens
            end_document()  # a file's end ends its last document
        tokens = np.asarray(ids, np.int32)
        word_starts = np.asarray(starts, bool) if self.pre_segmented else self.word_start_by_id[tokens]
        return DocumentBuffer(tokens, word_starts, np.asarray([0] + sentence_ends, np.int64),
                              np.asarray(document_offsets, np.int64)), counts

    def _tokenize(self, line: str) -> tuple[list[int], list[bool] | None]:
        if not self.pre_segmented:
            return self._line_ids(line), None
        ids: list[int] = []
        starts: list[bool] = []
        for word in line.split():
            pieces = self._line_ids(word)
            ids.extend(pieces)
            starts.extend([True] + [False] * (len(pieces) - 1) if pieces else [])
        return ids, starts


class _WordIds(dict):
    """word -> tuple of token ids, computed on first use; starts over when it gets too big."""

    def __init__(self, compute):
        super().__init__()
        self._compute = compute

    def __missing__(self, word: str) -> tuple[int, ...]:
        if len(self) >= _WORD_MEMO_SIZE:
            self.clear()
        value = self[word] = self._compute(word)
        return value


def _word_splitter(tokenizer):
    """`split_units` when the tokenizer is WordPiece's `FullTokenizer`, whose tokens of a line are
    exactly the concatenated tokens of those units; None for others (SentencePiece sees spaces)."""
    from bert_tf import tokenization

    if isinstance(tokenizer, tokenization.FullTokenizer):
        return tokenizer.split_units
    return None


def _read_lines(path: str, start: int, end: int, counts: ReadCounts) -> Iterator[str]:
    """Stripped lines of bytes [start, end) of a file, decoded as UTF-8 dropping invalid bytes
    (the original's rule); lines with invalid bytes are counted."""
    try:
        f = filesystem.open_read(path)
    except OSError as e:
        raise UnreadableFileError(f"--input_file: cannot read {path}: {e.strerror}") from None
    with f:
        f.seek(start)
        remaining, tail = end - start, b""
        while remaining > 0 or tail:
            chunk = f.read(min(_READ_BYTES, remaining)) if remaining > 0 else b""
            if remaining > 0 and not chunk:
                raise UserError(f"--input_file: {path} shrank while being read (at byte {end - remaining})")
            remaining -= len(chunk)
            data = tail + chunk
            cut = data.rfind(b"\n") + 1 if remaining > 0 else len(data)
            data, tail = data[:cut], data[cut:]
            counts.bytes += len(data)
            yield from _decode_lines(data, counts)


def _decode_lines(data: bytes, counts: ReadCounts) -> Iterator[str]:
    try:
        lines = data.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        lines = []
        for raw in data.split(b"\n"):
            try:
                lines.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                counts.invalid_utf8_lines += 1
                lines.append(raw.decode("utf-8", "ignore"))
    if data.endswith(b"\n"):
        lines.pop()
    counts.lines += len(lines)
    for line in lines:
        yield line.strip()
