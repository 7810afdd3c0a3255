"""Token-tagging (NER) data: file readers, label lists, WordPiece alignment, windows, write-back.

Two input formats, both with a blank line between sentences:

  conll  one word per line, whitespace-separated columns, the word first and the tag LAST
         (`EU NNP B-NP B-ORG`); `-DOCSTART-` lines are skipped.
  char   one character per line, then whitespace and its tag (`北 B-LOC`), as in Chinese NER sets.

A file without a tag column (one column per line) can be predicted. Tags are `O` or
`<B|I|E|S>-<TYPE>`; whatever the file's scheme (BIO, IOB1, BIOES) its entities are decoded
(`bert_tf.tasks.ner.metrics`) and re-tagged in the run's scheme, so the model always learns
well-formed BIO or BIOES tags.

Features: `[CLS] pieces... [SEP]`; the first WordPiece of each word carries the word's label and
weight 1, other pieces, special tokens and padding weight 0. A sentence whose pieces do not fit
in `max_seq_length - 2` is split at word boundaries into overlapping windows; each word is
predicted by exactly one window (the overlap is shared half and half, so every predicted word
keeps context on both sides) and `stitch_predictions` puts them back together.
"""

from __future__ import annotations

import itertools
from typing import Iterator, NamedTuple, Sequence

import numpy as np
from absl import logging

from bert_tf import filesystem
from bert_tf.text import tokenizers
from bert_tf.errors import EmptyInputError, MissingFileError, UserError
from bert_tf.tasks.ner import metrics as tag_metrics

DATA_FORMATS = ("conll", "char")
TAG_SCHEMES = {"bio": ("B", "I"), "bioes": ("B", "I", "E", "S")}
DOCSTART = "-DOCSTART-"


class Sentence(NamedTuple):
    """One sentence of a tagging file.

    Attributes:
      words: the words (conll) or characters (char).
      tags: their tags as written in the file, or None when the file has no tag column.
      line_numbers: the 1-based line of each word, for error messages.
    """

    words: tuple[str, ...]
    tags: tuple[str, ...] | None
    line_numbers: tuple[int, ...]


class _Line(NamedTuple):
    number: int
    text: str  # without the line break
    word: str | None  # None: a blank or -DOCSTART- line
    tag: str | None


def _scan(path: str, data_format: str) -> Iterator[_Line]:
    """Every line of a tagging file, classified; raises on malformed lines."""
    if data_format not in DATA_FORMATS:
        raise UserError(f"data format must be one of {DATA_FORMATS}, got {data_format!r}")
    if not filesystem.isfile(path):
        raise MissingFileError(f"{path}: tagging file not found")
    with filesystem.open_text(path, newline="") as f:
        try:
            for number, raw in enumerate(f, 1):
                text = raw.rstrip("\r\n")
                fields = text.split()
                if not fields or fields[0] == DOCSTART:
                    yield _Line(number, text, None, None)
                elif data_format == "conll":
                    yield _Line(number, text, fields[0], fields[-1] if len(fields) > 1 else None)
                else:
                    yield _Line(number, text, text[0], _char_line_tag(path, number, text))
        except UnicodeDecodeError as e:
            raise UserError(f"{path}: not UTF-8 ({e}); convert the file to UTF-8") from None


def _char_line_tag(path: str, number: int, text: str) -> str | None:
    """The tag of a char-format line `<char><whitespace><tag>` (None for a lone character)."""
    rest = text[1:].split()
    if len(text) > 1 and (not text[1].isspace() or len(rest) > 1):
        raise UserError(f"{path}:{number}: expected one character, whitespace and a tag "
                         f"(char format), got {text!r}; is this a --data_format=conll file?")
    return rest[0] if rest else None


def read_sentences(path: str, data_format: str = "conll") -> list[Sentence]:
    """Reads a tagging file (see the module docstring for the formats).

    Raises:
      FileNotFoundError: no such file.
      ValueError (naming the file and line): a malformed line or tag, or a file that gives tags
        on some lines and not on others; a file without sentences (EmptyInputError).
    """
    sentences: list[Sentence] = []
    words: list[str] = []
    tags: list[str | None] = []
    numbers: list[int] = []
    labeled_line: _Line | None = None  # the first word's line decides: tagged or not
    for line in _scan(path, data_format):
        if line.word is None:
            if words:
                sentences.append(Sentence(tuple(words), None if tags[0] is None else tuple(tags),
                                          tuple(numbers)))
                words, tags, numbers = [], [], []
            continue
        labeled_line = labeled_line or line
        if (line.tag is None) != (labeled_line.tag is None):
            raise UserError(f"{path}:{line.number}: {'no' if line.tag is None else 'a'} tag "
                             f"column, unlike line {labeled_line.number}: {line.text!r}")
        if line.tag is not None:
            try:
                tag_metrics.split_tag(line.tag)
            except ValueError as e:
                raise UserError(f"{path}:{line.number}: {e}") from None
        words.append(line.word)
        tags.append(line.tag)
        numbers.append(line.number)
    if words:
        sentences.append(Sentence(tuple(words), None if tags[0] is None else tuple(tags),
                                  tuple(numbers)))
    if not sentences:
        raise EmptyInputError(f"{path}: no sentences; expected one word per line (with its tag "
                              "for training and evaluation), a blank line between sentences")
    return sentences


