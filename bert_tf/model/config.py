"""BertConfig: the model hyper-parameters, stored under the original `bert_config.json` key names.

Run options (batch size, learning rate, steps) do not belong here; they are flags of the scripts.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, ClassVar, Mapping, Sequence

from bert_tf import filesystem
from bert_tf.errors import UserError

# The activation functions, each by a name that means it in every family (the encoder's table).
# "gelu" alone does not: google-research/bert's and google-research/albert's `gelu` is the tanh
# approximation, google-research/electra's (and Hugging Face's) the erf form.
GELU_TANH = "gelu_tanh"  # 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
GELU_ERF = "gelu_exact"  # 0.5·x·(1 + erf(x/√2))
# BERT's and ALBERT's `hidden_act` vocabulary, as their reference code means it: name → function.
# The first name of a function is the one bert_tf writes ("gelu": the original reads no other).
BERT_ACTIVATION_NAMES = {"gelu": GELU_TANH, "gelu_exact": GELU_ERF, "gelu_tanh": GELU_TANH,
                         "relu": "relu", "tanh": "tanh", "linear": "linear"}
ACTIVATIONS = tuple(BERT_ACTIVATION_NAMES)
# Hugging Face `hidden_act` → the function: their "gelu" is the erf form, "gelu_new" the tanh
# approximation. The first name of a function is the one the Hugging Face export writes.
HF_ACTIVATIONS = {"gelu": GELU_ERF, "gelu_new": GELU_TANH, "gelu_pytorch_tanh": GELU_TANH,
                  "gelu_fast": GELU_TANH, "relu": "relu", "tanh": "tanh", "linear": "linear"}


# The original's LayerNorm ε (tf.contrib.layers.layer_norm's variance_epsilon).
LAYER_NORM_EPS = 1e-12


def name_of_activation(names: Mapping[str, str], function: str) -> str:
    """The first name that `names` (a vocabulary: name → function) gives `function`."""
    return next(name for name, meant in names.items() if meant == function)


class ConfigError(UserError):
    """A bert_config.json whose values cannot describe a model."""


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """Hyper-parameters of a BERT encoder; field names are the original JSON keys.

    `extra` holds keys that released configs carry but the model does not use (for example
    `directionality` or `pooler_*` in the Chinese release); they are kept so a config written back
    out is the one that was read.

    `hidden_act` is read in the family's own vocabulary (`ACTIVATION_NAMES`, declared once per
    family) and kept as the name of that vocabulary that bert_tf writes for the same function;
    `activation` is the function's name in every family.
    """

    ACTIVATION_NAMES: ClassVar[Mapping[str, str]] = BERT_ACTIVATION_NAMES

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
    # Not in the original's bert_config.json (its LayerNorm's ε is 1e-12); written only when it
    # differs, so the files the original reads stay the original's.
    layer_norm_eps: float = LAYER_NORM_EPS
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings", "type_vocab_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        self.check_head_size()
        names = self.ACTIVATION_NAMES
        if self.hidden_act not in names:
            raise ConfigError(
                f"unknown hidden_act {self.hidden_act!r}; expected one of {', '.join(names)}")
        # Frozen: the written name replaces an alias once, here.
        object.__setattr__(self, "hidden_act", name_of_activation(names, names[self.hidden_act]))
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {value!r}")
        if not self.layer_norm_eps > 0:
            raise ConfigError(f"layer_norm_eps must be positive, got {self.layer_norm_eps!r}")
        if self.initializer_range <= 0:
            raise ConfigError(f"initializer_range must be positive, got {self.initializer_range!r}")

    def check_head_size(self) -> None:
        """Raises ConfigError unless the heads split hidden_size evenly."""
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"hidden_size ({self.hidden_size}) must be divisible by num_attention_heads "
                f"({self.num_attention_heads})")

    @property
    def activation(self) -> str:
        """The function `hidden_act` means in this family (GELU_TANH, GELU_ERF, relu, ...)."""
        return self.ACTIVATION_NAMES[self.hidden_act]

    def check_google_layout(self) -> None:
        """Raises ConfigError where the family's reference code would run a checkpoint of this
        model with another function than bert_tf does (BERT's and ALBERT's read `hidden_act`
        from the config bert_tf writes beside it: nothing to check)."""

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

    @property
    def embedding_projection(self) -> str | None:
        """The name of the Dense E → H after the embeddings, as the family's checkpoints name
        it; None where the embeddings are H wide already (BERT)."""
        return None

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
        if values["layer_norm_eps"] == LAYER_NORM_EPS:
            del values["layer_norm_eps"]
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


def hf_activation(values: Mapping[str, Any], source: str, default: str) -> str:
    """Checks what a Hugging Face config.json sets beyond our keys; returns its activation
    function (GELU_TANH, GELU_ERF, ...).

    Args:
      values: the parsed config.json.
      source: the file, named in errors.
      default: the model family's Hugging Face default activation.
    """
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
    """`config_class` from a Hugging Face config.json's `keys`, its activation translated into
    the family's name of the same function; a value the class refuses names `source`."""
    known = {key: values[key] for key in (*keys, "layer_norm_eps") if key in values}
    hidden_act = name_of_activation(config_class.ACTIVATION_NAMES,
                                    hf_activation(values, source, default=default_act))
    try:
        return config_class.from_dict({**known, "hidden_act": hidden_act})
    except (ConfigError, TypeError) as e:
        raise ConfigError(f"{source}: {e}") from None
