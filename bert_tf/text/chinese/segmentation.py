"""Chinese word segmentation for whole-word masking (`--chinese_segmenter=jieba`).

A segmented line is its words joined by single spaces: exactly the input `--pre_segmented`
expects, so segmenting on the fly gives the same records as segmenting beforehand. jieba leaves
runs of Latin letters and digits whole, so English words stay words (and WordPiece groups their
pieces as usual).
"""

from __future__ import annotations

from typing import Callable

from bert_tf.text.chinese.extra import import_extra

SEGMENTERS = ("jieba",)


def make_segmenter(name: str) -> Callable[[str], str]:
    """The `--chinese_segmenter` function: a line -> its words separated by single spaces.

    jieba's default (precise, HMM) mode is deterministic: the same line gives the same words in
    every process, so worker count and seeds behave as without a segmenter.

    Raises:
      ValueError: unknown name. MissingExtraError: jieba is not installed.
    """
    if name not in SEGMENTERS:
        raise ValueError(f"--chinese_segmenter={name}: expected one of {', '.join(SEGMENTERS)}")
    jieba = import_extra("jieba", f"--chinese_segmenter={name}")
    jieba.setLogLevel(60)  # its dictionary-loading messages are not errors
    tokenizer = jieba.dt  # the process's shared instance: its dictionary loads once, on first use

    def segment(line: str) -> str:
        return " ".join(word for word in tokenizer.cut(line) if not word.isspace())

    return segment


def make_line_preparer(conversion: str = "none", segmenter: str | None = None
                       ) -> Callable[[str], str] | None:
    """Script conversion, then segmentation (a segmenter's dictionary is in simplified script
    for jieba, so converting first segments traditional text better); None when neither is asked.

    Raises:
      ValueError: unknown value. MissingExtraError: the `chinese` extra is not installed.
    """
    from bert_tf.text.chinese.conversion import make_converter

    convert = make_converter(conversion)
    segment = make_segmenter(segmenter) if segmenter else None
    if convert is None or segment is None:
        return convert or segment
    return lambda line: segment(convert(line))
