"""Exports a fine-tuned tagger (run_ner.py --export_dir) as a SavedModel that tags raw text.

Signature `serving_default`: `text` string [B], words separated by whitespace (or, for a model
trained with --data_format=char, one character per word, whitespace ignored) ->
`tags` string [B,W] (each word's tag; "" past `num_words`), `words` string [B,W] and
`num_words` int32 [B]. Inside the graph, as run_ner.py: each word is tokenized on its own (no
pieces -> [UNK]; at most max_seq_length - 2 pieces), sentences too long for one window are split
at word boundaries into windows sharing `window_overlap` pieces (`ner/data.py` `plan_windows`), each
word is tagged at its first piece by the one window that scores it.

Decoding is one step, `TaggerServing.decode` (the label of the largest logit), so another
decoder (a CRF or tag-constraint decoder) can replace it.

`export_tagger_openvino` writes the same signature with the model on OpenVINO (int8, bfloat16 or
float32; `bert_tf.serving.openvino`): `TaggerServing.prepare` and `finish` are the text part.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import keras
import tensorflow as tf

from bert_tf.serving import openvino, packing
from bert_tf.serving.saved_model import SIGNATURE_KEY, save
from bert_tf.serving.text import character_classes, keep_values
from bert_tf.model.inputs import MODEL_INPUTS

_BIG = 1 << 40  # past every piece offset
_TEXT = tf.TensorSpec([None], tf.string, name="text")


def split_words(text: tf.Tensor, char_format: bool) -> tf.RaggedTensor:
    """string [B] -> ragged [B, (W)] words: `str.split()` words, or non-whitespace characters."""
    space = character_classes()["python_space"]
    if char_format:
        chars = tf.strings.unicode_split(text, "UTF-8")
        return keep_values(chars, ~tf.strings.regex_full_match(chars.flat_values, space))
    words = tf.strings.split(tf.strings.regex_replace(text, space, " "), sep=" ")
    return keep_values(words, tf.strings.length(words.flat_values) > 0)


def word_pieces(tokenizer: tf.Module, words: tf.RaggedTensor, capacity: int) -> tf.RaggedTensor:
    """int64 ragged [B, (W), (P)]: each word's pieces as `data._word_pieces` gives them."""
    pieces = tokenizer.tokenize(words.flat_values)  # [N, (P)]
    count = pieces.row_lengths()
    unk = tf.fill([pieces.nrows(), 1], tf.constant(tokenizer.special_ids["[UNK]"], tf.int64))
    with_unk = tf.concat([pieces, unk], axis=1)
    keep = tf.where(count > 0, tf.minimum(count, capacity), 1)
    # The first `keep` of each row, as a gather of flat positions: a ragged < dense [N, 1]
    # comparison broadcasts shapes in the graph, costly to trace.
    starts = with_unk.row_starts()
    kept = tf.gather(with_unk.flat_values, tf.ragged.range(starts, starts + keep))
    return words.with_flat_values(kept)


