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

Every name is declared once, in `names.py` (the encoder's and the generator's) and on the head
classes here (`CHECKPOINT_NAMES`).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from bert_tf.model import heads, names
from bert_tf.model.electra import names as electra_names
from bert_tf.model.electra.config import ElectraConfig
from bert_tf.model.encoder import BertEmbeddings, BertEncoder, Dense, get_activation
from bert_tf.model.names import NameTable


class ElectraEncoder(BertEncoder):
    """The ELECTRA encoder: BertEncoder's inputs, outputs and `call`; `pooled_output` is the
    last layer's vector of the first token ([CLS]), unchanged, as google-research/electra's."""

    def _make_pooler(self, config: ElectraConfig, policy) -> None:
        return None


class DiscriminatorHead(keras.layers.Layer):
    """Replaced-token detection: dense (H → H, the config's activation), then dense (H → 1):
    one logit per token, > 0 meaning "replaced"."""

    ATTRIBUTE = "discriminator"
    CHECKPOINT_NAMES = NameTable(
        names.dense("discriminator_predictions/dense", "dense", "discriminator_predictions.dense"),
        names.dense("discriminator_predictions/dense_1", "prediction",
                    "discriminator_predictions.dense_prediction"))

    def __init__(self, config: ElectraConfig, **kwargs):
        super().__init__(autocast=False, **kwargs)
        h = config.hidden_size
        self.dense = Dense(config, h, h, activation=get_activation(config.activation),
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

    def call(self, features: dict, training=False, static_shapes: bool = False) -> dict:
        """→ `discriminator_logits` [B,S] (float32); `static_shapes` as `BertEncoder`'s."""
        sequence = self.encoder(features, training=training,
                                static_shapes=static_shapes)["sequence_output"]
        return {"discriminator_logits": self.discriminator(sequence)}


class GeneratorEncoder(ElectraEncoder):
    """The generator's encoder (its own config, see `ElectraConfig.generator`), over the
    discriminator's embeddings."""

    CHECKPOINT_NAMES = electra_names.GENERATOR

    def __init__(self, config: ElectraConfig, shared: BertEmbeddings, **kwargs):
        # Read by _make_embeddings during BertEncoder.__init__; a tuple so Keras does not track
        # it twice.
        object.__setattr__(self, "_shared_embeddings", (shared,))
        super().__init__(config, **kwargs)

    def _make_embeddings(self, config: ElectraConfig, policy) -> BertEmbeddings:
        """The discriminator's tables and LayerNorm (the same variables), then its own
        `embeddings_project` (E → the generator's H) where the widths differ, as
        google-research/electra's generator."""
        return BertEmbeddings(config, shared=self._shared_embeddings[0], name="embeddings",
                              dtype=policy)


class GeneratorPredictions(heads.MaskedLM):
    """The generator's masked-LM head, under google-research/electra's names."""

    ATTRIBUTE = "generator_predictions"
    CHECKPOINT_NAMES = NameTable(
        names.dense("generator_predictions/dense", "transform", "generator_predictions.dense"),
        names.layer_norm("generator_predictions/LayerNorm", "layer_norm",
                         "generator_predictions.LayerNorm"),
        names.Name("generator_predictions/output_bias", "output_bias", "generator_lm_head.bias"))


def gumbel_noise(uniform: tf.Tensor) -> tf.Tensor:
    """-log(-log(u + 1e-9) + 1e-9): Gumbel noise from uniforms, as google-research/electra's
    `sample_from_softmax` (argmax(logits + noise) samples from softmax(logits))."""
    return -tf.math.log(-tf.math.log(uniform + 1e-9) + 1e-9)


def sampling_uniforms(sampling_seed: tf.Tensor, shape: tf.Tensor) -> tf.Tensor:
    """Uniforms in [0,1) of `shape` ([B,P,V]) from the first row of `sampling_seed` [B,2]."""
    return tf.random.stateless_uniform(shape, seed=sampling_seed[0])


def replace_tokens(input_ids: tf.Tensor, positions: tf.Tensor, original_ids: tf.Tensor,
                   weights: tf.Tensor, sampled_ids: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The discriminator's input and labels from the masked input and the generator's samples.

    Args:
      input_ids: int32 [B,S], the masked input ([MASK] or the kept token at the positions).
      positions, original_ids, weights: [B,P], the masked positions, their original ids and 1.0
        for a real prediction (0.0 for a padding slot, whose position is 0).
      sampled_ids: int32 [B,P], the generator's samples.

    Returns:
      (fake_ids int32 [B,S]: the originals with the samples at the masked positions,
       replaced int32 [B,S]: 1 where fake_ids differs from the original token).
    """
    batch, preds = tf.shape(positions)[0], tf.shape(positions)[1]
    rows = tf.broadcast_to(tf.range(batch)[:, None], [batch, preds])
    index = tf.stack([rows, positions], axis=-1)  # [B,P,2]
    real = weights > 0
    # Padding slots write position 0's own id back: no change.
    first = tf.broadcast_to(input_ids[:, :1], [batch, preds])
    originals = tf.tensor_scatter_nd_update(input_ids, index, tf.where(real, original_ids, first))
    fake = tf.tensor_scatter_nd_update(originals, index, tf.where(real, sampled_ids, first))
    return fake, tf.cast(tf.not_equal(fake, originals), tf.int32)


class ElectraPretrainingModel(keras.Model):
    """Replaced-token detection (google-research/electra): a small masked-LM generator over the
    discriminator's embeddings puts samples at the masked positions; the discriminator
    (`encoder`, the model fine-tuning starts from) tells every real token replaced or not.

    Called with the masked-LM features (`input_ids` masked, `input_mask`, `segment_ids`,
    `masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights`) and `sampling_seed` int32
    [B,2] (the first row's seed draws the batch's sampling noise, `sampling_uniforms`: the
    pipeline draws the seeds, so that a resumed run samples alike). Returns `masked_lm_logits` [B,P,V] (the generator's),
    `sampled_ids` [B,P], `replaced` int32 [B,S] and `discriminator_logits` [B,S] (float32).
    """

    def __init__(self, config: ElectraConfig, generator_config: ElectraConfig, dtype=None,
                 name: str = "electra_pretraining_model", **kwargs):
        super().__init__(dtype=dtype, name=name, **kwargs)
        policy = self.dtype_policy
        self.config = config
        self.encoder = ElectraEncoder(config, dtype=policy, name="electra")
        self.generator = GeneratorEncoder(generator_config, self.encoder.embeddings,
                                          dtype=policy, name="generator")
        self.generator_predictions = GeneratorPredictions(
            generator_config, name="generator_predictions", dtype=policy)
        self.discriminator = DiscriminatorHead(config, name="discriminator", dtype=policy)
        self.built = True

    def call(self, features: dict, training=False, static_shapes: bool = False) -> dict:
        positions = features["masked_lm_positions"]
        generated = self.generator(features, training=training, output_positions=positions,
                                   static_shapes=static_shapes)["selected_output"]  # [B,P,Hg]
        logits = self.generator_predictions(generated,
                                            embedding_table=self.encoder.embedding_table)
        uniforms = sampling_uniforms(features["sampling_seed"], tf.shape(logits))
        noisy = tf.stop_gradient(logits) + gumbel_noise(uniforms)
        sampled = tf.argmax(noisy, axis=-1, output_type=tf.int32)  # [B,P]
        fake_ids, replaced = replace_tokens(tf.convert_to_tensor(features["input_ids"]),
                                            positions, features["masked_lm_ids"],
                                            features["masked_lm_weights"], sampled)
        sequence = self.encoder({**features, "input_ids": fake_ids}, training=training,
                                static_shapes=static_shapes)["sequence_output"]
        return {"masked_lm_logits": logits, "sampled_ids": sampled, "replaced": replaced,
                "discriminator_logits": self.discriminator(sequence)}
