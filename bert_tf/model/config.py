"""BertConfig: the model hyper-parameters, stored under the original `bert_config.json` key names.

Run options (batch size, learning rate, steps) do not belong here; they are flags of the scripts.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any, Mapping, Sequence

from bert_tf import filesystem
from bert_tf.errors import UserError

# Activations the original accepts in `hidden_act`, plus "gelu_exact" (the erf form) which is ours.
# "gelu" is the tanh approximation, as in the original.
ACTIVATIONS = ("gelu", "gelu_exact", "relu", "tanh", "linear")
# Hugging Face `hidden_act` → ours, the same function: their "gelu" is the erf form, "gelu_new"
# the tanh approximation.
HF_ACTIVATIONS = {"gelu": "gelu_exact", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu",
                  "gelu_fast": "gelu", "relu": "relu", "tanh": "tanh", "linear": "linear"}


class ConfigError(UserError):
    """A bert_config.json whose values cannot describe a model."""


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """Hyper-parameters of a BERT encoder; field names are the original JSON keys.

    `extra` holds keys that released configs carry but the model does not use (for example
    `directionality` or `pooler_*` in the Chinese release); they are kept so a config written back
    out is the one that was read.
    """

    vocab_size: int
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 16
    initializer_range: float = 0.02
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings", "type_vocab_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        self.check_head_size()
        if self.hidden_act not in ACTIVATIONS:
            raise ConfigError(
                f"unknown hidden_act {self.hidden_act!r}; expected one of {', '.join(ACTIVATIONS)}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {value!r}")
        if self.initializer_range <= 0:
            raise ConfigError(f"initializer_range must be positive, got {self.initializer_range!r}")

    def check_head_size(self) -> None:
        """Raises ConfigError unless the heads split hidden_size evenly."""
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"hidden_size ({self.hidden_size}) must be divisible by num_attention_heads "
                f"({self.num_attention_heads})")

    @property
    def head_size(self) -> int:
        """D: the width of one attention head."""
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "BertConfig":
        """Builds a config from original-style keys; unknown keys go to `extra`."""
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        if "vocab_size" not in values:
            raise ConfigError("bert config has no vocab_size")
        known = {k: v for k, v in values.items() if k in names}
        extra = {k: v for k, v in values.items() if k not in names}
        return cls(**known, extra=extra)

    @property
    def embedding_width(self) -> int:
        """The width of the word-embedding table: H for BERT (ALBERT's is E)."""
        return self.hidden_size

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> "BertConfig":
        """Reads a `bert_config.json` (the original's or ours)."""
        return cls._from_file_values(read_config_json(path), path)

    @classmethod
    def _from_file_values(cls, values: dict[str, Any], path: str | os.PathLike) -> "BertConfig":
        try:
            return cls.from_dict(values)
        except (ConfigError, TypeError) as e:
            raise ConfigError(f"{path}: {e}") from None

    def to_dict(self) -> dict[str, Any]:
        """The original JSON layout, with any extra keys that were read."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        values.update(self.extra)
        return values

    def to_json_string(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path: str | os.PathLike) -> None:
        """Writes the config through the one writer (a temporary name, then a rename)."""
        filesystem.write_atomically(os.fspath(path), self.to_json_string())

    def replace(self, **changes: Any) -> "BertConfig":
        return dataclasses.replace(self, **changes)


def read_config_json(path: str | os.PathLike) -> dict[str, Any]:
    """The JSON object of a model config file; errors name the file (and line)."""
    try:
        values = json.loads(filesystem.read_text(os.fspath(path)))
    except FileNotFoundError:
        raise ConfigError(f"{path}: bert config file not found (check --bert_config_file)") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: line {e.lineno}: not valid JSON ({e.msg})") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 ({e.reason}); JSON files are UTF-8") from None
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: expected a JSON object of model settings")
    return values


def hf_hidden_act(values: Mapping[str, Any], source: str, default: str) -> str:
    """Checks what a Hugging Face config.json sets beyond our keys; returns our `hidden_act`.

    Args:
      values: the parsed config.json.
      source: the file, named in errors.
      default: the model family's Hugging Face default activation.
    """
    eps = values.get("layer_norm_eps", 1e-12)
    if not math.isclose(eps, 1e-12, rel_tol=0, abs_tol=1e-13):
        raise ConfigError(f"{source}: layer_norm_eps {eps} differs from BERT's 1e-12")
    if values.get("position_embedding_type", "absolute") != "absolute":
        raise ConfigError(f"{source}: position_embedding_type "
                          f"{values['position_embedding_type']!r} is not supported (BERT uses "
                          f"absolute position embeddings)")
    act = values.get("hidden_act", default)
    if act not in HF_ACTIVATIONS:
        raise ConfigError(f"{source}: hidden_act {act!r} has no bert_tf equivalent "
                          f"(supported: {', '.join(HF_ACTIVATIONS)})")
    return HF_ACTIVATIONS[act]


def config_from_hf(config_class: type, values: Mapping[str, Any], keys: Sequence[str],
                   source: str, default_act: str):
    """`config_class` from a Hugging Face config.json's `keys`, its activation translated
    (`hf_hidden_act`); a value the class refuses names `source`."""
    known = {key: values[key] for key in keys if key in values}
    hidden_act = hf_hidden_act(values, source, default=default_act)
    try:
        return config_class.from_dict({**known, "hidden_act": hidden_act})
    except (ConfigError, TypeError) as e:
        raise ConfigError(f"{source}: {e}") from None
