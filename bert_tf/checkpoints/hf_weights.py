"""Hugging Face BERT, ALBERT and ELECTRA directories (`config.json` + `model.safetensors`) seen through
TF1 names.

Hugging Face names (`bert.encoder.layer.3.attention.self.query.weight`, with or without the
family's `bert.` prefix) are translated to the original's TF1 names by the family's one name table
(`ModelFamily.hf_names`: its encoder's names and its heads'), so that name_map holds the only map
to model variables. Linear weights are [out, in] in PyTorch and kernels [in, out] in TF1: they are
transposed here; `[2,H]` head matrices are [out, in] in both and are not.
"""

from __future__ import annotations

import json
import os
from typing import Callable

import numpy as np

from bert_tf import filesystem
from bert_tf.model import families
from bert_tf.model.config import BertConfig, ConfigError
from bert_tf.model.family import ModelFamily
from bert_tf.model.names import NameTable

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX_FILE = "model.safetensors.index.json"

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


def _unprefixed(hf_name: str, family: ModelFamily) -> str:
    return hf_name[len(family.hf_prefix):] if hf_name.startswith(family.hf_prefix) else hf_name


def tf1_name(hf_name: str, family: ModelFamily = families.FAMILIES[0],
             table: NameTable | None = None) -> tuple[str | None, bool]:
    """Translates one Hugging Face weight name of `family` (BERT by default), with or without
    its prefix, through its name table (`table`: `family.hf_names()` unless given).

    Returns:
      (TF1 name, transpose), or (None, False) for a name with no TF1 counterpart.
    """
    return (table or family.hf_names()).hf_to_tf1(_unprefixed(hf_name, family))


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
    list them as unused; buffers and tied copies (`ModelFamily.hf_not_weights`: `position_ids`,
    `cls.predictions.decoder.*`) are dropped, a tied copy being read when a file kept only it.
    """
    family = families.family_of(bert_config_from_hf(directory))
    handles = [_open_weights(path) for path in _weight_files(directory)]
    table = family.hf_names(name for handle in handles for name in handle.keys())
    arrays: dict[str, Callable[[], np.ndarray]] = {}
    copies: dict[str, Callable[[], np.ndarray]] = {}
    for handle in handles:
        for hf_name in handle.keys():
            name, transpose = tf1_name(hf_name, family, table)

            def load(handle=handle, hf_name=hf_name, transpose=transpose) -> np.ndarray:
                value = handle.get_tensor(hf_name).astype(np.float32, copy=False)
                return np.ascontiguousarray(value.T) if transpose else value

            if _unprefixed(hf_name, family) in family.hf_tied_copies:
                copies[_unprefixed(hf_name, family)] = load
            if not family.hf_not_weights.search(hf_name):
                arrays[name or hf_name] = load
    for copy, load in copies.items():
        arrays.setdefault(tf1_name(family.hf_tied_copies[copy], family, table)[0], load)
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
