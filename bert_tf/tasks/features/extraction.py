"""Contextual embeddings of every token of every input line, as the original's extract_features.

Input: one example per line, `text` or `text_a ||| text_b` (UTF-8; bad bytes dropped).
Output: JSON lines in the original's format, one per input line, in input order:

  {"linex_index": 0, "features": [{"token": "[CLS]", "layers": [{"index": -1, "values": [...]},
   ...]}, ...]}

`values` are the H activations of that token in that encoder layer (-1 = the last block, 0 =
the first), each rounded to 6 decimals exactly as the original's `round(float(x), 6)`.

Each batch is padded only to its longest example (the original padded to max_seq_length; the
attention mask makes the real tokens' values the same either way, up to float rounding). The
next batch runs on the encoder while the current one is formatted.

`dtype` (--dtype) is the encoder's compute dtype, as in training: bfloat16 computes in bfloat16
on the float32 weights (Keras' mixed_bfloat16 policy; the residual stream, which the layers'
outputs are, and the attention scores stay float32); the values written are float32 either way,
in the same format. "auto" picks what the devices run fastest (`distribution.resolve_dtype`).
The export keeps its own --export_dtype.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
import json
import re
import time
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import filesystem
from bert_tf.text import tokenizers
from bert_tf.checkpoints import name_map as checkpoints, model_config
from bert_tf.errors import MissingFileError, UserError
from bert_tf.model.families import build_encoder
from bert_tf.model.encoder import BertEncoder
from bert_tf.serving import openvino, precision
from bert_tf.text.pairs import truncate_pair_lengths
from bert_tf.training import distribution

_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")
PROGRESS_SECONDS = 30.0
# Lines the OpenVINO export is compared with float32 on: every token's --layers vectors of each
# are held twice in memory (float32's and the export's).
COMPARISON_LINES = 128


@dataclasses.dataclass(frozen=True)
class ExtractionOptions(openvino.ExportOptions):
    """What extract_features.py's flags describe (the original's names and defaults)."""

    input_file: str | None  # None: export only
    output_file: str | None
    bert_config_file: str | None  # None: the init_checkpoint's config (see model_config)
    init_checkpoint: str
    vocab_file: str | None = None
    spm_model_file: str | None = None
    layers: Sequence[int] = (-1, -2, -3, -4)
    max_seq_length: int = 128
    do_lower_case: bool = True
    batch_size: int = 32
    export_dir: str | None = None  # also write a raw-text SavedModel (tasks/features/export.py)
    dtype: str = "float32"  # the encoder's compute dtype for the JSON lines, or "auto"


@dataclasses.dataclass(frozen=True)
class Example:
    """One input line, packed: `tokens` ([CLS] a [SEP] (b [SEP])), their ids and segment ids."""

    index: int
    tokens: list[str]
    input_ids: list[int]
    segment_ids: list[int]


def parse_line(line: str) -> tuple[str, str | None]:
    """`text` → (text, None); `text_a ||| text_b` → (text_a, text_b); surrounding space stripped."""
    line = line.strip()
    match = _PAIR.match(line)
    return (line, None) if match is None else (match.group(1), match.group(2))


def pack(index: int, line: str, tokenizer, max_seq_length: int) -> Example:
    """Tokenizes one line and trims it as the original: a pair to S − 3 tokens, a text to S − 2."""
    text_a, text_b = parse_line(line)
    tokens_a = tokenizer.tokenize(text_a)
    tokens_b = tokenizer.tokenize(text_b) if text_b else []
    if not tokens_b:  # the original's `if tokens_b`: an empty second text packs as a single one
        tokens = ["[CLS]", *tokens_a[:max_seq_length - 2], "[SEP]"]
        segment_ids = [0] * len(tokens)
    else:
        keep_a, keep_b = truncate_pair_lengths(len(tokens_a), len(tokens_b), max_seq_length - 3)
        tokens = ["[CLS]", *tokens_a[:keep_a], "[SEP]", *tokens_b[:keep_b], "[SEP]"]
        segment_ids = [0] * (keep_a + 2) + [1] * (keep_b + 1)
    return Example(index, tokens, tokenizer.convert_tokens_to_ids(tokens), segment_ids)


def batch_arrays(examples: Sequence[Example]) -> dict[str, np.ndarray]:
    """int32 [B, S] arrays padded with zeros to the longest example of the batch."""
    length = max(len(e.input_ids) for e in examples)
    arrays = {name: np.zeros((len(examples), length), np.int32)
              for name in ("input_ids", "input_mask", "segment_ids")}
    for row, e in enumerate(examples):
        arrays["input_ids"][row, :len(e.input_ids)] = e.input_ids
        arrays["input_mask"][row, :len(e.input_ids)] = 1
        arrays["segment_ids"][row, :len(e.segment_ids)] = e.segment_ids
    return arrays


def json_line(example: Example, values: np.ndarray, layers: Sequence[int]) -> str:
    """The original's JSON line for one example.

    Args:
      values: float32 [S, len(layers), H], the example's row of the batch (S ≥ its tokens).
    """
    # float64 holds x·10⁶ of a float32 x exactly, so np.round gives round(float(x), 6) bit for bit.
    rounded = np.round(values[:len(example.tokens)].astype(np.float64), 6).tolist()
    features = [{"token": token, "layers": [{"index": layer, "values": per_layer}
                                            for layer, per_layer in zip(layers, token_values)]}
                for token, token_values in zip(example.tokens, rounded)]
    return json.dumps({"linex_index": example.index, "features": features}) + "\n"


def layer_function(encoder: BertEncoder, layers: Sequence[int]):
    """A tf.function: the batch dict → float32 [B, S, len(layers), H] of the chosen layers."""
    spec = tf.TensorSpec([None, None], tf.int32)

    @tf.function(input_signature=[{"input_ids": spec, "input_mask": spec, "segment_ids": spec}])
    def run(features):
        outputs = encoder(features, training=False)["encoder_outputs"]
        return tf.cast(tf.stack([outputs[i] for i in layers], axis=2), tf.float32)

    return run


def check_layers(layers: Sequence[int], num_layers: int) -> None:
    bad = [i for i in layers if not -num_layers <= i < num_layers]
    if bad or not layers:
        raise UserError(f"--layers {','.join(map(str, layers))}: the model has {num_layers} "
                         f"layers; use indexes from {-num_layers} (first) to -1 (last), or 0 to "
                         f"{num_layers - 1}")


class _Progress:
    """A log line every PROGRESS_SECONDS: lines done, rate and time left."""

    def __init__(self, total: int, path: str):
        self.total, self.path, self.done = total, path, 0
        self.start = self.last = time.monotonic()

    def update(self, count: int) -> None:
        self.done += count
        now = time.monotonic()
        if now - self.last >= PROGRESS_SECONDS or self.done == self.total:
            self.last = now
            rate = self.done / max(now - self.start, 1e-9)
            logging.info("%s: %d/%d lines (%.0f%%), %.1f lines/s, %.0f s left", self.path, self.done,
                         self.total, 100.0 * self.done / max(self.total, 1), rate,
                         (self.total - self.done) / max(rate, 1e-9))


def _export(options: ExtractionOptions, encoder, build: Callable) -> None:
    """Writes --export_dir: the TensorFlow SavedModel, or the OpenVINO export calibrated on and
    compared with float32 on --input_file's lines (`serving_lines`)."""
    from bert_tf.serving.saved_model import in_graph_tokenizer
    from bert_tf.tasks.features import export

    tokenizer = in_graph_tokenizer(options.vocab_file, options.spm_model_file,
                                   options.do_lower_case)
    if options.export_runtime == "openvino":
        calibration, comparison = serving_lines(options.input_file,
                                                options.int8_calibration_examples)
        export.export_features_openvino(
            encoder, options.export_dir, tokenizer, options.layers, options.max_seq_length,
            options.export_dtype, calibration if options.export_dtype == "int8" else [],
            comparison, options.export_max_relative_loss,
            options.quantization())
    else:
        export.export_features(precision.model_in_dtype(encoder, build, options.export_dtype),
                               options.export_dir, tokenizer, options.layers,
                               options.max_seq_length)
    logging.info("Exported the SavedModel to %s", options.export_dir)


