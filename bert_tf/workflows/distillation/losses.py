"""TinyBERT's task-distillation losses, as (Σ loss, Σ weight) pairs for the training loop.

The loop divides each term's sum by its weight summed over the global batch
(`bert_tf.training.loop.Task`), so every function here returns the numerator from the outputs and
a normalizer from the input mask only.

Intermediate stage (student layer j ↔ teacher layer `layer_map(...)[j]`):
  attention  Σ_layers mean over heads and real (query, key) pairs of (s_student − s_teacher)², with
             s the scaled query·key scores before the mask and softmax. TinyBERT zeroes the scores
             of padding keys and divides by every position of the padded batch; here padding
             queries and keys are left out of both sums, so the loss does not depend on how
             much padding a batch has (dynamic padding changes it from batch to batch).
  hidden     Σ_states mean over real tokens and the teacher's width of
             (student_state · W + b − teacher_state)², states = the embeddings then every mapped
             layer; W [H_student, H_teacher] learned (TinyBERT's `fit_dense`) when the widths
             differ, none when they are equal.
Prediction stage, on logits / T (`temperature`):
  soft cross-entropy   −Σ_c softmax(t/T)_c · log softmax(s/T)_c per example (TinyBERT takes the
             mean over classes as well: the same gradient direction, 1/C of its size, which
             would weigh the gold-label loss C times more under `alpha`);
  soft binary cross-entropy (multi-label): sigmoid(t/T) as targets, mean over the labels;
  mean squared error (regression): (s − t)², no temperature.
"""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf

from bert_tf.errors import UserError


def layer_map(student_layers: int, teacher_layers: int) -> list[int]:
    """The teacher layer (0-based) each student layer learns from: student layer j (1-based)
    ↔ teacher layer j·k, k = teacher_layers / student_layers (TinyBERT's uniform map).

    Raises:
      UserError: the teacher's layers are not a whole multiple of the student's.
    """
    if student_layers < 1 or teacher_layers % student_layers:
        raise UserError(f"the student's {student_layers} layers must divide the teacher's "
                        f"{teacher_layers} (student layer j learns from teacher layer j·k); "
                        "choose --student_layers or --student_config accordingly")
    k = teacher_layers // student_layers
    return [(j + 1) * k - 1 for j in range(student_layers)]


def token_mask(input_mask: tf.Tensor, is_real_example: tf.Tensor | None = None) -> tf.Tensor:
    """float32 [B,S]: 1 at the real tokens of real examples."""
    mask = tf.cast(input_mask, tf.float32)
    if is_real_example is not None:
        mask *= tf.reshape(tf.cast(is_real_example, tf.float32), [-1, 1])
    return mask


def attention_loss(student_scores: Sequence[tf.Tensor], teacher_scores: Sequence[tf.Tensor],
                   mask: tf.Tensor) -> tf.Tensor:
    """Σ over the paired layers and the real (query, key) pairs of every head of (s − t)².

    Args:
      student_scores, teacher_scores: the paired layers' scores, each float [B,N,S,S] (the same N:
        `student.check_heads` says so at the start).
      mask: float32 [B,S] (`token_mask`).
    """
    pairs = mask[:, tf.newaxis, :, tf.newaxis] * mask[:, tf.newaxis, tf.newaxis, :]  # [B,1,S,S]
    return tf.add_n([tf.reduce_sum(pairs * tf.square(tf.cast(s, tf.float32)
                                                     - tf.cast(t, tf.float32)))
                     for s, t in zip(student_scores, teacher_scores)])


def attention_weight(mask: tf.Tensor, num_heads: int) -> tf.Tensor:
    """What `attention_loss` is divided by: N · Σ_b (real tokens of b)²."""
    return num_heads * tf.reduce_sum(tf.square(tf.reduce_sum(mask, axis=1)))


def hidden_loss(student_states: Sequence[tf.Tensor], teacher_states: Sequence[tf.Tensor],
                mask: tf.Tensor) -> tf.Tensor:
    """Σ over the paired states and the real tokens of Σ_h (s − t)².

    Args:
      student_states: each [B,S,H_teacher] (projected to the teacher's width if need be);
        teacher_states: each [B,S,H_teacher].
      mask: float32 [B,S] (`token_mask`).
    """
    return tf.add_n([tf.reduce_sum(mask[..., tf.newaxis] * tf.square(
        tf.cast(s, tf.float32) - tf.cast(t, tf.float32)))
        for s, t in zip(student_states, teacher_states)])


def hidden_weight(mask: tf.Tensor, hidden_size: int) -> tf.Tensor:
    """What `hidden_loss` is divided by: H_teacher · Σ real tokens."""
    return hidden_size * tf.reduce_sum(mask)


def soft_cross_entropy(student_logits: tf.Tensor, teacher_logits: tf.Tensor,
                       temperature: float) -> tf.Tensor:
    """float32 [...]: −Σ_c softmax(t/T)_c · log softmax(s/T)_c over the last axis."""
    targets = tf.nn.softmax(tf.cast(teacher_logits, tf.float32) / temperature, axis=-1)
    log_probs = tf.nn.log_softmax(tf.cast(student_logits, tf.float32) / temperature, axis=-1)
    return -tf.reduce_sum(targets * log_probs, axis=-1)


def soft_binary_cross_entropy(student_logits: tf.Tensor, teacher_logits: tf.Tensor,
                              temperature: float) -> tf.Tensor:
    """float32 [B]: mean over labels of the binary cross-entropy of sigmoid(s/T) against
    sigmoid(t/T) (multi-label)."""
    targets = tf.math.sigmoid(tf.cast(teacher_logits, tf.float32) / temperature)
    per_label = tf.nn.sigmoid_cross_entropy_with_logits(
        labels=targets, logits=tf.cast(student_logits, tf.float32) / temperature)
    return tf.reduce_mean(per_label, axis=-1)


def squared_error(student_logits: tf.Tensor, teacher_logits: tf.Tensor) -> tf.Tensor:
    """float32 [B]: (s − t)² of a regression's single output."""
    difference = tf.cast(student_logits, tf.float32) - tf.cast(teacher_logits, tf.float32)
    return tf.reduce_sum(tf.square(difference), axis=-1)
