"""What the fine-tuning tasks (classifier, SQuAD, NER) share, so that each states only its own part.

- `FinetuningOptions`: the options every fine-tuning script has (the flags of
  `training_flags.define_model_flags` and `define_finetuning_flags`); each task's options
  dataclass extends it. Run options (batch sizes, learning rate, ...) live in `training.RunConfig`.
- `EncoderTask`: a `training.Task` whose model reads the encoder's three inputs only.
- `epochs_run_config`: the original's count of updates from examples, batch size and epochs, with
  its warm-up proportion.
- `write_lines`, `write_label_list`, `write_results`: atomic text outputs.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from typing import Callable, Iterable, Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import filesystem
from bert_tf.text import tokenizers
from bert_tf.checkpoints import hf_export, model_config
from bert_tf.errors import UserError
from bert_tf.model.config import BertConfig
from bert_tf.model.inputs import MODEL_INPUTS
from bert_tf.records import datasets
from bert_tf.training import log as training_log, loop as training

LABEL_LIST_FILE = "label_list.txt"


@dataclasses.dataclass(frozen=True, kw_only=True)
class FinetuningOptions:
    """The options every fine-tuning run shares, with the original's defaults.

    Attributes mirror the flags of the same names; `vocab_file` (WordPiece) or `spm_model_file`
    (SentencePiece) gives the tokenizer. `dynamic_padding` and `group_by_length` shape the
    classifier's and the tagger's batches (docs/finetuning_shared.md); run_squad.py has neither
    flag: its span loss is a softmax over all S positions, padding included, as the original's.
    """

    bert_config_file: str | None = None
    vocab_file: str | None = None
    spm_model_file: str | None = None
    do_lower_case: bool = True
    max_seq_length: int = 128
    do_train: bool = False
    do_predict: bool = False
    num_train_epochs: float = 3.0
    warmup_proportion: float = 0.1
    chinese_conversion: str = "none"  # t2s / s2t before tokenizing (bert_tf.text.chinese.conversion)
    dynamic_padding: bool = True
    group_by_length: bool = False
    # Evaluation during training (bert_tf.training.best_checkpoint; training_flags.define_selection_flags).
    eval_every_n_steps: int = 0
    eval_every_epoch: bool = False
    best_metric: str | None = None
    early_stopping_patience: int = 0
    predict_from: str = "best"
    # The model as a Hugging Face directory at the end (checkpoints/hf_export.py).
    export_hf_dir: str | None = None
    export_hf_dtype: str = "float32"

    def trim_features(self, names: Sequence[str] = MODEL_INPUTS) -> tuple[str, ...]:
        """The [B,S] features the input pipelines trim to each batch's longest sequence
        (`bert_tf.records.datasets.trim_padding`): `names` with dynamic_padding, else none."""
        return tuple(names) if self.dynamic_padding else ()

    @property
    def length_groups(self) -> int:
        """Batches per group of similar lengths in training (1: plain shuffled batches)."""
        return datasets.LENGTH_GROUP_BATCHES if self.group_by_length else 1

    @property
    def tokenizer_files(self) -> list[str]:
        """The files that define the tokenizer (for the fingerprints of cached records)."""
        return [path for path in (self.vocab_file, self.spm_model_file) if path]

    def create_tokenizer(self, init_checkpoint: str | None = None, bert_config: BertConfig | None = None
                         ) -> tokenizers.FullTokenizer | tokenizers.SentencePieceTokenizer:
        """The run's tokenizer; warns, as the original does, when `do_lower_case` contradicts the
        casing that `init_checkpoint`'s name announces (`uncased_...` / `cased_...`).

        Raises:
          UserError: naming the vocabulary when it lacks [CLS] or [SEP] (every task packs them)
            or holds more tokens than `bert_config.vocab_size`.
        """
        from bert_tf.text.chinese.conversion import with_conversion

        tokenizers.validate_case_matches_checkpoint(self.do_lower_case, init_checkpoint)
        tokenizer = tokenizers.create_tokenizer(vocab_file=self.vocab_file,
                                                spm_model_file=self.spm_model_file,
                                                do_lower_case=self.do_lower_case)
        source = self.vocab_file or self.spm_model_file
        tokenizers.check_special_tokens(tokenizer.vocab, ["[CLS]", "[SEP]"], source, "fine-tuning")
        if bert_config is not None:
            tokenizers.check_vocab_size(tokenizer.vocab, bert_config.vocab_size, source)
        return with_conversion(tokenizer, self.chinese_conversion)

    def hf_tokenizer(self) -> hf_export.TokenizerFiles:
        """The tokenizer files and settings an --export_hf_dir directory ships.

        Raises:
          HfExportError: --chinese_conversion, which transformers' tokenizers cannot do.
        """
        if self.chinese_conversion != "none":
            raise hf_export.HfExportError(
                f"--export_hf_dir with --chinese_conversion={self.chinese_conversion}: "
                "transformers' tokenizers have no OpenCC conversion; convert the text before "
                "tokenizing it there, and export without the flag")
        return hf_export.TokenizerFiles(self.vocab_file, self.spm_model_file,
                                        self.do_lower_case, self.max_seq_length)

    def load_bert_config(self, run_config: training.RunConfig) -> BertConfig:
        """The model's config: --bert_config_file, else the checkpoint's or the run's own."""
        return model_config.resolve_model_config(
            self.bert_config_file, run_config.init_checkpoint, run_config.output_dir,
            max_seq_length=self.max_seq_length)


