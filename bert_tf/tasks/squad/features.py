"""SQuAD examples → doc-stride windows → fixed-length features.

A feature is one window of the tokenized context: `[CLS] query [SEP] window [SEP]`, zero-padded
to `max_seq_length`. Long contexts give several windows of `max_seq_length - len(query) - 3`
tokens every `doc_stride` tokens; each document token is marked in the window where it has the
most context (prediction keeps only answers starting there). In training, the answer is snapped
to its tokenized form; impossible questions (v2.0) and answers outside a window point at
position 0 (`[CLS]`).

Speed: a context is tokenized once for all its questions (words memoised across contexts), the
window bookkeeping is plain integers per example, and the [N, S] arrays are assembled for a
whole chunk of examples at once with numpy gathers.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator, Sequence

import numpy as np

from bert_tf.errors import UserError
from bert_tf.tasks.squad.examples import SquadExample

PER_TOKEN_COLUMNS = ("input_ids", "input_mask", "segment_ids", "token_to_orig",
                     "token_is_max_context")


@dataclasses.dataclass
class SquadFeatures:
    """Windows, column-wise: row i is window i (N rows, S = max_seq_length), all int32.

    Attributes:
      example_index: [N], the example each window belongs to (an index into the examples list);
        an example's windows are consecutive rows, in document order.
      input_ids, input_mask, segment_ids: [N, S], `[CLS] query [SEP] window [SEP]`, zero-padded.
      start_positions, end_positions: [N], the answer's first/last token in the window;
        0 (`[CLS]`) for impossible questions, answers outside the window, and at prediction time.
      is_impossible: [N], 1 for the windows of impossible questions (training only; as in the
        original, a window that merely misses the answer keeps 0).
      token_to_orig: [N, S], the context word (index into `doc_tokens`) of each window token;
        -1 for `[CLS]`, the query, `[SEP]` and padding.
      token_is_max_context: [N, S], 1 where no other window gives that token more context.
    """

    example_index: np.ndarray
    input_ids: np.ndarray
    input_mask: np.ndarray
    segment_ids: np.ndarray
    start_positions: np.ndarray
    end_positions: np.ndarray
    is_impossible: np.ndarray
    token_to_orig: np.ndarray
    token_is_max_context: np.ndarray

    def __len__(self) -> int:
        return len(self.example_index)

    def columns(self) -> dict[str, np.ndarray]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def concatenate(cls, parts: Sequence["SquadFeatures"], max_seq_length: int) -> "SquadFeatures":
        columns = {}
        for f in dataclasses.fields(cls):
            empty_shape = (0, max_seq_length) if f.name in PER_TOKEN_COLUMNS else (0,)
            values = [getattr(p, f.name) for p in parts] or [np.zeros(empty_shape, np.int32)]
            columns[f.name] = np.concatenate(values)
        return cls(**columns)


@dataclasses.dataclass
class FeatureStats:
    """Counts describing a feature build (for the run summary)."""

    examples: int = 0
    features: int = 0
    queries_truncated: int = 0
    long_contexts: int = 0  # examples that needed more than one window
    answers_outside_window: int = 0  # training windows whose answer lies elsewhere → position 0


class _Pieces:
    """Token ids with a per-word memo: contexts repeat words, and serve ~5 questions each."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self._memo: dict[str, list[int]] = {}

    def text_ids(self, text: str) -> list[int]:
        return self.tokenizer.convert_tokens_to_ids(self.tokenizer.tokenize(text))

    def word_ids(self, word: str) -> list[int]:
        ids = self._memo.get(word)
        if ids is None:
            ids = self._memo[word] = self.text_ids(word)
        return ids

    def special_ids(self) -> tuple[int, int]:
        missing = [t for t in ("[CLS]", "[SEP]") if t not in self.tokenizer.vocab]
        if missing:
            raise UserError(
                f"the vocabulary has no {' or '.join(missing)} token (SQuAD needs both)")
        cls_id, sep_id = self.tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
        return cls_id, sep_id


@dataclasses.dataclass
class _Context:
    """A tokenized context: ids (list and int32 [T]), token → word int32 [T], and
    word → first token [W + 1]."""

    ids: list[int]
    ids_array: np.ndarray
    token_to_word: np.ndarray
    word_to_token: list[int]


def tokenize_context(words: Sequence[str], pieces: _Pieces) -> _Context:
    """Word-pieces of a context, word by word (as the original), with both index maps."""
    per_word = [pieces.word_ids(w) for w in words]
    counts = np.fromiter(map(len, per_word), dtype=np.int64, count=len(per_word))
    ids = [i for word_ids in per_word for i in word_ids]
    word_to_token = np.concatenate(([0], np.cumsum(counts))).tolist()
    return _Context(ids, np.asarray(ids, np.int32).reshape(-1),
                    np.repeat(np.arange(len(words), dtype=np.int32), counts), word_to_token)


