"""Exports a fine-tuned SQuAD model (run_squad.py --export_dir) as a SavedModel that answers
questions on raw text.

Signature `serving_default`: `question` string [B], `context` string [B] ->
* `answer` string [B]: the best span's text cut from `context` as given ("" when there is none,
  or, for v2.0 models, when the null answer wins);
* `answer_start` int32 [B]: its first character's offset in `context` (as SQuAD's
  `answer_start`, in Unicode characters; -1 without an answer);
* `score` float32 [B]: the best span's start + end logit (0 when no span is valid);
* `has_answer` bool [B]: a valid span exists and, for v2.0 models, `null_odds` does not exceed
  the null-score threshold chosen at evaluation (saved in the model as `null_threshold`);
* v2.0 models also `null_odds` float32 [B]: null score − best span score, as null_odds.json.

Inside the graph, as run_squad.py does it: the context splits into words on the original's
whitespace (space, tab, CR, LF, U+202F), each word is tokenized on its own, the question is cut to
`max_query_length` pieces, the context's pieces go into windows of `max_seq_length - query - 3`
every `doc_stride` pieces, `[CLS] question [SEP] window [SEP]` padded to `max_seq_length`; each
piece is marked in the window where it has the most context. Post-processing follows
`postprocess.compute_predictions`: each window's `n_best_size` best starts and ends make the
candidate spans, the best by start + end logit across windows wins (ties: the earlier window and
rank), and its pieces are mapped back onto the context words through `final_text`'s alignment.

`export_squad_openvino` writes the same signature with the model on OpenVINO (int8, bfloat16 or
float32; `bert_tf.serving.openvino`): `SquadServing.prepare` (the windows) and `finish` (the span
search and the mapping back) are the text part.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import keras
import tensorflow as tf

from bert_tf.model.inputs import MODEL_INPUTS
from bert_tf.serving import openvino, packing
from bert_tf.serving.saved_model import SIGNATURE_KEY, save
from bert_tf.serving.sentencepiece import InGraphSentencePiece
from bert_tf.serving.text import basic_words, character_classes

# The original's context whitespace (examples._CONTEXT_WORD): not every Unicode space.
_CONTEXT_SPACES = (0x20, 0x09, 0x0D, 0x0A, 0x202F)
_SPM_SPACE = "\u2581"
_BIG = tf.int64.max
_LOGITS = ("start_logits", "end_logits")
_QUESTION = tf.TensorSpec([None], tf.string, name="question")
_CONTEXT = tf.TensorSpec([None], tf.string, name="context")
# What `finish` reads of `_windows`' fields and of `context_words`' (prefixed `word_`).
_WINDOW_STATE = ("example", "start", "query_part", "in_context", "is_max_context")
_WORD_STATE = ("words", "starts", "lengths")


def context_words(context: tf.Tensor) -> dict[str, tf.RaggedTensor]:
    """examples.split_context on string [B] (valid UTF-8; invalid bytes read as U+FFFD).

    Returns:
      `words` string ragged [B, (W)], `starts` and `lengths` int64 ragged [B, (W)]: each word's
      first character's offset in its context and its length, in characters.
    """
    chars = tf.strings.unicode_decode(context, "UTF-8", errors="replace")  # [B, (C)]
    flat = chars.flat_values
    space = tf.reduce_any(tf.stack([flat == c for c in _CONTEXT_SPACES]), axis=0)
    position = tf.ragged.range(chars.row_lengths()).flat_values
    after_space = tf.concat([[True], space], axis=0)[:-1]
    first = ~space & ((position == 0) | after_space)  # a word's first character
    word_of_char = tf.cumsum(tf.cast(first, tf.int64)) - 1
    num_words = tf.reduce_sum(tf.cast(first, tf.int64))
    word_chars = tf.RaggedTensor.from_value_rowids(
        tf.boolean_mask(flat, ~space), tf.boolean_mask(word_of_char, ~space), nrows=num_words)
    example = tf.boolean_mask(chars.value_rowids(), first)
    rows = lambda values: tf.RaggedTensor.from_value_rowids(  # noqa: E731
        values, example, nrows=chars.nrows())
    return {"words": rows(tf.strings.unicode_encode(word_chars, "UTF-8")),
            "starts": rows(tf.boolean_mask(position, first)),
            "lengths": rows(word_chars.row_lengths())}


def plan_windows(num_tokens: tf.Tensor, query_lengths: tf.Tensor, max_seq_length: int,
                 doc_stride: int) -> dict[str, tf.Tensor]:
    """features.doc_spans for every example at once.

    Args:
      num_tokens, query_lengths: int64 [B] context pieces and (cut) question pieces.

    Returns:
      `example`, `start`, `length`: int64 [R] per window, in example then document order (an
      example without context pieces has none).
    """
    capacity = max_seq_length - query_lengths - 3  # max_tokens_for_doc
    step = tf.minimum(capacity, doc_stride)
    extra = tf.maximum(num_tokens - capacity, 0)
    count = tf.where(num_tokens > 0, 1 + (extra + step - 1) // step, 0)
    index = tf.ragged.range(count)
    example = index.value_rowids()
    start = index.flat_values * tf.gather(step, example)
    length = tf.minimum(tf.gather(num_tokens, example) - start, tf.gather(capacity, example))
    return {"example": example, "start": start, "length": length}


def _first_best(values: tf.Tensor, segments: tf.Tensor, num_segments: tf.Tensor, extreme,
                order: tf.Tensor, valid: tf.Tensor | None = None) -> tf.Tensor:
    """int64 [num_segments]: per segment, the least `order` among its (`valid`) entries that hold
    the segment's `extreme` (`tf.math.unsorted_segment_max` or `_min`) of `values`; `_BIG` where
    there is none. Python's `max`/`argmin` taking the first of equals, for every segment at once."""
    best = tf.gather(extreme(values, segments, num_segments), segments)
    holds = values == best if valid is None else valid & (values == best)
    return tf.math.unsorted_segment_min(tf.where(holds, order, _BIG), segments, num_segments)


