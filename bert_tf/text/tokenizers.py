"""Tokenizers with the original BERT's exact behaviour, plus SentencePiece.

Two paths give the same tokens for every input:

* the **reference path** (`BasicTokenizer` + `WordpieceTokenizer`, or `FullTokenizer(fast=False)`)
  follows the original character by character and is the readable definition of the behaviour;
* the **fast path** (`FullTokenizer`'s default) computes the same function in fewer steps.
  The reference's per-word steps (lower-casing, NFD, dropping combining marks, splitting
  punctuation) work character by character and never look past whitespace or a CJK ideograph,
  so the fast path does them on the whole line with C string operations over tables built from
  Python's category table (`text/fast_basic.py`; tests check them on every code point); a pure-ASCII
  line (most lines of English) needs only `str.lower` and `str.split`. A word's tokens depend on
  the word only, so each word's pieces are memoised (worked out once, WordPiece by a matcher that
  finds the same longest matches scanning forward: `text/fast_wordpiece.py`) and afterwards cost one
  dict lookup.

Every public name of the original's tokenization.py is here with its behaviour
(`convert_to_unicode`, `printable_text`, `load_vocab`, `convert_by_vocab`, `convert_tokens_to_ids`,
`convert_ids_to_tokens`, `whitespace_tokenize`, the three tokenizer classes,
`validate_case_matches_checkpoint`). `create_tokenizer` picks WordPiece (`--vocab_file`) or SentencePiece (`--spm_model_file`);
`validate_case_matches_checkpoint` warns when `--do_lower_case` contradicts the checkpoint's name.
"""

from __future__ import annotations

import collections
import functools
import itertools
import os
import re
import unicodedata
from typing import Iterable, Mapping, Sequence

import sentencepiece
from absl import logging

from bert_tf import filesystem
from bert_tf.errors import MissingFileError, UserError
from bert_tf.text.fast_basic import (CJK_RANGES, ascii_unit_text, basic_tokens, convert_to_unicode,
                                     lines_word_text, space_word_edges, split_words)
from bert_tf.text.fast_wordpiece import ForwardWordpiece, WordMemo

# Words longer than this become [UNK], as in the original.
MAX_CHARS_PER_WORD = 200
UNK_TOKEN = "[UNK]"
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# Whole-word memo of the fast path; cleared when full (~40 MB of short English words).
DEFAULT_CACHE_SIZE = 200_000

def load_vocab(vocab_file: str | os.PathLike) -> "collections.OrderedDict[str, int]":
    """Reads `vocab.txt`: one token per line, id = line number (surrounding whitespace stripped).

    A token on two lines (blank lines aside), an empty file and a UTF-16/32 file are refused with
    the file named.
    """
    path = os.fspath(vocab_file)
    try:
        if filesystem.scheme(path):  # gs://, s3://, ...
            with filesystem.open_read(path) as f:
                entries = _vocab_entries(f.read(), path)
        else:
            stat = os.stat(path)
            entries = _local_vocab_entries(path, stat.st_size, stat.st_mtime_ns)
    except FileNotFoundError:
        raise MissingFileError(f"{vocab_file}: vocabulary file not found (check --vocab_file)") from None
    if not entries:
        raise UserError(f"{vocab_file}: vocabulary file is empty")
    vocab = collections.OrderedDict(zip(entries, itertools.count()))
    # Blank lines (the empty token, which text never produces) keep their ids, as the original's.
    if len(vocab) != len(entries) and len(set(entries) - {""}) != len(entries) - entries.count(""):
        raise UserError(f"{vocab_file}: {_duplicates(entries)}; each token must be on one line "
                        "only (a repeated token leaves an id that is never used, and the ids "
                        "reach past the model's vocab_size)")
    return vocab


def _duplicates(tokens: tuple[str, ...]) -> str:
    """'2 repeated tokens, e.g. 'x' on lines 5 and 9' (one-based line numbers)."""
    first_line: dict[str, int] = {}
    repeats = []
    for line, token in enumerate(tokens, 1):
        if token and token in first_line:
            repeats.append((token, first_line[token], line))
        first_line.setdefault(token, line)
    token, first, again = repeats[0]
    return f"{len(repeats)} repeated tokens, e.g. {token!r} on lines {first} and {again}"


