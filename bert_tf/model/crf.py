"""Linear-chain CRF and scheme-constrained Viterbi decoding, as TensorFlow ops.

Pure functions on tensors (no Keras state), so that a training step, an evaluation and an
exported serving graph decode the same way. Shapes: B batch, T time steps (words), C tags.
A sequence's valid steps are its first `lengths[b]` steps (a prefix, like pytorch-crf's mask);
`compact` turns a mask of scattered positions (a window's first WordPieces) into that form.

- `crf_log_likelihood`: log p(tags | emissions) with learned `transitions[i, j]` (score of tag j
  after tag i), `start_scores` and `end_scores` — the model of pytorch-crf's `CRF`.
- `crf_decode`: the Viterbi path under the same scores.
- `scheme_constraints` + `constrained_decode`: Viterbi whose forbidden transitions (BIO: `I-X`
  only after `B-X`/`I-X`; BIOES: also `E-X` closes and `S-X`/`O` stand alone) are −∞, so every
  path is a well-formed entity sequence.

Scores are computed in the emissions' dtype (float16/bfloat16 in float32).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np
import tensorflow as tf

OUTSIDE = "O"
NEG_INF = float("-inf")


class Constraints(NamedTuple):
    """Additive scores, 0 where allowed and −∞ where forbidden: transitions [C,C] (from, to),
    start [C] (first tag), end [C] (last tag); float32 numpy arrays."""

    transitions: np.ndarray
    start: np.ndarray
    end: np.ndarray


def _float(x: tf.Tensor) -> tf.Tensor:
    x = tf.convert_to_tensor(x)
    return x if x.dtype in (tf.float32, tf.float64) else tf.cast(x, tf.float32)


def _padded(emissions: tf.Tensor, lengths: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """emissions [B,T,C] with one masked step appended (so a scan over steps 1.. is never empty)
    and the float mask [B,T+1]."""
    emissions = tf.pad(emissions, [[0, 0], [0, 1], [0, 0]])
    mask = tf.sequence_mask(lengths, tf.shape(emissions)[1], emissions.dtype)
    return emissions, mask


def crf_log_likelihood(emissions: tf.Tensor, tags: tf.Tensor, lengths: tf.Tensor,
                       transitions: tf.Tensor, start_scores: tf.Tensor,
                       end_scores: tf.Tensor) -> tf.Tensor:
    """log p(tags | emissions) of each sequence (0 for an empty one).

    Args:
      emissions: [B,T,C] float, the per-step tag scores.
      tags: [B,T] int, the gold tags (any value past a sequence's length).
      lengths: [B] int, valid steps of each sequence (0..T).
      transitions: [C,C] float, score of tag j following tag i at [i, j].
      start_scores, end_scores: [C] float, scores of the first and the last tag.

    Returns:
      [B] log-likelihoods, differentiable in every float argument.
    """
    emissions = _float(emissions)
    dtype = emissions.dtype
    transitions, start, end = (tf.cast(x, dtype) for x in (transitions, start_scores, end_scores))
    lengths = tf.cast(lengths, tf.int32)
    tags = tf.cast(tags, tf.int32)
    padded, mask = _padded(emissions, lengths)  # [B,T+1,C], [B,T+1]
    tags = tf.pad(tags, [[0, 0], [0, 1]])  # [B,T+1]
    # The gold path's score: start + Σ emissions + Σ transitions + end, over the valid steps.
    unary = tf.gather(padded, tags, batch_dims=2)  # [B,T+1]
    pairs = tf.gather_nd(transitions, tf.stack([tags[:, :-1], tags[:, 1:]], axis=-1))  # [B,T]
    last = tf.gather(tags, tf.maximum(lengths - 1, 0), batch_dims=1)  # [B]
    gold = (tf.gather(start, tags[:, 0]) + tf.reduce_sum(unary * mask, axis=1)
            + tf.reduce_sum(pairs * mask[:, 1:], axis=1) + tf.gather(end, last))

    # The forward algorithm: alpha[b, j] = log Σ over paths ending in tag j.
    def step(alpha, inputs):
        emission, valid = inputs  # [B,C], [B]
        moved = tf.reduce_logsumexp(alpha[:, :, None] + transitions[None], axis=1) + emission
        return tf.where(valid[:, None] > 0, moved, alpha)

    alpha = tf.foldl(step, (tf.transpose(padded[:, 1:], [1, 0, 2]),
                            tf.transpose(mask[:, 1:])),
                     initializer=start + padded[:, 0])  # [B,C]
    log_partition = tf.reduce_logsumexp(alpha + end, axis=1)  # [B]
    return tf.where(lengths > 0, gold - log_partition, tf.zeros_like(gold))


def crf_decode(emissions: tf.Tensor, lengths: tf.Tensor, transitions: tf.Tensor,
               start_scores: tf.Tensor, end_scores: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The highest-scoring tag path of each sequence (Viterbi).

    Args: as `crf_log_likelihood` (no tags); scores may hold −∞ (forbidden).

    Returns:
      (tags [B,T] int32, 0 past each length; best path score [B], 0 for an empty sequence).
    """
    emissions = _float(emissions)
    dtype = emissions.dtype
    transitions, start, end = (tf.cast(x, dtype) for x in (transitions, start_scores, end_scores))
    lengths = tf.cast(lengths, tf.int32)
    padded, mask = _padded(emissions, lengths)  # [B,T+1,C], [B,T+1]
    num_tags = tf.shape(emissions)[2]
    identity = tf.broadcast_to(tf.range(num_tags), tf.shape(padded[:, 0]))  # [B,C]

    def forward(carry, inputs):
        score, _ = carry
        emission, valid = inputs
        total = score[:, :, None] + transitions[None]  # [B,C_from,C_to]
        keep = valid[:, None] > 0
        moved = tf.reduce_max(total, axis=1) + emission
        best_from = tf.argmax(total, axis=1, output_type=tf.int32)  # [B,C]
        # Past the end the score stands still and each tag points to itself.
        return tf.where(keep, moved, score), tf.where(keep, best_from, identity)

    scores, backpointers = tf.scan(
        forward, (tf.transpose(padded[:, 1:], [1, 0, 2]), tf.transpose(mask[:, 1:])),
        initializer=(start + padded[:, 0], identity))  # [T,B,C] each
    final = scores[-1] + end  # [B,C]
    last = tf.argmax(final, axis=1, output_type=tf.int32)  # [B]

    def backward(tag, pointers):
        return tf.gather(pointers, tag, batch_dims=1)

    # Step t's pointers give the tag at t-1: scanning T..1 yields the tags at T-1..0.
    earlier = tf.scan(backward, backpointers, initializer=last, reverse=True)  # [T,B]
    path = tf.transpose(earlier) * tf.cast(mask[:, :-1], tf.int32)  # [B,T]
    best = tf.where(lengths > 0, tf.reduce_max(final, axis=1), tf.zeros_like(final[:, 0]))
    return path, best


def scheme_constraints(labels: Sequence[str], scheme: str) -> Constraints:
    """The forbidden moves of `scheme` ("bio" or "bioes") over `labels` (e.g. O, B-PER, I-PER).

    BIO: `I-X` only after `B-X` or `I-X`, never first. BIOES: after `B-X`/`I-X` only `I-X`/`E-X`;
    after `O`, `E-*`, `S-*` only `O`, `B-*`, `S-*`; first tag `O`/`B`/`S`, last `O`/`E`/`S`.
    """
    parts = [(OUTSIDE, "") if label == OUTSIDE else tuple(label.split("-", 1)) for label in labels]
    size = len(parts)
    transitions = np.zeros((size, size), np.float32)
    start = np.zeros(size, np.float32)
    end = np.zeros(size, np.float32)
    inside = ("I",) if scheme == "bio" else ("I", "E")
    for j, (prefix, kind) in enumerate(parts):
        if prefix in inside:
            start[j] = NEG_INF
        if scheme == "bioes" and prefix in ("B", "I"):
            end[j] = NEG_INF
        for i, (before, before_kind) in enumerate(parts):
            continues = before in ("B", "I") and before_kind == kind
            if prefix in inside and not continues:
                transitions[i, j] = NEG_INF
            if scheme == "bioes" and before in ("B", "I") and not (prefix in inside
                                                                     and continues):
                transitions[i, j] = NEG_INF
    return Constraints(transitions, start, end)


def constrained_decode(log_probs: tf.Tensor, lengths: tf.Tensor,
                       constraints: Constraints) -> tf.Tensor:
    """The most probable well-formed tag path: Viterbi over per-step log-probabilities.

    Args:
      log_probs: [B,T,C] float, e.g. log_softmax of a tagger's logits.
      lengths: [B] int.
      constraints: from `scheme_constraints`.

    Returns:
      [B,T] int32 tags, 0 past each length.
    """
    return crf_decode(log_probs, lengths, *constraints)[0]


def compact(values: tf.Tensor, mask: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Moves the masked-in positions of each row to its front, in order.

    Args:
      values: [B,S,...].
      mask: [B,S] int or bool, the positions to keep (e.g. each word's first WordPiece).

    Returns:
      (values [B,S,...] with row b's kept positions first; lengths [B] int32; the order [B,S]
       int32 for `expand`).
    """
    keep = tf.cast(mask, tf.bool)
    order = tf.argsort(tf.cast(tf.logical_not(keep), tf.int32), axis=1, stable=True)  # [B,S]
    lengths = tf.reduce_sum(tf.cast(keep, tf.int32), axis=1)
    return tf.gather(values, order, batch_dims=1), lengths, order


def expand(compacted: tf.Tensor, order: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """The inverse of `compact` for [B,S] values: back in place, 0 at masked-out positions."""
    inverse = tf.argsort(order, axis=1)  # [B,S] where each position went
    placed = tf.gather(compacted, inverse, batch_dims=1)
    return placed * tf.cast(tf.cast(mask, tf.bool), placed.dtype)
