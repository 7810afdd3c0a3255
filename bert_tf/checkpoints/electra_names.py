"""ELECTRA's checkpoint names: google-research/electra's TF1 names and Hugging Face's, as they
differ from BERT's (name_map.py holds the one name map and composes it from these pieces).

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
encoder is translated to the `generator/` scope: it is not a discriminator).
"""

from __future__ import annotations

import re
from typing import Iterable

from bert_tf.model.tf1_names import EMBEDDING_NAMES, LAYER_NAMES

DISCRIMINATOR_SCOPE = "electra"
GENERATOR_SCOPE = "generator"
DISCRIMINATOR = "ELECTRA discriminator"
GENERATOR = "ELECTRA generator"

# The discriminator's head: TF1 name → attribute path on model.electra.DiscriminatorHead.
DISCRIMINATOR_HEAD_NAMES = {
    "discriminator_predictions/dense/kernel": "dense.kernel",
    "discriminator_predictions/dense/bias": "dense.bias",
    "discriminator_predictions/dense_1/kernel": "prediction.kernel",
    "discriminator_predictions/dense_1/bias": "prediction.bias",
}
# The generator's masked-LM head: TF1 name → attribute path on a model.heads.MaskedLM.
GENERATOR_HEAD_NAMES = {
    "generator_predictions/dense/kernel": "transform.kernel",
    "generator_predictions/dense/bias": "transform.bias",
    "generator_predictions/LayerNorm/gamma": "layer_norm.gamma",
    "generator_predictions/LayerNorm/beta": "layer_norm.beta",
    "generator_predictions/output_bias": "output_bias",
}
# Hugging Face head scopes → TF1 scopes (their Linear weights are [out,in]: transposed); the
# translation of whole names is hf_weights.electra_tf1_name.
HF_HEAD_SCOPES = {
    "discriminator_predictions.dense": "discriminator_predictions/dense",
    "discriminator_predictions.dense_prediction": "discriminator_predictions/dense_1",
    "generator_predictions.dense": "generator_predictions/dense",
    "generator_predictions.LayerNorm": "generator_predictions/LayerNorm",
}
# The generator's output matrix is the tied embedding table: not a weight of its own.
HF_NOT_WEIGHTS = re.compile(r"(position_ids|token_type_ids|generator_lm_head\.weight)$")


def encoder_names(num_layers: int, project: bool, scope: str = DISCRIMINATOR_SCOPE
                  ) -> dict[str, str]:
    """TF1 name → attribute path on an ElectraEncoder of `num_layers` blocks, in the original's
    order (embeddings, projection, blocks); `project`: E ≠ H."""
    names = {f"{DISCRIMINATOR_SCOPE}/{k}": v for k, v in EMBEDDING_NAMES.items()}
    if project:
        names.update({f"{scope}/embeddings_project/{leaf}": f"embeddings.embeddings_project.{leaf}"
                      for leaf in ("kernel", "bias")})
    for i in range(num_layers):
        names.update({f"{scope}/encoder/layer_{i}/{k}": f"transformer_layers[{i}].{v}"
                      for k, v in LAYER_NAMES.items()})
    return names


def generator_names(num_layers: int, project: bool) -> dict[str, str]:
    """TF1 name → attribute path on a GeneratorEncoder: its projection and blocks (its
    embeddings are the discriminator's, named once under `electra/embeddings/`)."""
    return {name: path for name, path in encoder_names(num_layers, project, GENERATOR_SCOPE).items()
            if name.startswith(f"{GENERATOR_SCOPE}/")}


def family_of(names: Iterable[str]) -> str | None:
    """DISCRIMINATOR or GENERATOR by the encoder names a checkpoint holds (a checkpoint with
    both is a discriminator's: google-research/electra's pretraining checkpoints), else None."""
    names = list(names)
    if any(n.startswith(f"{DISCRIMINATOR_SCOPE}/encoder/") for n in names):
        return DISCRIMINATOR
    if any(n.startswith(f"{GENERATOR_SCOPE}/encoder/") for n in names):
        return GENERATOR
    return None


def hf_scope(hf_names: Iterable[str]) -> str:
    """The TF1 scope of a Hugging Face ELECTRA directory's encoder: `generator` when it holds a
    generator's head and no discriminator's (ElectraForMaskedLM), else `electra`."""
    heads = {name.split(".")[0] for name in hf_names}
    if "generator_predictions" in heads and "discriminator_predictions" not in heads:
        return GENERATOR_SCOPE
    return DISCRIMINATOR_SCOPE
