"""Builds a WordPiece `vocab.txt` (and optionally a SentencePiece model) from raw text.

Layout of the vocabulary, as in the released BERT vocabularies (with the default 99 placeholders
the special tokens get the released ids: [PAD]=0, [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103):

    [PAD]  [unused0] ... [unusedN-1]  [UNK] [CLS] [SEP] [MASK]
    single characters seen at the start of a word, most frequent first
    ##-forms of the characters seen inside words, most frequent first
    learned pieces, in the order they were learned

Learning: the text is split by the same basic tokenizer `FullTokenizer` uses, and the distinct
basic tokens are counted. Each token starts as its characters (`w ##o ##r ##d`); the most
frequent adjacent pair of symbols (weighted by token counts) is merged into a new piece, again and
again, until the vocabulary has the requested size or no pair occurs `min_frequency` times.
Pair counts are updated incrementally over the distinct tokens that hold the merged pair, and the
next pair comes from a heap, so a merge costs time in proportion to the tokens it touches.
Ties go to the alphabetically first pair, so the same text always gives the same file.
"""

from __future__ import annotations

import collections
import dataclasses
import heapq
import io
from typing import Callable, Iterable, Iterator, Sequence

import sentencepiece
from absl import logging

from bert_tf import filesystem
from bert_tf.text import tokenizers
from bert_tf.errors import UserError
from bert_tf.filesystem import expand_input_patterns
from bert_tf.text import fast_basic
from bert_tf.text.chinese.conversion import make_converter

SPECIAL_AFTER_UNUSED = ("[UNK]", "[CLS]", "[SEP]", "[MASK]")
# At most this share of the non-special entries goes to single characters; rarer characters
# become [UNK] so that text with thousands of distinct characters still leaves room for pieces.
MAX_ALPHABET_SHARE = 0.5

# SentencePiece trains on a random sample of at most this many lines (it holds them in memory).
SPM_MAX_SENTENCES = 5_000_000
# ALBERT's spm_train recipe; SentencePiece's default (0.9995) drops characters such as < > { } ~ $ %
# that English text holds tens to hundreds of times per million characters.
SPM_CHARACTER_COVERAGE = 0.99995

Pair = tuple[str, str]


@dataclasses.dataclass(frozen=True)
class VocabBuildConfig:
    """What `build_vocab` reads and writes (the flags of `build_vocab.py`)."""

    input_file: str | Sequence[str]  # comma-separated globs or directories, or a list of them
    output_file: str
    vocab_size: int = 30522
    do_lower_case: bool = True
    num_unused: int = 99
    min_frequency: int = 2
    spm_model_prefix: str | None = None
    spm_character_coverage: float = SPM_CHARACTER_COVERAGE
    chinese_conversion: str = "none"  # t2s / s2t applied to every line (bert_tf.text.chinese.conversion)

    def __post_init__(self):
        reserved = 1 + self.num_unused + len(SPECIAL_AFTER_UNUSED)
        if self.num_unused < 0:
            raise UserError(f"--num_unused must be >= 0, got {self.num_unused}")
        if self.vocab_size <= reserved:
            raise UserError(f"--vocab_size={self.vocab_size} leaves no room for pieces after "
                             f"{reserved} special entries; raise it or lower --num_unused")
        if self.min_frequency < 1:
            raise UserError(f"--min_frequency must be >= 1, got {self.min_frequency}")
        if not 0 < self.spm_character_coverage <= 1:
            raise UserError(f"--spm_character_coverage must be in (0, 1], got {self.spm_character_coverage}")


def read_lines(files: Sequence[str], convert: Callable[[str], str] | None = None) -> Iterator[str]:
    """Lines of the files, decoded as UTF-8 dropping invalid bytes (as the original reads text),
    then passed through `convert` (--chinese_conversion) if given."""
    for path in files:
        with filesystem.open_read(path) as f:
            for raw in f:
                line = raw.decode("utf-8", "ignore")
                yield convert(line) if convert is not None else line


def count_words(lines: Iterable[str]) -> collections.Counter:
    """Counts of the whitespace-separated words `FullTokenizer` sees (`fast_basic.split_words`)."""
    counts: collections.Counter = collections.Counter()
    for line in lines:
        counts.update(fast_basic.split_words(line))
    return counts


def count_basic_tokens(word_counts: collections.Counter, do_lower_case: bool) -> collections.Counter:
    """Counts of basic tokens (lower-cased, accents stripped, punctuation split) from word counts."""
    counts: collections.Counter = collections.Counter()
    for word, count in word_counts.items():
        for token in fast_basic.basic_tokens(word, do_lower_case):
            counts[token] += count
    return counts


