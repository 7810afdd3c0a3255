"""The original BERT's tokenization as TensorFlow ops, so a SavedModel takes raw text.

`FullTokenizer` (the original's `BasicTokenizer` + `WordpieceTokenizer`) works character by
character in Python. Here the same steps run on a batch of strings in the graph, in the same
order, with character classes read from Python's own category table at export time (so the graph
selects exactly the characters `text/tokenizers.py` selects, whatever Unicode version the TensorFlow
build's RE2 or ICU carry):

1. drop NUL, U+FFFD and control/format characters (Cc, Cf; not tab, newline, return);
2. whitespace (space, tab, newline, return, Zs, and the line/paragraph separators `str.split`
   splits on) becomes a space;
3. CJK ideographs (`fast_basic.CJK_RANGES`) are spaced;
4. uncased models only: lower-case (`StringLower`, ICU full case mapping as `str.lower`),
   NFD (`NormalizeUTF8`, tensorflow-text), drop combining marks (Mn);
5. punctuation (ASCII non-alphanumerics and P*) is spaced; the text splits on spaces;
6. a word longer than 200 characters becomes [UNK]; other words go through tensorflow-text's
   WordPiece op (`WordpieceTokenizeWithOffsets`: greedy longest match first, `##`
   continuations, the whole word [UNK] when a piece is missing), as the original.

Each step maps characters to characters and never looks past whitespace, so running it on the
whole text equals the original's per-word loop (the argument of `text/fast_basic.py`); the tests
compare the tokens with `FullTokenizer`'s on the bundled corpora, multilingual stress text and
every code point class. The ops used are all registered by TensorFlow Serving's model server
(`op_allowlist.py`).
"""

from __future__ import annotations

import functools
import unicodedata
from typing import Mapping, Sequence

import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.text.fast_basic import (CJK_RANGES, _scanned_code_points, _selected_code_points,
                                     code_point_runs)
from bert_tf.text.tokenizers import MAX_CHARS_PER_WORD, UNK_TOKEN

# A word of at most MAX_CHARS_PER_WORD characters holds at most 4 bytes per character in UTF-8.
_MAX_BYTES_PER_WORD = 4 * MAX_CHARS_PER_WORD


def _re2_class(code_points: Sequence[int]) -> str:
    """An RE2 character class `[...]` of ascending `code_points`, as `\\x{..}` ranges."""
    parts = (f"\\x{{{lo:X}}}" if lo == hi else f"\\x{{{lo:X}}}-\\x{{{hi:X}}}"
             for lo, hi in code_point_runs(code_points))
    return "[" + "".join(parts) + "]"


@functools.cache
def character_classes() -> dict[str, str]:
    """The RE2 classes of each step, from Python's category table (what `FullTokenizer` uses)."""
    selected = _selected_code_points()
    dropped = set(selected["dropped"])
    # The original turns " \t\n\r" and Zs into spaces, then `str.split` also splits on the other
    # whitespace it knows (U+2028, U+2029; the rest of them are control characters, dropped).
    # Every whitespace character Unicode has assigned so far is in the Basic Multilingual Plane.
    whitespace = [cp for cp in range(0x10000) if chr(cp).isspace() and cp not in dropped
                  or unicodedata.category(chr(cp)) == "Zs"]
    cjk = [cp for lo, hi in CJK_RANGES for cp in range(lo, hi + 1)]
    # "python_space": what str.split() and str.strip() take for whitespace (NER's words,
    # extract_features' stripped lines).
    return {"python_space": _re2_class([cp for cp in range(0x10000) if chr(cp).isspace()]),
            "dropped": _re2_class(selected["dropped"]),
            "whitespace": _re2_class(whitespace),
            "cjk": _re2_class(sorted(cjk)),
            "combining_marks": _re2_class(selected["combining_marks"]),
            "punctuation": _re2_class(selected["punctuation"])}


def basic_words(text: tf.Tensor, do_lower_case: bool) -> tf.RaggedTensor:
    """`BasicTokenizer.tokenize` on a batch: string [B] -> ragged string [B, (W)] basic tokens."""
    classes = character_classes()
    # Invalid UTF-8 becomes U+FFFD, which is dropped next: the original decodes with "ignore".
    text = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace",
                                        replacement_char=0xFFFD)
    text = tf.strings.regex_replace(text, classes["dropped"], "")
    text = tf.strings.regex_replace(text, classes["whitespace"], " ")
    text = tf.strings.regex_replace(text, classes["cjk"], r" \0 ")
    if do_lower_case:
        text = lower_like_python(text)
        text = tf_text.normalize_utf8(text, "NFD")
        text = tf.strings.regex_replace(text, classes["combining_marks"], "")
    text = tf.strings.regex_replace(text, classes["punctuation"], r" \0 ")
    return _split_spaces(text)


@functools.cache
def lower_case_fixes() -> dict[str, str]:
    """Characters whose `str.lower` differs from TensorFlow's ICU `StringLower`, and their
    `str.lower`: letters added in a Unicode version newer than the ICU that TensorFlow links.

    Read once per process by running the op on every character `str.lower` changes.
    """
    # Letters with a lower-case mapping (Python's table): the characters that can differ.
    chars = [c for c in map(chr, _scanned_code_points()) if c.lower() != c]
    with tf.init_scope():  # eager, even while a signature is being traced
        lowered = tf.strings.lower(tf.constant(chars), encoding="utf-8").numpy()
    return {c: c.lower() for c, low in zip(chars, lowered) if low.decode("utf-8") != c.lower()}


