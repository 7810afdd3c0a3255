"""Adds tokens to a checkpoint's vocabulary.

Two ways, as users of the original are told to do by hand:
  unused  new tokens take the places of `[unusedN]` entries in vocab.txt, in id order; the
          checkpoint and vocab_size stay as they are (those rows were never trained on text).
  append  new tokens go to the end of vocab.txt; the word-embedding table [V,H] and the masked-LM
          `cls/predictions/output_bias` [V] (the family's names for them,
          `ModelFamily.vocabulary_names`) grow by one row per token: embeddings drawn like the
          original's initialisation (truncated normal, stddev initializer_range), bias 0.
The result — vocab.txt, bert_config.json and bert_model.ckpt in the original TF1 layout — is
written into a new output directory atomically.

A SentencePiece vocabulary (ALBERT's `30k-clean.model`, or build_vocab.py's) grows in append mode
only (it has no `[unusedN]` pieces): each new token becomes a user-defined piece at the end of the
model (sentencepiece always cuts such a piece out whole, whatever the model type), the embedding
table [V,E] (E = embedding_size for ALBERT's factorised embedding) and the output bias grow by one
row each, and the output directory receives the extended `.model`, the config
(`albert_config.json` for ALBERT, as google-research/albert names it) and `bert_model.ckpt`.
"""

from __future__ import annotations

import dataclasses
import os
import re
import struct

import keras
import numpy as np
import sentencepiece
from absl import logging

from bert_tf import filesystem
from bert_tf.text import tokenizers
from bert_tf.checkpoints import name_map as checkpoints
from bert_tf.checkpoints.files import (KIND_BERT_TF, KIND_HF, read_arrays, resolve_checkpoint,
                                       write_tf1_checkpoint)
from bert_tf.errors import MissingFileError, UserError
from bert_tf.model import families
from bert_tf.model.config import BertConfig

MODES = ("unused", "append")
_UNUSED = re.compile(r"^\[unused\d+\]$")


@dataclasses.dataclass
class VocabExtension:
    """What `extend_vocabulary` did: the new token ids, the tokens skipped, the new vocab size."""

    mode: str
    added: dict[str, int]
    already_present: list[str]
    vocab_size: int


def read_vocab_lines(vocab_file: str | os.PathLike) -> list[str]:
    """vocab.txt as a list (id = index), decoded and stripped as tokenizers.load_vocab does."""
    try:
        with filesystem.open_read(os.fspath(vocab_file)) as f:
            lines = [tokenizers.convert_to_unicode(raw).strip() for raw in f]
    except FileNotFoundError:
        raise MissingFileError(
            f"{vocab_file}: vocabulary file not found (check --vocab_file)") from None
    if len(set(lines)) != len(lines):
        raise UserError(f"{vocab_file}: the vocabulary repeats a token, so its ids and lines disagree")
    return lines


def check_new_tokens(tokens: list[str], vocab: list[str],
                     do_lower_case: bool) -> tuple[list[str], list[str]]:
    """Splits the requested tokens into (new, already present), rejecting impossible ones.

    A token the basic tokenizer would split or change (spaces, punctuation, upper case with
    do_lower_case) can never be produced whole from text: that is an error, not a silent no-op.
    A `##piece` continuation is checked without its `##`.
    """
    basic = tokenizers.BasicTokenizer(do_lower_case=do_lower_case)
    known, new, present = set(vocab), [], []
    for token in dict.fromkeys(tokens):  # keeps the order, drops repeats
        word = token[2:] if token.startswith("##") else token
        if not word or basic.tokenize(word) != [word]:
            raise UserError(
                f"token {token!r} can never be produced by the tokenizer (do_lower_case="
                f"{do_lower_case}); it would be split or changed into {basic.tokenize(word)}")
        (present if token in known else new).append(token)
    return new, present