def _alphabet(token_counts: collections.Counter, budget: int) -> list[str]:
    """Character forms (`c` at a word start, `##c` inside) by frequency, at most `budget`.

    A character is kept with both of the forms it occurs in, or not at all: the cut never keeps
    `##b` without `b` (a word starting with b would become [UNK] although `##b` is kept).
    """
    forms: collections.Counter = collections.Counter()
    for token, count in token_counts.items():
        forms[token[0]] += count
        for char in token[1:]:
            forms["##" + char] += count
    ranked = sorted(forms, key=lambda form: (-forms[form], form))
    kept: set[str] = set()
    for form in ranked:
        char = form.removeprefix("##")
        unit = {form} | {other for other in (char, "##" + char) if other in forms}
        if not unit <= kept and len(kept | unit) <= budget:
            kept |= unit
    ranked = [form for form in ranked if form in kept]
    # Word-start forms first, then ## forms, each most frequent first.
    return [f for f in ranked if not f.startswith("##")] + [f for f in ranked if f.startswith("##")]


class _PairMerger:
    """Byte-pair-style merging over distinct tokens with incremental pair counts."""

    def __init__(self, token_counts: collections.Counter, alphabet: set[str]):
        # Tokens holding a character outside the alphabet can never be matched whole: skip them.
        self.words = [[t[0]] + ["##" + c for c in t[1:]] for t in sorted(token_counts)]
        self.counts = [token_counts[t] for t in sorted(token_counts)]
        keep = [i for i, w in enumerate(self.words) if all(s in alphabet for s in w)]
        self.words = [self.words[i] for i in keep]
        self.counts = [self.counts[i] for i in keep]
        self.pair_counts: collections.Counter = collections.Counter()
        self.where: dict[Pair, set[int]] = collections.defaultdict(set)
        for i, symbols in enumerate(self.words):
            for pair in zip(symbols, symbols[1:]):
                self.pair_counts[pair] += self.counts[i]
                self.where[pair].add(i)
        self.heap = [(-count, pair) for pair, count in self.pair_counts.items()]
        heapq.heapify(self.heap)

    def best_pair(self, min_frequency: int) -> Pair | None:
        """The most frequent pair (alphabetically first on ties), or None below `min_frequency`."""
        while self.heap:
            negative_count, pair = self.heap[0]
            if self.pair_counts.get(pair, 0) != -negative_count:
                heapq.heappop(self.heap)  # stale entry: the count changed after it was pushed
                continue
            return pair if -negative_count >= min_frequency else None
        return None

    def merge(self, pair: Pair) -> str:
        """Merges `pair` in every token that holds it; returns the new piece."""
        first, second = pair
        piece = first + second[2:]
        changed: set[Pair] = set()
        for i in self.where.pop(pair):
            old = self.words[i]
            new, j = [], 0
            while j < len(old):
                if j + 1 < len(old) and old[j] == first and old[j + 1] == second:
                    new.append(piece)
                    j += 2
                else:
                    new.append(old[j])
                    j += 1
            self.words[i] = new
            self._recount(i, list(zip(old, old[1:])), list(zip(new, new[1:])), changed)
        del self.pair_counts[pair]
        for p in changed:
            if self.pair_counts.get(p, 0) > 0:
                heapq.heappush(self.heap, (-self.pair_counts[p], p))
        return piece

    def _recount(self, i: int, old_pairs: list[Pair], new_pairs: list[Pair], changed: set[Pair]):
        count = self.counts[i]
        for p in old_pairs:
            self.pair_counts[p] -= count
        for p in new_pairs:
            self.pair_counts[p] += count
        for p in set(old_pairs) - set(new_pairs):
            if p in self.where:
                self.where[p].discard(i)
        for p in set(new_pairs):
            self.where[p].add(i)
        changed.update(old_pairs)
        changed.update(new_pairs)


def learn_vocab(token_counts: collections.Counter, vocab_size: int, num_unused: int = 99,
                min_frequency: int = 2) -> list[str]:
    """The vocabulary (list index = id) learned from basic-token counts; see the module docstring.

    Returns exactly `vocab_size` entries unless the text runs out of pairs seen `min_frequency`
    times first, in which case the list is shorter.
    """
    head = ["[PAD]"] + [f"[unused{i}]" for i in range(num_unused)] + list(SPECIAL_AFTER_UNUSED)
    trainable = {t: c for t, c in token_counts.items() if len(t) <= tokenizers.MAX_CHARS_PER_WORD}
    budget = vocab_size - len(head)
    alphabet = _alphabet(collections.Counter(trainable), int(budget * MAX_ALPHABET_SHARE))
    vocab = head + alphabet
    seen = set(vocab)
    merger = _PairMerger(collections.Counter(trainable), set(alphabet))
    while len(vocab) < vocab_size:
        pair = merger.best_pair(min_frequency)
        if pair is None:
            break
        piece = merger.merge(pair)
        if piece not in seen:  # two different merges can spell the same piece
            seen.add(piece)
            vocab.append(piece)
    return vocab


