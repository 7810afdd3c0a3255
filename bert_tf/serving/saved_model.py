"""Writing a SavedModel in one piece, and the tokenizer a raw-text signature carries."""

from __future__ import annotations

from typing import Mapping

import tensorflow as tf

from bert_tf import filesystem
from bert_tf.text import tokenizers
from bert_tf.errors import UserError
from bert_tf.model.inputs import MODEL_INPUTS

SIGNATURE_KEY = "serving_default"  # the raw-text signature
IDS_SIGNATURE_KEY = "serve_ids"     # token ids in, as `bert_tf` packs them


def model_inputs_spec() -> dict[str, tf.TensorSpec]:
    """The model's inputs (`bert_tf.model.inputs.MODEL_INPUTS`), int32 [B,S] each, as the one
    argument of a traced model function that several signatures call."""
    return {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in MODEL_INPUTS}


def save(module: tf.Module, export_dir: str, signatures: Mapping[str, tf.types.experimental.ConcreteFunction]
         ) -> str:
    """Writes `module` as a SavedModel at `export_dir`, replacing what was there.

    Through the one writer (`filesystem.atomic_directory`): the SavedModel is written next to
    `export_dir` first and moved into place when complete, so a crash never leaves a
    half-written (or half-deleted) export under that name; a full disk is one
    `full_disk.DiskFullError` naming `export_dir`.

    Returns:
      the absolute export_dir.
    """
    export_dir = filesystem.absolute(export_dir)
    filesystem.makedirs(filesystem.dirname(export_dir))
    with filesystem.atomic_directory(export_dir) as tmp:
        tf.saved_model.save(module, tmp, signatures=dict(signatures))
    return export_dir


def require_tensorflow_text() -> None:
    """Raises a UserError saying how to install tensorflow-text when it is missing."""
    try:
        import tensorflow_text  # noqa: F401
    except ImportError:
        release = ".".join(tf.__version__.split(".")[:2])
        raise UserError(f"the raw-text export needs tensorflow-text: pip install --no-deps "
                        f"'tensorflow-text=={release}.*' (docs/serving.md, Install)") from None


def in_graph_tokenizer(vocab_file: str | None, spm_model_file: str | None, do_lower_case: bool
                       ) -> tf.Module:
    """The run's tokenizer as ops: WordPiece (`vocab_file`) or SentencePiece (`spm_model_file`).

    The module has `tokenize(string [B]) -> int64 ragged [B, (T)]`, `tokens(ids)` and
    `special_ids` ({"[CLS]": id, "[SEP]": id}).
    """
    require_tensorflow_text()
    if spm_model_file:
        from bert_tf.serving.sentencepiece import InGraphSentencePiece
        return InGraphSentencePiece(spm_model_file, do_lower_case)
    if not vocab_file:
        raise UserError("a raw-text export needs the tokenizer: give --vocab_file or --spm_model_file")
    from bert_tf.serving.text import InGraphWordpiece
    tokenizer = InGraphWordpiece(tokenizers.load_vocab(vocab_file), do_lower_case)
    missing = [name for name in ("[CLS]", "[SEP]") if name not in tokenizer.special_ids]
    if missing:
        raise UserError(f"{vocab_file}: the vocabulary has no {', '.join(missing)} token; "
                        "a raw-text export packs [CLS] a [SEP] b [SEP]")
    return tokenizer
