"""The ALBERT family's declaration (google-research/albert)."""

from __future__ import annotations

import re
from typing import Any, Mapping

from bert_tf.model.albert import names
from bert_tf.model.albert.config import AlbertConfig, albert_config_from_hf, is_albert_dict
from bert_tf.model.albert.modeling import AlbertEncoder
from bert_tf.model.bert.family import HEADS
from bert_tf.model.family import ModelFamily


def claims_albert(values: Mapping[str, Any]) -> bool:
    """ALBERT's keys, in a file that names no other `model_type` (ELECTRA's files carry
    `embedding_size` too; google's and bert_tf's ALBERT files name none)."""
    return is_albert_dict(values) and values.get("model_type", "albert") == "albert"


ALBERT = ModelFamily(
    name="ALBERT", config_class=AlbertConfig, encoder_class=AlbertEncoder,
    # google-research/albert's releases name theirs albert_config.json.
    config_file="albert_config.json", claims=claims_albert, hf_model_type="albert",
    config_from_hf=albert_config_from_hf, hf_class_prefix="Albert",
    hf_classifier_dropout_key="classifier_dropout_prob",
    names=names.ENCODER, heads=HEADS, hf_prefix="albert.", hf_head_renames=names.HF_HEAD_RENAMES,
    hf_not_weights=names.HF_NOT_WEIGHTS, checkpoint_kinds=(("ALBERT", names.CHECKPOINT_NAMES),),
    config_keys="has embedding_size / num_hidden_groups",
    blocks_found=(re.compile(r"group_(\d+)/"),
                  "The checkpoint has {count} groups of blocks; check num_hidden_groups and "
                  "inner_group_num in albert_config.json."))
