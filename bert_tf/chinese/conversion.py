"""Traditional <-> simplified Chinese conversion with OpenCC (`--chinese_conversion`).

`t2s` is CLUE's normalisation for Chinese BERT: traditional characters become simplified ones
(頭髮 -> 头发, 乾燥 -> 干燥). `s2t` is the reverse and phrase-aware, where one simplified character
stands for several traditional ones (头发 -> 頭髮 but 发展 -> 發展; 干燥 -> 乾燥).
"""

from __future__ import annotations

from typing import Callable

from bert_tf.chinese.extra import import_extra

CONVERSIONS = ("none", "t2s", "s2t")


def check_conversion(name: str) -> None:
    """Raises a one-line error unless `name` is a known `--chinese_conversion` value."""
    if name not in CONVERSIONS:
        raise ValueError(f"--chinese_conversion={name}: expected one of {', '.join(CONVERSIONS)}")


def make_converter(name: str) -> Callable[[str], str] | None:
    """The `--chinese_conversion` function text -> text, or None for "none".

    Raises:
      ValueError: unknown name. MissingExtraError: OpenCC is not installed.
    """
    check_conversion(name)
    if name == "none":
        return None
    opencc = import_extra("opencc", f"--chinese_conversion={name}")
    return opencc.OpenCC(name).convert


def make_length_preserving_converter(name: str) -> Callable[[str, str], str] | None:
    """Like `make_converter`, for text whose character offsets must survive (SQuAD answers).

    OpenCC converts phrase by phrase and may change a text's length (rarely: a few phrases map to
    a different number of characters); the returned function `convert(text, where)` stops with an
    error naming `where` when that happens, instead of shifting every later offset.
    """
    convert = make_converter(name)
    if convert is None:
        return None

    def convert_checked(text: str, where: str) -> str:
        converted = convert(text)
        if len(converted) != len(text):
            raise ValueError(f"{where}: --chinese_conversion={name} changes the text's length "
                             f"({len(text)} -> {len(converted)} characters), which would shift the "
                             f"answer offsets; convert this file before use or drop the flag")
        return converted

    return convert_checked