def plan_windows(counts: tf.RaggedTensor, capacity: int, overlap: int) -> dict[str, tf.Tensor]:
    """`data.plan_windows` (ner/data.py) for every sentence at once.

    Args:
      counts: int64 ragged [B, (W)] pieces per word (each <= capacity).

    Returns:
      `sentence`, `start`, `end`, `score_start`, `score_end`: int64 [R] per window, in sentence
      order then window order (a sentence without words has none); `ends`: int64 [B, Wmax + 1]
      piece offset of each word.
    """
    num_words = counts.row_lengths()  # [B]
    dense = counts.to_tensor(0)  # [B,Wmax]
    # The first column from num_words: dense[:, :1] has none when no sentence has a word
    # (an empty request, or only empty texts).
    ends = tf.concat([tf.zeros_like(num_words)[:, None], tf.cumsum(dense, axis=1)],
                     axis=1)  # [B,Wmax+1]
    width = tf.shape(ends, out_type=tf.int64)[1]
    padded = tf.where(tf.range(width)[None, :] <= num_words[:, None], ends, _BIG)

    def at(index):  # ends[b, index[b]]
        return tf.gather(padded, tf.minimum(index, width - 1)[:, None], batch_dims=1)[:, 0]

    def search(values, side):
        return tf.searchsorted(padded, values[:, None], side=side, out_type=tf.int64)[:, 0]

    def step(i, start, active, starts, stops, valid):
        end = tf.maximum(start + 1, search(at(start) + capacity, "right") - 1)
        starts, stops, valid = starts.write(i, start), stops.write(i, end), valid.write(i, active)
        nxt = tf.maximum(start + 1, tf.maximum(search(at(end) - overlap, "left"),
                                               search(at(end + 1) - capacity, "left")))
        active = active & (end < num_words)
        return i + 1, tf.where(active, nxt, start), active, starts, stops, valid

    arrays = [tf.TensorArray(dtype, size=0, dynamic_size=True) for dtype in (tf.int64, tf.int64, tf.bool)]
    _, _, _, starts, stops, valid = tf.while_loop(
        lambda i, start, active, *_: (i == 0) | tf.reduce_any(active), step,
        [tf.constant(0), tf.zeros_like(num_words), num_words > 0, *arrays])
    starts, stops, valid = (tf.transpose(a.stack()) for a in (starts, stops, valid))  # [B,K]
    # Overlapping words go half to each neighbour; cuts kept non-decreasing (a running max).
    nxt_valid = tf.concat([valid[:, 1:], tf.zeros_like(valid[:, :1])], axis=1)
    nxt_start = tf.concat([starts[:, 1:], tf.zeros_like(starts[:, :1])], axis=1)
    middles = tf.where(nxt_valid, nxt_start + (stops - nxt_start) // 2, num_words[:, None])
    k = tf.shape(middles)[1]
    earlier = tf.range(k)[None, :] <= tf.range(k)[:, None]  # [K,K]: j <= k
    cuts = tf.reduce_max(tf.where(earlier[None], middles[:, None, :], 0), axis=2)  # [B,K]
    score_start = tf.concat([tf.zeros_like(cuts[:, :1]), cuts[:, :-1]], axis=1)
    sentence = tf.broadcast_to(tf.range(tf.size(num_words, tf.int64))[:, None], tf.shape(starts, tf.int64))
    pick = lambda a: tf.boolean_mask(a, valid)  # noqa: E731  [R], sentence then window order
    return {"sentence": pick(sentence), "start": pick(starts), "end": pick(stops),
            "score_start": pick(score_start), "score_end": pick(cuts), "ends": ends}


class TaggerServing(tf.Module):
    """Holds the tagger, tokenizer and labels and the serving function."""

    def __init__(self, model: keras.Model, tokenizer: tf.Module, labels: Sequence[str],
                 max_seq_length: int, window_overlap: int, char_format: bool,
                 decoder: Callable | None = None):
        super().__init__(name="tagger_serving")
        # (model outputs, int32 [R,S] 1 at each scored word's first piece) -> label ids [R,S]:
        # run_ner.py's decoding (constrained Viterbi, CRF); None: the largest logit.
        self._decoder = decoder
        self.model = model
        self.tokenizer = tokenizer
        self.labels = tf.Variable(list(labels), dtype=tf.string, trainable=False, name="labels")
        self._capacity = max_seq_length - 2
        self._overlap = max(0, min(window_overlap, self._capacity // 2))
        self._max_seq_length = max_seq_length
        self._char_format = char_format

    def decode(self, logits: tf.Tensor, input_mask: tf.Tensor | None) -> tf.Tensor:
        """Label ids int32 [R,S] from logits [R,S,L]: the largest logit (run_ner.py's decoding);
        `input_mask` [R,S] (None in an OpenVINO export's `finish`, which has the logits only)."""
        del input_mask  # a sequence decoder would read it
        return tf.argmax(logits, axis=-1, output_type=tf.int32)

    @tf.function(autograph=False, input_signature=[_TEXT])
    def serve_text(self, text):
        prepared = self.prepare(text)
        outputs = self.model({k: prepared[k] for k in MODEL_INPUTS}, training=False)
        return self.finish({**outputs, **prepared})

    def text_signatures(self) -> dict[str, tuple[list[tf.TensorSpec], Callable]]:
        """The raw-text signature's input and its `prepare` (`bert_tf.serving.openvino`)."""
        return {SIGNATURE_KEY: ([_TEXT], self.prepare)}

    def model_outputs(self, features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """The model's outputs in float32 (`bert_tf.serving.openvino`)."""
        outputs = self.model(features, training=False)
        return {name: tf.cast(value, tf.float32) for name, value in outputs.items()}

    def prepare(self, text: tf.Tensor) -> dict[str, tf.Tensor]:
        """The windows' model inputs [R,S] for string [B] texts, and what `finish` maps their
        tags back to words with: `words` string [B,W] and `num_words` int32 [B], each window's
        `sentence`, first piece `lo` and scored words `score_start`..`score_end` int64 [R], and
        each word's piece offset `ends` int64 [B,W+1]."""
        words = split_words(text, self._char_format)  # [B,(W)]
        pieces = word_pieces(self.tokenizer, words, self._capacity)  # [B,(W),(P)]
        plan = plan_windows(pieces.row_lengths(axis=2), self._capacity, self._overlap)
        sentence_pieces = pieces.merge_dims(1, 2)  # [B,(T)]
        ends = plan["ends"]
        lo = tf.gather_nd(ends, tf.stack([plan["sentence"], plan["start"]], axis=1))  # [R]
        hi = tf.gather_nd(ends, tf.stack([plan["sentence"], plan["end"]], axis=1))
        offset = tf.gather(sentence_pieces.row_starts(), plan["sentence"])  # [R]
        window_ids = tf.gather(sentence_pieces.flat_values,
                               tf.ragged.range(offset + lo, offset + hi))  # [R,(Tw)]
        cls_id, sep_id = self.tokenizer.special_ids["[CLS]"], self.tokenizer.special_ids["[SEP]"]
        features = packing.pack(window_ids, None, cls_id, sep_id, self._max_seq_length)
        return {**{k: features[k] for k in MODEL_INPUTS}, "words": words.to_tensor(""),
                "num_words": tf.cast(words.row_lengths(), tf.int32), "ends": ends, "lo": lo,
                **{k: plan[k] for k in ("sentence", "score_start", "score_end")}}

    def finish(self, values: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """`tags`, `words`, `num_words` from the model's outputs and `prepare`'s state."""
        ends, lo, sentence = values["ends"], values["lo"], values["sentence"]
        # The words each window scores, in order: together, every word once.
        scored = tf.ragged.range(values["score_start"], values["score_end"])  # [R,(n)]
        row = tf.cast(scored.value_rowids(), tf.int64)
        word = scored.flat_values
        position = 1 + tf.gather_nd(ends, tf.stack([tf.gather(sentence, row), word], axis=1)) \
            - tf.gather(lo, row)
        index = tf.stack([row, tf.cast(position, tf.int64)], axis=1)  # [K,2]
        if self._decoder is None:
            predicted = self.decode(tf.cast(values["logits"], tf.float32),
                                    values.get("input_mask"))
        else:
            weights = tf.scatter_nd(index, tf.ones_like(row, tf.int32),
                                    tf.shape(values["logits"], out_type=tf.int64)[:2])  # [R,S]
            predicted = self._decoder(values, weights)  # [R,S]
        label_ids = tf.gather_nd(predicted, index)
        num_words = values["num_words"]
        tags = tf.RaggedTensor.from_row_lengths(tf.gather(self.labels, label_ids),
                                                tf.cast(num_words, tf.int64))
        words = tf.RaggedTensor.from_tensor(values["words"], lengths=num_words)
        return {"tags": tags.to_tensor(""), "words": words.to_tensor(""), "num_words": num_words}


def export_tagger(model: keras.Model, export_dir: str, tokenizer: tf.Module, labels: Sequence[str],
                  max_seq_length: int, window_overlap: int, char_format: bool,
                  decoder: Callable | None = None) -> str:
    """Writes the tagger's raw-text signature as a SavedModel at `export_dir` (atomically).

    Args:
      model: a `models.token_classifier_model` with its weights restored.
      tokenizer: `bert_tf.serving.saved_model.in_graph_tokenizer(...)`.
      labels: the label list, in output order (label_list.txt).
      max_seq_length, window_overlap: run_ner.py's flags of the same names.
      char_format: --data_format=char (one character per word).
      decoder: (model outputs, int32 [R,S] first-piece weights) -> int32 [R,S] label ids, e.g.
        `TaggingTask.decoded` (constrained Viterbi, CRF); None: the largest logit.

    Returns:
      export_dir.
    """
    module = TaggerServing(model, tokenizer, labels, max_seq_length, window_overlap, char_format,
                           decoder)
    return save(module, export_dir, {SIGNATURE_KEY: module.serve_text})


def export_tagger_openvino(model: keras.Model, export_dir: str, tokenizer: tf.Module,
                           labels: Sequence[str], max_seq_length: int, window_overlap: int,
                           char_format: bool, decoder: Callable | None, precision: str,
                           calibration: Sequence[Mapping[str, str]],
                           evaluation: openvino.Evaluation, max_relative_loss: float,
                           quantization: openvino.Quantization = openvino.Quantization()) -> str:
    """Writes the tagger's OpenVINO export (`bert_tf.serving.openvino`): `export_tagger`'s
    signature, its model on OpenVINO in `precision` (int8 calibrated on `calibration`), compared
    with float32 on `evaluation` before it is written.

    Returns:
      export_dir.
    """
    module = TaggerServing(model, tokenizer, labels, max_seq_length, window_overlap, char_format,
                           decoder)
    return openvino.export(module, export_dir, precision, calibration, evaluation,
                           max_relative_loss, quantization)
