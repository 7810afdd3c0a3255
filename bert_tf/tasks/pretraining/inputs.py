"""Pretraining input: file patterns -> blocks of whole documents -> tokenized `DocumentBuffer`s.

A *block* is a run of at most `document_buffer_size` consecutive documents (byte ranges of one or
more files, cut only at blank lines). Blocks are the unit of work and of "random next" sampling:
each is tokenized, chunked, masked and written on its own, so memory depends on the block size,
not on the corpus size, and the plan depends only on the input, not on the number of workers.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable, Iterator, Sequence

import numpy as np

from bert_tf import filesystem
from bert_tf.errors import MissingFileError, UnreadableFileError, UserError
from bert_tf.tasks.pretraining.instances import DocumentBuffer

# A whitespace-only line ends a document. Only ASCII whitespace is used to *plan* cuts (a
# line of other Unicode spaces still ends a document when the block is read, it just is not a cut).
_BLANK_LINE = re.compile(rb"\n[ \t\r\f\v]*\n")
_SCAN_BYTES = 1 << 20
_READ_BYTES = 1 << 20  # a read is tokenized at once: its units are held in memory
_WORD_MEMO_SIZE = 200_000  # ~30 MB; memory stops growing once it is full
# Marks each line's end among the units of many lines: no unit is NUL (tokenization deletes it).
_LINE_BREAK = "\x00"
_LINE_BREAK_ID = -1
WORD_START_MARKER = "\u2581"  # SentencePiece's "▁"


@dataclasses.dataclass(frozen=True)
class Block:
    """Consecutive documents: (path, start byte, end byte) ranges, each starting at a document
    start; or, read from a task's files (task_text.py), their sentences as lines, "" ending each
    document."""
    index: int
    ranges: tuple[tuple[str, int, int], ...]
    lines: tuple[str, ...] = ()

    @property
    def num_bytes(self) -> int:
        if self.lines:
            return sum(len(line.encode("utf-8")) + 1 for line in self.lines)
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
            if not base and not tail:
                filesystem.check_text_encoding(path, chunk[:4096], "--input_file")
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
        # token -> its id packed as int32 bytes: a unit's packed ids are one b"".join of its tokens'
        self._packed_ids = _packed_ids_by_token(self.vocab) if self._split_words is not None else {}
        self._unit_ids = _UnitIds(self._unit_packed_ids)
        # WordPiece lines that need no per-line step are tokenized a whole read at a time.
        self._unit_text = (tokenizer.unit_text if self._split_words is not None and not pre_segmented
                           and prepare_line is None else None)

    def _unit_packed_ids(self, unit: str) -> bytes:
        return b"".join(map(self._packed_ids.__getitem__, self.tokenizer.word_pieces(unit)))

    def _ids(self, tokens: list[str]) -> list[int]:
        vocab = self.vocab
        return [vocab[t] for t in tokens]

    def _line_ids(self, line: str) -> np.ndarray:
        """Token ids of a line (int32); with WordPiece, words are looked up in a memo of their ids."""
        if self._split_words is None:
            return np.asarray(self._ids(self.tokenizer.tokenize(line)), np.int32)
        return np.frombuffer(b"".join(map(self._unit_ids.__getitem__, self._split_words(line))), np.int32)

    def read_block(self, block: Block) -> tuple[DocumentBuffer, ReadCounts]:
        """Reads and tokenizes a block's documents (empty documents are dropped, as in the original)."""
        counts = ReadCounts()
        documents = _DocumentsBuilder()
        if block.lines:
            counts.bytes += block.num_bytes
            counts.lines += len(block.lines)
            self._add_lines(list(block.lines), documents, counts)
            documents.end_document()
        for path, start, end in block.ranges:
            for lines in _read_lines(path, start, end, counts):
                self._add_lines(lines, documents, counts)
            documents.end_document()  # a file's end ends its last document
        return documents.build(None if self.pre_segmented else self.word_start_by_id), counts

    def _add_lines(self, lines: list[str], documents: "_DocumentsBuilder", counts: ReadCounts) -> None:
        if self._unit_text is not None:
            self._add_lines_at_once(lines, documents, counts)
        else:
            self._add_lines_one_by_one(lines, documents, counts)

    def _add_lines_at_once(self, lines: list[str], documents: "_DocumentsBuilder", counts: ReadCounts) -> None:
        ids, line_tokens = self._lines_ids(lines)
        # A line that strips to nothing ends a document; one with no tokens is skipped.
        blank = np.fromiter(map(bool, map(str.strip, lines)), bool, len(lines)) == 0
        documents.add_lines(ids, line_tokens, blank)
        counts.overlong_lines += int((line_tokens > self.max_num_tokens).sum())

    def _add_lines_one_by_one(self, lines: list[str], documents: "_DocumentsBuilder", counts: ReadCounts) -> None:
        for line in map(str.strip, lines):
            if not line:
                documents.end_document()
                continue
            if self.prepare_line is not None:
                line = self.prepare_line(line)
            line_ids, line_starts = self._tokenize(line)
            if len(line_ids):
                documents.add_sentence(line_ids, line_starts)
                counts.overlong_lines += len(line_ids) > self.max_num_tokens

    def _lines_ids(self, lines: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Token ids of many lines at once, with C-level steps only: (ids int32 [T], tokens per
        line int64 [L]). The units of all lines come from one `unit_text` call (line breaks kept),
        each line's end marked by `_LINE_BREAK`; their packed ids are joined in one call."""
        units = self._unit_text("\n".join(lines) + "\n").replace("\n", f" {_LINE_BREAK} ").split()
        ids = np.frombuffer(b"".join(map(self._unit_ids.__getitem__, units)), np.int32)
        is_break = ids == _LINE_BREAK_ID
        return ids[~is_break], np.diff(np.flatnonzero(is_break), prepend=-1) - 1

    def _tokenize(self, line: str) -> tuple[np.ndarray, list[bool] | None]:
        if not self.pre_segmented:
            return self._line_ids(line), None
        ids: list[int] = []
        starts: list[bool] = []
        for word in line.split():
            pieces = self._line_ids(word).tolist()
            ids.extend(pieces)
            starts.extend([True] + [False] * (len(pieces) - 1) if pieces else [])
        return np.asarray(ids, np.int32), starts


class _DocumentsBuilder:
    """Sentences and document ends as a block is read, then its `DocumentBuffer`."""

    def __init__(self):
        self.ids: list[np.ndarray] = []
        self.starts: list[bool] = []
        self.num_tokens = 0
        self.sentence_ends: list[int] = []
        self.document_offsets = [0]

    def add_sentence(self, ids: np.ndarray, starts: list[bool] | None) -> None:
        self.ids.append(ids)
        self.starts.extend(starts or ())
        self.num_tokens += len(ids)
        self.sentence_ends.append(self.num_tokens)

    def add_lines(self, ids: np.ndarray, line_tokens: np.ndarray, blank: np.ndarray) -> None:
        """Lines in order: `line_tokens` [L] of `ids` each; a line with tokens is a sentence, a
        blank one ends the document (if it has a sentence yet)."""
        is_sentence = line_tokens > 0
        self.ids.append(ids)
        self.sentence_ends.extend((self.num_tokens + np.cumsum(line_tokens)[is_sentence]).tolist())
        self.num_tokens += len(ids)
        # sentences read before each blank line: non-decreasing, so each new value ends a document
        sentences_before = len(self.sentence_ends) - int(is_sentence.sum()) + np.cumsum(is_sentence)[blank]
        self.document_offsets.extend(np.unique(sentences_before[sentences_before > self.document_offsets[-1]]).tolist())

    def end_document(self) -> None:  # empty documents are dropped
        if len(self.sentence_ends) > self.document_offsets[-1]:
            self.document_offsets.append(len(self.sentence_ends))

    def build(self, word_start_by_id: np.ndarray | None) -> DocumentBuffer:
        """The buffer; word starts from each token's id (`word_start_by_id`), or as added (None)."""
        tokens = np.concatenate(self.ids) if self.ids else np.zeros(0, np.int32)
        word_starts = np.asarray(self.starts, bool) if word_start_by_id is None else word_start_by_id[tokens]
        return DocumentBuffer(tokens, word_starts, np.asarray([0] + self.sentence_ends, np.int64),
                              np.asarray(self.document_offsets, np.int64))


def _packed_ids_by_token(vocab: dict[str, int]) -> dict[str, bytes]:
    """token -> its id as 4 int32 bytes, cut from one packed array of the whole vocabulary."""
    packed = _packed(list(vocab.values()))
    return dict(zip(vocab, (packed[k:k + 4] for k in range(0, len(packed), 4))))


def _packed(ids: list[int]) -> bytes:
    """Token ids as int32 bytes: a line's are its units' joined by `b"".join` (C) and read back
    with one `np.frombuffer`."""
    return np.asarray(ids, np.int32).tobytes()


class _UnitIds(dict):
    """unit -> its packed token ids, computed on first use; starts over when it gets too big."""

    def __init__(self, compute: Callable[[str], bytes]):
        super().__init__()
        self._compute = compute
        self._start_over()

    def _start_over(self) -> None:
        self.clear()
        self[_LINE_BREAK] = _packed([_LINE_BREAK_ID])

    def __missing__(self, unit: str) -> bytes:
        if len(self) >= _WORD_MEMO_SIZE:
            self._start_over()
        value = self[unit] = self._compute(unit)
        return value


def _word_splitter(tokenizer):
    """`split_units` when the tokenizer is WordPiece's `FullTokenizer`, whose tokens of a line are
    exactly the concatenated tokens of those units; None for others (SentencePiece sees spaces)."""
    from bert_tf.text import tokenizers

    if isinstance(tokenizer, tokenizers.FullTokenizer):
        return tokenizer.split_units
    return None


def _read_lines(path: str, start: int, end: int, counts: ReadCounts) -> Iterator[list[str]]:
    """Lines (without their line break, not stripped) of bytes [start, end) of a file, a read's
    worth at a time, decoded as UTF-8 dropping invalid bytes (the original's rule); lines with
    invalid bytes are counted."""
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
            if data:  # a read inside one long line holds no whole line yet
                counts.bytes += len(data)
                yield _decode_lines(data, counts)


def _decode_lines(data: bytes, counts: ReadCounts) -> list[str]:
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
    return lines