def lower_like_python(text: tf.Tensor) -> tf.Tensor:
    """`str.lower` on string [B]: ICU's full case mapping, the characters it lacks mapped first."""
    fixes = lower_case_fixes()
    if fixes:
        fix_class = _re2_class(sorted(map(ord, fixes)))

        def apply_fixes():
            fixed = text
            for char, lower in sorted(fixes.items()):
                fixed = tf.strings.regex_replace(fixed, _re2_class([ord(char)]), lower)
            return fixed

        # One scan decides; the per-character passes run only on batches that need them.
        needs = tf.reduce_any(tf.strings.regex_full_match(text, f"(?s).*{fix_class}.*"))
        text = tf.cond(needs, apply_fixes, lambda: text)
    return tf.strings.lower(text, encoding="utf-8")


def one_trace(tokenize) -> tf.types.experimental.PolymorphicFunction:
    """`tokenize` (string [B] -> ragged ids) as a tf.function traced once: an export that
    tokenizes several inputs (text_a and text_b; two signatures) traces and stores it once."""
    return tf.function(tokenize, autograph=False,
                       input_signature=[tf.TensorSpec([None], tf.string, name="text")])


def _split_spaces(text: tf.Tensor) -> tf.RaggedTensor:
    """string [B] -> ragged [B, (W)], split on runs of spaces (no empty words)."""
    words = tf.strings.split(text, sep=" ")
    return keep_values(words, tf.strings.length(words.flat_values) > 0)


def keep_values(rows: tf.RaggedTensor, keep: tf.Tensor) -> tf.RaggedTensor:
    """Ragged [B, (N)] without the values where bool `keep` [total N] is False.

    Built from the flat values: `tf.ragged.boolean_mask` with a ragged mask broadcasts the two
    shapes in the graph, which makes an export's tracing slower.
    """
    return tf.RaggedTensor.from_value_rowids(
        tf.boolean_mask(rows.flat_values, keep), tf.boolean_mask(rows.value_rowids(), keep),
        nrows=rows.nrows(), validate=False)


class InGraphWordpiece(tf.Module):
    """WordPiece tokenization exact to `FullTokenizer`, as ops; holds the vocabulary table.

    Args:
      vocab: token -> id, as `tokenization.load_vocab` reads `vocab.txt`.
      do_lower_case: the model's casing (uncased models lower-case and strip accents).
    """

    def __init__(self, vocab: Mapping[str, int], do_lower_case: bool):
        super().__init__(name="wordpiece")
        self.do_lower_case = do_lower_case
        initializer = tf.lookup.KeyValueTensorInitializer(
            tf.constant(list(vocab), tf.string), tf.constant(list(vocab.values()), tf.int64))
        self.table = tf.lookup.StaticHashTable(initializer, default_value=-1)
        self._wordpiece = tf_text.WordpieceTokenizer(
            self.table, suffix_indicator="##", max_bytes_per_word=_MAX_BYTES_PER_WORD,
            token_out_type=tf.int64, unknown_token=UNK_TOKEN)
        tokens = [""] * (max(vocab.values()) + 1)
        for token, index in vocab.items():
            tokens[index] = token
        self.id_to_token = tf.constant(tokens, tf.string)  # [V]
        self.special_ids = {name: int(vocab[name]) for name in ("[CLS]", "[SEP]", UNK_TOKEN)
                            if name in vocab}
        self.tokenize = one_trace(self._tokenize)

    def _tokenize(self, text: tf.Tensor) -> tf.RaggedTensor:
        """string [B] -> int64 ragged [B, (T)] WordPiece ids."""
        pieces = self.tokenize_words(text)  # [B, (W), (P)]
        # merge_dims(1, 2), without the shape checks that make it slow to trace.
        return tf.RaggedTensor.from_row_splits(
            pieces.flat_values, tf.gather(pieces.values.row_splits, pieces.row_splits),
            validate=False)

    def tokenize_words(self, text: tf.Tensor) -> tf.RaggedTensor:
        """string [B] -> int64 ragged [B, (W), (P)]: each basic token's WordPiece ids."""
        words = basic_words(text, self.do_lower_case)
        too_long = tf.strings.length(words, unit="UTF8_CHAR") > MAX_CHARS_PER_WORD
        # The vocabulary's own "[UNK]" entry is its one piece: the original's whole-word [UNK].
        words = tf.ragged.map_flat_values(
            lambda w, long: tf.where(long, UNK_TOKEN, w), words, too_long)
        return self._wordpiece.tokenize(words)

    def tokens(self, ids: tf.Tensor) -> tf.Tensor:
        """int ids (any shape, ragged or dense) -> their token strings."""
        if isinstance(ids, tf.RaggedTensor):
            return tf.ragged.map_flat_values(tf.gather, self.id_to_token, ids)
        return tf.gather(self.id_to_token, ids)
