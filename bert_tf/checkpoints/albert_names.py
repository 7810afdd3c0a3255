"""ALBERT's checkpoint names: google-research/albert's TF1 names and Hugging Face's, as they differ
from BERT's (name_map.py holds the one name map and composes it from these pieces).

TF1 block scopes, under `bert/encoder/transformer/group_{g}/inner_group_{k}/`, for the BERT
scopes under `bert/encoder/layer_{i}/`:

  BERT layer scope            ALBERT block scope
  attention/self/             attention_1/self/
  attention/output/dense/     attention_1/output/dense/
  attention/output/LayerNorm/ LayerNorm/
  intermediate/dense/         ffn_1/intermediate/dense/
  output/dense/               ffn_1/intermediate/output/dense/
  output/LayerNorm/           LayerNorm_1/
"""

from __future__ import annotations

import re

_BLOCK_SCOPES = (  # most specific first
    ("attention/self/", "attention_1/self/"),
    ("attention/output/dense/", "attention_1/output/dense/"),
    ("attention/output/LayerNorm/", "LayerNorm/"),
    ("intermediate/dense/", "ffn_1/intermediate/dense/"),
    ("output/dense/", "ffn_1/intermediate/output/dense/"),
    ("output/LayerNorm/", "LayerNorm_1/"),
)
# TF1 name (under "bert/") → attribute path on an AlbertEncoder.
EMBEDDING_PROJECTION_NAMES = {
    "encoder/embedding_hidden_mapping_in/kernel": "embeddings.embedding_hidden_mapping_in.kernel",
    "encoder/embedding_hidden_mapping_in/bias": "embeddings.embedding_hidden_mapping_in.bias",
}

# Hugging Face ALBERT block names (under encoder.albert_layer_groups.{g}.albert_layers.{k}.) →
# TF1 block scope.
_HF_BLOCK_SCOPES = {
    "attention.query": "attention_1/self/query", "attention.key": "attention_1/self/key",
    "attention.value": "attention_1/self/value", "attention.dense": "attention_1/output/dense",
    "attention.LayerNorm": "LayerNorm", "ffn": "ffn_1/intermediate/dense",
    "ffn_output": "ffn_1/intermediate/output/dense", "full_layer_layer_norm": "LayerNorm_1",
}
_HF_SCOPES = {
    "embeddings.LayerNorm": "bert/embeddings/LayerNorm",
    "encoder.embedding_hidden_mapping_in": "bert/encoder/embedding_hidden_mapping_in",
    "pooler": "bert/pooler/dense",
    "predictions.dense": "cls/predictions/transform/dense",
    "predictions.LayerNorm": "cls/predictions/transform/LayerNorm",
    # AlbertForPreTraining, AlbertForSequenceClassification / TokenClassification, QA.
    "sop_classifier.classifier": "cls/seq_relationship",
    "classifier": "", "qa_outputs": "cls/squad",
}
_LAYER_NORM_LEAVES = {"weight": "gamma", "bias": "beta"}
_HF_BLOCK = re.compile(r"^encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.(.+)$")
# The decoder is the tied embedding table and bias: not weights of their own.
HF_NOT_WEIGHTS = re.compile(r"(position_ids|token_type_ids|predictions\.decoder\.(weight|bias))$")

_ALBERT_NAME = re.compile(r"(^|/)(transformer/group_\d+|group_\d+/inner_group_\d+|"
                          r"embedding_hidden_mapping_in)/")
_BERT_NAME = re.compile(r"(^|/)layer_\d+/")


def block_name(group: int, inner: int, bert_layer_name: str) -> str:
    """The TF1 name of a block weight: `attention/self/query/kernel` → `bert/encoder/transformer/
    group_{group}/inner_group_{inner}/attention_1/self/query/kernel`."""
    for bert_scope, albert_scope in _BLOCK_SCOPES:
        if bert_layer_name.startswith(bert_scope):
            leaf = bert_layer_name[len(bert_scope):]
            return f"bert/encoder/transformer/group_{group}/inner_group_{inner}/{albert_scope}{leaf}"
    raise KeyError(bert_layer_name)


def family_of(names) -> str | None:
    """"ALBERT" or "BERT" by the encoder names a checkpoint holds (TF1 or object paths)."""
    names = list(names)
    if any(_ALBERT_NAME.search(n) for n in names):
        return "ALBERT"
    if any(_BERT_NAME.search(n) for n in names):
        return "BERT"
    return None


def hf_tf1_name(hf_name: str) -> tuple[str | None, bool]:
    """Translates one Hugging Face ALBERT weight name (with or without `albert.`).

    Returns:
      (TF1 name, transpose: a PyTorch Linear weight [out,in] → kernel [in,out]), or (None, False)
      for a name with no TF1 counterpart.
    """
    name = hf_name[len("albert."):] if hf_name.startswith("albert.") else hf_name
    if name == "predictions.bias":
        return "cls/predictions/output_bias", False
    match = re.match(r"^embeddings\.(\w+_embeddings)\.weight$", name)
    if match:
        return f"bert/embeddings/{match.group(1)}", False
    scope, _, leaf = name.rpartition(".")
    block = _HF_BLOCK.match(scope)
    if block and block.group(3) in _HF_BLOCK_SCOPES:
        tf1_scope = (f"bert/encoder/transformer/group_{block.group(1)}/inner_group_"
                     f"{block.group(2)}/{_HF_BLOCK_SCOPES[block.group(3)]}")
    elif scope in _HF_SCOPES:
        tf1_scope = _HF_SCOPES[scope]
    else:
        return None, False
    if tf1_scope.endswith("LayerNorm") or tf1_scope.endswith("LayerNorm_1"):
        return f"{tf1_scope}/{_LAYER_NORM_LEAVES.get(leaf, leaf)}", False
    if scope in ("sop_classifier.classifier", "classifier", "qa_outputs"):  # [out,in] in both
        return f"{tf1_scope}/output_{'weights' if leaf == 'weight' else 'bias'}".lstrip("/"), False
    return f"{tf1_scope}/{'kernel' if leaf == 'weight' else 'bias'}", leaf == "weight"


def tf1_hf_name(tf1: str) -> str | None:
    """The Hugging Face ALBERT name (without "albert.") that `hf_tf1_name` translates to `tf1`,
    or None: its inverse, from the same tables (hf_export checks each name back through it)."""
    if tf1 == "cls/predictions/output_bias":
        return "predictions.bias"
    match = re.match(r"^bert/embeddings/(\w+_embeddings)$", tf1)
    if match:
        return f"embeddings.{match.group(1)}.weight"
    tf1_scope, _, leaf = tf1.rpartition("/")
    leaf = {"gamma": "weight", "beta": "bias", "kernel": "weight", "output_weights": "weight",
            "output_bias": "bias"}.get(leaf, leaf)
    block = re.match(r"^bert/encoder/transformer/group_(\d+)/inner_group_(\d+)/(.+)$", tf1_scope)
    if block:
        scopes = {v: k for k, v in _HF_BLOCK_SCOPES.items()}
        if block.group(3) not in scopes:
            return None
        return (f"encoder.albert_layer_groups.{block.group(1)}.albert_layers.{block.group(2)}."
                f"{scopes[block.group(3)]}.{leaf}")
    scopes = {v: k for k, v in _HF_SCOPES.items()}
    return f"{scopes[tf1_scope]}.{leaf}" if tf1_scope in scopes else None
