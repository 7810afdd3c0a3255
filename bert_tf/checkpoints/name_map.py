"""Checkpoints in every format a BERT user has, through one name map.

Formats (`init_from_checkpoint` tells them apart and logs which it found):
  tf1          the original's name-based checkpoint (`bert_model.ckpt.{index,data-*}`), or a
               directory holding one; names as the original writes them
               ("bert/encoder/layer_3/...").
  bert_tf      our own object-based training checkpoints (`tf.train.Checkpoint`, a run's
               output_dir with its `checkpoint` state file, or one `ckpt-N` prefix).
  huggingface  a Hugging Face BERT directory (`config.json` + `model.safetensors`), see hf_weights.

The ONE name map is `model_mappings(model)`: original TF1 name → the model's variable. The model's
variables have the original's layouts (separate query/key/value [H,H] kernels, `output_weights`
[out, in]), so copies need no reshape. Hugging Face names and layouts are translated to TF1 ones
first (hf_weights), so every import and the export go through that map and through `_assign`,
which checks the shape of every copy. bert_tf checkpoints are matched by object path instead
(the path of each variable from the model, looked up in the checkpoint's object graph).
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Iterable

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import filesystem
from bert_tf.checkpoints.files import (KIND_BERT_TF, KIND_HF, KIND_TF1, KIND_WORDS,
                                       OBJECT_VALUE_SUFFIX, CheckpointError, LazyArrays,
                                       ObjectCheckpoint, read_arrays, resolve_checkpoint,
                                       write_tf1_checkpoint)
from bert_tf.checkpoints.hf_weights import bert_config_from_hf
from bert_tf.model import families
from bert_tf.model.config import BertConfig, name_of_activation
from bert_tf.model.encoder import BertEncoder
from bert_tf.model.family import ModelFamily
from bert_tf.model.names import NameTable, attribute


@dataclasses.dataclass(frozen=True)
class WeightMapping:
    """One entry of the name map: an original TF1 name and the model's variable it fills.

    Every variable has the original's layout (kernels [in, out], `output_weights` [out, in]), so
    a copy needs no reshape; `_assign` checks the shape of every copy. `hf_name` is the
    weight's Hugging Face name (without the model's prefix) and `transpose` whether it is
    transposed there.
    """

    name: str
    variable: object
    in_encoder: bool = True
    hf_name: str | None = None
    transpose: bool = False


@dataclasses.dataclass
class CheckpointReport:
    """What `init_from_checkpoint` did; `str(report)` is a readable summary.

    Model weights are named by their TF1 names for every kind; unused bert_tf checkpoint entries
    by their object paths.
    """

    path: str
    kind: str
    loaded: list[str] = dataclasses.field(default_factory=list)
    missing: list[str] = dataclasses.field(default_factory=list)  # model weights left as initialised
    unused: list[str] = dataclasses.field(default_factory=list)  # checkpoint weights the model lacks
    mismatched: list[str] = dataclasses.field(default_factory=list)  # head weights of another shape
    ignored: int = 0  # optimizer slots and step counters

    def __str__(self) -> str:
        lines = [f"{KIND_WORDS[self.kind]} {self.path}: loaded {len(self.loaded)} weights, "
                 f"ignored {self.ignored} optimizer/step entries"]
        sections = (("model weights NOT in the checkpoint (left as initialised)", self.missing),
                    ("head weights of another shape (left as initialised)", self.mismatched),
                    ("checkpoint weights with no place in this model (not used)", self.unused))
        for label, names in sections:
            if names:
                lines.append(f"  {len(names)} {label}:")
                lines.extend(f"    {name}" for name in names)
        return "\n".join(lines)


def find_encoder(model):
    """The BertEncoder inside `model` (the model itself or its `.encoder`)."""
    if isinstance(model, BertEncoder):
        return model
    encoder = getattr(model, "encoder", None)
    if not isinstance(encoder, BertEncoder):
        raise TypeError(f"{type(model).__name__} is neither a BertEncoder nor has an `.encoder` one")
    return encoder


def _mappings(table: NameTable, layer, in_encoder: bool) -> list[WeightMapping]:
    return [WeightMapping(entry.tf1, attribute(layer, entry.attribute), in_encoder, entry.hf,
                          entry.transpose) for entry in table.entries(layer)]


def encoder_mappings(encoder: BertEncoder) -> list[WeightMapping]:
    """The encoder's part of the name map, in the original's order, as its family names it
    (`ModelFamily.names`: google-research/albert's names for ALBERT, one entry per shared
    block, not per layer; google-research/electra's discriminator names for ELECTRA)."""
    return _mappings(families.family_of(encoder.config).names, encoder, in_encoder=True)


def named_layers(model) -> list[tuple[str, object]]:
    """(attribute, layer) for each layer beside the encoder whose class declares its checkpoint
    names (`CHECKPOINT_NAMES`: the heads, ELECTRA's generator), in the order checkpoints list
    them (the registered heads' order, other layers first)."""
    encoder = find_encoder(model)
    if model is encoder:
        return []
    order = {head: index for index, head in enumerate(families.HEADS)}
    layers = [(name, layer) for name, layer in vars(model).items()
              if hasattr(type(layer), "CHECKPOINT_NAMES") and layer is not encoder]
    return sorted(layers, key=lambda item: order.get(type(item[1]), -1))


def model_mappings(model) -> list[WeightMapping]:
    """The whole name map of `model`: its encoder, then the layers beside it that declare their
    names (`named_layers`)."""
    encoder = find_encoder(model)
    family = families.family_of(encoder.config)
    mappings = encoder_mappings(encoder)
    for _, layer in named_layers(model):
        mappings.extend(_mappings(family.head_names(type(layer)), layer, in_encoder=False))
    return mappings


def _assign(mapping: WeightMapping, value: np.ndarray, source: str) -> None:
    """Copies a TF1-layout array into the mapped variable, checking the shape first."""
    expected = tuple(mapping.variable.shape)
    if value.shape != expected:
        raise CheckpointError(shape_mismatch_message(mapping.name, value.shape, expected, source))
    mapping.variable.assign(value.astype(mapping.variable.dtype, copy=False))


def shape_mismatch_message(name: str, found: tuple, expected: tuple, source: str) -> str:
    """A shape mismatch explained: which weight, both shapes, and the likely cause."""
    hints = {"word_embeddings": "vocab_size (and vocab.txt)", "output_bias": "vocab_size or num_labels",
             "output_weights": "num_labels", "position_embeddings": "max_position_embeddings",
             "token_type_embeddings": "type_vocab_size", "intermediate": "intermediate_size"}
    hint = next((v for k, v in hints.items() if k in name), "hidden_size")
    return (f"{source}: {name} has shape {list(found)} in the checkpoint but {list(expected)} in the "
            f"model: the model's bert_config.json does not describe this checkpoint (check {hint}). "
            f"Use the bert_config.json that was released or trained with the checkpoint.")


# --------------------------------------------------------------------------- loading

def init_from_checkpoint(model, path: str | os.PathLike) -> CheckpointReport:
    """Loads any checkpoint a BERT user has into `model`; the single entry point.

    Args:
      model: a BertEncoder or a model of model/models.py (an `.encoder` plus heads). The encoder is
        always loaded; each head is loaded when the checkpoint has it.
      path: an original TF1 checkpoint prefix or a directory holding one, a bert_tf output_dir or
        checkpoint prefix, or a Hugging Face directory (see `resolve_checkpoint`).

    Returns:
      The report (also logged): loaded, missing, unused and mismatched weights.

    Raises:
      CheckpointError: no checkpoint at `path`; an encoder weight (other than the pooler) is
        missing; or an encoder weight has another shape (a wrong bert_config.json).
    """
    kind, location = resolve_checkpoint(path)
    logging.info("init_from_checkpoint: %s is a %s (%s)", path, KIND_WORDS[kind], location)
    if kind == KIND_HF:
        _check_hf_activation(find_encoder(model).config, location)
    if kind == KIND_BERT_TF:
        report = _load_object_checkpoint(model, location)
    else:
        arrays, ignored = read_arrays(kind, location)
        report = _load_arrays(model, arrays, CheckpointReport(location, kind, ignored=ignored))
    logging.info("%s", report)
    logging.info("%s: %s", location, heads_summary(model, report))
    if report.missing or report.mismatched:
        logging.warning("%s: %d model weights were NOT loaded and keep their initial values: %s",
                        location, len(report.missing) + len(report.mismatched),
                        ", ".join(report.missing + report.mismatched))
    return report


def heads_summary(model, report: CheckpointReport) -> str:
    """Which heads the checkpoint holds, and which of the model's were loaded or newly
    initialised: "heads found: classifier; loaded: classifier; newly initialised: none"."""
    names_of = {head.ATTRIBUTE: set(head.CHECKPOINT_NAMES.tf1_names())
                for head in families.HEADS}
    in_checkpoint = set(report.loaded) | set(report.unused) | {
        entry.split(" ")[0] for entry in report.mismatched}
    model_heads = {name: set(head.CHECKPOINT_NAMES.tf1_names())
                   for name, head in named_layers(model) if hasattr(head, "ATTRIBUTE")}
    found = [head for head, names in names_of.items() if names & in_checkpoint
             # bert_tf checkpoints name what the model does not use by object path
             or any(f"/{head}/" in f"/{name}" for name in report.unused)]
    # One set of TF1 names, two heads (classifier, token_classifier): the model's, else the first.
    twins = {head: [other for other in found if names_of[other] == names_of[head]]
             for head in found}
    found = [head for head in found
             if head == next((t for t in twins[head] if t in model_heads), twins[head][0])]
    loaded = [head for head, names in model_heads.items() if names <= set(report.loaded)]
    new = [head for head in model_heads if head not in loaded]
    return (f"heads found: {', '.join(found) or 'none'}; loaded: {', '.join(loaded) or 'none'}; "
            f"newly initialised: {', '.join(new) or 'none'}")


def _check_hf_activation(config: BertConfig, directory: str) -> None:
    """Warns when the model's GELU is not the one the Hugging Face model was trained with
    (their "gelu" is the erf form, BERT's "gelu" the tanh approximation)."""
    trained = bert_config_from_hf(directory).activation
    if config.activation != trained:
        logging.warning("%s was trained with the activation bert_tf calls %r but the model uses %r: "
                        "its outputs will differ from the Hugging Face model's. Build the model "
                        "from checkpoints.bert_config_from_hf(%r).", directory,
                        name_of_activation(config.ACTIVATION_NAMES, trained), config.hidden_act,
                        directory)


def _load_arrays(model, arrays: LazyArrays, report: CheckpointReport) -> CheckpointReport:
    """Copies TF1-named arrays into the model through the name map."""
    mappings = model_mappings(model)
    _check_encoder_complete([m.name for m in mappings if m.in_encoder and m.name not in arrays],
                            arrays, report.path, find_encoder(model))
    for mapping in mappings:
        if mapping.name in arrays:
            _copy(mapping, np.asarray(arrays[mapping.name]()), report)
        else:
            report.missing.append(mapping.name)
    report.unused = sorted(set(arrays) - {m.name for m in mappings})
    return report


def _copy(mapping: WeightMapping, value: np.ndarray, report: CheckpointReport) -> None:
    """Assigns one weight; a head of another shape is reported and skipped, not an error."""
    if not mapping.in_encoder and value.shape != tuple(mapping.variable.shape):
        # A head for another label set (e.g. MNLI → RTE) keeps the new head's initial values.
        report.mismatched.append(f"{mapping.name} {list(value.shape)} ≠ {list(mapping.variable.shape)}")
        return
    _assign(mapping, value, report.path)
    report.loaded.append(mapping.name)


def _check_encoder_complete(missing: list[str], available: Iterable[str], source: str,
                            encoder: BertEncoder) -> None:
    """Raises when an encoder weight other than the pooler is absent (the pooler may be): the
    checkpoint is another family's (or a kind the model's family refuses), or it holds another
    number of blocks."""
    missing = [name for name in missing if not re.search(r"(^|/)pooler/", name)]
    if not missing:
        return
    available = list(available)
    model_family = families.family_of(encoder.config)
    found, kind = families.family_of_checkpoint(available)
    refusal = model_family.refuse_checkpoint(kind, available, source)
    if refusal is None and found not in (None, model_family):
        refusal = (found.refuse_model(kind, model_family, source) if found.refuse_model
                   else _other_family(found, kind, model_family, source))
    if refusal is not None:
        raise CheckpointError(refusal)
    pattern, sentence = model_family.blocks_found
    blocks = {m.group(1) for m in map(pattern.search, available) if m}
    raise CheckpointError(
        f"{source}: {len(missing)} encoder weights are not in the checkpoint, e.g. "
        f"{', '.join(missing[:3])}. {sentence.format(count=len(blocks))}")


def _other_family(found: ModelFamily, kind: str, model_family: ModelFamily, source: str) -> str:
    """A checkpoint of the family `found` (of its `kind`) met by a model of `model_family`."""
    article = "an" if kind[0] in "AEIOU" else "a"
    return (f"{source} is {article} {kind} checkpoint but the model config is "
            f"{model_family.name} ({model_family.config_keys}): use the config released with "
            f"the checkpoint ({found.config_file})")


def _variable_paths(root) -> dict[int, tuple[str, object]]:
    """id(variable) → (path from root as "a/b/c", variable), breadth first like the saver."""
    paths, queue, seen = {}, [(root, ())], {id(root)}
    while queue:
        node, path = queue.pop(0)
        for name, child in tf.train.TrackableView.children(node).items():
            if id(child) in seen:
                continue
            seen.add(id(child))
            if isinstance(child, (keras.Variable, tf.Variable)):
                paths[id(child)] = ("/".join(path + (name,)), child)
            else:
                queue.append((child, path + (name,)))
    return paths


def _load_object_checkpoint(model, prefix: str) -> CheckpointReport:
    """Restores a bert_tf checkpoint by object path: the encoder always, heads when present.

    The checkpoint may hold an encoder alone or any model of model/models.py, saved as
    `tf.train.Checkpoint(model=..., optimizer=..., ...)`.
    """
    ckpt = ObjectCheckpoint(prefix)
    root_name = "model" if "model" in ckpt.roots else next(iter(ckpt.roots), "")
    saved_model = ckpt.roots.get(root_name, 0)
    saved_encoder = ckpt.node(saved_model, "encoder") or saved_model
    if ckpt.node(saved_encoder, "embeddings") is None:
        raise CheckpointError(f"{prefix}: this object-based checkpoint holds no BERT encoder "
                              f"(no model/encoder/embeddings or model/embeddings object)")
    encoder = find_encoder(model)
    encoder_paths = _variable_paths(encoder)
    # Reports use TF1 names, the same for every kind of checkpoint.
    tf1_names = {id(m.variable): m.name for m in model_mappings(model)}
    found = [(WeightMapping(tf1_names.get(key, path), var), ckpt.key(saved_encoder, path))
             for key, (path, var) in encoder_paths.items()]
    if model is not encoder:  # heads: only a checkpoint of a whole model can hold them
        head_root = saved_model if saved_encoder != saved_model else None
        found += [(WeightMapping(tf1_names.get(key, path), var, in_encoder=False),
                   ckpt.key(head_root, path))
                  for key, (path, var) in _variable_paths(model).items() if key not in encoder_paths]
    _check_encoder_complete([m.name for m, key in found if m.in_encoder and key is None],
                            ckpt.variable_keys(), prefix, encoder)
    report = CheckpointReport(prefix, KIND_BERT_TF)
    for mapping, key in found:
        if key is None:
            report.missing.append(mapping.name)
        else:
            _copy(mapping, ckpt.reader.get_tensor(key), report)
    used = {key for _, key in found if key}
    weights = ckpt.variable_keys()
    unused = [k for k in weights if k.startswith(root_name + "/") and k not in used]
    report.unused = sorted(k[:-len(OBJECT_VALUE_SUFFIX)] for k in unused)
    report.ignored = len(weights) - len(used) - len(unused)
    return report


# --------------------------------------------------------------------------- writing

def export_google_checkpoint(model, prefix: str | os.PathLike,
                             vocab_file: str | os.PathLike | None = None) -> str:
    """Writes `model` in the original's TF1 layout, readable by the original code and converters.

    Writes `<prefix>.index`, `<prefix>.data-00000-of-00001` and `bert_config.json` (the encoder's
    config; `albert_config.json` for ALBERT, as google-research/albert names it), plus a copy of `vocab_file` as `vocab.txt` when given, into prefix's directory.

    Args:
      model: a BertEncoder or a model of model/models.py; its heads are written under their TF1 names.
      prefix: e.g. "exported/bert_model.ckpt".
      vocab_file: the vocabulary to ship alongside.

    Returns:
      The checkpoint prefix.
    """
    config = find_encoder(model).config
    config.check_google_layout()
    arrays = {m.name: np.asarray(m.variable.numpy()) for m in model_mappings(model)}
    files = {families.family_of(config).config_file: config.to_json_string()}
    if vocab_file is not None:
        files["vocab.txt"] = filesystem.read_text(os.fspath(vocab_file))
    write_tf1_checkpoint(arrays, prefix, files)
    logging.info("exported %d weights in the original TF1 layout to %s", len(arrays), prefix)
    return os.fspath(prefix)


