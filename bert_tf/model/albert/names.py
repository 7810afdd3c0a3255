"""ALBERT's checkpoint names: google-research/albert's TF1 names, the attribute paths on an
`AlbertEncoder` and transformers' AlbertModel names, in one table (`bert_tf.model.names`).

The embeddings and pooler are named as BERT's (but for the pooler's Hugging Face name,
`pooler.*`); the projection is `bert/encoder/embedding_hidden_mapping_in/*`
(`encoder.embedding_hidden_mapping_in.*`), and the shared blocks are named per group and inner
block, not per layer:

  BERT layer scope            ALBERT block scope                 Hugging Face block scope
  (bert/encoder/layer_{i}/)   (bert/encoder/transformer/         (encoder.albert_layer_groups.{g}.
                               group_{g}/inner_group_{k}/)         albert_layers.{k}.)
  attention/self/query        attention_1/self/query             attention.query
  (key, value likewise)
  attention/output/dense      attention_1/output/dense           attention.dense
  attention/output/LayerNorm  LayerNorm                          attention.LayerNorm
  intermediate/dense          ffn_1/intermediate/dense           ffn
  output/dense                ffn_1/intermediate/output/dense    ffn_output
  output/LayerNorm            LayerNorm_1                        full_layer_layer_norm

transformers' ALBERT heads are named `predictions.*` (BERT's `cls.predictions.transform.*`,
`cls.predictions.bias`) and `sop_classifier.classifier.*` (`cls.seq_relationship.*`).
"""

from __future__ import annotations

import re

from bert_tf.model import names
from bert_tf.model.bert import names as bert_names
from bert_tf.model.names import NameTable

_TF1_BLOCK = ("attention_1/self/query", "attention_1/self/key", "attention_1/self/value",
              "attention_1/output/dense", "LayerNorm", "ffn_1/intermediate/dense",
              "ffn_1/intermediate/output/dense", "LayerNorm_1")
_HF_BLOCK = ("attention.query", "attention.key", "attention.value", "attention.dense",
             "attention.LayerNorm", "ffn", "ffn_output", "full_layer_layer_norm")


def block_count(encoder) -> dict[str, int]:
    """The value ranges of `{g}` and `{k}`: the groups and the blocks of each."""
    return {"g": encoder.config.num_hidden_groups, "k": encoder.config.inner_group_num}


ENCODER = NameTable(
    bert_names.embedding_names("bert"),
    names.dense("bert/encoder/embedding_hidden_mapping_in",
                "embeddings.embedding_hidden_mapping_in", "encoder.embedding_hidden_mapping_in"),
    names.block("bert/encoder/transformer/group_{g}/inner_group_{k}", "group_{g}.inner_group_{k}",
                "encoder.albert_layer_groups.{g}.albert_layers.{k}", _TF1_BLOCK, _HF_BLOCK),
    # transformers' AlbertModel names its pooler's Linear `pooler` (BertModel's `pooler.dense`).
    names.dense("bert/pooler/dense", "pooler", "pooler"), counts=block_count)
# The Hugging Face names of the heads (model/heads.py declares BERT's) where ALBERT's differ.
HF_HEAD_RENAMES = {"cls.predictions.transform.": "predictions.",
                   "cls.predictions.bias": "predictions.bias",
                   "cls.seq_relationship.": "sop_classifier.classifier."}
# The decoder is the tied embedding table and bias: not weights of their own.
HF_NOT_WEIGHTS = re.compile(r"(position_ids|token_type_ids|predictions\.decoder\.(weight|bias))$")
# Encoder names (TF1 names or object paths) that only an ALBERT checkpoint holds.
CHECKPOINT_NAMES = re.compile(r"(^|/)(transformer/group_\d+|group_\d+/inner_group_\d+|"
                              r"embedding_hidden_mapping_in)/")
