"""The original modeling.py's `BertModel` and checkpoint helpers on TF2, over the one encoder.

Code written against the original (`modeling.BertModel(config=..., is_training=...,
input_ids=...)`, `get_pooled_output()`, `get_assignment_map_from_checkpoint` then
`init_from_checkpoint`) runs eagerly, inside `tf.function` and inside a Keras functional model.
`BertModel` computes nothing of its own: it runs a `BertEncoder` (bert_tf.model.encoder) built with
`compute_padding=True`, which computes every position, padding included, so every output is the
original's.

Variables live in *scopes*, as the original's `tf.variable_scope`: the first `BertModel` built
under a scope name (default "bert") creates the encoder; every later one with the same name uses
the same weights, whatever its inputs (the original's `reuse`). `reset_variable_scopes()` drops
them all (the original's fresh graph). A variable's original name
(`bert/encoder/layer_0/attention/self/query/kernel`) is `variable_name(var)`: Keras variables
keep their own short `.name`, so the checkpoint helpers go through `variable_name`.

The original's functional helpers (`get_shape_list`, `layer_norm`, `embedding_lookup`, ...)
are in bert_tf.model.compat_helpers; both modules are re-exported by bert_tf.modeling.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import re
from typing import Iterable, Mapping

import keras
import tensorflow as tf

from bert_tf.model import config as config_lib
from bert_tf.model.bert import names as bert_names
from bert_tf.model.encoder import BertEncoder
from bert_tf.model.names import attribute


@dataclasses.dataclass(frozen=True)
class BertConfig(config_lib.BertConfig):
    """The original's `modeling.BertConfig`: bert_tf's config (same fields, `from_dict`,
    `from_json_file`, `to_dict`, `to_json_string`), which, like the original, accepts a
    hidden_size that the heads do not divide until a model is built from it."""

    def check_head_size(self) -> None:
        """Deferred to `BertModel` (the original's attention layer raised it)."""


# scope name -> the encoder holding its weights; and, per scope, id(variable) -> original name.
_SCOPES: dict[str, BertEncoder] = {}
_NAMES: dict[str, dict[int, str]] = {}


def reset_variable_scopes() -> None:
    """Forgets every scope's weights: the next `BertModel` of any scope starts fresh, as a new
    graph did in the original (models already built keep theirs)."""
    _SCOPES.clear()
    _NAMES.clear()


_DROPOUT_FIELDS = ("hidden_dropout_prob", "attention_probs_dropout_prob")


def _differences(a: config_lib.BertConfig, b: config_lib.BertConfig, is_training: bool
                 ) -> list[str]:
    """The fields in which two configs cannot share one encoder: any size or activation, and
    the dropout rates when `b` is for training (the encoder's dropout layers hold `a`'s)."""
    skipped = {"extra"} | (set() if is_training else set(_DROPOUT_FIELDS))
    return [f.name for f in dataclasses.fields(config_lib.BertConfig)
            if f.name not in skipped and getattr(a, f.name) != getattr(b, f.name)]


def _scope_encoder(config: config_lib.BertConfig, scope: str, is_training: bool) -> BertEncoder:
    """The encoder of `scope`, created on first use (outside any tf.function being traced)."""
    encoder = _SCOPES.get(scope)
    if encoder is not None:
        differences = _differences(encoder.config, config, is_training)
        if differences:
            raise ValueError(
                f"variable scope '{scope}' already holds a BertModel whose config differs in "
                f"{', '.join(differences)}; pass another scope, or call "
                "modeling.reset_variable_scopes() to start afresh")
        return encoder
    # Variables are created eagerly even while a tf.function traces this (its first trace).
    with tf.init_scope():
        # compute_padding: every position, padding included, holds the original's value.
        encoder = BertEncoder(config, name=scope, compute_padding=True)
    # Both the Keras variables and the tf.Variables behind them (what a GradientTape watches).
    variables = {entry.tf1: attribute(encoder, entry.attribute)
                 for entry in bert_names.ENCODER.entries(encoder)}
    _NAMES[scope] = {id(v): scope + name[len("bert"):] for name, variable in variables.items()
                     for v in (variable, variable.value)}
    _SCOPES[scope] = encoder
    return encoder


def variable_name(variable) -> str:
    """The original's name of a variable, without ":0": its TF1 name for a `BertModel`
    variable ("bert/embeddings/word_embeddings"), the path of any other Keras variable, the
    name of a tf.Variable."""
    for names in _NAMES.values():
        if id(variable) in names:
            return names[id(variable)]
    if isinstance(variable, keras.Variable):
        return variable.path
    return re.sub(r":\d+$", "", variable.name)


class BertModel:
    """The original's BERT model object: build it on inputs, then read its outputs.

    Args:
      config: a BertConfig (the original's fields; bert_tf.model.config's or this module's).
      is_training: dropout on (True) or off. Inside a Keras functional model, True leaves it to
        the Keras training flag (`fit` on, `predict` off).
      input_ids: int [B,S] (a tensor, an array, or a `keras.Input`).
      input_mask: int [B,S], 1 = token, 0 = padding; default all ones.
      token_type_ids: int [B,S] segment ids; default all zeros.
      use_one_hot_embeddings: accepted for the original's callers; a gather computes the same
        lookup on every device.
      scope: the variable scope, default "bert"; models of one scope share their weights.

    Raises:
      ValueError: input_ids not of rank 2, hidden_size not a multiple of the heads, or the
        scope holding a model of another config.
    """

    def __init__(self, config: config_lib.BertConfig, is_training: bool, input_ids,
                 input_mask=None, token_type_ids=None, use_one_hot_embeddings: bool = False,
                 scope: str | None = None):
        del use_one_hot_embeddings
        if config.hidden_size % config.num_attention_heads:
            raise ValueError(
                f"The hidden size ({config.hidden_size}) is not a multiple of the number of "
                f"attention heads ({config.num_attention_heads})")
        symbolic = keras.backend.is_keras_tensor(input_ids)
        if not symbolic:
            input_ids = tf.convert_to_tensor(input_ids)
        if len(input_ids.shape) != 2:
            raise ValueError(f"input_ids must be of rank 2 [batch, seq_length], got shape "
                             f"{list(input_ids.shape)}")
        self.scope = scope or "bert"
        self.encoder = _scope_encoder(config, self.scope, bool(is_training))
        inputs = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": token_type_ids}
        # Keras inputs pass as they are; anything else becomes an int32 tensor.
        inputs = {k: v if symbolic else tf.cast(v, tf.int32) for k, v in inputs.items()
                  if v is not None}
        if symbolic and is_training:
            outputs = self.encoder(inputs)  # dropout follows the Keras model's training flag
        else:
            outputs = self.encoder(inputs, training=bool(is_training))
        self._outputs = outputs

    def get_pooled_output(self):
        """[B,H]: dense + tanh on the first token's final hidden state."""
        return self._outputs["pooled_output"]

    def get_sequence_output(self):
        """[B,S,H]: the last block's output at every position."""
        return self._outputs["sequence_output"]

    def get_all_encoder_layers(self) -> list:
        """L tensors [B,S,H], the output of every block."""
        return self._outputs["encoder_outputs"]

    def get_embedding_output(self):
        """[B,S,H]: word + type + position embeddings after LayerNorm and dropout."""
        return self._outputs["embedding_output"]

    def get_embedding_table(self):
        """The [V,H] word-embedding variable."""
        return self.encoder.embedding_table

    @property
    def trainable_variables(self) -> list:
        """The scope's weights (what `tf.trainable_variables()` held for the original)."""
        return self.encoder.trainable_variables


def _checkpoint_names(init_checkpoint: str | os.PathLike) -> list[tuple[str, list[int]]]:
    return tf.train.list_variables(os.fspath(init_checkpoint))


def get_assignment_map_from_checkpoint(tvars: Iterable, init_checkpoint: str | os.PathLike
                                       ) -> tuple[collections.OrderedDict, dict]:
    """The original's helper: which of `tvars` the checkpoint holds, by their original names.

    Returns:
      (assignment_map, initialized_variable_names): an OrderedDict name -> name for every
      checkpoint variable that one of `tvars` carries (names as `variable_name` gives them),
      in checkpoint order; and a dict of those names, each also with ":0", mapped to 1.
    """
    name_to_variable = {variable_name(v): v for v in tvars}
    assignment_map: collections.OrderedDict = collections.OrderedDict()
    initialized_variable_names = {}
    for name, _ in _checkpoint_names(init_checkpoint):
        if name in name_to_variable:
            assignment_map[name] = name
            initialized_variable_names[name] = 1
            initialized_variable_names[name + ":0"] = 1
    return assignment_map, initialized_variable_names


def _live_variables() -> dict[str, object]:
    return {name: v for scope, encoder in _SCOPES.items() for v in encoder.variables
            for name in [_NAMES[scope].get(id(v))] if name}


def init_from_checkpoint(init_checkpoint: str | os.PathLike, assignment_map: Mapping,
                         variables: Iterable | None = None) -> list[str]:
    """`tf.compat.v1.train.init_from_checkpoint` for eager variables: copies now.

    Args:
      init_checkpoint: a TF1 checkpoint prefix (`bert_model.ckpt`) or its directory.
      assignment_map: checkpoint name -> variable or variable name, as the original's:
        typically `get_assignment_map_from_checkpoint`'s first result. A key ending in "/"
        maps a whole scope ("bert/" -> "my_bert/").
      variables: where names are looked up (by `variable_name`): default every `BertModel`
        scope's weights; pass your own head variables here to load them too.

    Returns:
      The checkpoint names copied.

    Raises:
      ValueError: a name missing from the checkpoint or from `variables`, or a shape mismatch.
    """
    path = os.fspath(init_checkpoint)
    reader = tf.train.load_checkpoint(path)
    shapes = reader.get_variable_to_shape_map()
    lookup = (_live_variables() if variables is None
              else {variable_name(v): v for v in variables})
    pairs = []
    for source, target in assignment_map.items():
        if source.endswith("/"):
            prefix = "" if target in ("/", "") else str(target)
            pairs += [(name, prefix + name[len(source):]) for name in sorted(shapes)
                      if name.startswith(source) and prefix + name[len(source):] in lookup]
        else:
            pairs.append((source, target))
    for source, target in pairs:
        if source not in shapes:
            raise ValueError(f"Tensor {source} is not found in {path} checkpoint")
        variable = target if not isinstance(target, str) else lookup.get(target)
        if variable is None:
            raise ValueError(f"{target}: no such variable to initialise from {source} in {path}")
        value = reader.get_tensor(source)
        if tuple(value.shape) != tuple(variable.shape):
            raise ValueError(f"{path}: {source} has shape {list(value.shape)} but the variable "
                             f"{target if isinstance(target, str) else variable_name(variable)}"
                             f" has shape {list(variable.shape)}")
        variable.assign(tf.cast(value, variable.dtype))
    return [source for source, _ in pairs]
