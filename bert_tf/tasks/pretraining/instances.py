"""Documents -> pretraining instances -> masked features: the original's algorithm as pure functions.

The steps are those of the original `create_pretraining_data.py` (chunking, segments, masking), with
the random generators passed in:

- `create_instances_from_document`: chunks a document's sentences up to a target length and splits
  each chunk into segments A and B (B "actually next" or drawn from another document, label 1).
  Works on sentence-level token *ranges* with a `random.Random`; no token is copied.
  `create_instances` runs it over all documents `dupe_factor` times and trims every pair at once
  (`truncate_seq_pair`).
- `assemble_features` + `create_masked_lm_predictions`: build `[CLS] A [SEP] B [SEP]` and choose the
  masked positions for a whole batch of instances at once with numpy (`np.random.Generator`),
  with the same distribution as the original's per-token loop: a uniformly random set of
  `min(max_predictions, max(1, round(len * masked_lm_prob)))` candidate positions (whole words
  when requested, a word being skipped if it would overflow the budget), each replaced by
  `[MASK]` 80%, kept 10%, a random vocabulary id 10%.

Shapes: I = instances, S = max_seq_length, P = max_predictions_per_seq, T = tokens in the buffer.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import random
from typing import NamedTuple

import numpy as np

from bert_tf.errors import UserError
from bert_tf.records import features
from bert_tf.tasks.pretraining import ngram_masking


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
    """The original's flags that shape instances (same names and defaults)."""
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    do_whole_word_mask: bool = False
    sentence_order: bool = False  # ALBERT's sentence-order prediction instead of next-sentence
    ngram: int = 1  # ALBERT's n-gram masking: spans of 1..ngram words, P(n) proportional to 1/n

    def validate(self) -> None:
        if self.max_seq_length < 5:
            raise UserError(f"--max_seq_length must be at least 5 ([CLS] A [SEP] B [SEP]), got {self.max_seq_length}")
        if self.max_predictions_per_seq < 1:
            raise UserError(f"--max_predictions_per_seq must be positive, got {self.max_predictions_per_seq}")
        if self.max_predictions_per_seq > self.max_seq_length - 3:
            raise UserError(
                f"--max_predictions_per_seq={self.max_predictions_per_seq} is larger than the "
                f"{self.max_seq_length - 3} maskable positions a sequence of --max_seq_length="
                f"{self.max_seq_length} has (3 are [CLS]/[SEP]); lower it (the original uses "
                f"about max_seq_length * masked_lm_prob, e.g. 20 for 128)")
        if not 0.0 < self.masked_lm_prob <= 1.0:
            raise UserError(f"--masked_lm_prob must be in (0, 1], got {self.masked_lm_prob}")
        if self.ngram < 1:
            raise UserError(f"--ngram must be at least 1 (1 = single words/tokens), got {self.ngram}")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise UserError(f"--short_seq_prob must be in [0, 1], got {self.short_seq_prob}")


@dataclasses.dataclass
class DocumentBuffer:
    """Tokenized documents, back to back.

    Attributes:
      tokens: int32 [T] token ids.
      word_starts: bool [T], True where a token begins a word (for whole-word masking).
      sentence_offsets: int64 [num_sentences + 1]; sentence s is tokens[so[s]:so[s + 1]].
      document_offsets: int64 [num_documents + 1]; document d is sentences do[d]..do[d + 1] - 1.
    """
    tokens: np.ndarray
    word_starts: np.ndarray
    sentence_offsets: np.ndarray
    document_offsets: np.ndarray

    @property
    def num_documents(self) -> int:
        return len(self.document_offsets) - 1

    @functools.cached_property
    def offset_lists(self) -> tuple[list[int], list[int]]:
        """The offsets as Python lists: the per-sentence loop indexes them ~10x faster than arrays."""
        return self.sentence_offsets.tolist(), self.document_offsets.tolist()

    def shuffled(self, rng: random.Random) -> "DocumentBuffer":
        """The same documents in a random order (the original shuffles documents before use)."""
        order = list(range(self.num_documents))
        rng.shuffle(order)
        starts, ends = self.document_offsets[:-1][order], self.document_offsets[1:][order]
        sentence_order = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends)]) if order else \
            np.zeros(0, np.int64)
        s_starts, s_ends = self.sentence_offsets[:-1][sentence_order], self.sentence_offsets[1:][sentence_order]
        lengths = s_ends - s_starts
        token_index = np.repeat(s_starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths) + \
            np.arange(int(lengths.sum()))
        return DocumentBuffer(
            tokens=self.tokens[token_index], word_starts=self.word_starts[token_index],
            sentence_offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
            document_offsets=np.concatenate([[0], np.cumsum(ends - starts)]).astype(np.int64))