def check_special_tokens(vocab, needed: Iterable[str], source: str, purpose: str) -> None:
    """Raises `UserError` naming `source` if `vocab` lacks any of the `needed` tokens."""
    missing = [token for token in needed if token not in vocab]
    if missing:
        raise UserError(f"{source}: the vocabulary lacks {', '.join(missing)}, which {purpose} "
                        "needs; use the vocabulary the model was trained with (or build one "
                        "with build_vocab.py)")


def check_vocab_size(vocab, vocab_size: int, source: str) -> None:
    """Raises `UserError` if the vocabulary has ids the model's embedding table lacks."""
    size = max(vocab.values()) + 1  # blank lines hold ids too
    if size > vocab_size:
        raise UserError(f"{source}: {size} tokens, but the model's config has vocab_size "
                        f"{vocab_size}: ids from {vocab_size} on have no embedding; use the "
                        "vocabulary the model was trained with (or a config that fits it)")


@functools.lru_cache(maxsize=4)
def _local_vocab_entries(path: str, size: int, mtime_ns: int) -> tuple[str, ...]:
    # Keyed by size and modification time, so an edited file is read again. A data-conversion run
    # reads the vocabulary to check it, then in every worker: forked workers inherit this cache.
    del size, mtime_ns
    with open(path, "rb") as f:
        return _vocab_entries(f.read(), path)


def _vocab_entries(data: bytes, path: str = "") -> tuple[str, ...]:
    """The token of each line of the raw file (stripped), as reading it line by line gives them.

    Decoding the whole file at once drops the same invalid bytes as decoding each line: a newline
    byte is never part of a multi-byte UTF-8 sequence. A UTF-16/32 file is refused.
    """
    filesystem.check_text_encoding(path, data[:4096], "--vocab_file")
    lines = data.split(b"\n")
    if lines and not lines[-1]:  # a final newline ends the last line, it does not start one
        lines.pop()
    tokens = convert_to_unicode(b"\n".join(lines)).split("\n") if lines else []
    return tuple(map(str.strip, tokens))


def whitespace_tokenize(text: str) -> list[str]:
    return text.strip().split()


# ----------------------------------------------------------------------------- reference path
def _is_whitespace(char: str) -> bool:
    # \t, \n and \r are control characters by category but whitespace to the original.
    if char in (" ", "\t", "\n", "\r"):
        return True
    return unicodedata.category(char) == "Zs"


def _is_control(char: str) -> bool:
    if char in ("\t", "\n", "\r"):
        return False
    # Only Cc and Cf: private-use (Co), unassigned (Cn) and surrogates (Cs) are kept.
    return unicodedata.category(char) in ("Cc", "Cf")


def _is_dropped(char: str) -> bool:
    """Characters the original deletes before anything else: NUL, U+FFFD and control characters."""
    return char == "\x00" or char == "\ufffd" or _is_control(char)


def _is_punctuation(char: str) -> bool:
    cp = ord(char)
    # All non-letter, non-digit ASCII counts as punctuation, e.g. "^", "$", "`".
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_cjk_ideograph(cp: int) -> bool:
    for lo, hi in CJK_RANGES:
        if lo <= cp <= hi:
            return True
    return False


class BasicTokenizer:
    """Cleans text, splits on whitespace and punctuation, spaces CJK ideographs, optionally lower-cases.

    The reference implementation: one Python step per character, as the original.
    """

    def __init__(self, do_lower_case: bool = True):
        self.do_lower_case = do_lower_case

    def tokenize(self, text: str | bytes) -> list[str]:
        text = self._clean_text(convert_to_unicode(text))
        text = self._space_cjk(text)
        return [token for word in whitespace_tokenize(text) for token in self.split_word(word)]

    def split_word(self, word: str) -> list[str]:
        """Basic tokens of one whitespace-free word: lower-case, strip accents, split punctuation."""
        if self.do_lower_case:
            word = self._strip_accents(word.lower())
        return whitespace_tokenize(" ".join(self._split_punctuation(word)))

    @staticmethod
    def _strip_accents(text: str) -> str:
        return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")

    @staticmethod
    def _split_punctuation(word: str) -> list[str]:
        pieces: list[list[str]] = []
        start_new = True
        for char in word:
            if _is_punctuation(char):
                pieces.append([char])
                start_new = True
            else:
                if start_new:
                    pieces.append([])
                start_new = False
                pieces[-1].append(char)
        return ["".join(p) for p in pieces]

    @staticmethod
    def _space_cjk(text: str) -> str:
        out = []
        for char in text:
            if _is_cjk_ideograph(ord(char)):
                out.extend((" ", char, " "))
            else:
                out.append(char)
        return "".join(out)

    @staticmethod
    def _clean_text(text: str) -> str:
        out = []
        for char in text:
            if _is_dropped(char):
                continue
            out.append(" " if _is_whitespace(char) else char)
        return "".join(out)


