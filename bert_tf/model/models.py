"""Encoder + head models. Each is a keras.Model with an `.encoder` (a `BertEncoder`, or the
subclass its family builds: `AlbertEncoder`, `ElectraEncoder`; see `families`), called with
the features dict (int32 `input_ids, input_mask, segment_ids` [B,S], plus `masked_lm_positions`
[B,P] for pretraining) and returning a dict of float32 logits. `static_shapes=True` (the
training loop's choice under XLA and on TPUs) has the encoder compute every position and attend
all S keys, shapes that do not depend on the batch's padding.

All variables exist as soon as a model is constructed; `tf.train.Checkpoint(model=m)` tracks
them by the attribute paths documented in `encoder` and `heads`.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from bert_tf.model import heads
from bert_tf.model.families import build_encoder
from bert_tf.model.config import BertConfig


class _EncoderModel(keras.Model):
    """A keras.Model owning `self.encoder`, or sharing one given (multi-task models: one
    encoder under several heads); subclasses add one head.

    Each model declares how Hugging Face knows it (`checkpoints/hf_export.py` reads these):
    HF_CLASS_SUFFIX its transformers class after the family's prefix (BertFor...), whether that
    class keeps the pooler (HF_KEEPS_POOLER: transformers builds its token and span models
    without one), the head attribute whose outputs config.json names as labels (HF_LABELS_HEAD,
    id2label) and whether config.json says its problem_type (HF_PROBLEM_TYPE).
    """

    HF_CLASS_SUFFIX = "Model"
    HF_KEEPS_POOLER = True
    HF_LABELS_HEAD: str | None = None
    HF_PROBLEM_TYPE = False

    def __init__(self, config: BertConfig, dtype=None, encoder: keras.Layer | None = None,
                 **kwargs):
        super().__init__(dtype=dtype, **kwargs)
        self.config = config
        self.encoder = encoder if encoder is not None else build_encoder(
            config, dtype=self.dtype_policy)

    def dummy_inputs(self, batch_size: int = 1, seq_length: int = 2) -> dict:
        """A zero batch of the features dict, for building or tracing."""
        return self.encoder.dummy_inputs(batch_size, seq_length)


class PretrainingModel(_EncoderModel):
    """Masked LM (tied to the word embeddings) + next-sentence prediction."""

    HF_CLASS_SUFFIX = "ForPreTraining"

    def __init__(self, config: BertConfig, dtype=None, name: str = "pretraining_model", **kwargs):
        super().__init__(config, dtype=dtype, name=name, **kwargs)
        policy = self.dtype_policy
        self.masked_lm = heads.MaskedLM(config, name="masked_lm", dtype=policy)
        self.next_sentence = heads.NextSentence(config, name="next_sentence", dtype=policy)
        self.built = True

    def call(self, features: dict, training=False, static_shapes: bool = False) -> dict:
        """→ `masked_lm_logits` [B,P,V], `next_sentence_logits` [B,2] (float32)."""
        # The last layer runs only where the heads read: [CLS] and the masked positions.
        outputs = self.encoder(features, training=training,
                               output_positions=features["masked_lm_positions"],
                               static_shapes=static_shapes)
        return {
            "masked_lm_logits": self.masked_lm(outputs["selected_output"],
                                               embedding_table=self.encoder.embedding_table),
            "next_sentence_logits": self.next_sentence(outputs["pooled_output"]),
        }

    def dummy_inputs(self, batch_size: int = 1, seq_length: int = 2) -> dict:
        features = super().dummy_inputs(batch_size, seq_length)
        features["masked_lm_positions"] = tf.zeros([batch_size, 1], tf.int32)
        return features


class ClassifierModel(_EncoderModel):
    """Sentence (pair) classification on the pooled output."""

    HF_CLASS_SUFFIX = "ForSequenceClassification"
    HF_LABELS_HEAD = "classifier"
    HF_PROBLEM_TYPE = True

    def __init__(self, config: BertConfig, num_labels: int, dtype=None,
                 name: str = "classifier_model", **kwargs):
        super().__init__(config, dtype=dtype, name=name, **kwargs)
        self.classifier = heads.Classifier(config, num_labels, name="classifier",
                                           dtype=self.dtype_policy)
        self.built = True

    def call(self, features: dict, training=False, static_shapes: bool = False) -> dict:
        """→ `logits` [B,num_labels] (float32)."""
        # The head reads [CLS] only: the last layer computes no other position past its keys.
        no_positions = tf.zeros([tf.shape(features["input_ids"])[0], 0], tf.int32)  # [B,0]
        pooled = self.encoder(features, training=training, output_positions=no_positions,
                              static_shapes=static_shapes)["pooled_output"]
        return {"logits": self.classifier(pooled, training=training)}


class SpanModel(_EncoderModel):
    """Extractive question answering (SQuAD): start and end logits for every token."""

    HF_CLASS_SUFFIX = "ForQuestionAnswering"
    HF_KEEPS_POOLER = False

    def __init__(self, config: BertConfig, dtype=None, name: str = "span_model", **kwargs):
        super().__init__(config, dtype=dtype, name=name, **kwargs)
        self.span = heads.Span(config, name="span", dtype=self.dtype_policy)
        self.built = True

    def call(self, features: dict, training=False, static_shapes: bool = False) -> dict:
        """→ `start_logits` [B,S], `end_logits` [B,S] (float32)."""
        # The original's span loss is a softmax over every position, padding included, so the
        # padding positions are computed as the original computes them (attention still stops
        # at the longest window unless static_shapes: the keys past it weigh exactly 0).
        sequence = self.encoder(features, training=training, compute_padding=True,
                                static_shapes=static_shapes)["sequence_output"]
        start_logits, end_logits = self.span(sequence)
        return {"start_logits": start_logits, "end_logits": end_logits}


class TokenClassifierModel(_EncoderModel):
    """Per-token classification (NER tagging); optionally a bidirectional LSTM of `lstm_size`
    units each way between the encoder and the classifier, and a CRF's scores (`crf`)."""

    HF_CLASS_SUFFIX = "ForTokenClassification"
    HF_KEEPS_POOLER = False
    HF_LABELS_HEAD = "token_classifier"

    def __init__(self, config: BertConfig, num_labels: int, dtype=None,
                 name: str = "token_classifier_model", lstm_size: int = 0, crf: bool = False,
                 **kwargs):
        super().__init__(config, dtype=dtype, name=name, **kwargs)
        self.lstm = None
        if lstm_size:
            self.lstm = keras.layers.Bidirectional(
                keras.layers.LSTM(lstm_size, return_sequences=True), name="lstm",
                dtype=self.dtype_policy)
            self.lstm.build((None, None, config.hidden_size))
        self.token_classifier = heads.TokenClassifier(
            config, num_labels, input_size=2 * lstm_size or None, name="token_classifier",
            dtype=self.dtype_policy)
        self.crf = heads.CrfScores(num_labels, name="crf") if crf else None
        self.built = True

    def call(self, features: dict, training=False, static_shapes: bool = False) -> dict:
        """→ `logits` [B,S,num_labels] (float32), with a CRF also its `transitions` [C,C],
        `start_scores` [C] and `end_scores` [C]."""
        sequence = self.encoder(features, training=training,
                                static_shapes=static_shapes)["sequence_output"]  # [B,S,H]
        if self.lstm is not None:
            sequence = self.lstm(sequence, mask=tf.cast(features["input_mask"], tf.bool),
                                 training=training)  # [B,S,2·lstm_size]
        outputs = {"logits": self.token_classifier(sequence, training=training)}
        if self.crf is not None:
            outputs.update(self.crf.scores())
        return outputs


def pretraining_model(config: BertConfig, dtype=None) -> PretrainingModel:
    return PretrainingModel(config, dtype=dtype)


def classifier_model(config: BertConfig, num_labels: int, dtype=None,
                     encoder: keras.Layer | None = None) -> ClassifierModel:
    return ClassifierModel(config, num_labels, dtype=dtype, encoder=encoder)


def span_model(config: BertConfig, dtype=None, encoder: keras.Layer | None = None) -> SpanModel:
    return SpanModel(config, dtype=dtype, encoder=encoder)


def token_classifier_model(config: BertConfig, num_labels: int, dtype=None, lstm_size: int = 0,
                           crf: bool = False,
                           encoder: keras.Layer | None = None) -> TokenClassifierModel:
    return TokenClassifierModel(config, num_labels, dtype=dtype, lstm_size=lstm_size, crf=crf,
                                encoder=encoder)