def max_context(windows: dict[str, tf.Tensor], token_offsets: tf.Tensor, total_tokens: tf.Tensor
                ) -> tf.RaggedTensor:
    """features.max_context_window: bool ragged [R, (length)], True where no window gives that
    piece more context (score min(left, right) + 0.01 · length; the first best window wins).

    Args:
      windows: `plan_windows`' output.
      token_offsets: int64 [B], where each example's pieces start in the batch's flat pieces.
      total_tokens: int64 scalar, the batch's pieces.
    """
    inside = tf.ragged.range(windows["length"])  # [R, (length)]
    row = inside.value_rowids()
    j = inside.flat_values
    length = tf.gather(windows["length"], row)
    score = (tf.cast(tf.minimum(j, length - 1 - j), tf.float64)
             + 0.01 * tf.cast(length, tf.float64))
    piece = (tf.gather(token_offsets, tf.gather(windows["example"], row))
             + tf.gather(windows["start"], row) + j)  # into the batch's flat pieces
    first = _first_best(score, piece, total_tokens, tf.math.unsorted_segment_max, row)
    return inside.with_flat_values(tf.gather(first, piece) == row)


def best_spans(start_logits: tf.Tensor, end_logits: tf.Tensor, candidate_start: tf.Tensor,
               candidate_end: tf.Tensor, example: tf.Tensor, num_examples: tf.Tensor,
               n_best_size: int, max_answer_length: int) -> dict[str, tf.Tensor]:
    """postprocess.span_candidates + the ranking's first entry, for every example.

    Args:
      start_logits, end_logits: float32 [R, S].
      candidate_start: bool [R, S], where an answer may start (a context piece with its maximum
        context in this window); candidate_end: bool [R, S], where it may end.
      example: int64 [R], each window's example.

    Returns:
      `found` bool [B]; `row`, `start`, `end` int64 [B] (window, first and last position; 0
      where not found); `start_logit`, `end_logit` float64 [B] (0 where not found).
    """
    k = min(n_best_size, start_logits.shape[1])
    start_values, top_start = tf.math.top_k(start_logits, k)  # [R, k], ties: lower index first
    end_values, top_end = tf.math.top_k(end_logits, k)
    start_ok = tf.gather(candidate_start, top_start, batch_dims=1)
    end_ok = tf.gather(candidate_end, top_end, batch_dims=1)
    length = top_end[:, None, :] - top_start[:, :, None] + 1  # [R, k, k]
    valid = (start_ok[:, :, None] & end_ok[:, None, :] & (length >= 1)
             & (length <= max_answer_length))
    score = (tf.cast(start_values, tf.float64)[:, :, None]
             + tf.cast(end_values, tf.float64)[:, None, :])
    valid, score = tf.reshape(valid, [-1]), tf.reshape(score, [-1])  # (window, start, end rank)
    first = _first_best(tf.where(valid, score, -float("inf")), tf.repeat(example, k * k),
                        num_examples, tf.math.unsorted_segment_max,
                        tf.range(tf.size(score, tf.int64)), valid)
    found = first < _BIG
    row, rank = first // (k * k), first % (k * k)

    def pick(top: tf.Tensor, values: tf.Tensor, rank: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        # Through _gather: a batch of contexts without pieces has no windows at all.
        index = row * k + rank
        return (_gather(tf.reshape(tf.cast(top, tf.int64), [-1]), index, found),
                _gather(tf.reshape(tf.cast(values, tf.float64), [-1]), index, found))

    start, start_logit = pick(top_start, start_values, rank // k)
    end, end_logit = pick(top_end, end_values, rank % k)
    return {"found": found, "row": tf.where(found, row, 0), "start": start, "end": end,
            "start_logit": start_logit, "end_logit": end_logit}


def null_scores(start_logits: tf.Tensor, end_logits: tf.Tensor, example: tf.Tensor,
                num_examples: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """postprocess._null_candidate: float64 [B] start and end logits at [CLS] of the window with
    the lowest null score (the first of equals; 0 for an example without windows)."""
    start, end = tf.cast(start_logits[:, 0], tf.float64), tf.cast(end_logits[:, 0], tf.float64)
    first = _first_best(start + end, example, num_examples, tf.math.unsorted_segment_min,
                        tf.range(tf.size(example, tf.int64)))
    found = first < _BIG
    return _gather(start, first, found), _gather(end, first, found)


def _nonspace_length(text: tf.Tensor) -> tf.Tensor:
    """int64: characters other than " " (postprocess.final_text's `_strip_spaces`)."""
    return tf.cast(tf.strings.length(tf.strings.regex_replace(text, " ", ""), unit="UTF8_CHAR"),
                   tf.int64)


def _squeeze_spaces(text: tf.Tensor) -> tf.Tensor:
    """" ".join(text.split())."""
    space = character_classes()["python_space"]
    return tf.strings.regex_replace(tf.strings.regex_replace(text, f"{space}+", " "),
                                    "^ | $", "")


def aligned_range(pred_text: tf.Tensor, orig_text: tf.Tensor, do_lower_case: bool
                  ) -> tuple[tf.Tensor, tf.Tensor]:
    """postprocess.final_text as a range: int64 [B] first and last of `orig_text`'s non-space
    characters that the answer covers (all of them when the alignment fails)."""
    tok_text = tf.strings.reduce_join(basic_words(orig_text, do_lower_case), axis=-1,
                                      separator=" ")

    def before_first_match(texts):
        # str.find, as `split` at the first occurrence; an empty separator would split on spaces.
        haystack, needle = texts
        parts = tf.strings.split(haystack, sep=tf.where(needle == "", " ", needle), maxsplit=1)
        return tf.where((needle != "") & (tf.size(parts) == 2), parts[0], "\x00")

    prefix = tf.map_fn(before_first_match, (tok_text, pred_text),
                       fn_output_signature=tf.string)
    total = _nonspace_length(orig_text)
    aligned = (prefix != "\x00") & (total == _nonspace_length(tok_text))
    first = _nonspace_length(prefix)
    last = first + _nonspace_length(pred_text) - 1
    return tf.where(aligned, first, 0), tf.where(aligned, last, total - 1)


class SquadServing(tf.Module):
    """Holds the span model, tokenizer and settings, and the serving function."""

    def __init__(self, model: keras.Model, tokenizer: tf.Module, max_seq_length: int,
                 doc_stride: int, max_query_length: int, n_best_size: int,
                 max_answer_length: int, do_lower_case: bool, null_threshold: float | None):
        super().__init__(name="squad_serving")
        self.model = model
        self.tokenizer = tokenizer
        self._sentencepiece = isinstance(tokenizer, InGraphSentencePiece)
        self._settings = (max_seq_length, doc_stride, max_query_length)
        self._n_best_size, self._max_answer_length = n_best_size, max_answer_length
        self._do_lower_case = do_lower_case
        self.null_threshold = None
        if null_threshold is not None:  # SQuAD 2.0
            self.null_threshold = tf.Variable(float(null_threshold), dtype=tf.float64,
                                              trainable=False, name="null_threshold")

    @tf.function(autograph=False, input_signature=[_QUESTION, _CONTEXT])
    def serve_text(self, question, context):
        prepared = self.prepare(question, context)
        outputs = self.model({name: prepared[name] for name in MODEL_INPUTS}, training=False)
        return self.finish({**outputs, **prepared})

    def text_signatures(self) -> dict[str, tuple[list[tf.TensorSpec], Callable]]:
        """The raw-text signature's inputs and its `prepare` (`bert_tf.serving.openvino`)."""
        return {SIGNATURE_KEY: ([_QUESTION, _CONTEXT], self.prepare)}

    def model_outputs(self, features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """The span model's logits in float32 (`bert_tf.serving.openvino`)."""
        outputs = self.model(features, training=False)
        return {name: tf.cast(outputs[name], tf.float32) for name in _LOGITS}

    def prepare(self, question: tf.Tensor, context: tf.Tensor) -> dict[str, tf.Tensor]:
        """The windows' model inputs int32 [max(R, 1), max_seq_length] for string [B] questions
        and contexts, and what `finish` finds and maps the answers back with (dense tensors,
        the ragged ones as flat values and row lengths: a signature returns no ragged tensor).

        A batch whose contexts have no pieces has no window, and the encoder does not run on
        zero rows: the model then reads one row of padding, whose logits `finish` drops."""
        tf.debugging.assert_equal(tf.size(question), tf.size(context),
                                  message="question and context must hold as many texts")
        context = tf.strings.unicode_transcode(context, "UTF-8", "UTF-8", errors="replace")
        words = context_words(context)
        pieces = self.tokenizer.tokenize(words["words"].flat_values)  # [N, (P)]
        doc = tf.RaggedTensor.from_row_lengths(pieces.flat_values, tf.math.unsorted_segment_sum(
            pieces.row_lengths(), words["words"].value_rowids(), tf.size(question)))  # [B, (T)]
        windows = self._windows(question, doc)
        rows = tf.shape(windows["input_ids"])[0]
        extra = [[0, tf.maximum(1 - rows, 0)], [0, 0]]
        return {**{name: tf.pad(windows[name], extra) for name in MODEL_INPUTS},
                **{name: windows[name] for name in _WINDOW_STATE},
                "doc_ids": doc.flat_values, "doc_lengths": doc.row_lengths(),
                "piece_word": tf.repeat(tf.range(pieces.nrows()), pieces.row_lengths()),  # [T]
                **{f"word_{name}": words[name].flat_values for name in _WORD_STATE},
                "context": context}

    def finish(self, values: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """The signature's outputs from the windows' logits and `prepare`'s state."""
        rows = tf.size(values["example"])
        # [R, max_seq_length]: the span search's top_k needs the static width.
        start_logits, end_logits = (
            tf.ensure_shape(tf.cast(values[name][:rows], tf.float32), [None, self._settings[0]])
            for name in _LOGITS)
        num_examples = tf.size(values["context"], tf.int64)
        windows = {name: values[name] for name in _WINDOW_STATE}
        in_context = windows["in_context"]
        span = best_spans(start_logits, end_logits, in_context & windows["is_max_context"],
                          in_context, windows["example"], num_examples, self._n_best_size,
                          self._max_answer_length)
        doc = tf.RaggedTensor.from_row_lengths(values["doc_ids"], values["doc_lengths"])
        words = {name: values[f"word_{name}"] for name in _WORD_STATE}
        result = self._answer(span, windows, doc, values["piece_word"], words, values["context"])
        result["score"] = tf.cast(span["start_logit"] + span["end_logit"], tf.float32)
        has_answer = span["found"]
        if self.null_threshold is not None:
            null_start, null_end = null_scores(start_logits, end_logits, windows["example"],
                                               num_examples)
            null_odds = null_start + null_end - span["start_logit"] - span["end_logit"]
            has_answer &= ~(null_odds > self.null_threshold)
            result["null_odds"] = tf.cast(null_odds, tf.float32)
        result["has_answer"] = has_answer
        result["answer"] = tf.where(has_answer, result["answer"], "")
        result["answer_start"] = tf.where(has_answer, result["answer_start"], -1)
        return result

    def _windows(self, question: tf.Tensor, doc: tf.RaggedTensor) -> dict[str, tf.Tensor]:
        """`[CLS] question [SEP] window [SEP]` rows, int32 [R, max_seq_length] model inputs, with
        `plan_windows`' fields, `query_part` int64 [R] (where the context starts) and bool
        [R, max_seq_length] `in_context` and `is_max_context`."""
        max_seq_length, doc_stride, max_query_length = self._settings
        query = self.tokenizer.tokenize(question)[:, :max_query_length]
        windows = plan_windows(doc.row_lengths(), query.row_lengths(), max_seq_length, doc_stride)
        example = windows["example"]
        start = tf.gather(doc.row_starts(), example) + windows["start"]  # into doc.flat_values
        doc_index = tf.ragged.range(start, start + windows["length"])  # [R, (length)]
        # The windows fit (plan_windows), so packing truncates nothing.
        packed = packing.pack(tf.gather(query, example), tf.gather(doc.flat_values, doc_index),
                              self.tokenizer.special_ids["[CLS]"],
                              self.tokenizer.special_ids["[SEP]"], max_seq_length)
        # Every row is max_seq_length long, as in training: the span logits cover padding too.
        padding = [[0, 0], [0, max_seq_length - tf.shape(packed["input_ids"])[1]]]
        inputs = {name: tf.ensure_shape(tf.pad(packed[name], padding), [None, max_seq_length])
                  for name in MODEL_INPUTS}
        query_part = tf.cast(packed["lengths_a"], tf.int64) + 2  # [CLS] question [SEP]
        position = tf.range(max_seq_length, dtype=tf.int64)[None, :]
        end = tf.reduce_sum(tf.cast(inputs["input_mask"], tf.int64), axis=1, keepdims=True)
        flags = max_context(windows, doc.row_starts(), tf.size(doc.flat_values, tf.int64))
        query_flags = tf.RaggedTensor.from_row_lengths(
            tf.zeros([tf.reduce_sum(query_part)], tf.bool), query_part)
        is_max = tf.concat([query_flags, flags], axis=1)
        return {**windows, **inputs, "query_part": query_part,
                "in_context": (position >= query_part[:, None]) & (position < end - 1),
                "is_max_context": is_max.to_tensor(False, shape=[None, max_seq_length])}

    def _answer(self, span: dict[str, tf.Tensor], windows: dict[str, tf.Tensor],
                doc: tf.RaggedTensor, piece_word: tf.Tensor, words: dict[str, tf.Tensor],
                context: tf.Tensor) -> dict[str, tf.Tensor]:
        """The best span's text cut from `context`, and its offset (any value where not found).

        `words`: `context_words`' fields, their flat values [N] (every context's words)."""
        found = span["found"]
        row = span["row"]
        offset = (doc.row_starts() + _gather(windows["start"], row, found)
                  - _gather(windows["query_part"], row, found))  # window position -> flat piece index
        first_piece = tf.where(found, offset + span["start"], 0)
        last_piece = tf.where(found, offset + span["end"], -1)
        ids = tf.gather(doc.flat_values, tf.ragged.range(first_piece, last_piece + 1))
        separator = "" if self._sentencepiece else " "
        pred_text = tf.strings.reduce_join(self.tokenizer.tokens(ids), axis=-1,
                                           separator=separator)
        if self._sentencepiece:
            pred_text = tf.strings.regex_replace(pred_text, _SPM_SPACE, " ")
        else:  # postprocess.detokenize: "##" continuations glued on
            pred_text = tf.strings.regex_replace(
                tf.strings.regex_replace(pred_text, " ##", ""), "##", "")
        pred_text = _squeeze_spaces(pred_text)
        first_word = _gather(piece_word, first_piece, found)
        last_word = _gather(piece_word, last_piece, found)
        all_words = words["words"]
        orig_text = tf.strings.reduce_join(
            tf.gather(all_words, tf.ragged.range(first_word, tf.where(found, last_word + 1, 0))),
            axis=-1, separator=" ")
        first, last = aligned_range(pred_text, orig_text, self._do_lower_case)
        # Non-space characters of orig_text are its words' characters: count along the words.
        lengths = words["lengths"]
        before = tf.cumsum(lengths, exclusive=True)
        through = tf.cumsum(lengths)
        word_starts = words["starts"]

        def context_offset(nonspace):  # int64 [B]: the context character at that position
            index = _gather(before, first_word, found) + nonspace
            word = tf.searchsorted(through[None, :], index[None, :], side="right")[0]
            return (_gather(word_starts, word, found)
                    + index - _gather(before, word, found))
        start, stop = context_offset(first), context_offset(last) + 1
        answer = tf.strings.substr(context, tf.where(found, start, 0),
                                   tf.where(found, stop - start, 0), unit="UTF8_CHAR")
        return {"answer": answer, "answer_start": tf.cast(tf.where(found, start, -1), tf.int32)}


def _gather(values: tf.Tensor, index: tf.Tensor, found: tf.Tensor) -> tf.Tensor:
    """values[index] where `found`, 0 elsewhere (also when `values` is empty)."""
    padded = tf.concat([values, tf.zeros([1], values.dtype)], axis=0)
    return tf.gather(padded, tf.where(found, index, tf.size(values, index.dtype)))


def export_squad(model: keras.Model, export_dir: str, tokenizer: tf.Module, max_seq_length: int,
                 doc_stride: int, max_query_length: int, n_best_size: int,
                 max_answer_length: int, do_lower_case: bool,
                 null_threshold: float | None) -> str:
    """Writes the span model's question-answering signature as a SavedModel (atomically).

    Args:
      model: a `models.span_model` with its weights restored.
      tokenizer: `bert_tf.serving.saved_model.in_graph_tokenizer(...)`.
      max_seq_length, doc_stride, max_query_length, n_best_size, max_answer_length,
        do_lower_case: run_squad.py's flags of the same names.
      null_threshold: SQuAD 2.0: the null-score threshold (predict no answer above it); None
        for SQuAD 1.1 models.

    Returns:
      export_dir.
    """
    module = SquadServing(model, tokenizer, max_seq_length, doc_stride, max_query_length,
                          n_best_size, max_answer_length, do_lower_case, null_threshold)
    return save(module, export_dir, {SIGNATURE_KEY: module.serve_text})


def export_squad_openvino(model: keras.Model, export_dir: str, tokenizer: tf.Module,
                          max_seq_length: int, doc_stride: int, max_query_length: int,
                          n_best_size: int, max_answer_length: int, do_lower_case: bool,
                          null_threshold: float | None, precision: str,
                          calibration: Sequence[Mapping[str, str]],
                          evaluation: openvino.Evaluation, max_relative_loss: float,
                          quantization: openvino.Quantization = openvino.Quantization()) -> str:
    """Writes the SQuAD OpenVINO export (`bert_tf.serving.openvino`): `export_squad`'s
    signature, its span model on OpenVINO in `precision` (int8 calibrated on the windows of
    `calibration`, questions and contexts by input name), compared with float32 on `evaluation`
    before it is written.

    Returns:
      export_dir.
    """
    module = SquadServing(model, tokenizer, max_seq_length, doc_stride, max_query_length,
                          n_best_size, max_answer_length, do_lower_case, null_threshold)
    return openvino.export(module, export_dir, precision, calibration, evaluation,
                           max_relative_loss, quantization)
