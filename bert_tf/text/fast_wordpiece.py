"""Exact fast building blocks of the default WordPiece path: a forward-scanning greedy matcher
and a bounded memo. Neither changes results; `tests/text/test_tokenization.py` checks both against the
reference implementation in `bert_tf.text.tokenizers`.
"""

from __future__ import annotations

from typing import Callable


class ForwardWordpiece:
    """Greedy longest-match-first WordPiece that scans each piece forward instead of backward.

    `_heads` maps every prefix of every vocab token to whether it is itself a token; `_tails` does
    the same for the `##` tokens with the `##` removed, for the pieces after the first. The scan
    stops at the first candidate that no token starts with, so no longer candidate can be a token:
    the last token seen is the longest match, the one the reference's backward scan returns, after
    about as many lookups as the piece has characters instead of as many as the word has left.
    """

    def __init__(self, vocab: "dict[str, int]", unk_token: str, max_input_chars_per_word: int):
        self._heads = self._prefix_table([token for token in vocab if token])
        self._tails = self._prefix_table([token[2:] for token in vocab if token.startswith("##") and token[2:]])
        self._unk = (unk_token,)
        self._max_chars = max_input_chars_per_word

    @staticmethod
    def _prefix_table(tokens: "list[str]") -> "dict[str, bool]":
        """Every proper prefix of every token -> False, then every token -> True."""
        table = dict.fromkeys([token[:end] for token in tokens for end in range(1, len(token))], False)
        table.update(dict.fromkeys(tokens, True))
        return table

    def tokenize_word(self, word: str) -> tuple[str, ...]:
        """Pieces of one basic token, as `WordpieceTokenizer.tokenize_word` returns them."""
        n = len(word)
        if n > self._max_chars:
            return self._unk
        pieces, table, start = [], self._heads, 0
        while start < n:
            if table.get(word[start:]):  # the rest is one token: the longest match, found at once
                match_end = n
            else:
                match_end = 0
                for end in range(start + 1, n):
                    is_token = table.get(word[start:end])
                    if is_token is None:  # no token starts with this: none is longer
                        break
                    if is_token:
                        match_end = end
                if not match_end:
                    return self._unk
            pieces.append(word[:match_end] if start == 0 else "##" + word[start:match_end])
            table, start = self._tails, match_end
        return tuple(pieces)


class WordMemo(dict):
    """word -> tuple of its tokens, computed on first use; starts over when `max_size` is reached."""

    def __init__(self, compute: Callable[[str], tuple], max_size: int):
        super().__init__()
        self._compute = compute
        self._max_size = max_size

    def __missing__(self, word: str) -> tuple:
        if len(self) >= self._max_size:
            self.clear()
        value = self[word] = self._compute(word)
        return value
