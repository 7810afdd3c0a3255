"""Seeded, deliberately awkward multilingual text for checking and timing the tokenizers.

Each line mixes English-like words drawn from a Zipf distribution (as in real text, where a few
words repeat constantly) with pieces chosen to hit every branch of the original tokenizer: accents
and combining marks, CJK (including extension blocks and compatibility ideographs), kana, Hangul,
emoji with joiners and skin tones, control and format characters, NUL, U+FFFD, words longer than
200 characters, literal `[CLS]`/`[SEP]`/`[MASK]`, Greek capital sigma, Turkish dotted I, `ß`,
private-use characters, full-width forms, odd whitespace, and random code points from the whole
Unicode range. The same seed always gives the same lines.
"""

from __future__ import annotations

import itertools
import random

# Awkward pieces by theme; `\u` escapes keep invisible characters visible in the source.
EDGE_PIECES: dict[str, tuple[str, ...]] = {
    "accents": ("café", "naïve", "Ångström", "résumé", "Crème brûlée", "Tiếng Việt", "Ÿ", "Øresund",
                "São Paulo", "Ǆemal", "ǅ", "ŉ", "Å", "K"),
    "combining": ("e\u0301", "a\u0308\u0304", "\u0301", "o\u0338", "\u0915\u093f", "n\u0303o",
                  "\u0301\u0302"),
    "cjk": ("中文字符", "漢字テスト", "\u3400\u4db5", "\U00020000\U0002a6df", "\U0002a700\U0002b739",
            "\U0002b740\U0002b81d", "\U0002b820\U0002ceaf", "\U00030000", "\uf900\ufa6a",
            "\U0002f800\U0002fa1d", "东京2020年", "abc中def", "。、「」"),
    "kana_hangul": ("ひらがな", "カタカナー", "한국어 문장", "ｶﾀｶﾅ"),
    "emoji": ("😀", "👍🏽", "👨\u200d👩\u200d👧", "🇺🇸🇯🇵", "❤\ufe0f", "🤷\u200d♀\ufe0f", "a😀b"),
    "control": ("\x00", "\x01", "\x07", "\x1b", "\x7f", "\x85", "\x9f", "\u200b", "\u200e",
                "\ufeff", "\u00ad", "\x0b", "\x0c", "\x1c", "a\x01b", "x\u200by"),
    "replacement": ("\ufffd", "bad\ufffdbyte"),
    "long_words": ("a" * 199, "b" * 200, "c" * 201, "supercalifragilistic" * 12, "é" * 201),
    "specials": ("[CLS]", "[SEP]", "[MASK]", "[UNK]", "[PAD]", "##ing", "[cls]", "word[SEP]next"),
    "scripts": ("Москва", "Ελληνικά", "العربية", "עברית", "हिन्दी", "ไทย", "ქართული", "Ǹ", "ᏣᎳᎩ"),
    "sigma": ("ΟΔΟΣ", "ΣΑΣ.", "Σ", "ΟΔΥΣΣΕΥΣ's", "AΣ'B", "ΣΣ", "όροΣ"),
    "turkish": ("İstanbul", "DİYARBAKIR", "ılık", "I\u0307"),
    "german": ("ß", "Straße", "ẞ", "GROẞ"),
    "private_use": ("\ue000", "\uf8ff", "\U000f0000", "\U00100000", "x\ue000y"),
    "fullwidth": ("，", "！", "？", "（注）", "：；", "ＡＢＣ１２３", "＄"),
    "punctuation": ("…", "‘quoted’", "“double”", "—", "–", "«guillemets»", "¿¡", "3.14", "1,000",
                    "e-mail", "$5", "^_^", "`tick`", "a/b\\c", "x²", "½", "Ⅻ", "ﬁne", "℃"),
    "joiners": ("\u200d", "\u200c", "a\u200db", "क्\u200dष"),
    "whitespace": ("\t", "\n", "\r\n", "\u3000", "\xa0", "\u2003", "\u2028", "\u2029", "\u1680",
                   "\u180e"),
}
_THEMES = sorted(EDGE_PIECES)
# Long words are rare: the reference WordPiece spends cubic time on them.
_THEME_WEIGHTS = [0.1 if theme == "long_words" else 1.0 for theme in _THEMES]
_ODD_SEPARATORS = ("", "\t", "  ", "\xa0", "\u3000", "\u2009")
_SYLLABLES = ("ka", "lo", "mi", "ra", "ten", "sul", "bre", "on", "ar", "vis", "que", "tho", "ing",
              "ed", "st", "pre", "ex", "tion", "al", "er", "un", "der", "mo", "ni", "ca", "ph")


def _lexicon(rng: random.Random, size: int) -> list[str]:
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))))
    return sorted(words)


def _random_code_point(rng: random.Random) -> str:
    """Any scalar value (no surrogates: they cannot be written as UTF-8), biased toward the BMP."""
    while True:
        cp = rng.randrange(0x10000) if rng.random() < 0.7 else rng.randrange(0x110000)
        if not 0xD800 <= cp <= 0xDFFF:
            return chr(cp)


def _word(rng: random.Random, lexicon: list[str], cum_weights: list[float]) -> str:
    word = rng.choices(lexicon, cum_weights=cum_weights)[0]
    roll = rng.random()
    if roll < 0.1:
        word = word.capitalize()
    elif roll < 0.12:
        word = word.upper()
    if rng.random() < 0.08:
        word += rng.choice(",.;:!?)'\"")
    return word


def varied_lines(num_lines: int, seed: int = 0, exotic_rate: float = 0.15,
                 lexicon_size: int = 5000, max_items: int = 24) -> list[str]:
    """`num_lines` lines of 1 to `max_items` items; each is awkward with probability `exotic_rate`.

    Args:
      num_lines: how many lines.
      seed: the random seed; equal seeds give equal lines.
      exotic_rate: probability that an item is an edge-case piece or a random code point rather
        than an ordinary word, and that the separator after it is not a plain space.
      lexicon_size: number of distinct ordinary words (Zipf-distributed).
      max_items: most items (words or pieces) per line.

    Returns:
      A list of str lines (they may hold newlines and other line breaks inside).
    """
    rng = random.Random(seed)
    lexicon = _lexicon(rng, lexicon_size)
    cum_weights = list(itertools.accumulate(1.0 / rank for rank in range(1, lexicon_size + 1)))
    lines = []
    for _ in range(num_lines):
        items = []
        for _ in range(rng.randint(1, max_items)):
            if rng.random() >= exotic_rate:
                items.append(_word(rng, lexicon, cum_weights))
            elif rng.random() < 0.15:
                items.append("".join(_random_code_point(rng) for _ in range(rng.randint(1, 3))))
            else:
                items.append(rng.choice(EDGE_PIECES[rng.choices(_THEMES, _THEME_WEIGHTS)[0]]))
            items.append(rng.choice(_ODD_SEPARATORS) if rng.random() < exotic_rate else " ")
        lines.append("".join(items))
    return lines
