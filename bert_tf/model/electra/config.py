"""ElectraConfig: a BertConfig with google-research/electra's `embedding_size`, told apart by
`"model_type": "electra"` (google-research/electra keeps its hyper-parameters in code, not in a
file; bert_tf writes them as `electra_config.json`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Mapping

from bert_tf.model.config import GELU_ERF, GELU_TANH, BertConfig, ConfigError, config_from_hf

MODEL_TYPE = "electra"
# ELECTRA's `hidden_act` vocabulary as google-research/electra's code means it: its `gelu` is the
# erf form (model/modeling.py, `def gelu`), and "gelu" is its default. bert_tf writes
# "gelu_exact" (the first name of the function): that reference code keeps its hyper-parameters
# in code, so no reader of the file needs the bare name, and a file bert_tf writes cannot be
# mistaken for one written before ELECTRA's "gelu" meant the erf form here
# (`bert_tf.checkpoints.model_config.legacy_activation`).
ELECTRA_ACTIVATION_NAMES = {"gelu_exact": GELU_ERF, "gelu": GELU_ERF, "gelu_tanh": GELU_TANH,
                            "relu": "relu", "tanh": "tanh", "linear": "linear"}

_HF_KEYS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
            "num_attention_heads", "intermediate_size", "hidden_dropout_prob",
            "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
            "initializer_range")


def is_electra_dict(values: Mapping[str, Any]) -> bool:
    """Whether config keys describe an ELECTRA model (`model_type` "electra")."""
    return values.get("model_type") == MODEL_TYPE


@dataclasses.dataclass(frozen=True)
class ElectraConfig(BertConfig):
    """Hyper-parameters of an ELECTRA encoder (discriminator or generator).

    `embedding_size` (E) is the width of the embedding tables; None means the hidden size, as
    google-research/electra's default. Where E differs from H, `embeddings_project` (Dense E → H)
    runs after the embeddings' LayerNorm.
    """

    ACTIVATION_NAMES: ClassVar[Mapping[str, str]] = ELECTRA_ACTIVATION_NAMES

    embedding_size: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        value = self.embedding_size
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value <= 0):
            raise ConfigError(f"embedding_size must be a positive integer, got {value!r}")

    def check_google_layout(self) -> None:
        """google-research/electra's code reads no config file and computes "gelu" as the erf
        form: a model with another activation would run there with another function."""
        if self.activation != GELU_ERF:
            raise ConfigError(
                f"hidden_act {self.hidden_act!r}: google-research/electra's code runs every "
                f"ELECTRA with its \"gelu\", the erf form (\"gelu_exact\"), and reads no config "
                f"file, so this model in its layout would run there with another activation: "
                f"use the run directory itself as --init_checkpoint instead")

    @property
    def embedding_width(self) -> int:
        """E: the width of the embedding tables (H unless embedding_size says otherwise)."""
        return self.embedding_size or self.hidden_size

    @property
    def projects_embeddings(self) -> bool:
        """Whether the embeddings are projected from E to H (`embeddings_project`)."""
        return self.embedding_width != self.hidden_size

    @property
    def embedding_projection(self) -> str | None:
        """google-research/electra's `embeddings_project`, where E differs from H."""
        return "embeddings_project" if self.projects_embeddings else None

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "ElectraConfig":
        return super().from_dict({k: v for k, v in values.items() if k != "model_type"})

    def to_dict(self) -> dict[str, Any]:
        """bert_config.json's keys, `embedding_size` and `"model_type": "electra"`."""
        values = super().to_dict()
        if values["embedding_size"] is None:
            del values["embedding_size"]
        return {**values, "model_type": MODEL_TYPE}

    def generator(self, hidden_fraction: float) -> "ElectraConfig":
        """The generator's config as google-research/electra's `get_generator_config`: hidden
        size round(H · hidden_fraction), intermediate size 4 × that, one head per 64 units (at
        least one); the tables' width E kept (the generator shares the discriminator's
        embeddings)."""
        if not 0.0 < hidden_fraction <= 1.0:
            raise ConfigError(f"the generator's hidden fraction must be in (0, 1], got "
                              f"{hidden_fraction!r}")
        hidden = int(round(self.hidden_size * hidden_fraction))
        return self.replace(hidden_size=hidden, intermediate_size=4 * hidden,
                            num_attention_heads=max(1, hidden // 64),
                            embedding_size=self.embedding_width)


def electra_config_from_hf(values: Mapping[str, Any], source: str = "config.json"
                           ) -> ElectraConfig:
    """An ElectraConfig from the dict of a Hugging Face ELECTRA `config.json`.

    `hidden_act` is translated so that the function stays the same (Hugging Face "gelu", ELECTRA's
    default there, is the erf form, as google-research/electra's: written "gelu_exact").
    """
    return config_from_hf(ElectraConfig, values, _HF_KEYS, source, default_act="gelu")
