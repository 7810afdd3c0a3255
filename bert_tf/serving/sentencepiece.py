"""SentencePiece (ALBERT and `build_vocab.py --spm_model_prefix` models) as ops.

`tokenization.SentencePieceTokenizer` lower-cases with `str.lower` when asked, then encodes to
ids; here `text.lower_like_python` and tensorflow-text's `SentencepieceTokenizer` (ops `SentencepieceOp`,
`SentencepieceTokenizeOp`, which TensorFlow Serving links) do the same with the model's bytes
saved in the graph.
"""

from __future__ import annotations

import os

import sentencepiece
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf import filesystem
from bert_tf.serving.text import lower_like_python, one_trace


class InGraphSentencePiece(tf.Module):
    """SentencePiece tokenization as ops, same interface as `text.InGraphWordpiece`."""

    def __init__(self, spm_model_file: str | os.PathLike, do_lower_case: bool):
        super().__init__(name="sentencepiece")
        model = filesystem.read_bytes(os.fspath(spm_model_file))
        processor = sentencepiece.SentencePieceProcessor(model_proto=model)
        pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
        self.do_lower_case = do_lower_case
        self._sp = tf_text.SentencepieceTokenizer(model=model, out_type=tf.int32)
        self.id_to_token = tf.constant(pieces, tf.string)  # [V]
        self.special_ids = {name: pieces.index(name) for name in ("[CLS]", "[SEP]") if name in pieces}
        self.special_ids["[UNK]"] = processor.unk_id()  # the model's own unknown piece
        self.tokenize = one_trace(self._tokenize)

    def _tokenize(self, text: tf.Tensor) -> tf.RaggedTensor:
        """string [B] -> int64 ragged [B, (T)] piece ids."""
        text = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="ignore")
        # The op reads a text only up to its first NUL; SentencePiece reads a NUL as an unknown
        # character, as it reads U+FFFF (a noncharacter no model holds).
        text = tf.strings.regex_replace(text, "\\x00", "\uffff")
        if self.do_lower_case:
            text = lower_like_python(text)
        return tf.cast(self._sp.tokenize(text), tf.int64)

    def tokens(self, ids: tf.Tensor) -> tf.Tensor:
        """int ids (any shape, ragged or dense) -> their piece strings."""
        if isinstance(ids, tf.RaggedTensor):
            return tf.ragged.map_flat_values(tf.gather, self.id_to_token, ids)
        return tf.gather(self.id_to_token, ids)
