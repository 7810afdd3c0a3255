"""Hugging Face BERT, ALBERT and ELECTRA directories (`config.json` + `model.safetensors`) seen through
TF1 names (ALBERT's translation: albert/checkpoint_names.py).

Hugging Face names (`bert.encoder.layer.3.attention.self.query.weight`, with or without the
`bert.` prefix) are translated to the original's TF1 names so that checkpoints.py holds the only
map to model variables. Linear weights are [out, in] in PyTorch and kernels [in, out] in TF1:
they are transposed here; `[2,H]` head matrices are [out, in] in both and are not.
"""

from __future__ import annotations

import functools
import json
import os
import re
from typing import Callable

import numpy as np

from bert_tf import filesystem
from bert_tf.checkpoints import albert_names, electra_names
from bert_tf.model import families
from bert_tf.model.albert.config import AlbertConfig
from bert_tf.model.config import BertConfig, ConfigError
from bert_tf.model.electra.config import ElectraConfig

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX_FILE = "model.safetensors.index.json"

# Heads: Hugging Face name (without "bert.") → (TF1 name, transpose).
_HEAD_NAMES = {
    "cls.predictions.transform.dense.weight": ("cls/predictions/transform/dense/kernel", True),
    "cls.predictions.transform.dense.bias": ("cls/predictions/transform/dense/bias", False),
    "cls.predictions.transform.LayerNorm.weight": ("cls/predictions/transform/LayerNorm/gamma", False),
    "cls.predictions.transform.LayerNorm.bias": ("cls/predictions/transform/LayerNorm/beta", False),
    "cls.predictions.bias": ("cls/predictions/output_bias", False),
    "cls.seq_relationship.weight": ("cls/seq_relationship/output_weights", False),
    "cls.seq_relationship.bias": ("cls/seq_relationship/output_bias", False),
    # BertForSequenceClassification and BertForTokenClassification.
    "classifier.weight": ("output_weights", False),
    "classifier.bias": ("output_bias", False),
    "qa_outputs.weight": ("cls/squad/output_weights", False),
    "qa_outputs.bias": ("cls/squad/output_bias", False),
}
# Buffers and tied copies that are not weights of their own.
_DECODER_BIAS = "cls.predictions.decoder.bias"
_NOT_WEIGHTS = re.compile(r"(position_ids|cls\.predictions\.decoder\.(weight|bias))$")



def is_hf_directory(path: str) -> bool:
    """config.json and the weights (one file or an index of shards), on any file system."""
    return filesystem.isfile(filesystem.join(path, CONFIG_FILE)) and (
        filesystem.isfile(filesystem.join(path, WEIGHTS_FILE))
        or filesystem.isfile(filesystem.join(path, WEIGHTS_INDEX_FILE)))


def _read_json(path: str) -> dict:
    try:
        return json.loads(filesystem.read_text(path))
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON ({e}); give the directory's config.json as "
                          "transformers wrote it") from None


def tf1_name(hf_name: str) -> tuple[str | None, bool]:
    """Translates one Hugging Face weight name.

    Returns:
      (TF1 name, transpose), or (None, False) for a name with no TF1 counterpart.
    """
    name = hf_name[len("bert."):] if hf_name.startswith("bert.") else hf_name
    if name in _HEAD_NAMES:
        return _HEAD_NAMES[name]
    parts = re.sub(r"^encoder\.layer\.(\d+)\.", r"encoder.layer_\1.", name).split(".")
    if parts[0] not in ("embeddings", "encoder", "pooler") or len(parts) < 3:
        return None, False
    scope, leaf = parts[:-1], parts[-1]
    if scope[-1] == "LayerNorm":
        leaf = {"weight": "gamma", "bias": "beta"}.get(leaf, leaf)  # old files say gamma/beta
        return "bert/" + "/".join(scope + [leaf]), False
    if scope[-1].endswith("_embeddings") and leaf == "weight":
        return "bert/" + "/".join(scope), False
    if leaf in ("weight", "bias"):
        return "bert/" + "/".join(scope + ["kernel" if leaf == "weight" else "bias"]), leaf == "weight"
    return None, False