# ------------------------------------------------------------------ tag schemes and label lists
def convert_tags(sentences: Sequence[Sequence[str]], scheme: str) -> list[list[str]]:
    """Each sentence's tags re-written in `scheme` ("bio" or "bioes") from its decoded entities.

    Well-formed tags of the same scheme come back unchanged; IOB1 and ill-formed BIO come back as
    the BIO/BIOES tags of the entities conlleval sees in them.
    """
    return [tag_metrics.tags_from_entities(spans, len(tags), scheme)
            for tags, spans in zip(sentences, tag_metrics.sentence_entities(sentences))]


def label_list(entity_types: Sequence[str], scheme: str) -> list[str]:
    """`O`, then each type's tags in the scheme's prefix order: O, B-LOC, I-LOC, B-PER, ..."""
    if scheme not in TAG_SCHEMES:
        raise UserError(f"tag scheme must be one of {sorted(TAG_SCHEMES)}, got {scheme!r}")
    return [tag_metrics.OUTSIDE] + [f"{prefix}-{entity_type}"
                                    for entity_type in sorted(set(entity_types))
                                    for prefix in TAG_SCHEMES[scheme]]


def labels_from_sentences(sentences: Sequence[Sentence], scheme: str) -> list[str]:
    """The label list for the entity types of a (training) file: every tag of every type, so a
    type seen only as one-word entities can still be predicted across several words."""
    tagged = [s.tags for s in sentences if s.tags is not None]
    types = {e.type for spans in tag_metrics.sentence_entities(tagged) for e in spans}
    return label_list(sorted(types), scheme)


def label_ids(sentences: Sequence[Sentence], tags: Sequence[Sequence[str]], labels: Sequence[str],
              path: str) -> list[np.ndarray]:
    """Each sentence's tags (already in the run's scheme) as int32 ids into `labels`.

    Raises:
      ValueError: a tag is not in `labels`, naming the first such word's file and line.
    """
    index = {label: i for i, label in enumerate(labels)}
    flat = [tag for sentence in tags for tag in sentence]
    ids = np.fromiter((index.get(tag, -1) for tag in flat), np.int32, len(flat))
    unknown = np.flatnonzero(ids < 0)
    if len(unknown):
        word = int(unknown[0])
        lines = [n for s in sentences for n in s.line_numbers]
        raise UserError(f"{path}:{lines[word]}: tag {flat[word]!r} is not in the label list "
                         f"{list(labels)}; add its type to the training file or to --labels")
    return np.split(ids, np.cumsum([len(t) for t in tags])[:-1])


# ------------------------------------------------------------------ windows and features
class Window(NamedTuple):
    """Words [start, end) of a sentence in one sequence, which predicts words
    [score_start, score_end)."""

    start: int
    end: int
    score_start: int
    score_end: int