def serving_lines(path: str, count: int) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """A seeded draw of `path`'s lines as `serving_default`'s inputs: `count` to calibrate the
    int8 export on, and up to `COMPARISON_LINES` others (the calibration lines themselves when
    there are no others) to compare the export with float32 on."""
    lines = [{"text": line} for line in read_lines(path)]
    if not lines:
        raise UserError(f"{path}: no lines to calibrate and compare the export on")
    order = np.random.default_rng(0).permutation(len(lines))
    calibration, rest = order[:count], order[count:] if len(order) > count else order
    return ([lines[i] for i in sorted(calibration)],
            [lines[i] for i in sorted(rest[:COMPARISON_LINES])])


def read_lines(path: str) -> Iterator[str]:
    """Input lines decoded as UTF-8 dropping bad bytes, as the original's convert_to_unicode."""
    with filesystem.open_read(path) as f:
        filesystem.check_text_encoding(path, f.read(4096), "--input_file")
        f.seek(0)
        for raw in f:
            yield tokenizers.convert_to_unicode(raw)


def _batches(lines: Iterable[str], tokenizer, options: ExtractionOptions) -> Iterator[list[Example]]:
    examples = (pack(i, line, tokenizer, options.max_seq_length) for i, line in enumerate(lines))
    while batch := list(itertools.islice(examples, options.batch_size)):
        yield batch


