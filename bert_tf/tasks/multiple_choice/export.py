"""Exports a fine-tuned multiple-choice model as a TensorFlow SavedModel that takes raw text.

Signatures (TensorFlow Serving's ops and tensorflow-text's tokenizer only):
* `serving_default`: `context`, `stem` and `choice_0` .. `choice_{N-1}`, string [B] each ->
  `probabilities` float32 [B,N] and `prediction` int32 [B] (the most probable choice's index).
  Each choice is tokenized in the graph exactly as the run's tokenizer does and packed
  `[CLS] context [SEP] stem ending [SEP]` with the original's pair truncation to
  `max_seq_length`, as run_swag.py packs its files (`bert_tf.tasks.multiple_choice.data`).
* `without_stem`: the same without `stem` (questions whose choices continue the context).

One string input per choice rather than one [B,N] string tensor: every raw-text client feeds
one string per input and example (bert-predict's TSV columns and JSON fields, TensorFlow
Serving's row format), and N is fixed by the trained head's data anyway.

`export_multiple_choice_openvino` writes the same signatures with the model on OpenVINO (int8,
bfloat16 or float32; `bert_tf.serving.openvino`): `prepare` (one row per choice) and `finish`
(the rows' scores as [B,N], their softmax) are the text part.

Reload with TensorFlow and tensorflow-text alone:

    import tensorflow as tf, tensorflow_text  # registers the tokenizer ops
    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    serve(context=tf.constant(["He opens the door."]), stem=tf.constant(["He"]),
          choice_0=..., choice_1=..., choice_2=..., choice_3=...)["probabilities"]
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import keras
import tensorflow as tf

from bert_tf.model.inputs import MODEL_INPUTS
from bert_tf.serving import openvino, packing
from bert_tf.serving.saved_model import SIGNATURE_KEY, in_graph_tokenizer, save

WITHOUT_STEM_KEY = "without_stem"


def choice_names(num_choices: int) -> list[str]:
    return [f"choice_{i}" for i in range(num_choices)]


class _MultipleChoiceServing(tf.Module):
    """Holds the model and tokenizer and the serving functions: what the SavedModel stores."""

    def __init__(self, model: keras.Model, tokenizer: tf.Module, max_seq_length: int,
                 num_choices: int):
        super().__init__(name="multiple_choice_serving")
        self.model, self.tokenizer = model, tokenizer
        self._max_seq_length, self._num_choices = max_seq_length, num_choices
        self._texts = [tf.TensorSpec([None], tf.string, name=name)
                       for name in ["context", "stem", *choice_names(num_choices)]]
        self.serve_text = tf.function(self._serve_text, autograph=False,
                                      input_signature=self._texts)
        self.serve_without_stem = tf.function(self._serve_without_stem, autograph=False,
                                              input_signature=self._stemless_texts())

    def _stemless_texts(self) -> list[tf.TensorSpec]:
        return [self._texts[0], *self._texts[2:]]

    def _serve_without_stem(self, context, *choices):
        return self.serve_text(context, tf.fill(tf.shape(context), ""), *choices)

    def _serve_text(self, context, stem, *choices):
        return self.finish(self.model_outputs(self.prepare(context, stem, *choices)))

    def _prepare_without_stem(self, context, *choices):
        return self.prepare(context, tf.fill(tf.shape(context), ""), *choices)

    def text_signatures(self) -> dict[str, tuple[list[tf.TensorSpec], Callable]]:
        """The raw-text signatures' inputs and their `prepare` (`bert_tf.serving.openvino`)."""
        return {SIGNATURE_KEY: (self._texts, self.prepare),
                WITHOUT_STEM_KEY: (self._stemless_texts(), self._prepare_without_stem)}

    def prepare(self, context: tf.Tensor, stem: tf.Tensor, *choices: tf.Tensor
                ) -> dict[str, tf.Tensor]:
        """int32 [B·N,W] model inputs, one row per choice (question b's choice n in row
        b·N + n), W the longest packed choice of the batch. Rows rather than [B,N,W]: the
        model the OpenVINO export runs scores choices one row each, as the encoder reads them.
        """
        questions = tf.size(context)
        # One tokenizer call for every text: context, stem, choice_0, ... of [B] each.
        ids = self.tokenizer.tokenize(tf.concat([context, stem, *choices], axis=0))
        question_of_row = tf.repeat(tf.range(questions), self._num_choices)  # [B·N]
        # Choice n of question b is text (2 + n)·B + b of the concatenation.
        choice_text = 2 * questions + tf.reshape(tf.transpose(tf.reshape(
            tf.range(self._num_choices * questions), [self._num_choices, questions])), [-1])
        ending = tf.concat([tf.gather(ids, questions + question_of_row),  # stem ending
                            tf.gather(ids, choice_text)], axis=1)
        packed = packing.pack(tf.gather(ids, question_of_row), ending,
                              self.tokenizer.special_ids["[CLS]"],
                              self.tokenizer.special_ids["[SEP]"], self._max_seq_length)
        return {name: packed[name] for name in MODEL_INPUTS}

    def model_outputs(self, features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """The model: float32 `logits` [R], one choice's score per row of [R,W] inputs
        (`bert_tf.serving.openvino`)."""
        logits = self.model({name: features[name][:, None] for name in MODEL_INPUTS},
                            training=False)["logits"]  # [R,1]: R questions of one choice
        return {"logits": tf.cast(logits[:, 0], tf.float32)}

    def finish(self, values: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """The raw-text signatures' outputs from the rows' `logits`."""
        logits = tf.reshape(values["logits"], [-1, self._num_choices])  # [B,N]
        probabilities = tf.nn.softmax(logits, axis=-1)
        return {"probabilities": probabilities,
                "prediction": tf.argmax(probabilities, axis=-1, output_type=tf.int32)}


def _serving(model: keras.Model, options, num_choices: int) -> _MultipleChoiceServing:
    return _MultipleChoiceServing(model, in_graph_tokenizer(
        options.vocab_file, options.spm_model_file, options.do_lower_case),
        options.max_seq_length, num_choices)


def export_multiple_choice(model: keras.Model, options, num_choices: int) -> str:
    """Writes `model` (a `MultipleChoiceModel`, weights restored) to `options.export_dir`,
    replacing what was there (atomically), for questions of `num_choices` choices packed to
    `options.max_seq_length`; the tokenizer from the options' files."""
    module = _serving(model, options, num_choices)
    return save(module, options.export_dir, {SIGNATURE_KEY: module.serve_text,
                                             WITHOUT_STEM_KEY: module.serve_without_stem})


def export_multiple_choice_openvino(model: keras.Model, options, num_choices: int,
                                    calibration: Sequence[Mapping[str, str]],
                                    evaluation: openvino.Evaluation) -> str:
    """Writes the OpenVINO export (`bert_tf.serving.openvino`) of `export_multiple_choice`'s
    signatures to `options.export_dir`: the model (one choice per row) on OpenVINO in
    `options.export_dtype`, compared with float32 on `evaluation` and refused past
    `options.export_max_relative_loss`.

    Args:
      model: the float32 `MultipleChoiceModel` (weights restored).
      options: the run's options (export_dir, export_dtype, the int8 settings, the
        tokenizer's files, ...).
      num_choices: N, as `export_multiple_choice`'s.
      calibration: int8: training questions as `serving_default`'s inputs (each gives N rows).
      evaluation: the dev questions and their accuracy.

    Returns:
      export_dir.
    """
    return openvino.export(_serving(model, options, num_choices), options.export_dir,
                           options.export_dtype, calibration, evaluation,
                           options.export_max_relative_loss,
                           quantization=options.quantization())
