"""Checkpoint names, each written once and read in every direction.

A layer whose weights checkpoints name (an encoder, through its family; a head; ELECTRA's
generator) declares them as `Name`s: the original's TF1 name, the attribute path on the layer and
the Hugging Face name, with `{i}`-style placeholders for block indices
(`bert/encoder/layer_{i}/attention/self/query/kernel` ↔ `transformer_layers[{i}].query.kernel`
↔ `encoder.layer.{i}.attention.self.query.weight`). A `NameTable` lists a layer's names in the
original's order and translates between any two of the three by matching one pattern and filling
in another, so no direction is written by hand and none can drift from another.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import re
from typing import Any, Callable, Iterable, Mapping

_PLACEHOLDER = re.compile(r"\{(\w+)\}")
# The three ways a weight is named; `NameTable.translate` goes from any to any.
TF1, ATTRIBUTE, HF = "tf1", "attribute", "hf"


@dataclasses.dataclass(frozen=True)
class Name:
    """One weight's names (patterns with `{placeholders}`).

    Attributes:
      tf1: the original's TF1 name.
      attribute: the attribute path on the declaring layer ("a.b[{i}].c").
      hf: the Hugging Face name (without the model's prefix, e.g. "bert."); None where
        transformers has none.
      transpose: a PyTorch Linear weight ([out, in]) that is a TF1 kernel ([in, out]).
      optional: present only where the layer has the attribute (an embedding projection that
        exists where the widths differ).
      hf_aliases: other Hugging Face names read as this weight (older files' LayerNorm
        gamma/beta).
    """

    tf1: str
    attribute: str
    hf: str | None = None
    transpose: bool = False
    optional: bool = False
    hf_aliases: tuple[str, ...] = ()

    @property
    def placeholders(self) -> tuple[str, ...]:
        """The placeholders, in the order the TF1 name has them (the outer index first)."""
        return tuple(dict.fromkeys(_PLACEHOLDER.findall(self.tf1)))


@dataclasses.dataclass(frozen=True)
class Entry:
    """One weight of one layer, its placeholders filled in."""

    tf1: str
    attribute: str
    hf: str | None
    transpose: bool


def _leaf(hf: str | None, leaf: str) -> str | None:
    return None if hf is None else f"{hf}.{leaf}"


def dense(tf1: str, attribute: str, hf: str | None = None, optional: bool = False
          ) -> tuple[Name, Name]:
    """A Dense layer's kernel and bias (TF1 `kernel`/`bias`, Hugging Face `weight`/`bias`)."""
    return (Name(f"{tf1}/kernel", f"{attribute}.kernel", _leaf(hf, "weight"), True, optional),
            Name(f"{tf1}/bias", f"{attribute}.bias", _leaf(hf, "bias"), False, optional))


def layer_norm(tf1: str, attribute: str, hf: str | None = None) -> tuple[Name, Name]:
    """A LayerNorm's gamma and beta (Hugging Face `weight`/`bias`; older files `gamma`/`beta`)."""
    return tuple(Name(f"{tf1}/{leaf}", f"{attribute}.{leaf}", _leaf(hf, hf_leaf),
                      hf_aliases=(_leaf(hf, leaf),) if hf else ())
                 for leaf, hf_leaf in (("gamma", "weight"), ("beta", "bias")))


def embedding_table(tf1: str, attribute: str, hf: str | None = None) -> Name:
    """An embedding table (Hugging Face's `Embedding.weight`, [rows, width] in both)."""
    return Name(tf1, attribute, _leaf(hf, "weight"))


def output_weights(tf1_scope: str, hf: str | None = None) -> tuple[Name, Name]:
    """A head's `output_weights` [out, in] and `output_bias` (a Linear's weight and bias, [out,
    in] in PyTorch too: not transposed), under `tf1_scope` ("" for none)."""
    scope = f"{tf1_scope}/" if tf1_scope else ""
    return (Name(f"{scope}output_weights", "output_weights", _leaf(hf, "weight")),
            Name(f"{scope}output_bias", "output_bias", _leaf(hf, "bias")))


# A TransformerBlock's (bert_tf.model.encoder) sublayers in the original's order, and their kind.
BLOCK_LAYERS = (("query", dense), ("key", dense), ("value", dense), ("attention_output", dense),
                ("attention_layer_norm", layer_norm), ("intermediate", dense),
                ("output_dense", dense), ("output_layer_norm", layer_norm))


def block(tf1: str, attribute: str, hf: str, tf1_scopes: Iterable[str], hf_scopes: Iterable[str]
          ) -> tuple[Name, ...]:
    """A TransformerBlock's names: its sublayers (BLOCK_LAYERS) under `tf1`/`attribute`/`hf`,
    each at the family's scope for it."""
    return tuple(name for (layer, kind), tf1_scope, hf_scope
                 in zip(BLOCK_LAYERS, tf1_scopes, hf_scopes, strict=True)
                 for name in kind(f"{tf1}/{tf1_scope}", f"{attribute}.{layer}",
                                  f"{hf}.{hf_scope}"))


def attribute(root, path: str):
    """Follows "a.b[3].c" from root."""
    for part in path.split("."):
        name, _, index = part.partition("[")
        root = getattr(root, name)
        if index:
            root = root[int(index[:-1])]
    return root


def _has_attribute(root, path: str) -> bool:
    try:
        attribute(root, path)
    except AttributeError:
        return False
    return True


def _pattern(text: str) -> re.Pattern:
    """A name pattern as a regular expression: each `{placeholder}` a group of digits."""
    parts = _PLACEHOLDER.split(text)  # literal, placeholder, literal, ...
    return re.compile("".join(re.escape(part) if i % 2 == 0 else f"(?P<{part}>\\d+)"
                              for i, part in enumerate(parts)) + "$")


class NameTable:
    """A layer's names, in the original's order, and the translations between them.

    Args:
      *names: `Name`s (or tuples of them), in the order the original's checkpoints list them.
      counts: the number of values of each placeholder on a layer ({"i": its blocks}).
    """

    def __init__(self, *names: Name | Iterable[Name],
                 counts: Callable[[Any], Mapping[str, int]] = lambda layer: {}):
        self.names = tuple(itertools.chain.from_iterable(
            (n,) if isinstance(n, Name) else n for n in names))
        self.counts = counts

    def __add__(self, other: "NameTable") -> "NameTable":
        return NameTable(self.names, other.names, counts=self.counts)

    def renamed_hf(self, renames: Mapping[str, str]) -> "NameTable":
        """The table with the Hugging Face names that start with a key of `renames` starting
        with its value instead (a family whose transformers classes name a head otherwise)."""
        def rename(hf: str | None) -> str | None:
            start = next((old for old in renames if hf and hf.startswith(old)), None)
            return hf if start is None else renames[start] + hf[len(start):]

        return NameTable(*(dataclasses.replace(
            n, hf=rename(n.hf), hf_aliases=tuple(map(rename, n.hf_aliases))) for n in self.names),
            counts=self.counts)

    def entries(self, layer) -> list[Entry]:
        """Every weight `layer` has, in order: names with the same placeholders come as a group,
        repeated for each value of them (block 0's names, then block 1's, ...)."""
        counts = self.counts(layer)
        entries = []
        for placeholders, group in itertools.groupby(self.names, lambda n: n.placeholders):
            group = list(group)
            for values in itertools.product(*(range(counts[p]) for p in placeholders)):
                fill = dict(zip(placeholders, values))
                for name in group:
                    path = name.attribute.format(**fill)
                    if name.optional and not _has_attribute(layer, path):
                        continue
                    entries.append(Entry(name.tf1.format(**fill), path,
                                         None if name.hf is None else name.hf.format(**fill),
                                         name.transpose))
        return entries

    def tf1_names(self) -> tuple[str, ...]:
        """The TF1 names of a table without placeholders (a head's)."""
        return tuple(name.tf1 for name in self.names)

    @functools.cached_property
    def _patterns(self) -> dict[str, list[tuple[re.Pattern, Name]]]:
        patterns: dict[str, list[tuple[re.Pattern, Name]]] = {TF1: [], ATTRIBUTE: [], HF: []}
        for name in self.names:
            patterns[TF1].append((_pattern(name.tf1), name))
            patterns[ATTRIBUTE].append((_pattern(name.attribute), name))
            for hf in (name.hf, *name.hf_aliases) if name.hf else ():
                patterns[HF].append((_pattern(hf), name))
        return patterns

    def translate(self, text: str, source: str, target: str) -> tuple[str | None, Name | None]:
        """`text`, a name of kind `source` (TF1, ATTRIBUTE or HF), as a name of kind `target`,
        with the `Name` that matched; (None, None) when no name of the table matches."""
        for pattern, name in self._patterns[source]:
            match = pattern.match(text)
            if match:
                result = getattr(name, target)
                return (None if result is None else result.format(**match.groupdict())), name
        return None, None

    def hf_to_tf1(self, hf: str) -> tuple[str | None, bool]:
        """(TF1 name, transpose) of a Hugging Face name, or (None, False)."""
        tf1, name = self.translate(hf, HF, TF1)
        return (tf1, name.transpose) if name else (None, False)