def _pipelined(batches: Iterable[list[Example]], run) -> Iterator[tuple[list[Example], np.ndarray]]:
    """(batch, its layer values), with the encoder one batch ahead of the caller in a thread
    (TensorFlow releases the GIL, so formatting JSON and the encoder overlap)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = None
        for batch in batches:
            future = pool.submit(lambda b=batch: run(batch_arrays(b)).numpy())
            if pending is not None:
                yield pending[0], pending[1].result()
            pending = (batch, future)
        if pending is not None:
            yield pending[0], pending[1].result()


def extract_features(options: ExtractionOptions) -> int:
    """Writes the JSON-lines features of `options.input_file` to `options.output_file`, and
    the raw-text SavedModel to `options.export_dir` when given.

    The output appears whole or not at all (a temporary file, then a rename).

    Returns:
      The number of lines written.
    """
    options.check_export(options.export_dir)
    if options.export_dir and options.export_runtime == "openvino" and not options.input_file:
        raise UserError("--export_runtime=openvino calibrates on and compares with float32 on "
                        "--input_file's lines: give it")
    dtype = distribution.resolve_dtype(options.dtype)
    policy = distribution.policy_name(dtype)
    config = model_config.resolve_model_config(options.bert_config_file, options.init_checkpoint)
    check_layers(options.layers, config.num_hidden_layers)
    if not 2 < options.max_seq_length <= config.max_position_embeddings:
        raise UserError(f"--max_seq_length {options.max_seq_length} must be in 3.."
                         f"{config.max_position_embeddings} (max_position_embeddings)")
    if options.input_file is not None and not filesystem.exists(options.input_file):
        raise MissingFileError(f"{options.input_file}: input file not found (check --input_file)")
    tokenizer = tokenizers.create_tokenizer(vocab_file=options.vocab_file,
                                            spm_model_file=options.spm_model_file,
                                            do_lower_case=options.do_lower_case)
    source = options.vocab_file or options.spm_model_file
    tokenizers.check_special_tokens(tokenizer.vocab, ["[CLS]", "[SEP]"], source, "feature extraction")
    tokenizers.check_vocab_size(tokenizer.vocab, config.vocab_size, source)
    encoder = build_encoder(config)
    checkpoints.init_from_checkpoint(encoder, options.init_checkpoint)
    if options.export_dir:
        _export(options, encoder, lambda: build_encoder(config))
    if options.input_file is None or options.output_file is None:  # an export only
        return 0
    for warning in distribution.speed_warnings(tf.distribute.get_strategy(), dtype, False):
        logging.warning(warning)
    if dtype != "float32":
        encoder = precision.copy_in_policy(encoder, lambda: build_encoder(config), policy)
    run = layer_function(encoder, list(options.layers))
    progress = _Progress(sum(1 for _ in read_lines(options.input_file)), options.input_file)
    batches = _batches(read_lines(options.input_file), tokenizer, options)
    with filesystem.atomic_output(options.output_file) as out:
        for batch, values in _pipelined(batches, run):
            out.write("".join(json_line(e, v, options.layers) for e, v in zip(batch, values)))
            progress.update(len(batch))
    return progress.done
