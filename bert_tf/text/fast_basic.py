"""The fast path's first half: the original's basic tokenization done on whole lines, exactly.

The reference (`tokenization.BasicTokenizer`) cleans the text, spaces CJK ideographs, splits on
whitespace, then lower-cases, NFD-normalises, drops combining marks and splits punctuation one
word at a time. Those per-word steps work character by character and never look past whitespace
or an ideograph, so here they run on the whole line (or many lines) with C string operations:
`str.translate` tables and regex classes built once per process from Python's category table,
`str.lower`, `unicodedata.normalize`, `str.split`. A pure-ASCII line needs only `str.lower` and
`str.split` (`ascii_unit_text`). `tests/text/test_tokenization.py` checks every table against the
reference predicates on all code points and every function against the reference on awkward
text. The second half, WordPiece, is `fast_wordpiece.py`.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from typing import Sequence

# CJK Unified Ideographs blocks (not Hangul, Hiragana or Katakana, which are spaced words).
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
              (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def convert_to_unicode(text: str | bytes) -> str:
    """Decodes bytes as UTF-8, dropping invalid bytes (the original's `errors="ignore"`)."""
    if isinstance(text, bytes):
        return text.decode("utf-8", "ignore")
    if isinstance(text, str):
        return text
    raise TypeError(f"expected str or bytes to tokenize, got {type(text).__name__}")


def code_point_runs(code_points: Sequence[int]) -> list[list[int]]:
    """Ascending `code_points` as [first, last] runs of consecutive values."""
    runs: list[list[int]] = []
    for cp in code_points:
        if runs and runs[-1][1] == cp - 1:
            runs[-1][1] = cp
        else:
            runs.append([cp, cp])
    return runs


def _char_class(code_points: Sequence[int]) -> str:
    """A regex character class (without brackets) of ascending `code_points`, as ranges."""
    runs = code_point_runs(code_points)
    return "".join(re.escape(chr(lo)) if lo == hi else f"{re.escape(chr(lo))}-{re.escape(chr(hi))}"
                   for lo, hi in runs)


# Up to this Unicode version, planes 4-13 hold no character and planes 15-16 only private-use ones
# (category Co): the categories the tables need (Cc, Cf, Mn, P*) are all in planes 0-3 and 14.
_PLANES_CHECKED_UP_TO = (16, 0, 0)


def _scanned_code_points() -> list[int]:
    """The code points whose categories can hold a selected one: planes 0-3 and 14, or every
    code point when Python's Unicode is newer than `_PLANES_CHECKED_UP_TO`."""
    if tuple(map(int, unicodedata.unidata_version.split("."))) > _PLANES_CHECKED_UP_TO:
        return list(range(0x110000))
    return list(itertools.chain(range(0x40000), range(0xE0000, 0xF0000)))


@functools.cache
def _selected_code_points() -> dict[str, list[int]]:
    """Every code point the reference predicates select: dropped, combining mark, punctuation.

    Read from Python's own category table with C-level maps (~0.07 s once per process; the table
    changes with Python's Unicode version). A test checks the tables built from them against the
    predicates on every code point.
    """
    code_points = _scanned_code_points()
    categories = list(map(unicodedata.category, map(chr, code_points)))

    def selected(wanted: set[str]) -> list[int]:
        return list(itertools.compress(code_points, map(wanted.__contains__, categories)))

    ascii_punctuation = [cp for cp in range(33, 127) if not chr(cp).isalnum()]
    return {"dropped": sorted({0, 0xFFFD}.union(selected({"Cc", "Cf"})) - {ord("\t"), ord("\n"), ord("\r")}),
            "combining_marks": selected({"Mn"}),
            "punctuation": sorted(set(ascii_punctuation).union(selected({"Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po"})))}


@functools.cache
def _dropped_chars_re() -> re.Pattern:
    return re.compile(f"[{_char_class(_selected_code_points()['dropped'])}]+")


# str.translate tables rather than regex classes: a class holding code points past U+FFFF is
# matched range by range (hundreds of them), a translate table is one dict lookup per character.
@functools.cache
def _deleted_combining_marks() -> dict[int, None]:
    return dict.fromkeys(_selected_code_points()["combining_marks"])


@functools.cache
def _spaced_punctuation() -> dict[int, str]:
    return {cp: f" {chr(cp)} " for cp in _selected_code_points()["punctuation"]}


# ASCII characters the reference drops: NUL and the control characters (category Cc: 0-31 and
# 127) but tab, newline and return.
_ASCII_DROPPED = dict.fromkeys(cp for cp in (*range(32), 127) if chr(cp) not in "\t\n\r")
# Once those are deleted, an ASCII line holds whitespace (space, tab, newline, return), letters and
# digits, and punctuation (every other printable character).
_ASCII_BASIC_TOKEN_RE = re.compile(r"[0-9A-Za-z]+|[!-/:-@\[-`{-~]")


def ascii_basic_tokens(text: str, do_lower_case: bool) -> list[str]:
    """`BasicTokenizer.tokenize(text)` for a pure-ASCII `text`, by C string operations on the line.

    NFD and accent stripping do nothing to ASCII and lower-casing is per character; a dropped
    control character joins its neighbours, so it is deleted before the regex looks for runs of
    letters and digits and single punctuation characters, across whitespace.
    """
    if not text.isprintable():  # tab, newline or a control character
        text = text.translate(_ASCII_DROPPED)
    if do_lower_case:
        text = text.lower()
    return _ASCII_BASIC_TOKEN_RE.findall(text)


# Punctuation that most often opens or ends a word of English text, with spaces around it. Spacing
# it on the whole line (str.replace, C, only when present) before splitting on whitespace keeps
# words like "end." or "(see" out of the word memo; a word that still holds punctuation is split
# once, when memoised.
_WORD_EDGE_PUNCTUATION = tuple((mark, f" {mark} ") for mark in ",.;:()")


def ascii_unit_text(text: str, do_lower_case: bool) -> str:
    """A pure-ASCII `text` as whitespace-separated parts whose basic tokens, concatenated in order,
    are `BasicTokenizer.tokenize(text)`: lower-cased (uncased), common punctuation spaced off.

    Dropped control characters join their neighbours, so they go first; lower-casing and spacing
    punctuation work character by character on ASCII, so doing them on the line is exact (and on
    many lines at once: line breaks are kept).
    """
    if not text.isprintable():  # tab, newline or a control character
        text = text.translate(_ASCII_DROPPED)
    return space_word_edges(text.lower() if do_lower_case else text)


def space_word_edges(text: str) -> str:
    """`text` with the common word-edge punctuation (`_WORD_EDGE_PUNCTUATION`) spaced off."""
    for mark, spaced in _WORD_EDGE_PUNCTUATION:
        if mark in text:
            text = text.replace(mark, spaced)
    return text


def basic_tokens(text: str, do_lower_case: bool) -> list[str]:
    """`BasicTokenizer.tokenize(text)` for any `text`, by C string operations on the whole line.

    The reference's steps after its whitespace split (lower-casing, NFD, dropping combining
    marks, splitting punctuation) work character by character, and the split points it adds
    before them (whitespace, spaced CJK ideographs) are characters that NFD leaves in front of
    any combining mark and that end the final-sigma context of `str.lower`, so doing them on the
    line first gives the same characters. Spacing punctuation and ideographs and splitting on
    whitespace (`str.split` splits on `str.isspace`, as the reference's last split) then gives
    the tokens.
    """
    if text.isascii():
        return ascii_basic_tokens(text, do_lower_case)
    if not text.isprintable() or "\ufffd" in text:
        text = _dropped_chars_re().sub("", text)
    if do_lower_case:
        text = unicodedata.normalize("NFD", text.lower())
        if not text.isascii():
            text = text.translate(_deleted_combining_marks())
    return _space_cjk(text.translate(_spaced_punctuation())).split()


# A capturing split keeps each ideograph as a part of its own; joining the parts with spaces
# spaces them in C (a substitution template would be expanded once per call in Python).
_CJK_SPLIT_RE = re.compile("([" + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in CJK_RANGES) + "])")


