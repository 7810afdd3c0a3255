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

Reload with TensorFlow and tensorflow-text alone:

    import tensorflow as tf, tensorflow_text  # registers the tokenizer ops
    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    serve(context=tf.constant(["He opens the door."]), stem=tf.constant(["He"]),
          choice_0=..., choice_1=..., choice_2=..., choice_3=...)["probabilities"]
"""

from __future__ import annotations

import keras
import tensorflow as tf

from bert_tf.model.inputs import MODEL_INPUTS
from bert_tf.serving import packing
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
        texts = [tf.TensorSpec([None], tf.string, name=name)
                 for name in ["context", "stem", *choice_names(num_choices)]]
        self.serve_text = tf.function(self._serve_text, autograph=False, input_signature=texts)
        self.serve_without_stem = tf.function(self._serve_without_stem, autograph=False,
                                              input_signature=[texts[0], *texts[2:]])

    def _serve_without_stem(self, context, *choices):
        return self.serve_text(context, tf.fill(tf.shape(context), ""), *choices)

    def _serve_text(self, context, stem, *choices):
        features = self.prepare(context, stem, choices)
        logits = tf.cast(self.model(features, training=False)["logits"], tf.float32)  # [B,N]
        probabilities = tf.nn.softmax(logits, axis=-1)
        return {"probabilities": probabilities,
                "prediction": tf.argmax(probabilities, axis=-1, output_type=tf.int32)}

    def prepare(self, context: tf.Tensor, stem: tf.Tensor, choices) -> dict[str, tf.Tensor]:
        """int32 [B,N,W] model inputs, W the longest packed choice of the batch."""
        ids_a = self.tokenizer.tokenize(context)  # [B,(T)]
        ids_stem = self.tokenizer.tokenize(stem)
        cls_id, sep_id = self.tokenizer.special_ids["[CLS]"], self.tokenizer.special_ids["[SEP]"]
        packed = [packing.pack(ids_a, tf.concat([ids_stem, self.tokenizer.tokenize(choice)],
                                                axis=1),
                               cls_id, sep_id, self._max_seq_length) for choice in choices]
        width = tf.reduce_max(tf.stack([tf.shape(p["input_ids"])[1] for p in packed]))
        return {name: tf.stack([tf.pad(p[name], [[0, 0], [0, width - tf.shape(p[name])[1]]])
                                for p in packed], axis=1)  # [B,N,W]
                for name in MODEL_INPUTS}


def export_multiple_choice(model: keras.Model, options, num_choices: int) -> str:
    """Writes `model` (a `MultipleChoiceModel`, weights restored) to `options.export_dir`,
    replacing what was there (atomically), for questions of `num_choices` choices packed to
    `options.max_seq_length`; the tokenizer from the options' files."""
    tokenizer = in_graph_tokenizer(options.vocab_file, options.spm_model_file,
                                   options.do_lower_case)
    module = _MultipleChoiceServing(model, tokenizer, options.max_seq_length,
                                    num_choices)
    return save(module, options.export_dir, {SIGNATURE_KEY: module.serve_text,
                                             WITHOUT_STEM_KEY: module.serve_without_stem})
