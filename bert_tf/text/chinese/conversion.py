"""Traditional <-> simplified Chinese conversion with OpenCC (`--chinese_conversion`).

`t2s` is CLUE's normalisation for Chinese BERT: traditional characters become simplified ones
(頭髮 -> 头发, 乾燥 -> 干燥). `s2t` is the reverse and phrase-aware, where one simplified character
stands for several traditional ones (头发 -> 頭髮 but 发展 -> 發展; 干燥 -> 乾燥).
"""

from __future__ import annotations

from typing import Callable

from bert_tf.text.chinese.extra import import_extra

CONVERSIONS = ("none", "t2s", "s2t")


def define_chinese_conversion_flag(flag_values=None) -> None:
    """--chinese_conversion, for every script that reads text (absl is imported only here)."""
    from absl import flags

    flags.DEFINE_enum("chinese_conversion", "none", list(CONVERSIONS), "Convert Chinese script before "
                      "tokenizing: t2s = traditional to simplified, s2t the reverse (OpenCC; needs the "
                      "'chinese' extra). Fine-tuning outputs keep the input's script.",
                      flag_values=flag_values or flags.FLAGS)


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


class ConvertingTokenizer:
    """A fine-tuning tokenizer that converts the script of every text before tokenizing it.

    The examples keep their original text, so predictions (SQuAD answers, tagged files) come out
    in the script of the input; only what the model reads is converted. Every other attribute is
    the wrapped tokenizer's.

    Args:
      tokenizer: a `FullTokenizer` or `SentencePieceTokenizer`.
      conversion: a `--chinese_conversion` value other than "none".
    """

    def __init__(self, tokenizer, conversion: str):
        self.tokenizer = tokenizer
        self.conversion = conversion
        self.convert_text = make_converter(conversion)

    def tokenize(self, text: str) -> list[str]:
        return self.tokenizer.tokenize(self.convert_text(text))

    def __getattr__(self, name: str):
        return getattr(self.tokenizer, name)


def with_conversion(tokenizer, conversion: str):
    """`tokenizer` itself for "none", else a `ConvertingTokenizer` around it."""
    check_conversion(conversion)
    return tokenizer if conversion == "none" else ConvertingTokenizer(tokenizer, conversion)