def check_new_pieces(tokens: list[str], pieces: list[str],
                     do_lower_case: bool) -> tuple[list[str], list[str]]:
    """(new, already present) for a SentencePiece model, rejecting pieces text never holds:
    whitespace (text is split there), upper case when the input is lower-cased."""
    known, new, present = set(pieces), [], []
    for token in dict.fromkeys(tokens):
        if not token or any(c.isspace() for c in token) or (do_lower_case and token != token.lower()):
            raise UserError(f"token {token!r} can never be produced by the SentencePiece tokenizer "
                            f"(do_lower_case={do_lower_case}): no whitespace"
                            f"{', lower case only' if do_lower_case else ''}")
        (present if token in known else new).append(token)
    return new, present


def _varint(value: int) -> bytes:
    out = b""
    while True:
        low, value = value & 0x7F, value >> 7
        if not value:
            return out + bytes([low])
        out += bytes([low | 0x80])


def appended_pieces(model: bytes, tokens: list[str]) -> bytes:
    """A serialized SentencePiece ModelProto with `tokens` as user-defined pieces at the end.

    Written at the wire level (repeated field 1 `pieces`: a later occurrence appends), so no
    generated protobuf module is needed: sentencepiece's own pins a protobuf runtime that
    TensorFlow's environment may not have.
    """
    user_defined = 4  # ModelProto.SentencePiece.Type.USER_DEFINED
    for token in tokens:
        text = token.encode("utf-8")
        piece = (b"\x0a" + _varint(len(text)) + text + b"\x15" + struct.pack("<f", 0.0)
                 + b"\x18" + _varint(user_defined))
        model += b"\x0a" + _varint(len(piece)) + piece
    return model


def _checkpoint_arrays(path: str, config: BertConfig) -> dict[str, np.ndarray]:
    """Every weight of a checkpoint under its TF1 name (optimizer state left out)."""
    kind, location = resolve_checkpoint(path)
    if kind == KIND_BERT_TF:  # names come from a model: load one with both pretraining heads
        from bert_tf.model import models  # noqa: PLC0415 (only this kind needs a model)
        model = models.pretraining_model(config)
        report = checkpoints.init_from_checkpoint(model, location)
        loaded = set(report.loaded)
        return {m.name: m.variable.numpy() for m in checkpoints.model_mappings(model)
                if m.name in loaded}
    arrays, _ = read_arrays(kind, location)
    return {name: np.asarray(load()) for name, load in arrays.items()}


def extend_vocabulary(init_checkpoint: str, vocab_file: str | None, config: BertConfig,
                      new_tokens: list[str], output_dir: str, mode: str = "unused",
                      do_lower_case: bool = True, seed: int = 12345,
                      spm_model_file: str | None = None) -> VocabExtension:
    """Adds `new_tokens` to a checkpoint's vocabulary and writes the result to `output_dir`.

    Args:
      init_checkpoint: any checkpoint init_from_checkpoint accepts.
      vocab_file: its vocab.txt (None with `spm_model_file`).
      config: its bert_config.json (or albert_config.json).
      new_tokens: tokens to add; ones already in the vocabulary are skipped.
      output_dir: receives vocab.txt (or the extended `.model`), the config and bert_model.ckpt.*;
        must not be the checkpoint's own directory.
      mode: "unused" (reuse `[unusedN]` slots) or "append" (grow the tables).
      do_lower_case: how the vocabulary is used; tokens the tokenizer could not produce are refused.
      seed: for the new embedding rows.
      spm_model_file: its SentencePiece model, instead of `vocab_file` (append mode only).

    Returns:
      What was added where.
    """
    if mode not in MODES:
        raise UserError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if (vocab_file is None) == (spm_model_file is None):
        raise UserError("give exactly one of --vocab_file (WordPiece) and --spm_model_file "
                        "(SentencePiece)")
    if spm_model_file and mode != "append":
        raise UserError(f"{spm_model_file}: a SentencePiece model has no [unusedN] pieces; "
                        f"use --mode=append to grow the vocabulary")
    source = spm_model_file or vocab_file
    vocab = (list(tokenizers.SentencePieceTokenizer(spm_model_file).vocab) if spm_model_file
             else read_vocab_lines(vocab_file))
    if len(vocab) > config.vocab_size or (mode == "append" and len(vocab) != config.vocab_size):
        raise UserError(f"{source} has {len(vocab)} tokens but vocab_size is {config.vocab_size}: "
                         f"the vocabulary and the model config do not belong together")
    _refuse_source_directory(init_checkpoint, output_dir)
    check = check_new_pieces if spm_model_file else check_new_tokens
    new, present = check(new_tokens, vocab, do_lower_case)
    if present:
        logging.warning("already in %s, skipped: %s", source, " ".join(present))
    arrays = _checkpoint_arrays(init_checkpoint, config)
    if mode == "unused":
        vocab, added = _fill_unused_slots(vocab, new, vocab_file)
    else:
        vocab, added = vocab + new, {token: len(vocab) + i for i, token in enumerate(new)}
        arrays.update(_grown_tables(arrays, families.family_of(config).vocabulary_names(),
                                    len(new), config.initializer_range, seed))
        config = config.replace(vocab_size=len(vocab))
    files = {families.family_of(config).config_file: config.to_json_string()}
    if spm_model_file:
        files[os.path.basename(spm_model_file)] = _extended_model(spm_model_file, added)
    else:
        files["vocab.txt"] = "".join(t + "\n" for t in vocab)
    write_tf1_checkpoint(arrays, os.path.join(output_dir, "bert_model.ckpt"), files)
    logging.info("added %d tokens (%s) to %s; vocab_size %d", len(added), mode, output_dir, len(vocab))
    return VocabExtension(mode, added, present, config.vocab_size)