# Every CJK ideograph is at or above U+3400: one range is a cheaper first check than the blocks.
_MAY_HOLD_CJK_RE = re.compile("[\u3400-\U0010ffff]")


def _space_cjk(text: str) -> str:
    """`text` with a space on each side of every CJK ideograph."""
    if text.isascii() or not _MAY_HOLD_CJK_RE.search(text):
        return text
    parts = _CJK_SPLIT_RE.split(text)
    return " ".join(parts) if len(parts) > 1 else text


def split_words(text: str | bytes) -> list[str]:
    """Words of the reference's cleaned, CJK-spaced text, split on whitespace: the same list.

    Turning whitespace into spaces is skipped: every character the reference turns into a space
    (`_is_whitespace`) is already a separator for `str.split` (`str.isspace`).
    """
    if text.__class__ is not str:
        text = convert_to_unicode(text)
    if text.isascii():  # no CJK; every ASCII character `str.split` splits on is whitespace or dropped
        return (text if text.isprintable() else text.translate(_ASCII_DROPPED)).split()
    # Control characters are never printable, so the cheap C checks skip most lines.
    if not text.isprintable() or "\ufffd" in text:
        text = _dropped_chars_re().sub("", text)
    return _space_cjk(text).split()


def lines_word_text(text: str) -> str:
    """Many lines of `text` cleaned (dropped characters deleted) and CJK-spaced, line breaks
    kept: the words of each line are `split_words(line)`."""
    if "\ufffd" in text:
        text = text.replace("\ufffd", "")
    # Unless something else than line breaks and tabs is not printable, no character is dropped
    # (and the character class need not be built); otherwise only such lines go through it.
    if not text.isprintable() and not text.replace("\n", "").replace("\t", "").replace("\r", "").isprintable():
        dropped = _dropped_chars_re()
        text = "\n".join(line if line.isprintable() else dropped.sub("", line) for line in text.split("\n"))
    return _space_cjk(text)
