"""ELECTRA's checkpoint names: google-research/electra's TF1 names, the attribute paths on an
`ElectraEncoder` and transformers' ElectraModel names, in one table (`bert_tf.model.names`).

google-research/electra writes one checkpoint holding both networks:

  electra/embeddings/...              the embeddings, BERT's names below the scope (shared by
                                      the generator unless its embeddings are untied)
  electra/embeddings_project/*        Dense E → H, only where embedding_size ≠ hidden_size
  electra/encoder/layer_{i}/...       the discriminator's blocks, BERT's names below the scope
  discriminator_predictions/dense/*, discriminator_predictions/dense_1/*   its head
  generator/embeddings_project/*, generator/encoder/layer_{i}/...          the generator
  generator_predictions/{dense/*, LayerNorm/*, output_bias}                its masked-LM head

No pooler: [CLS]'s vector is the pooled output. Hugging Face's ElectraModel, ElectraForPreTraining
and ElectraForMaskedLM use BERT's Hugging Face names under `electra.` (a generator directory's
encoder is read under the `generator/` scope: it is not a discriminator).
"""

from __future__ import annotations

import re
from typing import Iterable

from bert_tf.model import names
from bert_tf.model.bert import names as bert_names
from bert_tf.model.names import NameTable

DISCRIMINATOR_SCOPE = "electra"
GENERATOR_SCOPE = "generator"


def projection_names(scope: str) -> tuple[names.Name, ...]:
    """The embedding projection (where E ≠ H) under `scope`."""
    return names.dense(f"{scope}/embeddings_project", "embeddings.embeddings_project",
                       "embeddings_project", optional=True)


def encoder_names(scope: str) -> NameTable:
    """An encoder's names under `scope`: embeddings, projection, blocks."""
    return NameTable(bert_names.embedding_names(scope), projection_names(scope),
                     bert_names.layer_names(scope), counts=bert_names.layer_count)


ENCODER = encoder_names(DISCRIMINATOR_SCOPE)
# The generator's own weights (its embeddings are the discriminator's, named once under
# `electra/embeddings/`).
GENERATOR = NameTable(projection_names(GENERATOR_SCOPE), bert_names.layer_names(GENERATOR_SCOPE),
                      counts=bert_names.layer_count)
# The generator's output matrix is the tied embedding table: not a weight of its own.
HF_NOT_WEIGHTS = re.compile(r"(position_ids|token_type_ids|generator_lm_head\.weight)$")
# Encoder names (TF1) by which a checkpoint is an ELECTRA discriminator's or generator's; a
# checkpoint with both is a discriminator's (google-research/electra's pretraining checkpoints).
DISCRIMINATOR = "ELECTRA discriminator"
GENERATOR_KIND = "ELECTRA generator"
CHECKPOINT_KINDS = ((DISCRIMINATOR, re.compile(rf"^{DISCRIMINATOR_SCOPE}/encoder/")),
                    (GENERATOR_KIND, re.compile(rf"^{GENERATOR_SCOPE}/encoder/")))


def hf_encoder_names(hf_names: Iterable[str]) -> NameTable:
    """The encoder names of a Hugging Face ELECTRA directory: under `generator/` when it holds a
    generator's head and no discriminator's (ElectraForMaskedLM), else under `electra/`."""
    heads = {name.split(".")[0] for name in hf_names}
    if "generator_predictions" in heads and "discriminator_predictions" not in heads:
        return encoder_names(GENERATOR_SCOPE)
    return ENCODER