def vocab_stats(tokenizer: tokenizers.FullTokenizer, word_counts: collections.Counter) -> dict:
    """[UNK] rate and coverage of `tokenizer` on the text `word_counts` came from.

    Each distinct word is tokenized once and weighted by its count, which equals tokenizing the
    whole text (`FullTokenizer`'s tokens of a line are the tokens of its words, concatenated).
    """
    words = tokens = unknown = whole = unknown_words = 0
    for word, count in word_counts.items():
        pieces = tokenizer.tokenize(word)
        words += count
        tokens += count * len(pieces)
        unk = pieces.count(tokenizers.UNK_TOKEN)
        unknown += count * unk
        unknown_words += count * (unk > 0)
        whole += count * (len(pieces) == 1)
    return {
        "vocab_size": len(tokenizer.vocab), "words": words, "distinct_words": len(word_counts),
        "tokens": tokens, "unk_tokens": unknown, "unk_rate": unknown / max(tokens, 1),
        "words_with_unk": unknown_words / max(words, 1),
        "single_token_words": whole / max(words, 1), "tokens_per_word": tokens / max(words, 1),
    }


def write_vocab(vocab: Sequence[str], path: str) -> None:
    """Writes one token per line, atomically (a temporary file in the same directory, then rename)."""
    filesystem.makedirs(filesystem.dirname(filesystem.absolute(path)))
    with filesystem.atomic_output(path) as f:
        f.writelines(token + "\n" for token in vocab)


def train_sentencepiece(lines: Iterable[str], model_prefix: str, vocab_size: int,
                        do_lower_case: bool,
                        character_coverage: float = SPM_CHARACTER_COVERAGE) -> str:
    """Trains a unigram SentencePiece model with BERT's special pieces; returns the .model path.

    `[PAD]`=0 and `[UNK]`=1, `[CLS] [SEP] [MASK]` as control symbols (ids 2-4, never produced from
    text); no BOS/EOS. `vocab_size` is a soft limit, so a small text gives a smaller model rather
    than an error. `character_coverage`: the share of the text's characters the model keeps
    (ALBERT's recipe: 0.99995; SentencePiece's own default 0.9995 turns `< > { } ~ $ %` of English
    text into [UNK]). `<prefix>.model` and `<prefix>.vocab` appear atomically, and the same text
    and flags give the same bytes (the model is written from memory: no temporary path is stored
    in it).
    """
    filesystem.makedirs(filesystem.dirname(filesystem.absolute(model_prefix)))
    stripped = (line.strip() for line in lines)
    sentences = (line.lower() if do_lower_case else line for line in stripped if line)
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=sentences, model_writer=model, vocab_size=vocab_size,
        model_type="unigram", pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, pad_piece="[PAD]",
        unk_piece="[UNK]", control_symbols="[CLS],[SEP],[MASK]", hard_vocab_limit=False,
        character_coverage=character_coverage, input_sentence_size=SPM_MAX_SENTENCES,
        shuffle_input_sentence=True, minloglevel=2)
    processor = sentencepiece.SentencePieceProcessor(model_proto=model.getvalue())
    # spm_train's .vocab: piece, tab, score as C++ prints a float (6 significant digits).
    vocab = "".join(f"{processor.id_to_piece(i)}\t{processor.get_score(i):g}\n"
                    for i in range(processor.get_piece_size()))
    filesystem.write_atomically(model_prefix + ".model", model.getvalue())
    filesystem.write_atomically(model_prefix + ".vocab", vocab)
    return model_prefix + ".model"


def build_vocab(config: VocabBuildConfig) -> dict:
    """Builds and writes the vocabulary (and SentencePiece model); returns its statistics.

    The statistics come from tokenizing the input text with `FullTokenizer` over the written file:
    `unk_rate` ([UNK] tokens / tokens), `words_with_unk`, `single_token_words` (words that are one
    token), `tokens_per_word`, counts of words, distinct words and tokens.
    """
    files = expand_input_patterns(config.input_file)
    convert = make_converter(config.chinese_conversion)
    word_counts = count_words(read_lines(files, convert))
    if not word_counts:
        raise UserError(f"--input_file: {', '.join(files)} hold no words to build a vocabulary from")
    token_counts = count_basic_tokens(word_counts, config.do_lower_case)
    vocab = learn_vocab(token_counts, config.vocab_size, config.num_unused, config.min_frequency)
    if len(vocab) < config.vocab_size:
        logging.warning("The text supports only %d entries (no pair occurs --min_frequency=%d "
                        "times any more); wrote a vocabulary of that size instead of %d.",
                        len(vocab), config.min_frequency, config.vocab_size)
    write_vocab(vocab, config.output_file)
    tokenizer = tokenizers.FullTokenizer(config.output_file, config.do_lower_case)
    stats = {"output_file": config.output_file, "input_files": len(files),
             **vocab_stats(tokenizer, word_counts)}
    if config.spm_model_prefix:
        model = train_sentencepiece(read_lines(files, convert), config.spm_model_prefix, config.vocab_size,
                                    config.do_lower_case, config.spm_character_coverage)
        stats["spm_model_file"] = model
        stats["spm_vocab_size"] = len(tokenizers.SentencePieceTokenizer(model).vocab)
    return stats


def summary_lines(stats: dict) -> list[str]:
    """`stats` as `key: value` lines for the console (rates as percentages)."""
    lines = []
    for key, value in stats.items():
        if key in ("unk_rate", "words_with_unk", "single_token_words"):
            value = f"{100 * value:.3f}%"
        elif isinstance(value, float):
            value = f"{value:.3f}"
        lines.append(f"{key}: {value}")
    return lines
