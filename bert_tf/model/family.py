"""`ModelFamily`: what a model family declares, in its own folder (`bert_tf.model.families` is
the one list of them)."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

from bert_tf.model.config import BertConfig


@dataclasses.dataclass(frozen=True)
class ModelFamily:
    """What a model family declares.

    Attributes:
      name: as messages name it ("BERT", "ALBERT", "ELECTRA").
      config_class: its config (a BertConfig subclass, or BertConfig itself).
      encoder_class: its encoder (a BertEncoder subclass, or BertEncoder itself).
      config_file: the name its reference code's releases give the config beside a checkpoint
        (and the one bert_tf writes beside a checkpoint in that layout).
      claims: whether a config file's keys are this family's (the default family claims all).
      hf_model_type: the `model_type` of its Hugging Face `config.json`.
      config_from_hf: its config from a Hugging Face config.json's values (and the file, for
        errors), the activation translated to the family's name of the same function.
      hf_class_prefix: the start of its transformers classes' names ("Bert": BertModel, ...).
      hf_classifier_dropout_key: the Hugging Face config key of a classifier head's dropout.
      hf_export: whether `--export_hf_dir` writes this family (a message says why not).
      files_say_model_type: whether bert_tf's config files of this family say `model_type`
        (which otherwise marks a Hugging Face config.json, with `transformers_version`).
      legacy_activation_names: `hidden_act` names that earlier bert_tf versions read as another
        function than the family's reference code means: name → the function they were read as.
    """

    name: str
    config_class: type
    encoder_class: type
    config_file: str
    claims: Callable[[Mapping[str, Any]], bool]
    hf_model_type: str
    config_from_hf: Callable[[Mapping[str, Any], str], BertConfig]
    hf_class_prefix: str
    hf_classifier_dropout_key: str = "classifier_dropout"
    hf_export: bool = True
    files_say_model_type: bool = False
    legacy_activation_names: Mapping[str, str] = dataclasses.field(default_factory=dict)