# An instance is a row (a_start, a_end, b_start, b_end, label): segment A = tokens[a_start:a_end],
# B = tokens[b_start:b_end] of a `DocumentBuffer`; label 1 = B is a random next (NSP), or A and B
# are swapped (SOP).
Instance = tuple[int, int, int, int, int]


def _randint(rng: random.Random, low: int, high: int) -> int:
    """Uniform integer in [low, high], like `rng.randint` at a fifth of the cost (the bias of
    flooring a 53-bit float is below 1e-9 for any range used here)."""
    return low + int(rng.random() * (high - low + 1))


def truncate_seq_pair(len_a: np.ndarray, len_b: np.ndarray, max_num_tokens: int,
                      rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Tokens to drop (front_a, back_a, front_b, back_b) so that each pair fits `max_num_tokens`.

    Same outcome distribution as the original's loop, which removes one token at a time from the
    longer side (B on a tie), from its front or back with equal probability: the counts per side
    follow from the lengths alone, and the front share of n removals is Binomial(n, 1/2).

    Args:
      len_a, len_b: int [I] segment lengths.
    """
    excess = np.maximum(len_a + len_b - max_num_tokens, 0)
    first = np.minimum(np.abs(len_a - len_b), excess)  # only the longer side shrinks until they are equal
    rest = excess - first  # then they alternate, B first
    drop_a = np.where(len_a > len_b, first, 0) + rest // 2
    drop_b = np.where(len_a > len_b, 0, first) + (rest + 1) // 2
    front_a, front_b = rng.binomial(drop_a, 0.5), rng.binomial(drop_b, 0.5)
    return front_a, drop_a - front_a, front_b, drop_b - front_b


def create_instances(buffer: DocumentBuffer, options: InstanceOptions, dupe_factor: int,
                     rng: random.Random, np_rng: np.random.Generator) -> np.ndarray:
    """`dupe_factor` passes of `create_instances_from_document` over every document, trimmed.

    Returns:
      int64 [I, 5] `Instance` rows, each pair fitting `max_seq_length - 3` tokens.
    """
    rows: list[tuple] = []
    for _ in range(dupe_factor):
        for document_index in range(buffer.num_documents):
            rows += create_instances_from_document(buffer, document_index, options, rng)
    table = np.asarray(rows, np.int64).reshape(-1, 5)
    front_a, back_a, front_b, back_b = truncate_seq_pair(
        table[:, 1] - table[:, 0], table[:, 3] - table[:, 2], options.max_seq_length - 3, np_rng)
    table[:, 0] += front_a
    table[:, 1] -= back_a
    table[:, 2] += front_b
    table[:, 3] -= back_b
    return table


def create_instances_from_document(buffer: DocumentBuffer, document_index: int, options: InstanceOptions,
                                   rng: random.Random) -> list[Instance]:
    """The original's chunking of one document into (A, B) pairs
    (its `create_instances_from_document`).

    Args:
      buffer: all documents "random next" segments may be drawn from.
      document_index: the document to cut.
      options: lengths and probabilities.
      rng: drives every choice, in a fixed order, so a seed gives the same instances.

    Returns:
      `Instance` tuples, not yet trimmed to `max_seq_length - 3` tokens (see `truncate_seq_pair`).
    """
    so, do = buffer.offset_lists
    first, last = do[document_index], do[document_index + 1]  # sentences [first, last)
    max_num_tokens = options.max_seq_length - 3
    # Chosen once per document: short targets teach the model short sequences.
    target = _randint(rng, 2, max_num_tokens) if rng.random() < options.short_seq_prob else max_num_tokens
    instances: list[Instance] = []
    chunk_start, i = first, first
    while i < last:
        if i == last - 1 or so[i + 1] - so[chunk_start] >= target:
            chunk_len = i + 1 - chunk_start
            a_end = chunk_start + (_randint(rng, 1, chunk_len - 1) if chunk_len >= 2 else 1)
            if options.sentence_order:
                instance = _sentence_order_pair(buffer, chunk_start, a_end, i + 1, rng)
                if instance is not None:
                    instances.append(instance)
            elif chunk_len == 1 or rng.random() < 0.5:
                b_start, b_end = _random_next(buffer, document_index, target - (so[a_end] - so[chunk_start]), rng)
                instances.append((so[chunk_start], so[a_end], b_start, b_end, 1))
                i = a_end - 1  # the chunk's unused sentences start the next chunk
            else:
                instances.append((so[chunk_start], so[a_end], so[a_end], so[i + 1], 0))
            chunk_start = i + 1
        i += 1
    return instances


def _random_next(buffer: DocumentBuffer, document_index: int, target_b_length: int,
                 rng: random.Random) -> tuple[int, int]:
    """Segment B from a random other document, from a random sentence until the target is reached."""
    num_docs = buffer.num_documents
    other = document_index
    for _ in range(10):
        other = _randint(rng, 0, num_docs - 1)
        if other != document_index:
            break
    so, do = buffer.offset_lists
    start_sentence = _randint(rng, do[other], do[other + 1] - 1)
    start = so[start_sentence]
    # the first sentence end at or past the target (at least one sentence), else the document's end
    end_sentence = bisect.bisect_left(so, start + max(target_b_length, 1), start_sentence + 1, do[other + 1])
    return start, so[end_sentence]


def _sentence_order_pair(buffer: DocumentBuffer, chunk_start: int, a_end: int, chunk_end: int,
                         rng: random.Random):
    """SOP: A and B are consecutive parts of the chunk, swapped with probability 1/2 (label 1).

    A one-sentence chunk is split inside the sentence, so B always comes from the same document;
    a one-token chunk gives no instance.
    """
    so, _ = buffer.offset_lists
    start, split, end = so[chunk_start], so[a_end], so[chunk_end]
    if chunk_end - chunk_start == 1:
        if end - start < 2:
            return None
        split = start + _randint(rng, 1, end - start - 1)
    return (split, end, start, split, 1) if rng.random() < 0.5 else (start, split, split, end, 0)


class SpecialIds(NamedTuple):
    cls: int
    sep: int
    mask: int
    vocab_size: int


def assemble_features(buffer: DocumentBuffer, instances: np.ndarray, max_seq_length: int,
                      special: SpecialIds) -> dict[str, np.ndarray]:
    """`[CLS] A [SEP] B [SEP]` for a batch of instances, zero-padded.

    Args:
      buffer: the documents the ranges point into.
      instances: int64 [I, 5] `Instance` rows.

    Returns:
      `input_ids`, `input_mask`, `segment_ids` int32 [I, S]; `word_starts` bool [I, S];
      `next_sentence_labels` int32 [I, 1].
    """
    index_type = np.int32 if len(buffer.tokens) < 2 ** 31 - max_seq_length else np.int64
    a_start, a_end, b_start, b_end, label = (instances[:, k:k + 1].astype(index_type) for k in range(5))
    len_a, len_b = a_end - a_start, b_end - b_start
    j = np.arange(max_seq_length, dtype=index_type)[None, :]
    from_text = ((j >= 1) & (j <= len_a)) | ((j >= len_a + 2) & (j < len_a + len_b + 2))
    # buffer position of each A / B token (anything for the other cells, then zeroed)
    source = np.where(j <= len_a, a_start - 1, b_start - len_a - 2) + j
    source[~from_text] = 0
    previous_from_text = np.concatenate([np.zeros_like(from_text[:, :1]), from_text[:, :-1]], axis=1)
    # `take` gathers with int32 indices about twice as fast as fancy indexing does
    input_ids = buffer.tokens.take(source).astype(np.int32, copy=False)
    input_ids[~from_text] = 0
    input_ids[:, 0] = special.cls
    rows = np.arange(len(instances))
    input_ids[rows, len_a[:, 0] + 1] = special.sep
    input_ids[rows, (len_a + len_b)[:, 0] + 2] = special.sep
    return {
        "input_ids": input_ids,
        "input_mask": (j < len_a + len_b + 3).astype(np.int32),
        "segment_ids": ((j >= len_a + 2) & (j < len_a + len_b + 3)).astype(np.int32),
        # a word cut by truncation starts a new group, so no group spans [SEP]
        "word_starts": from_text & (buffer.word_starts.take(source) | ~previous_from_text),
        "next_sentence_labels": label.astype(np.int32),
    }


def unmasked_features(assembled: dict[str, np.ndarray], options: InstanceOptions,
                      special: SpecialIds) -> dict[str, np.ndarray]:
    """The values of an unmasked record (`features.unmasked_pretraining_schema`) for a batch.

    Args:
      assembled: `assemble_features`'s output for I instances.
    """
    input_ids, input_mask = assembled["input_ids"], assembled["input_mask"]
    special_token = (input_ids == special.cls) | (input_ids == special.sep)
    kinds = np.where(assembled["word_starts"], features.TOKEN_WORD_START, features.TOKEN_WORD_CONTINUATION)
    kinds = np.where(special_token, features.TOKEN_SPECIAL, kinds)
    kinds = np.where(input_mask == 1, kinds, features.TOKEN_PADDING)
    column = np.ones((len(input_ids), 1), np.int64)
    return {
        "input_ids": input_ids, "segment_ids": assembled["segment_ids"], "token_kinds": kinds,
        "next_sentence_labels": assembled["next_sentence_labels"],
        "mask_token_id": column * special.mask, "vocab_size": column * special.vocab_size,
        "do_whole_word_mask": column * int(options.do_whole_word_mask), "ngram": column * options.ngram,
        "masked_lm_prob": np.full((len(input_ids), 1), options.masked_lm_prob, np.float32),
    }


def create_masked_lm_predictions(input_ids: np.ndarray, input_mask: np.ndarray, word_starts: np.ndarray,
                                 options: InstanceOptions, special: SpecialIds,
                                 rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Masks a batch of sequences (the original's `create_masked_lm_predictions`).

    Args:
      input_ids: int32 [I, S] `[CLS] A [SEP] B [SEP]` + padding; input_mask: int32 [I, S].
      word_starts: bool [I, S] from `assemble_features` (used with whole-word masking).
      options: `max_predictions_per_seq`, `masked_lm_prob`, `do_whole_word_mask`, `ngram`.
      special: [CLS]/[SEP]/[MASK] ids and the vocabulary size for random replacements.
      rng: numpy generator.

    Returns:
      `input_ids` int32 [I, S] with the replacements; `masked_lm_positions`, `masked_lm_ids`
      int32 [I, P] ascending positions and their original ids, zero-padded; `masked_lm_weights`
      float32 [I, P] (1.0 for real predictions); `masked_choice` int8 [I, P] (0 = [MASK],
      1 = kept, 2 = random id, -1 = padding) for statistics.
    """
    num, seq = input_ids.shape
    lengths = input_mask.sum(axis=1)
    candidates = (input_mask == 1) & (input_ids != special.cls) & (input_ids != special.sep)
    budget = np.minimum(options.max_predictions_per_seq,
                        np.maximum(1, np.round(lengths * options.masked_lm_prob).astype(np.int64)))
    if options.ngram > 1:
        units = candidates & word_starts if options.do_whole_word_mask else candidates
        chosen = ngram_masking.choose_ngrams(candidates, units, input_ids == special.sep, budget,
                                             options.ngram, rng)
    elif options.do_whole_word_mask:
        chosen = _choose_whole_words(candidates, word_starts & candidates, budget, rng)
    else:
        # a uniformly random subset of `budget` candidates: those with the smallest random keys
        keys = _random_keys(candidates, rng)
        kth_key = np.sort(keys, axis=1)[np.arange(num), budget - 1]
        chosen = candidates & (keys <= kth_key[:, None])
    preds = options.max_predictions_per_seq
    count = chosen.sum(axis=1)
    real = np.arange(preds)[None, :] < count[:, None]  # every branch keeps count <= budget <= preds
    # the chosen cells in row-major order are each row's positions, ascending: the real slots' values
    cells = np.flatnonzero(chosen)
    positions = np.zeros((num, preds), np.int64)
    positions[real] = cells % seq
    labels = np.zeros((num, preds), input_ids.dtype)
    labels[real] = input_ids.take(cells)
    u_mask, u_keep = rng.random((num, preds)), rng.random((num, preds))
    choice = np.where(u_mask < 0.8, 0, np.where(u_keep < 0.5, 1, 2))
    replacement = np.where(choice == 0, special.mask,
                           np.where(choice == 1, labels, rng.integers(0, special.vocab_size, (num, preds))))
    masked = input_ids.copy()
    np.put(masked, cells, replacement[real])
    return {
        "input_ids": masked,
        "masked_lm_positions": positions.astype(np.int32),
        "masked_lm_ids": labels.astype(np.int32),
        "masked_lm_weights": real.astype(np.float32),
        "masked_choice": np.where(real, choice, -1).astype(np.int8),
    }


def _random_keys(valid: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Random sort keys, distinct within a row (the low bits hold the column), so sorting them
    gives a random order with no ties; invalid cells sort last.

    int32 keys (about 2x faster to draw and sort than int64) keep 24 random bits for 128 columns;
    two equal draws, about once in 2,000 rows, are then ordered by column, a negligible bias.
    """
    num, width = valid.shape
    column_bits = max(1, int(width - 1).bit_length())
    dtype = np.int32 if column_bits <= 12 else np.int64
    random_bits = (31 if dtype == np.int32 else 62) - column_bits
    keys = (rng.integers(0, 1 << random_bits, (num, width), dtype=dtype) << column_bits) | np.arange(width, dtype=dtype)
    return np.where(valid, keys, np.iinfo(dtype).max)


def _choose_whole_words(candidates: np.ndarray, group_starts: np.ndarray, budget: np.ndarray,
                        rng: np.random.Generator) -> np.ndarray:
    """Visits each row's words in random order, taking a word if it fits the remaining budget.

    Rows run in lockstep, one word rank per step, so the loop is over words, not instances.
    """
    num, seq = candidates.shape
    group = np.cumsum(group_starts, axis=1) - 1  # word index of each candidate token
    num_groups = int(group_starts.sum(axis=1).max()) if num else 0
    flat_group = np.where(candidates, group, num_groups)  # non-candidates count into a dummy column
    cells = (np.arange(num)[:, None] * (num_groups + 1) + flat_group).ravel()
    sizes = np.bincount(cells, minlength=num * (num_groups + 1)).reshape(num, num_groups + 1)[:, :num_groups]
    order = np.argsort(_random_keys(sizes > 0, rng), axis=1)  # order[r, k]: the k-th word visited
    taken = np.zeros((num, num_groups + 1), bool)
    used = np.zeros(num, np.int64)
    row = np.arange(num)
    for step in range(num_groups):
        g = order[:, step]
        size = sizes[row, g]
        take = (size > 0) & (used + size <= budget)
        taken[row, g] = take
        used += np.where(take, size, 0)
    return candidates & taken[np.arange(num)[:, None], flat_group]