@dataclasses.dataclass(frozen=True)
class SoftTargets:
    """What distillation's prediction stage matches of a task's outputs (a teacher's soft
    targets for its student).

    Attributes:
      outputs: the output names compared, each scored over its last axis; the loss is the mean
        over them (SQuAD's start and end).
      kind: "softmax" (soft cross-entropy), "sigmoid" (soft binary cross-entropy, multi-label)
        or "squared_error" (regression).
      weights: each row's weight (an output's shape without its last axis: [B] per example,
        [B,S] per token) from the features; None: every row weighs 1.
    """

    outputs: tuple[str, ...]
    kind: str
    weights: Callable[[Mapping[str, tf.Tensor]], tf.Tensor] | None = None


def example_weights(features: Mapping[str, tf.Tensor]) -> tf.Tensor:
    """float32 [B]: 1 for a real example, 0 for a padding row (`is_real_example`)."""
    return tf.reshape(tf.cast(features["is_real_example"], tf.float32), [-1])


def accuracy_counts(logits: tf.Tensor, label_ids: tf.Tensor,
                    weights: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The loop's `accuracy` metric of [B,N] logits against [B] (or [B,1]) labels: (Σ w over
    the rows whose argmax is the label, Σ w)."""
    predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
    labels = tf.cast(tf.reshape(label_ids, [-1]), tf.int32)
    correct = tf.cast(tf.equal(predicted, labels), tf.float32)
    return tf.reduce_sum(weights * correct), tf.reduce_sum(weights)


class EncoderTask(training.Task):
    """A task whose model reads `input_ids, input_mask, segment_ids` (int32 [B,S]) only; the
    other features (labels, weights, ids) are for the loss, metrics and predictions.

    `build_model(encoder=None)` builds the model over its own encoder, or over `encoder` (one
    encoder shared by several heads: multi-task); `soft_targets()` says what a distilled
    student matches of its outputs."""

    def soft_targets(self) -> SoftTargets:
        raise NotImplementedError(f"{type(self).__name__} declares no soft targets")

    def encoder_rows(self, features: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """The encoder's int32 [rows,S] inputs of a batch, with each row's `is_real_example`
        when the batch has it (what distillation's intermediate stage compares): the batch's
        own here; a task whose examples hold several sequences gives one row per sequence."""
        names = [*MODEL_INPUTS, *(["is_real_example"] if "is_real_example" in features else [])]
        return {name: features[name] for name in names}

    def forward(self, model: keras.Model, features: Mapping[str, tf.Tensor],
                training: bool, static_shapes: bool = False) -> Mapping[str, tf.Tensor]:
        return model({name: features[name] for name in MODEL_INPUTS}, training=training,
                     static_shapes=static_shapes)

    def with_bert_config(self, bert_config: BertConfig) -> "EncoderTask":
        """The same task (head, labels, losses) over a model of another config (a distillation
        teacher)."""
        task = copy.copy(self)
        task.bert_config = bert_config
        return task


# What a run trains in place of its task (the distillation workflow's teacher-student task);
# evaluation, prediction and export use the task itself.
TrainingTask = Callable[[EncoderTask], training.Task]


def export_hf(options: FinetuningOptions, model: keras.Model, strategy,
              head: hf_export.HeadLabels = hf_export.HeadLabels()) -> str | None:
    """Writes `model` to --export_hf_dir (on the chief only); returns the directory."""
    if not training.is_chief(strategy or tf.distribute.get_strategy()):
        return None
    return hf_export.export_hf_directory(model, options.export_hf_dir, options.hf_tokenizer(),
                                         head, options.export_hf_dtype)


def num_train_steps(num_examples: int, train_batch_size: int, num_train_epochs: float) -> int:
    """Updates in the run, as the original counts them: int(examples / batch · epochs)."""
    return int(num_examples / train_batch_size * num_train_epochs)


def static_shape_options(options: FinetuningOptions, run_config: training.RunConfig,
                         strategy: tf.distribute.Strategy | None) -> FinetuningOptions:
    """`options` with dynamic_padding and group_by_length off where every batch must have one
    shape (XLA with `use_xla`, TPUs): there each new batch length is a new compilation. Says so
    in one log line when it turns either off."""
    on_tpu = isinstance(strategy or tf.distribute.get_strategy(), tf.distribute.TPUStrategy)
    if not (run_config.use_xla or on_tpu) or not (options.dynamic_padding
                                                   or options.group_by_length):
        return options
    logging.info("--dynamic_padding and --group_by_length are off under %s: every batch keeps "
                 "the --max_seq_length shape (one compilation)",
                 "--use_tpu" if on_tpu else "--use_xla")
    return dataclasses.replace(options, dynamic_padding=False, group_by_length=False)


def epochs_run_config(run_config: training.RunConfig, options: FinetuningOptions,
                      num_examples: int, unit: str = "training examples") -> training.RunConfig:
    """`run_config` with the steps of `options.num_train_epochs` over `num_examples` and
    `options.warmup_proportion` of them as warm-up (the original's int() roundings).

    Raises:
        ValueError: naming the count (`unit`, e.g. "training windows") when not one update fits.
    """
    batch = run_config.train_batch_size
    steps = num_train_steps(num_examples, batch, options.num_train_epochs)
    if steps < 1:
        raise UserError(f"{num_examples} {unit} make no full batch of {batch} in "
                         f"{options.num_train_epochs} epochs")
    return run_config.replace(num_train_steps=steps,
                              num_warmup_steps=int(steps * options.warmup_proportion))


def write_lines(path: str, lines: Iterable[str]) -> None:
    """Writes `lines` (each ending in a newline) to `path` through the one writer."""
    with filesystem.atomic_output(path) as f:
        f.writelines(lines)


def write_label_list(output_dir: str, labels: Sequence[str]) -> str:
    """`output_dir/label_list.txt`: the labels one per line, in the model's output order."""
    path = os.path.join(output_dir, LABEL_LIST_FILE)
    write_lines(path, (f"{label}\n" for label in labels))
    return path


def write_results(path: str, results: Mapping[str, object]) -> None:
    """`key = value` lines in key order (the original's eval_results.txt), also logged.

    Floats are written as float32, as the original's Estimator metrics (`0.54545456`, not
    `0.5454545617103577`); integers (global_step) stay integers.
    """
    results = {key: np.float32(value) if isinstance(value, (float, np.floating)) else value
               for key, value in results.items()}
    training_log.write_eval_results(path, results)
    for key in sorted(results):
        logging.info("  %s = %s", key, results[key])
