"""Checkpoint files without a model: find them, tell their kind, read and write them.

Kinds: KIND_TF1 (the original's name-based `bert_model.ckpt`), KIND_BERT_TF (our object-based
`tf.train.Checkpoint` files) and KIND_HF (a Hugging Face directory, see hf_weights). Paths go
through tf.io.gfile, so `gs://` buckets work for the TensorFlow kinds.
"""

from __future__ import annotations

import os
import re
from typing import Callable, Mapping

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from bert_tf import filesystem
from bert_tf.checkpoints import hf_weights
from bert_tf.errors import UserError

KIND_TF1, KIND_BERT_TF, KIND_HF = "tf1", "bert_tf", "huggingface"
KIND_WORDS = {KIND_TF1: "original TF1 checkpoint", KIND_BERT_TF: "bert_tf training checkpoint",
              KIND_HF: "Hugging Face directory"}

# Optimizer slots and step counters of TF1 training checkpoints: never model weights.
_TF1_TRAINING_STATE = re.compile(
    r"(/adam_[mv]|/Adam(_1)?|/Momentum|/lamb_[mv])$|^global_step$|^beta[12]_power")
_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
OBJECT_VALUE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"

LazyArrays = Mapping[str, Callable[[], np.ndarray]]


class CheckpointError(UserError):
    """A checkpoint that cannot be found, read or matched to the model."""


def resolve_checkpoint(path: str | os.PathLike) -> tuple[str, str]:
    """Finds the checkpoint that `path` names.

    Args:
      path: a checkpoint prefix (`.../bert_model.ckpt`, `.../ckpt-12`; a trailing `.index` or
        `.data-*` is accepted), a directory holding one (with a `checkpoint` state file, the
        latest), a bert_tf output_dir, or a Hugging Face directory.

    Returns:
      (kind, location): KIND_TF1 or KIND_BERT_TF with the checkpoint prefix, or KIND_HF with the
      directory.
    """
    path = re.sub(r"\.(index|meta|data-\d{5}-of-\d{5})$", "", os.fspath(path))
    # A prefix first: object stores (and ram://) may call the prefix of file names a directory.
    if filesystem.exists(path + ".index"):
        prefix = path
    elif filesystem.isdir(path):
        if hf_weights.is_hf_directory(path):
            return KIND_HF, path
        prefix = tf.train.latest_checkpoint(path) or _single_prefix_in(path)
    else:
        raise CheckpointError(
            f"{path}: no checkpoint found. Expected a checkpoint prefix such as "
            f".../bert_model.ckpt (the files .index and .data-* next to it), a directory holding "
            f"one, a bert_tf output_dir, or a Hugging Face directory (config.json + "
            f"model.safetensors).")
    names = set(checkpoint_reader(prefix).get_variable_to_shape_map())
    return (KIND_BERT_TF if _OBJECT_GRAPH_KEY in names else KIND_TF1), prefix


def holds_bert_tf_checkpoint(directory: str) -> bool:
    """Whether `directory` is a bert_tf run directory: its latest checkpoint is object-based."""
    prefix = tf.train.latest_checkpoint(directory) if filesystem.isdir(directory) else None
    return bool(prefix) and _OBJECT_GRAPH_KEY in checkpoint_reader(
        prefix).get_variable_to_shape_map()


def checkpoint_reader(prefix: str):
    """The reader of the checkpoint at `prefix` (tf.train.load_checkpoint would look for a
    `checkpoint` state file under a prefix that the file system calls a directory)."""
    return tf.compat.v1.train.NewCheckpointReader(prefix)


def _single_prefix_in(directory: str) -> str:
    prefixes = sorted(p[:-len(".index")]
                      for p in filesystem.glob(os.path.join(directory, "*.index")))
    if len(prefixes) == 1:
        return prefixes[0]
    if not prefixes:
        raise CheckpointError(f"{directory}: directory holds no checkpoint (no *.index file, no "
                              f"`checkpoint` state file, no config.json + model.safetensors)")
    raise CheckpointError(f"{directory}: holds several checkpoints and no `checkpoint` state file; "
                          f"pass one prefix: {', '.join(prefixes)}")


