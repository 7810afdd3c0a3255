"""Chinese test and benchmark text made from jieba's own dictionary (no corpus to download).

Sentences are words drawn by their dictionary frequency, so a segmenter meets real words in
realistic proportions (the grammar is random). Needs the `chinese` extra.
"""

from __future__ import annotations

import functools
import os

import numpy as np

from bert_tf.text.chinese.extra import import_extra

_MIN_FREQUENCY = 1000  # common words only (about 15,000 of jieba's 349,000)


@functools.lru_cache(maxsize=1)
def _common_words() -> tuple[list[str], np.ndarray]:
    jieba = import_extra("jieba", "Chinese sample text")
    words, weights = [], []
    with open(os.path.join(os.path.dirname(jieba.__file__), "dict.txt"), encoding="utf-8") as f:
        for line in f:
            word, frequency, _ = line.split(" ")
            if int(frequency) >= _MIN_FREQUENCY and all("\u4e00" <= c <= "\u9fff" for c in word):
                words.append(word)
                weights.append(int(frequency))
    weights = np.asarray(weights, np.float64)
    return words, weights / weights.sum()


def generate_chinese_corpus(num_docs: int, seed: int = 0, english_share: float = 0.0) -> str:
    """Documents of 2-8 sentences, one per line, a blank line between documents.

    Args:
      num_docs: documents to write.
      seed: the same seed gives the same text.
      english_share: the share of words replaced by an English word (mixed-language text).
    """
    words, probabilities = _common_words()
    english = ["BERT", "model", "training", "Google", "tokenizer", "pretraining", "embeddings", "wordpiece"]
    rng = np.random.default_rng(seed)
    documents = []
    for _ in range(num_docs):
        sentences = []
        for _ in range(rng.integers(2, 9)):
            picks = [words[i] for i in rng.choice(len(words), rng.integers(4, 16), p=probabilities)]
            # English words keep spaces around them, as in real mixed text
            picks = [f" {english[rng.integers(len(english))]} " if rng.random() < english_share else w
                     for w in picks]
            cut = int(rng.integers(1, len(picks)))
            sentences.append(("".join(picks[:cut]).strip() + "，" + "".join(picks[cut:]).strip() + "。")
                             .replace("  ", " "))
        documents.append("\n".join(sentences))
    return "\n\n".join(documents) + "\n"