def hf_name(tf1: str) -> str | None:
    """The Hugging Face name (without "bert.") that `tf1_name` translates to `tf1`, or None.

    The inverse of `tf1_name` for the export (hf_export checks every name it writes back through
    `tf1_name`, so the two cannot drift apart).
    """
    heads = {tf1_head: name for name, (tf1_head, _) in _HEAD_NAMES.items()}
    if tf1 in heads:
        return heads[tf1]
    if not tf1.startswith("bert/"):
        return None
    *scope, leaf = tf1[len("bert/"):].split("/")
    if leaf.endswith("_embeddings"):
        scope, leaf = [*scope, leaf], "weight"
    else:
        leaf = {"gamma": "weight", "beta": "bias", "kernel": "weight"}.get(leaf, leaf)
    return re.sub(r"^encoder\.layer_(\d+)\.", r"encoder.layer.\1.", ".".join([*scope, leaf]))


def electra_tf1_name(hf_name: str, scope: str = electra_names.DISCRIMINATOR_SCOPE
                     ) -> tuple[str | None, bool]:
    """Translates one Hugging Face ELECTRA weight name (with or without `electra.`): BERT's names
    under `scope` (electra_names), `embeddings_project` and the two heads.

    Returns:
      (TF1 name, transpose), or (None, False) for a name with no TF1 counterpart (e.g.
      ElectraForSequenceClassification's own head).
    """
    name = hf_name[len("electra."):] if hf_name.startswith("electra.") else hf_name
    if name == "generator_lm_head.bias":
        return "generator_predictions/output_bias", False
    hf_scope, _, leaf = name.rpartition(".")
    if hf_scope in electra_names.HF_HEAD_SCOPES:
        tf1_scope = electra_names.HF_HEAD_SCOPES[hf_scope]
        if tf1_scope.endswith("LayerNorm"):
            return f"{tf1_scope}/{'gamma' if leaf == 'weight' else 'beta'}", False
        return f"{tf1_scope}/{'kernel' if leaf == 'weight' else 'bias'}", leaf == "weight"
    if hf_scope == "embeddings_project" and leaf in ("weight", "bias"):
        return (f"{scope}/embeddings_project/{'kernel' if leaf == 'weight' else 'bias'}",
                leaf == "weight")
    bert_name, transpose = tf1_name(name)
    if bert_name is None or not bert_name.startswith("bert/") or "/pooler/" in bert_name:
        return None, False
    # google-research/electra's generator shares the discriminator's embeddings; a Hugging Face
    # generator directory brings its own (the generator's untied ones).
    return f"{scope}/{bert_name[len('bert/'):]}", transpose


def electra_hf_name(tf1: str) -> str | None:
    """The Hugging Face name (without `electra.`) that `electra_tf1_name` translates to `tf1`, or
    None: its inverse, from the same tables."""
    if tf1 == "generator_predictions/output_bias":
        return "generator_lm_head.bias"
    tf1_scope, _, leaf = tf1.rpartition("/")
    hf_leaf = {"gamma": "weight", "beta": "bias", "kernel": "weight"}.get(leaf, leaf)
    heads = {v: k for k, v in electra_names.HF_HEAD_SCOPES.items()}
    if tf1_scope in heads:
        return f"{heads[tf1_scope]}.{hf_leaf}"
    scope, _, rest = tf1.partition("/")
    if scope not in (electra_names.DISCRIMINATOR_SCOPE, electra_names.GENERATOR_SCOPE):
        return None
    if rest.startswith("embeddings_project/"):
        return f"embeddings_project.{hf_leaf}"
    return hf_name(f"bert/{rest}")