def _extended_model(spm_model_file: str, added: dict[str, int]) -> bytes:
    """The model file with the `added` pieces, checked to load with exactly those ids."""
    model = appended_pieces(filesystem.read_bytes(spm_model_file), list(added))
    processor = sentencepiece.SentencePieceProcessor(model_proto=model)
    ids = {token: processor.piece_to_id(token) for token in added}
    if ids != added:  # a bug, not the user's input
        raise RuntimeError(f"the extended SentencePiece model gives ids {ids}, expected {added}")
    return model


def _fill_unused_slots(vocab: list[str], new: list[str],
                       vocab_file: str) -> tuple[list[str], dict[str, int]]:
    slots = [i for i, token in enumerate(vocab) if _UNUSED.match(token)]
    if len(new) > len(slots):
        raise UserError(f"{vocab_file} has {len(slots)} [unusedN] slots for {len(new)} new tokens; "
                         f"use mode 'append' to grow the vocabulary instead")
    vocab = list(vocab)
    for slot, token in zip(slots, new):
        vocab[slot] = token
    return vocab, dict(zip(new, slots))


def _grown_tables(arrays: dict[str, np.ndarray], names: tuple[str, ...], count: int,
                  stddev: float, seed: int) -> dict[str, np.ndarray]:
    """The word embeddings (`names[0]`) with `count` new rows drawn like the original's, and
    the other tables of `names` that the checkpoint holds (masked-LM output biases) with
    `count` zeros."""
    word_embeddings, *biases = names
    if word_embeddings not in arrays:
        raise UserError(f"the checkpoint has no {word_embeddings}; is it a BERT checkpoint?")
    table = arrays[word_embeddings]
    rows = keras.initializers.TruncatedNormal(stddev=stddev, seed=seed)((count, table.shape[1]))
    grown = {word_embeddings: np.concatenate([table, np.asarray(rows, table.dtype)])}
    for name in biases:
        if name in arrays:
            grown[name] = np.concatenate([arrays[name], np.zeros(count, arrays[name].dtype)])
    return grown


def _refuse_source_directory(init_checkpoint: str, output_dir: str) -> None:
    kind, location = resolve_checkpoint(init_checkpoint)
    source = location if kind == KIND_HF else os.path.dirname(location) or "."
    if filesystem.scheme(source) or filesystem.scheme(output_dir):
        same = filesystem.absolute(source).rstrip("/") == filesystem.absolute(output_dir).rstrip("/")
    else:
        same = os.path.exists(output_dir) and os.path.samefile(source, output_dir)
    if same:
        raise UserError(f"--output_dir {output_dir} is the checkpoint's own directory; "
                         f"write the extended checkpoint somewhere else")
