"""The BERT family's declaration (google-research/bert)."""

from __future__ import annotations

import re
from typing import Any, Mapping

from bert_tf.model import heads
from bert_tf.model.bert import names
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


# How many layers an incomplete checkpoint holds, and which config key would fix it.
BLOCKS_FOUND = (re.compile(r"layer_(\d+)/"),
                "The checkpoint has {count} encoder layers; check num_hidden_layers in "
                "bert_config.json, and that this is a BERT checkpoint.")
# The heads of google-research/bert's scripts (and its NER forks' tagger).
HEADS = (heads.MaskedLM, heads.NextSentence, heads.Classifier, heads.Span, heads.TokenClassifier)

BERT = ModelFamily(
    name="BERT", config_class=BertConfig, encoder_class=BertEncoder,
    config_file="bert_config.json", claims=lambda values: True, hf_model_type="bert",
    config_from_hf=bert_config_from_hf_values, hf_class_prefix="Bert",
    names=names.ENCODER, heads=HEADS, hf_prefix="bert.",
    hf_not_weights=re.compile(r"(position_ids|cls\.predictions\.decoder\.(weight|bias))$"),
    # Files that kept only the tied copy of the masked-LM output bias.
    hf_tied_copies={"cls.predictions.decoder.bias": "cls.predictions.bias"},
    checkpoint_kinds=(("BERT", re.compile(r"(^|/)layer_\d+/")),),
    config_keys="lacks embedding_size / num_hidden_groups", blocks_found=BLOCKS_FOUND)
