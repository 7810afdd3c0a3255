"""Task heads on top of `BertEncoder` outputs; every head returns float32 logits.

Variables by attribute path (original TF1 names on the right; kernels [in,out], `output_weights`
[out,in] as in the original):

  masked_lm.transform.{kernel,bias}        [H,H],[H]  cls/predictions/transform/dense/*
  masked_lm.layer_norm.{gamma,beta}        [H]        cls/predictions/transform/LayerNorm/*
  (ALBERT: [H,E],[E] and [E], E = embedding_size, the width of its tied table)
  masked_lm.output_bias                    [V]        cls/predictions/output_bias
  (the [V,H] output matrix is the encoder's word-embedding table, passed in at call time, so
  checkpoints store it once, under the encoder)
  next_sentence.output_weights, .output_bias  [2,H],[2]  cls/seq_relationship/*
  classifier.output_weights, .output_bias  [num_labels,H],[num_labels]  output_weights, output_bias
  span.output_weights, .output_bias        [2,H],[2]  cls/squad/*
  token_classifier.output_weights, .output_bias  [num_labels,H],[num_labels]  (not in the original)
  crf.transitions, .start_scores, .end_scores  [C,C],[C],[C]  (run_ner.py --crf)

Each head class declares its names (`CHECKPOINT_NAMES`: TF1 name ↔ attribute path on the head ↔
transformers' BertFor* name, `bert_tf.model.names`) and the attribute models keep it under
(`ATTRIBUTE`, which reports name it by); the checkpoint name map finds a model's heads by the
layers it has.

The heads do not autocast their own variables: biases and small weight matrices are float32
under every policy (the pure "bfloat16" one of the bfloat16 exports too); only the masked-LM
transform and vocabulary matmul run in the compute dtype.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from bert_tf.model import names
from bert_tf.model.config import BertConfig
from bert_tf.model.encoder import Dense, Dropout, LayerNorm, get_activation
from bert_tf.model.names import NameTable

# The original's classifier and SQuAD heads use this stddev and dropout whatever the config says.
FINE_TUNING_INITIALIZER_RANGE = 0.02
CLASSIFIER_DROPOUT = 0.1


class MaskedLM(keras.layers.Layer):
    """Transforms the encoder's rows at the masked positions and scores them against the tied
    table."""

    ATTRIBUTE = "masked_lm"
    CHECKPOINT_NAMES = NameTable(
        names.dense("cls/predictions/transform/dense", "transform",
                    "cls.predictions.transform.dense"),
        names.layer_norm("cls/predictions/transform/LayerNorm", "layer_norm",
                         "cls.predictions.transform.LayerNorm"),
        names.Name("cls/predictions/output_bias", "output_bias", "cls.predictions.bias"))
    # Its weights with one row per vocabulary entry (they grow with the vocabulary).
    VOCABULARY_ROWS = ("output_bias",)

    def __init__(self, config: BertConfig, **kwargs):
        super().__init__(autocast=False, **kwargs)
        # H → H for BERT; H → E for ALBERT, whose tied table is E wide.
        h, e = config.hidden_size, config.embedding_width
        self.transform = Dense(config, e, h, activation=get_activation(config.activation),
                               name="transform", dtype=self.dtype_policy)
        self.layer_norm = LayerNorm(e, config.layer_norm_eps, name="layer_norm",
                                    dtype=self.dtype_policy)
        self.output_bias = self.add_weight(shape=(config.vocab_size,), initializer="zeros",
                                           name="output_bias", dtype="float32")
        self.built = True

    def call(self, masked_rows: tf.Tensor, embedding_table) -> tf.Tensor:
        """Args:
          masked_rows: [B,P,H], the encoder's output at the positions to predict (see
            `BertEncoder`'s `output_positions`).
          embedding_table: the encoder's word-embedding variable [V,H] (tied, not copied).

        Returns:
          float32 logits [B,P,V].
        """
        x = tf.cast(self.layer_norm(self.transform(masked_rows)), self.compute_dtype)  # [B,P,H]
        table = tf.cast(embedding_table, x.dtype)  # [V,H]
        logits = tf.matmul(tf.reshape(x, [-1, x.shape[-1]]), table, transpose_b=True)  # [B*P,V]
        logits = tf.cast(logits, tf.float32) + self.output_bias
        shape = tf.shape(masked_rows)
        return tf.reshape(logits, [shape[0], shape[1], table.shape[0]])  # [B,P,V]


class _OutputWeights(keras.layers.Layer):
    """float32 `output_weights` [out,in] and `output_bias` [out], applied as x @ Wᵀ + b."""

    def __init__(self, hidden_size: int, num_outputs: int, stddev: float, **kwargs):
        super().__init__(autocast=False, **kwargs)
        self.output_weights = self.add_weight(
            shape=(num_outputs, hidden_size),
            initializer=keras.initializers.TruncatedNormal(stddev=stddev), name="output_weights",
            dtype="float32")
        self.output_bias = self.add_weight(shape=(num_outputs,), initializer="zeros",
                                           name="output_bias", dtype="float32")
        self.built = True

    def _logits(self, x: tf.Tensor) -> tf.Tensor:
        """x [..., H] → float32 [..., out]."""
        shape = tf.shape(x)
        x = tf.reshape(tf.cast(x, tf.float32), [-1, x.shape[-1]])  # [M,H]
        logits = tf.matmul(x, self.output_weights, transpose_b=True) + self.output_bias  # [M,out]
        return tf.reshape(logits, tf.concat([shape[:-1], [self.output_weights.shape[0]]], 0))


class NextSentence(_OutputWeights):
    """pooled_output [B,H] → float32 logits [B,2] (0 = actual next, 1 = random)."""

    ATTRIBUTE = "next_sentence"
    CHECKPOINT_NAMES = NameTable(names.output_weights("cls/seq_relationship",
                                                      "cls.seq_relationship"))

    def __init__(self, config: BertConfig, **kwargs):
        super().__init__(config.hidden_size, 2, config.initializer_range, **kwargs)

    def call(self, pooled_output: tf.Tensor) -> tf.Tensor:
        return self._logits(pooled_output)


class Classifier(_OutputWeights):
    """dropout 0.1 on pooled_output [B,H] → float32 logits [B,num_labels]."""

    ATTRIBUTE = "classifier"
    # Unscoped in the original's run_classifier.py; BertForSequenceClassification's `classifier`.
    CHECKPOINT_NAMES = NameTable(names.output_weights("", "classifier"))

    def __init__(self, config: BertConfig, num_labels: int, input_size: int | None = None,
                 **kwargs):
        super().__init__(input_size or config.hidden_size, num_labels,
                         FINE_TUNING_INITIALIZER_RANGE, **kwargs)
        self.dropout = Dropout(CLASSIFIER_DROPOUT, dtype=self.dtype_policy)

    def call(self, pooled_output: tf.Tensor, training=False) -> tf.Tensor:
        return self._logits(self.dropout(pooled_output, training=training))


class Span(_OutputWeights):
    """sequence_output [B,S,H] → float32 (start_logits [B,S], end_logits [B,S])."""

    ATTRIBUTE = "span"
    CHECKPOINT_NAMES = NameTable(names.output_weights("cls/squad", "qa_outputs"))

    def __init__(self, config: BertConfig, **kwargs):
        super().__init__(config.hidden_size, 2, FINE_TUNING_INITIALIZER_RANGE, **kwargs)

    def call(self, sequence_output: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        logits = self._logits(sequence_output)  # [B,S,2]
        return logits[..., 0], logits[..., 1]


class TokenClassifier(Classifier):
    """dropout 0.1 on sequence_output [B,S,H] → float32 logits [B,S,num_labels] (e.g. NER).

    The classifier head applied to every token (its matmul takes any leading shape);
    `input_size` is the width of what it reads (H, or 2×lstm_size above a BiLSTM). Its names are
    the classifier's (the original's NER forks use them; BertForTokenClassification's
    `classifier`).
    """

    ATTRIBUTE = "token_classifier"

    # Above a BiLSTM its input carries the padding mask; the logits at padding are never read.
    supports_masking = True


class CrfScores(keras.layers.Layer):
    """A linear-chain CRF's learned scores (float32, zeros at first; see `bert_tf.model.crf`):
    `transitions` [C,C] (tag j after tag i at [i, j]), `start_scores` [C], `end_scores` [C]."""

    def __init__(self, num_labels: int, **kwargs):
        super().__init__(autocast=False, **kwargs)
        self.transitions = self.add_weight(shape=(num_labels, num_labels), initializer="zeros",
                                           name="transitions", dtype="float32")
        self.start_scores = self.add_weight(shape=(num_labels,), initializer="zeros",
                                            name="start_scores", dtype="float32")
        self.end_scores = self.add_weight(shape=(num_labels,), initializer="zeros",
                                          name="end_scores", dtype="float32")
        self.built = True

    def scores(self) -> dict[str, tf.Tensor]:
        """{"transitions", "start_scores", "end_scores"}: the variables as tensors."""
        return {"transitions": tf.convert_to_tensor(self.transitions),
                "start_scores": tf.convert_to_tensor(self.start_scores),
                "end_scores": tf.convert_to_tensor(self.end_scores)}