def label_names(directory: str) -> list[str] | None:
    """A Hugging Face classifier's label names (`id2label` in id order), or None when the
    directory names none of its own (no id2label, or transformers' LABEL_0, LABEL_1, ...)."""
    id2label = _read_json(filesystem.join(directory, CONFIG_FILE)).get("id2label") or {}
    labels = [id2label.get(str(i)) for i in range(len(id2label))]
    if None in labels or labels == [f"LABEL_{i}" for i in range(len(labels))]:
        return None
    return labels


def _weight_files(directory: str) -> list[str]:
    index = filesystem.join(directory, WEIGHTS_INDEX_FILE)
    if filesystem.isfile(index):
        shards = sorted(set(_read_json(index)["weight_map"].values()))
        return [filesystem.join(directory, shard) for shard in shards]
    return [filesystem.join(directory, WEIGHTS_FILE)]


class _WeightsInMemory(dict):
    """A safetensors file read whole: {name: array} with `safe_open`'s `get_tensor`."""

    def get_tensor(self, name: str) -> np.ndarray:
        return self[name]


def _open_weights(path: str):
    """safetensors' lazy reader of a local file; a file on another file system (gs://) is read
    whole, since safetensors opens local paths only."""
    if not filesystem.scheme(path):
        from safetensors import safe_open  # noqa: PLC0415 (only needed for this format)

        return safe_open(path, framework="numpy")
    from safetensors.numpy import load  # noqa: PLC0415

    return _WeightsInMemory(load(filesystem.read_bytes(path)))


def load_tf1_arrays(directory: str) -> dict[str, Callable[[], np.ndarray]]:
    """Lazy arrays of a Hugging Face directory under TF1 names (float32, TF1 layout).

    Names with no TF1 counterpart are kept under their Hugging Face name so that a report can
    list them as unused; buffers and tied copies (`position_ids`, `cls.predictions.decoder.*`)
    are dropped.
    """
    config = bert_config_from_hf(directory)
    translate, not_weights = tf1_name, _NOT_WEIGHTS
    handles = [_open_weights(path) for path in _weight_files(directory)]
    if isinstance(config, AlbertConfig):
        translate, not_weights = albert_names.hf_tf1_name, albert_names.HF_NOT_WEIGHTS
    elif isinstance(config, ElectraConfig):
        scope = electra_names.hf_scope(name for handle in handles for name in handle.keys())
        translate = functools.partial(electra_tf1_name, scope=scope)
        not_weights = electra_names.HF_NOT_WEIGHTS
    arrays: dict[str, Callable[[], np.ndarray]] = {}
    decoder_bias = None
    for handle in handles:
        for hf_name in handle.keys():
            name, transpose = translate(hf_name)

            def load(handle=handle, hf_name=hf_name, transpose=transpose) -> np.ndarray:
                value = handle.get_tensor(hf_name).astype(np.float32, copy=False)
                return np.ascontiguousarray(value.T) if transpose else value

            if hf_name.endswith(_DECODER_BIAS):
                decoder_bias = load
            if not not_weights.search(hf_name):
                arrays[name or hf_name] = load
    if decoder_bias is not None and not isinstance(config, (AlbertConfig, ElectraConfig)):
        # Files that kept only the tied copy of the masked-LM output bias.
        arrays.setdefault(_HEAD_NAMES["cls.predictions.bias"][0], decoder_bias)
    return arrays


def bert_config_from_hf(path: str | os.PathLike) -> BertConfig:
    """The config of the family whose `model_type` a Hugging Face `config.json` (or the
    directory holding it) names (`families.family_of_hf`).

    `hidden_act` is translated so that the function is the same, under the family's name for it:
    Hugging Face "gelu" (erf) becomes "gelu_exact", "gelu_new" (tanh) BERT's and ALBERT's "gelu"
    (ELECTRA's "gelu_tanh").
    """
    path = os.fspath(path)
    if filesystem.isdir(path):
        path = filesystem.join(path, CONFIG_FILE)
    try:
        values = _read_json(path)
    except FileNotFoundError:
        raise ConfigError(f"{path}: Hugging Face config.json not found") from None
    return families.family_of_hf(values, path).config_from_hf(values, path)
