"""ElectraEncoder: BertEncoder with ELECTRA's embedding projection and no pooler, and the
discriminator's head.

Variables by attribute path (E = embedding_size; TF1 names under `electra/` as
google-research/electra writes them; the blocks are BertEncoder's `layer_{i}`, named
`electra/encoder/layer_{i}/...` as BERT's below `bert/`):

  attribute path                                  shape      original TF1 name
  embeddings.{word,token_type,position}_embeddings  [*,E]    electra/embeddings/*
  embeddings.layer_norm.{gamma,beta}              [E]        electra/embeddings/LayerNorm/*
  embeddings.embeddings_project.{kernel,bias}     [E,H],[H]  electra/embeddings_project/*
                                                             (only where E ≠ H)
  discriminator.dense.{kernel,bias}               [H,H],[H]  discriminator_predictions/dense/*
  discriminator.prediction.{kernel,bias}          [H,1],[1]  discriminator_predictions/dense_1/*
"""

from __future__ import annotations

import keras
import tensorflow as tf

from bert_tf.model.electra.config import ElectraConfig
from bert_tf.model.encoder import BertEmbeddings, BertEncoder, Dense, TokenLayout, get_activation


class ElectraEmbeddings(BertEmbeddings):
    """BERT's embeddings at width E, then `embeddings_project` (Dense E → H) where E ≠ H."""

    def __init__(self, config: ElectraConfig, **kwargs):
        super().__init__(config, **kwargs)
        self.embeddings_project = None
        if config.projects_embeddings:
            self.embeddings_project = Dense(
                config, config.hidden_size, config.embedding_width, name="embeddings_project",
                dtype=self.dtype_policy)

    def call(self, input_ids: tf.Tensor, segment_ids: tf.Tensor, layout: TokenLayout,
             training=False) -> tf.Tensor:
        """input_ids, segment_ids: int32 [B,S] → [T,H] (the real tokens) in the compute dtype."""
        embedded = super().call(input_ids, segment_ids, layout=layout, training=training)  # [T,E]
        if self.embeddings_project is None:
            return embedded
        return self.embeddings_project(embedded)


class ElectraEncoder(BertEncoder):
    """The ELECTRA encoder: BertEncoder's inputs, outputs and `call`; `pooled_output` is the
    last layer's vector of the first token ([CLS]), unchanged, as google-research/electra's."""

    def _make_embeddings(self, config: ElectraConfig, policy) -> ElectraEmbeddings:
        return ElectraEmbeddings(config, name="embeddings", dtype=policy)

    def _make_pooler(self, config: ElectraConfig, policy) -> None:
        return None


class DiscriminatorHead(keras.layers.Layer):
    """Replaced-token detection: dense (H → H, the config's activation), then dense (H → 1):
    one logit per token, > 0 meaning "replaced"."""

    def __init__(self, config: ElectraConfig, **kwargs):
        super().__init__(autocast=False, **kwargs)
        h = config.hidden_size
        self.dense = Dense(config, h, h, activation=get_activation(config.hidden_act),
                           name="dense", dtype=self.dtype_policy)
        self.prediction = Dense(config, 1, h, name="prediction", dtype=self.dtype_policy)
        self.built = True

    def call(self, sequence_output: tf.Tensor) -> tf.Tensor:
        """[B,S,H] → float32 logits [B,S]."""
        logits = self.prediction(self.dense(sequence_output))  # [B,S,1]
        return tf.cast(tf.squeeze(logits, -1), tf.float32)


class DiscriminatorModel(keras.Model):
    """An ElectraEncoder and its replaced-token-detection head (`discriminator`), as
    google-research/electra's discriminator and transformers' ElectraForPreTraining."""

    def __init__(self, config: ElectraConfig, dtype=None, name: str = "discriminator_model",
                 **kwargs):
        super().__init__(dtype=dtype, name=name, **kwargs)
        self.config = config
        self.encoder = ElectraEncoder(config, dtype=self.dtype_policy, name="electra")
        self.discriminator = DiscriminatorHead(config, name="discriminator",
                                               dtype=self.dtype_policy)
        self.built = True

    def call(self, features: dict, training=False) -> dict:
        """→ `discriminator_logits` [B,S] (float32)."""
        sequence = self.encoder(features, training=training)["sequence_output"]
        return {"discriminator_logits": self.discriminator(sequence)}
