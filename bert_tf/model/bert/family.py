"""The BERT family's declaration (google-research/bert)."""

from __future__ import annotations

from typing import Any, Mapping

from bert_tf.model.config import BertConfig, config_from_hf
from bert_tf.model.encoder import BertEncoder
from bert_tf.model.family import ModelFamily

# The keys of a Hugging Face BERT config.json that are bert_config.json's too.
_HF_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
            "intermediate_size", "hidden_dropout_prob", "attention_probs_dropout_prob",
            "max_position_embeddings", "type_vocab_size", "initializer_range")


def bert_config_from_hf_values(values: Mapping[str, Any], source: str) -> BertConfig:
    """A BertConfig from a Hugging Face BERT config.json's values (its "gelu" is the erf form)."""
    return config_from_hf(BertConfig, values, _HF_KEYS, source, default_act="gelu")


BERT = ModelFamily(
    name="BERT", config_class=BertConfig, encoder_class=BertEncoder,
    config_file="bert_config.json", claims=lambda values: True, hf_model_type="bert",
    config_from_hf=bert_config_from_hf_values, hf_class_prefix="Bert")