def improve_answer_span(doc_ids: Sequence[int], start: int, end: int,
                        answer_ids: Sequence[int]) -> tuple[int, int]:
    """Narrows a token span to the first occurrence of the tokenized answer inside it.

    Word boundaries are coarser than tokens: for the answer "1895" in the word "(1895)." the word
    span covers "( 1895 ) ." and this returns just "1895". Unchanged when the answer is not found.
    """
    answer = list(answer_ids)
    length = len(answer)
    if length:
        for first in range(start, end - length + 2):
            if list(doc_ids[first:first + length]) == answer:
                return first, first + length - 1
    return start, end


def doc_spans(num_tokens: int, max_tokens_for_doc: int, doc_stride: int) -> list[tuple[int, int]]:
    """Window (start, length) pairs: every `doc_stride` tokens until the end is covered."""
    spans = []
    start = 0
    while start < num_tokens:
        length = min(num_tokens - start, max_tokens_for_doc)
        spans.append((start, length))
        if start + length == num_tokens:
            break
        start += min(length, doc_stride)
    return spans


def max_context_window(spans: Sequence[tuple[int, int]], num_tokens: int) -> np.ndarray:
    """For each token, the window that gives it the most context, int64 [T].

    A token's score in a window is min(tokens left of it, tokens right of it) + 0.01 · window
    length; the first window with the highest score wins.
    """
    spans = np.asarray(spans, np.int64).reshape(-1, 2)
    position = np.arange(num_tokens)[None, :]  # [1, T]
    first, length = spans[:, :1], spans[:, 1:]  # [K, 1]
    left, right = position - first, first + length - 1 - position  # [K, T]
    score = np.where((left >= 0) & (right >= 0), np.minimum(left, right) + 0.01 * length, -np.inf)
    return np.argmax(score, axis=0)


class _Chunk:
    """Window bookkeeping for a chunk of examples, assembled into [N, S] arrays at once."""

    def __init__(self):
        self.queries: list[list[int]] = []
        self.doc_parts: list[_Context] = []
        self.doc_size = 0
        # Per window: example, query, doc start, length, answer start, answer end, impossible.
        self.rows: list[tuple[int, ...]] = []
        # row → max-context flags of its document tokens (examples with several windows only).
        self.max_context: dict[int, np.ndarray] = {}

    def add_context(self, context: _Context) -> int:
        """Adds a context's tokens to the chunk's buffer; returns where they start."""
        self.doc_parts.append(context)
        self.doc_size += len(context.ids)
        return self.doc_size - len(context.ids)

    def assemble(self, max_seq_length: int, cls_id: int, sep_id: int) -> SquadFeatures:
        example, query, doc_start, doc_len, start, end, impossible = (
            np.asarray(c, np.int64) for c in zip(*self.rows))
        query_len = np.fromiter(map(len, self.queries), np.int64, len(self.queries))
        query_start = np.concatenate(([0], np.cumsum(query_len)))[query]
        query_len = query_len[query]
        query_ids = np.fromiter((i for q in self.queries for i in q), np.int32)
        doc_ids = np.concatenate([c.ids_array for c in self.doc_parts])
        doc_words = np.concatenate([c.token_to_word for c in self.doc_parts])
        n, rows = len(self.rows), np.arange(len(self.rows))
        j = np.arange(max_seq_length)[None, :]  # [1, S]
        offset = (query_len + 2)[:, None]  # [N, 1], where the document starts
        in_query = (j >= 1) & (j < offset - 1)  # [N, S]
        in_doc = (j >= offset) & (j < offset + doc_len[:, None])
        doc_index = (doc_start[:, None] + j - offset)[in_doc]  # [D] into the chunk's doc buffer
        input_ids = np.zeros((n, max_seq_length), np.int32)
        input_ids[in_query] = query_ids[(query_start[:, None] + j - 1)[in_query]]
        input_ids[in_doc] = doc_ids[doc_index]
        input_ids[:, 0] = cls_id
        input_ids[rows, query_len + 1] = sep_id
        input_ids[rows, query_len + 2 + doc_len] = sep_id
        input_mask = j <= offset + doc_len[:, None]
        token_to_orig = np.full((n, max_seq_length), -1, np.int32)
        token_to_orig[in_doc] = doc_words[doc_index]
        is_max_context = in_doc.astype(np.int32)
        for row, flags in self.max_context.items():
            is_max_context[row, offset[row, 0]:offset[row, 0] + len(flags)] = flags
        return SquadFeatures(
            example_index=example.astype(np.int32), input_ids=input_ids,
            input_mask=input_mask.astype(np.int32),
            segment_ids=((j >= offset) & input_mask).astype(np.int32),
            start_positions=start.astype(np.int32), end_positions=end.astype(np.int32),
            is_impossible=impossible.astype(np.int32), token_to_orig=token_to_orig,
            token_is_max_context=is_max_context)


