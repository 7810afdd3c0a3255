"""Masks drawn in the tf.data pipeline for unmasked records (RoBERTa-style dynamic masking).

`create_pretraining_data.py --dynamic_masking` writes each instance once, without masks
(`features.unmasked_pretraining_schema`); `pretraining_dataset` reads such records and masks every
batch as it is read, with the same rules as the static path (`pretraining.create_masked_lm_predictions`):
`min(max_predictions_per_seq, max(1, round(length * masked_lm_prob)))` tokens, as whole words or
ALBERT n-grams when the records ask for them, each replaced by [MASK] 80%, kept 10%, a random id 10%.
The output has the static records' features, so the model and the task do not change.

Randomness: stateless ops keyed by (seed, pipeline batch counter). The training loop resumes by
skipping the batches finished steps consumed, which keeps the counter, so a resumed run draws the
masks of an uninterrupted one; the counter keeps growing over epochs, so a record seen again is
masked afresh. Shapes: B = batch, S = max_seq_length, P = max_predictions_per_seq, N = ngram.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np
import tensorflow as tf

from bert_tf.errors import UserError
from bert_tf.records import datasets, features, tfrecord
from bert_tf.tasks.pretraining import ngram_masking


@dataclasses.dataclass(frozen=True)
class MaskingOptions:
    """How masks are drawn (read from the records, except `max_predictions_per_seq`)."""
    max_predictions_per_seq: int
    masked_lm_prob: float = 0.15
    do_whole_word_mask: bool = False
    ngram: int = 1
    mask_token_id: int = 103
    vocab_size: int = 30522
    # Of the chosen tokens, this fraction becomes [MASK]; of the others, `keep_fraction` keep
    # their token and the rest get a random id (BERT: 80%, then half of 20%: 10% / 10%).
    mask_fraction: float = 0.8
    keep_fraction: float = 0.5


# ELECTRA (google-research/electra's pretrain_helpers.mask): 85% [MASK], 15% kept, no random id.
ELECTRA_REPLACEMENT = {"mask_fraction": 0.85, "keep_fraction": 1.0}


def is_unmasked_file(path: str) -> bool:
    """Whether a record file holds unmasked instances (judged by its first record's features)."""
    from tensorflow.core.example import example_pb2

    for record in tfrecord.read_records(path, limit=1):
        return "token_kinds" in example_pb2.Example.FromString(record).features.feature
    return False


def read_masking_options(files: Sequence[str], max_seq_length: int,
                         max_predictions_per_seq: int) -> MaskingOptions:
    """The masking options every file's first record holds; an error names a file that differs."""
    schema = features.unmasked_pretraining_schema(max_seq_length)
    found: dict[str, MaskingOptions] = {}
    for path in files:
        for record in tfrecord.read_records(path, limit=1):
            values = schema.decode(record, source=path)
            found[path] = MaskingOptions(
                max_predictions_per_seq, masked_lm_prob=round(float(values["masked_lm_prob"][0]), 6),
                do_whole_word_mask=bool(values["do_whole_word_mask"][0]), ngram=int(values["ngram"][0]),
                mask_token_id=int(values["mask_token_id"][0]), vocab_size=int(values["vocab_size"][0]))
    if not found:
        raise ValueError(f"no records in {', '.join(files)}")
    first_path, first = next(iter(found.items()))
    for path, options in found.items():
        if options != first:
            raise ValueError(f"{path}: masking options {options} differ from those of {first_path} "
                             f"({first}); write all inputs with the same create_pretraining_data flags")
    return first


def pretraining_dataset(input_patterns: str, schema: features.Schema, batch_size: int, *,
                        is_training: bool, input_context: tf.distribute.InputContext | None,
                        seed: int, drop_remainder: bool, repeat: bool = False,
                        electra: bool = False) -> tf.data.Dataset:
    """Batches of pretraining features from static or unmasked records (detected per input).

    Args:
      schema: the static `features.pretraining_schema`; its lengths are the flags' values.
      electra: ELECTRA's masks (`ELECTRA_REPLACEMENT`) and a `sampling_seed` int32 [B,2] per
        batch (the seeds of the generator's sampling noise); unmasked records only.
      Others as `datasets.record_dataset`.

    Raises:
      UserError: `electra` on static records (their masks are BERT's, fixed when written).
    """
    files = datasets.resolve_input_files(input_patterns)
    unmasked = [is_unmasked_file(path) for path in files]
    kwargs = dict(is_training=is_training, input_context=input_context, seed=seed,
                  drop_remainder=drop_remainder, repeat=repeat)
    if electra and not all(unmasked):
        raise UserError(f"{files[unmasked.index(False)]}: --objective=electra draws ELECTRA's "
                        f"masks (85% [MASK], 15% kept) as it reads: write the records with "
                        f"create_pretraining_data.py --dynamic_masking")
    if not any(unmasked):
        return datasets.record_dataset(files, schema, batch_size, **kwargs)
    if not all(unmasked):
        raise ValueError(f"--input_file mixes masked records ({files[unmasked.index(False)]}) with "
                         f"unmasked ones ({files[unmasked.index(True)]}, --dynamic_masking); use one kind")
    seq = schema.by_name["input_ids"].length
    options = read_masking_options(files, seq, schema.by_name["masked_lm_positions"].length)
    if electra:
        options = dataclasses.replace(options, **ELECTRA_REPLACEMENT)
    dataset = datasets.record_dataset(files, features.unmasked_pretraining_schema(seq), batch_size, **kwargs)
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    base_seed = tf.constant([seed, pipeline_id], tf.int64)

    def mask(batch_index, batch):
        batch_seed = tf.random.experimental.stateless_fold_in(base_seed, batch_index)
        masked = mask_batch(batch, batch_seed, options)
        if electra:
            rows = tf.shape(batch["input_ids"])[0]
            masked["sampling_seed"] = tf.random.stateless_uniform(
                [rows, 2], tf.random.experimental.stateless_fold_in(batch_seed, -1),
                minval=None, maxval=None, dtype=tf.int32)
        return masked

    return dataset.enumerate().map(mask, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True) \
        .prefetch(tf.data.AUTOTUNE)


def mask_batch(batch: dict[str, tf.Tensor], seed: tf.Tensor, options: MaskingOptions) -> dict[str, tf.Tensor]:
    """Draws the masks of a batch of unmasked records.

    Args:
      batch: parsed unmasked records: `input_ids`, `segment_ids`, `token_kinds` int32 [B, S],
        `next_sentence_labels` int32 [B, 1].
      seed: int [2], the stateless seed of this batch.

    Returns:
      The static records' features: `input_ids` (with replacements), `input_mask`, `segment_ids`
      int32 [B, S]; `masked_lm_positions`, `masked_lm_ids` int32 [B, P]; `masked_lm_weights`
      float32 [B, P]; `next_sentence_labels` int32 [B, 1].
    """
    input_ids, kinds = batch["input_ids"], batch["token_kinds"]
    choose_seed, replace_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    input_mask = tf.cast(kinds != features.TOKEN_PADDING, tf.int32)
    candidates = kinds >= features.TOKEN_WORD_START
    lengths = tf.cast(tf.reduce_sum(input_mask, axis=1), tf.float32)
    budget = tf.minimum(options.max_predictions_per_seq,
                        tf.maximum(1, tf.cast(tf.round(lengths * options.masked_lm_prob), tf.int32)))
    if options.ngram == 1 and not options.do_whole_word_mask:
        chosen = _choose_tokens(candidates, budget, choose_seed)
    else:
        units = candidates & (kinds == features.TOKEN_WORD_START) if options.do_whole_word_mask else candidates
        chosen = _choose_spans(candidates, units, kinds == features.TOKEN_SPECIAL, budget, options.ngram,
                               choose_seed)
    return dict(_replace(input_ids, chosen, options, replace_seed), input_mask=input_mask,
                segment_ids=batch["segment_ids"], next_sentence_labels=batch["next_sentence_labels"])


def _choose_tokens(candidates: tf.Tensor, budget: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """A uniformly random set of `budget` candidates per row: those with the smallest keys."""
    keys = tf.where(candidates, tf.random.stateless_uniform(tf.shape(candidates), seed), 2.0)
    kth = tf.gather(tf.sort(keys, axis=1), budget - 1, batch_dims=1)
    return candidates & (keys <= kth[:, None])


def _choose_spans(candidates: tf.Tensor, unit_starts: tf.Tensor, separators: tf.Tensor, budget: tf.Tensor,
                  ngram: int, seed: tf.Tensor) -> tf.Tensor:
    """Whole words / n-grams: the algorithm of `ngram_masking.choose_ngrams`, in TF ops.

    Units (words, or tokens) are visited in random order; each draws n with P(n) ∝ 1/n among the
    lengths inside its segment, shortens the span to the remaining budget and takes it unless it
    overlaps a span already taken. With ngram=1 this is the static whole-word rule.
    """
    batch, seq = tf.shape(candidates)[0], tf.shape(candidates)[1]
    order_seed, draw_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    unit = tf.cumsum(tf.cast(unit_starts, tf.int32), axis=1) - 1
    flat_unit = tf.where(candidates, unit, seq)  # [B, S]; seq is the non-candidates' dummy unit
    row = tf.range(batch)[:, None]
    cells = tf.reshape(row * (seq + 1) + flat_unit, [-1])
    sizes = tf.reshape(tf.math.unsorted_segment_sum(tf.ones_like(cells), cells, batch * (seq + 1)),
                       [batch, seq + 1]) * tf.cast(tf.range(seq + 1) < seq, tf.int32)[None, :]
    first_token = tf.concat([tf.zeros([batch, 1], tf.int32), tf.cumsum(sizes, axis=1)], axis=1)  # [B, S + 2]
    segment = tf.cumsum(tf.cast(separators, tf.int32), axis=1)
    start_cells = tf.reshape(row * (seq + 1) + tf.where(unit_starts, unit, seq), [-1])
    unit_segment = tf.reshape(tf.math.unsorted_segment_max(
        tf.reshape(tf.where(unit_starts, segment, -1), [-1]), start_cells, batch * (seq + 1)), [batch, seq + 1])
    units_in_row = tf.reduce_sum(tf.cast(unit_starts, tf.int32), axis=1)
    same_as_first = unit_segment == unit_segment[:, :1]
    in_first_segment = tf.reduce_sum(tf.cast(same_as_first, tf.int32), axis=1)
    left = tf.where(same_as_first, in_first_segment[:, None], units_in_row[:, None]) - tf.range(seq + 1)[None, :]
    keys = tf.where(sizes[:, :seq] > 0, tf.random.stateless_uniform([batch, seq], order_seed), 2.0)
    order = tf.argsort(keys, axis=1, stable=True)
    draws = tf.random.stateless_uniform([batch, seq], draw_seed)
    cumulative = tf.constant(np.cumsum(ngram_masking.ngram_probabilities(ngram)), tf.float32)
    span_offsets = tf.range(ngram)[None, :]
    width = seq + ngram + 1

    def visit(step, covered, used):
        u = order[:, step]
        longest = tf.clip_by_value(tf.gather(left, u, batch_dims=1), 0, ngram)
        at_least_one = tf.maximum(longest, 1)
        total = tf.gather(cumulative, at_least_one - 1)
        n = 1 + tf.reduce_sum(tf.cast(draws[:, step, None] * total[:, None] >= cumulative[None, :], tf.int32), 1)
        n = tf.minimum(n, at_least_one)

        def span_tokens(n):
            end = tf.minimum(u + n, seq + 1)
            return tf.gather(first_token, end, batch_dims=1) - tf.gather(first_token, u, batch_dims=1)

        for _ in range(ngram - 1):  # shorten until the span fits
            n = tf.where((n > 1) & (used + span_tokens(n) > budget), n - 1, n)
        span = span_tokens(n)
        in_span = span_offsets < n[:, None]  # [B, N]
        overlaps = tf.reduce_any(tf.gather(covered, u[:, None] + span_offsets, batch_dims=1) & in_span, axis=1)
        take = (longest > 0) & (used + span <= budget) & ~overlaps
        hits = tf.one_hot(u[:, None] + span_offsets, width, on_value=True, off_value=False, dtype=tf.bool)
        covered |= tf.reduce_any(hits & (in_span & take[:, None])[..., None], axis=1)
        return step + 1, covered, used + tf.where(take, span, 0)

    # a row whose budget is full takes nothing more, so the loop ends when every row is full
    _, covered, _ = tf.while_loop(
        lambda step, covered, used: (step < tf.reduce_max(units_in_row)) & tf.reduce_any(used < budget), visit,
        (tf.constant(0), tf.zeros([batch, width], tf.bool), tf.zeros([batch], tf.int32)))
    return candidates & tf.gather(covered, flat_unit, batch_dims=1)


def _replace(input_ids: tf.Tensor, chosen: tf.Tensor, options: MaskingOptions, seed: tf.Tensor) -> dict:
    """The chosen positions (ascending, at most P) and the 80/10/10 replacements."""
    batch, seq = tf.shape(input_ids)[0], tf.shape(input_ids)[1]
    preds = options.max_predictions_per_seq
    columns = tf.where(chosen, tf.range(seq)[None, :], seq)
    positions = tf.sort(columns, axis=1)[:, :preds]
    count = tf.reduce_sum(tf.cast(chosen, tf.int32), axis=1)
    real = tf.range(preds)[None, :] < count[:, None]
    positions = tf.where(real, positions, 0)
    labels = tf.where(real, tf.gather(input_ids, positions, batch_dims=1), 0)
    uniforms = tf.random.stateless_uniform([3, batch, preds], seed)
    random_ids = tf.cast(uniforms[2] * options.vocab_size, tf.int32)
    replacement = tf.where(uniforms[0] < options.mask_fraction, options.mask_token_id,
                           tf.where(uniforms[1] < options.keep_fraction, labels, random_ids))
    # padding predictions rewrite position 0 ([CLS]) with its own id: no change
    replacement = tf.where(real, replacement, input_ids[:, :1])
    rows = tf.broadcast_to(tf.range(batch)[:, None], [batch, preds])
    masked = tf.tensor_scatter_nd_update(input_ids, tf.stack([rows, positions], axis=-1), replacement)
    return {"input_ids": masked, "masked_lm_positions": positions, "masked_lm_ids": labels,
            "masked_lm_weights": tf.cast(real, tf.float32)}
