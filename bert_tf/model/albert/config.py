"""AlbertConfig: google-research/albert's `albert_config.json` keys on top of BertConfig's.

An ALBERT config is a BertConfig (every function that takes one takes the other) with a
word-embedding width `embedding_size` (E) and `num_hidden_groups` groups of `inner_group_num`
Transformer blocks shared by the `num_hidden_layers` layers.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from bert_tf.model.config import BertConfig, ConfigError, config_from_hf

# Keys only ALBERT configs have (google-research/albert's AlbertConfig and Hugging Face's).
ALBERT_KEYS = ("embedding_size", "num_hidden_groups", "inner_group_num", "net_structure_type",
               "gap_size", "down_scale_factor", "num_memory_blocks")
# Options of google-research/albert's code that its released models leave at these values and
# that this encoder does not implement: accepted only there.
_FIXED_KEYS = {"net_structure_type": 0, "gap_size": 0, "down_scale_factor": 1,
               "num_memory_blocks": 0}

_HF_KEYS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
            "num_hidden_groups", "inner_group_num", "num_attention_heads", "intermediate_size",
            "hidden_dropout_prob", "attention_probs_dropout_prob", "max_position_embeddings",
            "type_vocab_size", "initializer_range")


def is_albert_dict(values: Mapping[str, Any]) -> bool:
    """Whether config keys describe an ALBERT model (any ALBERT-only key present)."""
    return any(key in values for key in ALBERT_KEYS)


@dataclasses.dataclass(frozen=True)
class AlbertConfig(BertConfig):
    """Hyper-parameters of an ALBERT encoder; defaults as google-research/albert's AlbertConfig
    for the new keys (`embedding_size` 128, one group of one block)."""

    embedding_size: int = 128
    num_hidden_groups: int = 1
    inner_group_num: int = 1
    net_structure_type: int = 0
    gap_size: int = 0
    down_scale_factor: int = 1
    num_memory_blocks: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("embedding_size", "num_hidden_groups", "inner_group_num"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        for name, default in _FIXED_KEYS.items():
            if getattr(self, name) != default:
                raise ConfigError(
                    f"{name}={getattr(self, name)!r} is not supported (only {default}, as in every "
                    f"released ALBERT model)")
        if self.num_hidden_groups > self.num_hidden_layers:
            raise ConfigError(f"num_hidden_groups ({self.num_hidden_groups}) must not exceed "
                              f"num_hidden_layers ({self.num_hidden_layers})")

    @property
    def embedding_width(self) -> int:
        """E: the width of the word-embedding table (projected to H before the first layer)."""
        return self.embedding_size

    @property
    def embedding_projection(self) -> str:
        """google-research/albert's `embedding_hidden_mapping_in` (always present)."""
        return "embedding_hidden_mapping_in"

    def group_of_layer(self, layer: int) -> int:
        """The group whose blocks layer `layer` runs, as google-research/albert computes it."""
        return int(layer / (self.num_hidden_layers / self.num_hidden_groups))


def albert_config_from_hf(values: Mapping[str, Any], source: str = "config.json") -> AlbertConfig:
    """An AlbertConfig from the dict of a Hugging Face ALBERT `config.json`.

    `hidden_act` is translated so that the function stays the same: Hugging Face "gelu_new"
    (tanh, ALBERT's default) becomes "gelu", their "gelu" (erf) becomes "gelu_exact".

    Args:
      values: the parsed config.json (model_type "albert").
      source: the file, named in errors.
    """
    return config_from_hf(AlbertConfig, values, _HF_KEYS, source, default_act="gelu_new")