def plan_windows(piece_counts: Sequence[int], capacity: int, overlap: int) -> list[Window]:
    """Splits a sentence into windows of at most `capacity` pieces, on word boundaries.

    Args:
      piece_counts: WordPieces of each word (each at most `capacity`).
      capacity: pieces per window (max_seq_length - 2).
      overlap: pieces the next window repeats from the end of this one, for context (the
        last words whose pieces fit in it; at least one new word per window).

    Returns:
      windows in order; their [score_start, score_end) ranges cover every word exactly once.
    """
    ends = np.concatenate([[0], np.cumsum(piece_counts)])  # [W + 1] piece offset of each word
    num_words = len(piece_counts)
    spans: list[tuple[int, int]] = []
    start = 0
    while start < num_words:
        end = max(start + 1, int(np.searchsorted(ends, ends[start] + capacity, side="right")) - 1)
        spans.append((start, end))
        if end >= num_words:
            break
        # The next window starts where `overlap` pieces remain before `end`, but late enough
        # to take in the word at `end`, and at least one word later.
        start = max(start + 1, int(np.searchsorted(ends, ends[end] - overlap, side="left")),
                    int(np.searchsorted(ends, ends[end + 1] - capacity, side="left")))
    # Overlapping words go half to each neighbour: [next start, this end) split in the middle
    # (kept non-decreasing, so that the ranges tile the sentence).
    middles = [nxt + (end - nxt) // 2 for (_, end), (nxt, _) in zip(spans, spans[1:])]
    cuts = [0, *np.maximum.accumulate(middles).tolist(), num_words] if middles else [0, num_words]
    return [Window(s, e, cuts[i], cuts[i + 1]) for i, (s, e) in enumerate(spans)]


class TaggingFeatures(NamedTuple):
    """Fixed-length windows of a file's sentences.

    Attributes:
      arrays: the `features.tagging_schema` columns, int32 [N, S] each (N includes padding
        rows, all zero).
      sentence_index: int32 [N], the sentence of each window (-1 for padding rows).
      word_index: int32 [N, S], the word (within its sentence) a position predicts; -1 where
        it predicts none.
      num_windows: real windows (the first num_windows rows).
    """

    arrays: dict[str, np.ndarray]
    sentence_index: np.ndarray
    word_index: np.ndarray
    num_windows: int


def _ragged(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For rows of `lengths` [R] items: (row of each item, its index within the row), [Σ len]."""
    rows = np.repeat(np.arange(len(lengths)), lengths)
    return rows, np.arange(len(rows)) - np.repeat(np.cumsum(lengths) - lengths, lengths)


def _word_pieces(sentences: Sequence[Sentence], tokenizer,
                 capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """WordPiece ids of all words, concatenated (int64 [P]), and each word's count (int64 [W]).

    Each distinct word is tokenized once; a word with no pieces becomes [UNK], a word with more
    than `capacity` keeps its first `capacity`.
    """
    # SentencePiece models name their unknown piece themselves.
    unk = tokenizer.convert_tokens_to_ids([getattr(tokenizer, "unk_token", tokenizers.UNK_TOKEN)])
    memo: dict[str, list[int]] = {}
    truncated = 0
    for word in {w for s in sentences for w in s.words}:
        ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(word)) or unk
        truncated += len(ids) > capacity
        memo[word] = ids[:capacity]
    if truncated:
        logging.warning("%d distinct words have more than %d WordPieces; only their first %d are "
                        "kept", truncated, capacity, capacity)
    per_word = [memo[w] for s in sentences for w in s.words]
    counts = np.fromiter(map(len, per_word), np.int64, len(per_word))
    return np.fromiter(itertools.chain.from_iterable(per_word), np.int64, int(counts.sum())), counts


def _plan_all(sentences: Sequence[Sentence], counts: np.ndarray, word_offsets: np.ndarray,
              capacity: int, overlap: int) -> np.ndarray:
    """Windows of every sentence, int64 [R, 5]: sentence, start, end, score_start, score_end."""
    lengths = np.diff(word_offsets)
    sentence_pieces = np.add.reduceat(counts, word_offsets[:-1]) if len(counts) else lengths
    short = np.flatnonzero(sentence_pieces <= capacity)  # one window: the whole sentence
    plans = [np.stack([short, 0 * short, lengths[short], 0 * short, lengths[short]], axis=1)]
    for i in np.flatnonzero(sentence_pieces > capacity).tolist():
        windows = plan_windows(counts[word_offsets[i]:word_offsets[i + 1]], capacity, overlap)
        plans.append(np.array([(i, *w) for w in windows], np.int64))
    plan = np.concatenate(plans).astype(np.int64)
    return plan[np.lexsort((plan[:, 1], plan[:, 0]))]  # sentence order, then window order


def convert_sentences(sentences: Sequence[Sentence], labels: Sequence[np.ndarray] | None,
                      tokenizer, max_seq_length: int, window_overlap: int,
                      pad_to_multiple: int = 1) -> TaggingFeatures:
    """Tokenizes sentences and packs them into windows, all rows at once.

    Args:
      sentences: from `read_sentences` (none empty).
      labels: each sentence's label ids (from `label_ids`), or None (no labels: ids 0).
      tokenizer: `tokenize(text) -> list[str]` and `convert_tokens_to_ids`.
      max_seq_length: S, at least 3.
      window_overlap: pieces shared by consecutive windows of a long sentence (capped at half a
        window, so that windows always advance).
      pad_to_multiple: append all-zero rows up to a multiple of this (the global eval batch).
    """
    if max_seq_length < 3:
        raise UserError(f"max_seq_length must be at least 3 for tagging, got {max_seq_length}")
    capacity = max_seq_length - 2
    try:
        cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    except KeyError as e:
        raise UserError(f"the vocabulary has no {e} token; BERT's inputs need [CLS] and [SEP]") from None
    piece_ids, counts = _word_pieces(sentences, tokenizer, capacity)
    word_offsets = np.concatenate([[0], np.cumsum([len(s.words) for s in sentences])]
                                  ).astype(np.int64)  # [N + 1]
    first_piece = np.concatenate([[0], np.cumsum(counts)])  # [W + 1] piece offset of each word
    flat_labels = (np.concatenate(labels) if labels is not None and len(labels)
                   else np.zeros(len(counts), np.int32))
    overlap = max(0, min(window_overlap, capacity // 2))
    plan = _plan_all(sentences, counts, word_offsets, capacity, overlap)
    num_windows = len(plan)
    base = word_offsets[plan[:, 0]]  # [R] first word of each window's sentence
    piece_start = first_piece[base + plan[:, 1]]  # [R]
    lengths = first_piece[base + plan[:, 2]] - piece_start  # [R] pieces per window
    total = num_windows + (-num_windows % pad_to_multiple)
    input_ids = np.zeros((total, max_seq_length), np.int32)
    rows, cols = _ragged(lengths)
    input_ids[rows, 1 + cols] = piece_ids[piece_start[rows] + cols]
    input_ids[np.arange(num_windows), 0] = cls_id
    input_ids[np.arange(num_windows), lengths + 1] = sep_id
    # The words each window predicts, at their first piece.
    rows, k = _ragged(plan[:, 4] - plan[:, 3])
    word = plan[rows, 3] + k  # [K] within the sentence
    positions = 1 + first_piece[base[rows] + word] - piece_start[rows]
    word_index = np.full((total, max_seq_length), -1, np.int32)
    word_index[rows, positions] = word
    label_array = np.zeros((total, max_seq_length), np.int32)
    label_array[rows, positions] = flat_labels[base[rows] + word]
    sentence_index = np.full(total, -1, np.int32)
    sentence_index[:num_windows] = plan[:, 0]
    used = np.zeros(total, np.int64)
    used[:num_windows] = lengths + 2  # [CLS] pieces [SEP]
    arrays = {"input_ids": input_ids,
              "input_mask": (np.arange(max_seq_length) < used[:, None]).astype(np.int32),
              "segment_ids": np.zeros_like(input_ids), "label_ids": label_array,
              "label_weights": (word_index >= 0).astype(np.int32)}
    return TaggingFeatures(arrays, sentence_index, word_index, num_windows)


def stitch_predictions(features: TaggingFeatures, predicted: np.ndarray,
                       sentence_lengths: Sequence[int]) -> list[np.ndarray]:
    """Puts the windows' per-position predictions back into sentences.

    Args:
      features: the windows the predictions were made on.
      predicted: int [M, S] per-position label ids, M >= num_windows (padding rows ignored).
      sentence_lengths: words per sentence.

    Returns:
      int32 [len] label ids per sentence.

    Raises:
      RuntimeError: some word got no prediction or several (the windows do not match).
    """
    n = features.num_windows
    offsets = np.concatenate([[0], np.cumsum(sentence_lengths)]).astype(np.int64)
    where = features.word_index[:n] >= 0  # [n, S]
    rows = np.nonzero(where)[0]
    flat = offsets[features.sentence_index[:n][rows]] + features.word_index[:n][where]
    counts = np.bincount(flat, minlength=int(offsets[-1]))
    if len(counts) != offsets[-1] or not np.all(counts == 1):
        raise RuntimeError(f"{int(np.sum(counts != 1))} words are predicted by no window or by "
                           "several: the predictions do not come from these features")
    out = np.empty(int(offsets[-1]), np.int32)
    out[flat] = np.asarray(predicted)[:n][where]
    return np.split(out, offsets[1:-1])


# ------------------------------------------------------------------ writing predictions back
def write_predictions(source_path: str, output_path: str, data_format: str,
                      predicted_tags: Sequence[Sequence[str]]) -> int:
    """Writes `source_path` again with each word's predicted tag appended as a last column.

    Blank lines are copied as they are, `-DOCSTART-` lines get an `O` column (conlleval needs
    the same number of columns on every line); the new column is separated by a tab if the
    line uses tabs, else by a space. Written atomically (temp name, then rename).

    Args:
      source_path: the file the sentences were read from (same data_format).
      output_path: where to write.
      data_format: "conll" or "char".
      predicted_tags: each sentence's tags, in file order.

    Returns:
      the number of words written.
    """
    flat = iter([tag for tags in predicted_tags for tag in tags])
    lines = []
    for line in _scan(source_path, data_format):
        if line.word is None:
            # -DOCSTART- gets an "O" column too: conlleval wants as many columns on every line
            is_docstart = line.text.split()[:1] == [DOCSTART]
            tag_column = ("\t" if "\t" in line.text else " ") + "O" if is_docstart else ""
            lines.append(line.text + tag_column + "\n")
            continue
        tag = next(flat, None)
        if tag is None:
            raise UserError(f"{source_path}:{line.number}: more words than predictions")
        lines.append(line.text + ("\t" if "\t" in line.text else " ") + tag + "\n")
    if next(flat, None) is not None:
        raise UserError(f"{source_path}: fewer words than predictions")
    with filesystem.atomic_output(output_path) as out:
        out.writelines(lines)
    return sum(len(tags) for tags in predicted_tags)