def iter_features(examples: Sequence[SquadExample], tokenizer: Any, max_seq_length: int,
                  doc_stride: int, max_query_length: int, is_training: bool,
                  stats: FeatureStats | None = None,
                  chunk_size: int = 1024) -> Iterator[SquadFeatures]:
    """Turns examples into windows, `chunk_size` examples at a time (bounded memory).

    Args:
      examples: from `read_squad_examples` (with answers when `is_training`).
      tokenizer: a `FullTokenizer`-like object (`tokenize`, `convert_tokens_to_ids`, `vocab`).
      max_seq_length: S, the window length including `[CLS]`, the query and two `[SEP]`.
      doc_stride: distance in tokens between the starts of consecutive windows.
      max_query_length: questions are cut to this many tokens.
      is_training: fill start/end positions from the examples' answers.
      stats: counts are added to it.
      chunk_size: examples per yielded chunk.

    Yields:
      `SquadFeatures` of consecutive examples; `example_index` counts from the first example.

    Raises:
      ValueError: when `max_seq_length` leaves no room for the document after the query.
    """
    pieces = _Pieces(tokenizer)
    cls_id, sep_id = pieces.special_ids()
    stats = stats if stats is not None else FeatureStats()
    # Examples of one paragraph share their word list: tokenize it once (training shuffles the
    # examples, so a paragraph's questions are not consecutive).
    contexts: dict[int, tuple[list[str], _Context]] = {}
    for chunk_start in range(0, len(examples), chunk_size):
        chunk = _Chunk()
        starts: dict[int, int] = {}  # context → where its tokens start in the chunk's buffer
        for index in range(chunk_start, min(chunk_start + chunk_size, len(examples))):
            example = examples[index]
            key = id(example.doc_tokens)
            if key not in contexts:
                contexts[key] = (example.doc_tokens, tokenize_context(example.doc_tokens, pieces))
            context = contexts[key][1]
            if key not in starts:
                starts[key] = chunk.add_context(context)
            query = pieces.text_ids(example.question_text)
            stats.queries_truncated += len(query) > max_query_length
            chunk.queries.append(query[:max_query_length])
            _add_windows(chunk, index, example, context, starts[key], max_seq_length, doc_stride,
                         is_training, pieces, stats)
        stats.examples += index - chunk_start + 1
        stats.features += len(chunk.rows)
        if chunk.rows:
            yield chunk.assemble(max_seq_length, cls_id, sep_id)


def _add_windows(chunk: _Chunk, index: int, example: SquadExample, context: _Context,
                 context_start: int, max_seq_length: int, doc_stride: int, is_training: bool,
                 pieces: _Pieces, stats: FeatureStats) -> None:
    """Adds one example's windows (and their answer positions) to the chunk."""
    query = chunk.queries[-1]
    max_tokens_for_doc = max_seq_length - len(query) - 3
    if max_tokens_for_doc < 1:
        raise UserError(f"max_seq_length={max_seq_length} leaves no room for the context after "
                         f"a {len(query)}-token question; raise --max_seq_length or lower "
                         "--max_query_length")
    spans = doc_spans(len(context.ids), max_tokens_for_doc, doc_stride)
    answer = None
    if is_training and not example.is_impossible:
        start = context.word_to_token[example.start_position]
        end = context.word_to_token[example.end_position + 1] - 1
        answer_ids = pieces.text_ids(example.orig_answer_text)
        answer = improve_answer_span(context.ids, start, end, answer_ids)
    if len(spans) > 1:
        stats.long_contexts += 1
        best = max_context_window(spans, len(context.ids))
    offset = len(query) + 2
    for k, (first, length) in enumerate(spans):
        start = end = 0
        if answer is not None and first <= answer[0] and answer[1] < first + length:
            start, end = answer[0] - first + offset, answer[1] - first + offset
        elif answer is not None:
            stats.answers_outside_window += 1
        if len(spans) > 1:
            chunk.max_context[len(chunk.rows)] = best[first:first + length] == k
        chunk.rows.append((index, len(chunk.queries) - 1, context_start + first, length, start, end,
                           int(is_training and example.is_impossible)))