class WordpieceTokenizer:
    """Greedy longest-match-first WordPiece with `##` continuations (reference implementation)."""

    def __init__(self, vocab: "dict[str, int]", unk_token: str = UNK_TOKEN,
                 max_input_chars_per_word: int = MAX_CHARS_PER_WORD):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word

    def tokenize(self, text: str) -> list[str]:
        output: list[str] = []
        for word in whitespace_tokenize(convert_to_unicode(text)):
            output.extend(self.tokenize_word(word))
        return output

    def tokenize_word(self, word: str) -> list[str]:
        """Pieces of one whitespace-free word, or [UNK] when it is too long or cannot be matched."""
        if len(word) > self.max_input_chars_per_word:
            return [self.unk_token]
        pieces: list[str] = []
        start = 0
        while start < len(word):
            end = len(word)
            match = None
            while start < end:
                candidate = word[start:end] if start == 0 else "##" + word[start:end]
                if candidate in self.vocab:
                    match = candidate
                    break
                end -= 1
            if match is None:
                return [self.unk_token]
            pieces.append(match)
            start = end
        return pieces


# ----------------------------------------------------------------------------- conversions
def printable_text(text: str | bytes) -> str:
    """`text` as a str for printing or logging (bytes decoded as UTF-8, bad bytes dropped)."""
    return convert_to_unicode(text)


def convert_by_vocab(vocab: Mapping, items: Iterable) -> list:
    """Looks every item up in `vocab` (token -> id, or id -> token); a missing item is a KeyError."""
    return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab: Mapping[str, int], tokens: Iterable[str]) -> list[int]:
    return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab: Mapping[int, str], ids: Iterable[int]) -> list[str]:
    return convert_by_vocab(inv_vocab, ids)


# ----------------------------------------------------------------------------- tokenizers
class _VocabConversions:
    """Token <-> id conversions over `self.vocab` (token -> id) and `self.inv_vocab` (id -> token)."""

    vocab: "collections.OrderedDict[str, int]"
    inv_vocab: dict[int, str]

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> list[int]:
        return convert_by_vocab(self.vocab, tokens)

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        return convert_by_vocab(self.inv_vocab, ids)

    def missing_special_tokens(self, required: Sequence[str] = ("[CLS]", "[SEP]", "[MASK]")) -> list[str]:
        return [t for t in required if t not in self.vocab]