def read_arrays(kind: str, location: str) -> tuple[LazyArrays, int]:
    """Lazy TF1-named arrays of a tf1 or huggingface checkpoint found by `resolve_checkpoint`.

    Returns:
      (arrays, ignored): arrays maps each TF1 name to a function returning its value; `ignored`
      counts the optimizer slots and step counters left out.
    """
    if kind == KIND_HF:
        return hf_weights.load_tf1_arrays(location), 0
    if kind != KIND_TF1:
        raise CheckpointError(f"{location}: a bert_tf training checkpoint has no TF1 names; load "
                              f"it into a model with init_from_checkpoint, then "
                              f"export_google_checkpoint")
    reader = checkpoint_reader(location)
    names = list(reader.get_variable_to_shape_map())
    arrays = {name: (lambda name=name: reader.get_tensor(name))
              for name in names if not _TF1_TRAINING_STATE.search(name)}
    return arrays, len(names) - len(arrays)


def write_tf1_checkpoint(arrays: Mapping[str, np.ndarray], prefix: str | os.PathLike,
                         files: Mapping[str, str] | None = None) -> None:
    """Writes a TF1 name-based checkpoint (exactly `arrays`' names) and text files, atomically.

    Everything is written to a temporary directory first (`filesystem.atomic_files`), then
    renamed into the output directory, data before index, so a reader never finds an index
    without its data.

    Args:
      arrays: TF1 name → value.
      prefix: the checkpoint prefix, e.g. "out/bert_model.ckpt".
      files: file name → text (or bytes, e.g. a SentencePiece model), written next to the
        checkpoint (bert_config.json, vocab.txt).
    """
    directory, base = os.path.split(os.fspath(prefix))
    directory, files = directory or ".", files or {}
    names = sorted(arrays)
    with filesystem.atomic_files(directory, order=lambda n: (n.endswith(".index"), n in files),
                                 output=os.fspath(prefix)) as tmp:
        tf.raw_ops.SaveV2(prefix=filesystem.join(tmp, base), tensor_names=names,
                          shape_and_slices=[""] * len(names), tensors=[arrays[n] for n in names])
        for name, text in files.items():
            filesystem.write_atomically(filesystem.join(tmp, name), text)


class ObjectCheckpoint:
    """A bert_tf (object-based) checkpoint: tensors found by their object path.

    `tf.train.Checkpoint(model=..., optimizer=...)` records every object edge, so a variable can
    be found by any path (`model/encoder/embeddings/word_embeddings`) even when its tensor key
    was named after another one (`model/masked_lm/embedding_table`).
    """

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.reader = checkpoint_reader(prefix)
        self.graph = trackable_object_graph_pb2.TrackableObjectGraph()
        self.graph.ParseFromString(self.reader.get_tensor(_OBJECT_GRAPH_KEY))
        self.roots = {c.local_name: c.node_id for c in self.graph.nodes[0].children}

    def node(self, start: int | None, path: str) -> int | None:
        """The node reached from `start` by the named edges of "a/b/c", or None."""
        for name in filter(None, path.split("/")):
            if start is None:
                return None
            start = {c.local_name: c.node_id for c in self.graph.nodes[start].children}.get(name)
        return start

    def key(self, start: int | None, path: str) -> str | None:
        """The tensor key of the variable at `path` below node `start`, or None if absent."""
        node = self.node(start, path)
        if node is None:
            return None
        return next((a.checkpoint_key for a in self.graph.nodes[node].attributes
                     if a.name == "VARIABLE_VALUE"), None)

    def variable_keys(self) -> list[str]:
        return [k for k in self.reader.get_variable_to_shape_map() if k.endswith(OBJECT_VALUE_SUFFIX)]
