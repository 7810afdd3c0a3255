"""The model families, registered once: what the rest of bert_tf may ask of a family.

Each family declares itself in its own folder (`bert/family.py`, `albert/family.py`,
`electra/family.py`) as a `ModelFamily`; `FAMILIES` below is the one list of them. Code outside
the families looks a family up here (from a config, a config file's keys or a Hugging Face
`model_type`) and asks it, instead of testing which family it is.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from bert_tf.model.albert.family import ALBERT
from bert_tf.model.bert.family import BERT
from bert_tf.model.config import BertConfig, ConfigError
from bert_tf.model.electra.family import ELECTRA
from bert_tf.model.family import ModelFamily

# The one registration list. The first is the default: it claims a config no other claims.
FAMILIES: tuple[ModelFamily, ...] = (BERT, ALBERT, ELECTRA)
# Every family's head classes, in the order checkpoints list their weights.
HEADS: tuple[type, ...] = tuple(dict.fromkeys(head for family in FAMILIES for head in family.heads))


def family_of(config: BertConfig) -> ModelFamily:
    """The family whose config class `config` is (the most derived one that matches)."""
    for cls in type(config).__mro__:
        for family in FAMILIES:
            if family.config_class is cls:
                return family
    raise TypeError(f"{type(config).__name__} is the config of no registered model family")


def family_of_values(values: Mapping[str, Any]) -> ModelFamily:
    """The family a config file's keys describe (the default one when no other claims them)."""
    default, *others = FAMILIES
    return next((family for family in others if family.claims(values)), default)


def family_of_hf(values: Mapping[str, Any], source: str) -> ModelFamily:
    """The family of a Hugging Face config.json's `model_type` ("bert" when it names none).

    Raises:
      ConfigError: a model_type no family reads.
    """
    model_type = values.get("model_type", FAMILIES[0].hf_model_type)
    for family in FAMILIES:
        if family.hf_model_type == model_type:
            return family
    default, *others = FAMILIES
    raise ConfigError(f"{source}: model_type {model_type!r} is not {default.name} (nor "
                      f"{', nor '.join(f.name for f in others)}); only their weights can be "
                      f"imported")


def config_files() -> tuple[str, ...]:
    """The config file names of every family, the default's first."""
    return tuple(dict.fromkeys(family.config_file for family in FAMILIES))


def build_encoder(config: BertConfig, dtype=None, name: str = "bert"):
    """The encoder `config` describes (its family's encoder class)."""
    return family_of(config).encoder_class(config, dtype=dtype, name=name)


def family_of_checkpoint(names: Iterable[str]) -> tuple[ModelFamily | None, str | None]:
    """The family and kind (`ModelFamily.checkpoint_kinds`) whose encoder names a checkpoint
    holds (TF1 names or object paths), the default family's last; (None, None) for none."""
    names = list(names)
    default, *others = FAMILIES
    for family in (*others, default):
        for kind, pattern in family.checkpoint_kinds:
            if any(pattern.search(name) for name in names):
                return family, kind
    return None, None
