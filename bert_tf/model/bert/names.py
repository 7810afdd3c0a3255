"""BERT's checkpoint names: google-research/bert's TF1 names, bert_tf's attribute paths on a
`BertEncoder` and transformers' BertModel names, in one table (`bert_tf.model.names`).

  TF1 (under bert/)                         attribute path                 Hugging Face
  embeddings/{word,token_type,position}_embeddings  embeddings.*            embeddings.*.weight
  embeddings/LayerNorm/{gamma,beta}          embeddings.layer_norm.*        embeddings.LayerNorm.*
  encoder/layer_{i}/attention/self/query/*   transformer_layers[{i}].query.*  encoder.layer.{i}.
                                                                             attention.self.query.*
  (the block's other sublayers likewise, `names.BLOCK_LAYERS`)
  pooler/dense/{kernel,bias}                 pooler.{kernel,bias}           pooler.dense.*

ELECTRA's and ALBERT's tables start from these pieces.
"""

from __future__ import annotations

from bert_tf.model import names
from bert_tf.model.names import NameTable

# The block's sublayers (names.BLOCK_LAYERS) under `layer_{i}`, in TF1 and Hugging Face names.
_TF1_BLOCK = ("attention/self/query", "attention/self/key", "attention/self/value",
              "attention/output/dense", "attention/output/LayerNorm", "intermediate/dense",
              "output/dense", "output/LayerNorm")
_HF_BLOCK = tuple(scope.replace("/", ".") for scope in _TF1_BLOCK)


def embedding_names(scope: str) -> tuple[names.Name, ...]:
    """The embeddings' names under the TF1 scope `scope` ("bert", ELECTRA's "electra")."""
    return (*(names.embedding_table(f"{scope}/embeddings/{table}", f"embeddings.{table}",
                                    f"embeddings.{table}")
              for table in ("word_embeddings", "token_type_embeddings", "position_embeddings")),
            *names.layer_norm(f"{scope}/embeddings/LayerNorm", "embeddings.layer_norm",
                              "embeddings.LayerNorm"))


def layer_names(scope: str) -> tuple[names.Name, ...]:
    """The blocks' names, `{scope}/encoder/layer_{i}/...` ↔ `transformer_layers[{i}]...`."""
    return names.block(f"{scope}/encoder/layer_{{i}}", "transformer_layers[{i}]",
                       "encoder.layer.{i}", _TF1_BLOCK, _HF_BLOCK)


def layer_count(encoder) -> dict[str, int]:
    """The value range of `{i}`: the encoder's layers."""
    return {"i": encoder.config.num_hidden_layers}


POOLER = names.dense("bert/pooler/dense", "pooler", "pooler.dense")
ENCODER = NameTable(embedding_names("bert"), layer_names("bert"), POOLER, counts=layer_count)
