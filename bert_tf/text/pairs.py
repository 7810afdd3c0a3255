"""Sentence pairs: how the original trims `[CLS] a [SEP] b [SEP]` to a sequence length.

Shared by the classifier's features and feature extraction (the original repeats it as
`_truncate_seq_pair` in run_classifier.py and extract_features.py).
"""

from __future__ import annotations


def truncate_pair_lengths(len_a: int, len_b: int, max_total: int) -> tuple[int, int]:
    """Lengths kept by the original's pair trimming: drop the last token of the longer side
    (of `b` on a tie) until the pair fits in `max_total` tokens.

    Returns the same result as that loop without running it token by token.
    """
    excess = len_a + len_b - max_total
    if excess <= 0:
        return len_a, len_b
    first = min(abs(len_a - len_b), excess)  # only the longer side shrinks until they are equal
    if len_a > len_b:
        len_a -= first
    else:
        len_b -= first
    rest = excess - first  # then they alternate, b first (a tie trims b)
    return len_a - rest // 2, len_b - (rest + 1) // 2