class FullTokenizer(_VocabConversions):
    """Basic tokenization then WordPiece: the original `FullTokenizer`.

    Args:
      vocab_file: `vocab.txt`, one token per line.
      do_lower_case: lower-case and strip accents (uncased models).
      fast: memoised fast path (default); `False` runs the per-character reference path. Both
        give identical tokens.
      cache_size: most distinct words the fast path remembers at once.
    """

    def __init__(self, vocab_file: str | os.PathLike, do_lower_case: bool = True, fast: bool = True,
                 cache_size: int = DEFAULT_CACHE_SIZE):
        self.vocab = load_vocab(vocab_file)
        check_special_tokens(self.vocab, [UNK_TOKEN], os.fspath(vocab_file), "WordPiece")
        self.inv_vocab = {index: token for token, index in self.vocab.items()}
        self.do_lower_case = do_lower_case
        self.fast = fast
        self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
        self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)
        # Basic token -> its pieces, starting with the vocabulary's whole-word tokens (a token's
        # longest match is itself), so a first pass works out fewer tokens; and word -> its
        # pieces, so a line costs one lookup per word and the basic-token steps run once per word.
        matcher = ForwardWordpiece(self.vocab, UNK_TOKEN, MAX_CHARS_PER_WORD)
        self._memo = WordMemo(matcher.tokenize_word, cache_size)
        whole_words = [token for token in itertools.islice(self.vocab, cache_size // 2)
                       if not token.startswith("##") and len(token) <= MAX_CHARS_PER_WORD]
        self._memo.update((token, (token,)) for token in whole_words)
        self._word_memo = WordMemo(self.word_pieces, cache_size)
        # ... and with the whole-word tokens that are their own only basic token (ASCII letters
        # and digits, lower-case when uncased): most words of English text.
        self._word_memo.update((token, (token,)) for token in whole_words if token.isascii() and token.isalnum()
                               and not (do_lower_case and token != token.lower()))

    def tokenize(self, text: str | bytes) -> list[str]:
        """WordPiece tokens of `text` (str, or bytes decoded as UTF-8 ignoring errors)."""
        if not self.fast:
            return [piece for token in self.basic_tokenizer.tokenize(text)
                    for piece in self.wordpiece_tokenizer.tokenize(token)]
        # map + chain flatten in C: no Python step per word once its pieces are memoised.
        return list(itertools.chain.from_iterable(map(self._word_memo.__getitem__, self.split_units(text))))

    def word_pieces(self, word: str) -> tuple[str, ...]:
        """The tokens of one part that `split_units` or `unit_text` gives (whitespace-free, no
        dropped characters): `tokenize(word)` without splitting it again, and without keeping
        it in the word memo (for callers that keep their own, per part). Its basic tokens'
        pieces are memoised."""
        if word.isascii() and word.isalnum():  # its own only basic token (lower-cased when uncased)
            return self._memo[word.lower() if self.do_lower_case else word]
        return tuple(itertools.chain.from_iterable(map(self._memo.__getitem__,
                                                       basic_tokens(word, self.do_lower_case))))

    def split_units(self, text: str | bytes) -> list[str]:
        """Parts of one line `text` whose tokens, each part tokenized on its own, concatenated,
        are the tokens of `text`: the words of a pure-ASCII line, lower-cased (uncased) with the
        common word-edge punctuation spaced off (`ascii_unit_text`), the `split_words` words of
        any other. Callers may memoise `tokenize(unit)` (or `word_pieces(unit)`) per unit."""
        if text.__class__ is not str:
            text = convert_to_unicode(text)
        if text.isascii():  # most lines of English
            return ascii_unit_text(text, self.do_lower_case).split()
        return split_words(text)

    def unit_text(self, text: str) -> str:
        """Many lines at once: `text` with valid units (as `split_units` defines them) separated
        by whitespace and its line breaks kept (`unit_text(t).split("\n")[i].split()` are units of
        line i of `t`). Text that is not pure ASCII is cleaned and CJK-spaced
        (`lines_word_text`), lower-cased when uncased and its word-edge punctuation spaced off,
        like ASCII text, so that fewer distinct units reach the memo.

        Lower-casing the whole text is exact: `str.lower`'s only context rule (final sigma)
        stops at whitespace and ideographs, and `str.lower` is idempotent (checked on every code
        point by the tests), so lower-casing a unit again (`basic_tokens`) changes nothing.
        """
        if text.isascii():
            return ascii_unit_text(text, self.do_lower_case)
        text = lines_word_text(text)
        return space_word_edges(text.lower() if self.do_lower_case else text)


class SentencePieceTokenizer(_VocabConversions):
    """Tokenizes with a SentencePiece model; same interface as `FullTokenizer`.

    `build_vocab.py --spm_model_prefix` trains models whose special pieces carry BERT's names
    (`[PAD]`=0, `[UNK]`=1, `[CLS]`, `[SEP]`, `[MASK]` as control symbols), so the scripts that look
    them up work unchanged. Control symbols never come out of text: a literal `[CLS]` written in
    the text is split like any other word, as with WordPiece.

    Args:
      spm_model_file: the `.model` file.
      do_lower_case: lower-case text before encoding (train the model on lower-cased text then).

    Attributes:
      vocab: OrderedDict piece -> id, in id order. inv_vocab: dict id -> piece.
      unk_token: the model's unknown piece; text the model cannot encode becomes this piece.
    """

    def __init__(self, spm_model_file: str | os.PathLike, do_lower_case: bool = False):
        path = os.fspath(spm_model_file)
        if not filesystem.isfile(path):
            raise MissingFileError(f"{path}: SentencePiece model not found (check --spm_model_file)")
        self.sp_model = sentencepiece.SentencePieceProcessor()
        try:
            self.sp_model.LoadFromSerializedProto(filesystem.read_bytes(path))
        except (OSError, RuntimeError) as e:
            raise UserError(f"{path}: not a SentencePiece model file ({e}); --spm_model_file "
                             "takes the .model file that spm_train wrote") from None
        pieces = [self.sp_model.id_to_piece(i) for i in range(self.sp_model.get_piece_size())]
        self.vocab: collections.OrderedDict[str, int] = collections.OrderedDict(
            (piece, index) for index, piece in enumerate(pieces))
        self.inv_vocab = dict(enumerate(pieces))
        self.unk_token = pieces[self.sp_model.unk_id()]
        self.do_lower_case = do_lower_case

    def tokenize(self, text: str | bytes) -> list[str]:
        """Pieces of `text` (bytes are decoded as UTF-8, ignoring errors, as `FullTokenizer` does)."""
        text = convert_to_unicode(text)
        if self.do_lower_case:
            text = text.lower()
        # Encoding to ids maps anything the model cannot encode to its unknown piece, so every
        # token returned is in `vocab` (encoding to pieces would return the raw characters).
        return [self.inv_vocab[i] for i in self.sp_model.encode(text)]


def create_tokenizer(vocab_file: str | os.PathLike | None = None,
                     spm_model_file: str | os.PathLike | None = None,
                     do_lower_case: bool = True) -> FullTokenizer | SentencePieceTokenizer:
    """The tokenizer every script uses: WordPiece from `--vocab_file` or SentencePiece from
    `--spm_model_file` (exactly one of the two)."""
    if bool(vocab_file) == bool(spm_model_file):
        given = "both were given" if vocab_file else "neither was given"
        raise UserError("Pass exactly one of --vocab_file (a WordPiece vocab.txt) and "
                         f"--spm_model_file (a SentencePiece .model); {given}.")
    if spm_model_file:
        return SentencePieceTokenizer(spm_model_file, do_lower_case=do_lower_case)
    return FullTokenizer(vocab_file, do_lower_case=do_lower_case)


# Released models whose names do not say "uncased" although they were trained on lower-cased text.
_UNCASED_RELEASES = ("multilingual_L-12_H-768_A-12", "chinese_L-12_H-768_A-12")


def validate_case_matches_checkpoint(do_lower_case: bool,
                                     init_checkpoint: str | os.PathLike | None) -> str | None:
    """Warns when `do_lower_case` contradicts the casing that the checkpoint's name announces.

    The name looked at is the checkpoint's directory (`.../uncased_L-12_H-768_A-12/bert_model.ckpt`)
    or the path itself when it is a directory (a Hugging Face model directory, a run directory).
    Names with "uncased" (or the released multilingual/Chinese models) call for lower-casing,
    names with "cased" (e.g. `cased_L-12...`, `multi_cased_...`, `bert-base-cased`) for none.
    The original raised an error for its released names; a warning lets deliberate choices pass.

    Returns:
      The warning text (also logged), or None when the setting is consistent or the name says
      nothing about casing.
    """
    if not init_checkpoint:
        return None
    path = os.fspath(init_checkpoint).rstrip("/\\")
    name = filesystem.basename(path if filesystem.isdir(path) else filesystem.dirname(path))
    lowered = name.lower()
    if re.search(r"(?<![a-z])uncased(?![a-z])", lowered) or name in _UNCASED_RELEASES:
        expected = True
    elif re.search(r"(?<![a-z])cased(?![a-z])", lowered):
        expected = False
    else:
        return None
    if do_lower_case == expected:
        return None
    message = (f"--do_lower_case={do_lower_case} but --init_checkpoint={os.fspath(init_checkpoint)} "
               f"looks like {'an uncased' if expected else 'a cased'} model ({name!r}); pass "
               f"--do_lower_case={expected} so that text is cased as in pre-training (a mismatch "
               "silently ruins results). Ignore this if the directory name is misleading.")
    logging.warning(message)
    return message
