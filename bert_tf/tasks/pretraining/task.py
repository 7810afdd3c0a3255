"""Masked-LM + next-sentence pretraining (or ELECTRA's replaced-token detection,
`--objective=electra`: electra.py): what `run_pretraining.py` runs.

`run_pretraining(options, run_config, strategy)` trains on the records of
create_pretraining_data.py through the shared loop (`bert_tf.training.loop`) and writes:

  ckpt-<step>.*, checkpoint   training checkpoints (resumed by re-running the same command)
  bert_config.json            the model's config, so the directory is a complete model
  train/, eval/               TensorBoard summaries
  eval_results.txt            with --do_eval: the original's keys (global_step, loss,
                              masked_lm_accuracy, masked_lm_loss, next_sentence_accuracy,
                              next_sentence_loss)
  google_checkpoint/          with --export_google_checkpoint: bert_model.ckpt.* in the
                              original's TF1 layout, and its bert_config.json
  --export_hf_dir             the model as transformers' BertForPreTraining directory
"""

from __future__ import annotations

import dataclasses
import os
from typing import Mapping

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf.checkpoints import hf_export, name_map as checkpoints, model_config
from bert_tf.errors import UserError
from bert_tf.model import losses, models
from bert_tf.model.config import BertConfig
from bert_tf.records import datasets, features, tfrecord
from bert_tf.tasks.pretraining import dynamic_masking, electra
from bert_tf.training import log as training_log, loop as training

GOOGLE_CHECKPOINT_DIR = "google_checkpoint"
# eval_results.txt's metrics, those of the original's `metric_fn` (besides global_step).
EVAL_RESULT_NAMES = ("masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
                     "next_sentence_loss", "loss")


@dataclasses.dataclass(frozen=True)
class PretrainingOptions:
    """The pretraining-specific options (run options live in `training.RunConfig`).

    Attributes mirror run_pretraining.py's flags; `eval_input_file` defaults to `input_file`
    (the original evaluates on its training files). Evaluation reads the eval records again and
    again until `RunConfig.max_eval_steps` batches, as the original; `eval_one_pass` (or
    max_eval_steps None) stops at the end of the records instead (at most max_eval_steps
    batches).
    """

    input_file: str
    bert_config_file: str | None = None
    eval_input_file: str | None = None
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    do_train: bool = False
    do_eval: bool = False
    eval_one_pass: bool = False
    export_google_checkpoint: bool = False
    # --export_hf_dir: the model as a Hugging Face directory, with the tokenizer it was trained
    # with (checkpoints/hf_export.py).
    export_hf_dir: str | None = None
    export_hf_dtype: str = "float32"
    vocab_file: str | None = None
    spm_model_file: str | None = None
    do_lower_case: bool = True
    # "bert" (masked LM + next sentence) or "electra" (replaced-token detection, electra.py).
    objective: str = "bert"
    generator_hidden_size: float = electra.GENERATOR_HIDDEN_SIZE
    disc_weight: float = electra.DISC_WEIGHT


def _accuracy(logits: tf.Tensor, labels: tf.Tensor, weights: tf.Tensor
              ) -> tuple[tf.Tensor, tf.Tensor]:
    correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels), tf.float32)
    return tf.reduce_sum(weights * correct), tf.reduce_sum(weights)


class PretrainingTask(training.Task):
    """The original's two losses: MLM Σ w·CE / (Σ w + 1e-5), plus NSP mean CE."""

    loss_epsilons = {"masked_lm": losses.MASKED_LM_EPSILON}

    def __init__(self, bert_config: BertConfig):
        self.bert_config = bert_config

    def build_model(self):
        return models.pretraining_model(self.bert_config)

    def loss_normalizers(self, features: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        batch = tf.cast(tf.shape(features["input_ids"])[0], tf.float32)
        return {"masked_lm": tf.reduce_sum(features["masked_lm_weights"]), "next_sentence": batch}

    def losses(self, features, outputs) -> dict[str, tf.Tensor]:
        masked_lm = losses.masked_lm_loss(outputs["masked_lm_logits"], features["masked_lm_ids"],
                                          features["masked_lm_weights"])
        next_sentence = losses.next_sentence_loss(outputs["next_sentence_logits"],
                                                  features["next_sentence_labels"])
        return {"masked_lm": masked_lm.total, "next_sentence": next_sentence.total}

    def metrics(self, features, outputs) -> dict[str, tuple[tf.Tensor, tf.Tensor]]:
        labels = tf.reshape(features["next_sentence_labels"], [-1])
        return {
            "masked_lm_accuracy": _accuracy(outputs["masked_lm_logits"],
                                            features["masked_lm_ids"],
                                            features["masked_lm_weights"]),
            "next_sentence_accuracy": _accuracy(outputs["next_sentence_logits"], labels,
                                                tf.ones_like(labels, tf.float32)),
        }


def _input_fn(patterns: str, schema: features.Schema, is_training: bool, seed: int,
              repeat: bool = False, electra_objective: bool = False):
    def input_fn(input_context: tf.distribute.InputContext, batch_size: int) -> tf.data.Dataset:
        # drop_remainder in eval too, as the original: every eval batch is full (TPU shapes).
        # Static records are read as they are; unmasked ones (--dynamic_masking) are masked here.
        return dynamic_masking.pretraining_dataset(patterns, schema, batch_size, is_training=is_training,
                                                   input_context=input_context, seed=seed,
                                                   drop_remainder=True, repeat=repeat,
                                                   electra=electra_objective)
    return input_fn


def run_pretraining(options: PretrainingOptions, run_config: training.RunConfig,
                    strategy: tf.distribute.Strategy) -> dict[str, float]:
    """Trains and/or evaluates as `options` say; returns the eval results (or the last training
    figures when not evaluating)."""
    if not options.do_train and not options.do_eval and not options.export_hf_dir:
        raise UserError("At least one of --do_train or --do_eval must be True (or give "
                        "--export_hf_dir).")
    if options.export_hf_dir and not (options.vocab_file or options.spm_model_file):
        raise UserError("--export_hf_dir ships the tokenizer: give --vocab_file (or "
                        "--spm_model_file) and --do_lower_case as the records were made")
    bert_config = model_config.resolve_model_config(
        options.bert_config_file, run_config.init_checkpoint, run_config.output_dir,
        max_seq_length=options.max_seq_length)
    if options.export_google_checkpoint:
        bert_config.check_google_layout()  # before the training, not after
    electra_objective = options.objective == "electra"
    if options.objective not in ("bert", "electra"):
        raise UserError(f"--objective={options.objective}: expected bert or electra")
    if electra_objective and options.export_hf_dir:
        raise UserError("--export_hf_dir is not written for --objective=electra: export the run "
                        "with --export_google_checkpoint (google-research/electra's layout)")
    task = (electra.ElectraTask(bert_config, options.generator_hidden_size, options.disc_weight)
            if electra_objective else PretrainingTask(bert_config))
    schema = features.pretraining_schema(options.max_seq_length, options.max_predictions_per_seq)
    # Validate every input before hours of training, not after.
    _check_first_record(datasets.resolve_input_files(options.input_file), schema,
                        bert_config.vocab_size)
    eval_files = options.eval_input_file or options.input_file
    if options.do_eval:
        _check_first_record(datasets.resolve_input_files(eval_files, flag="eval_input_file"),
                            schema, bert_config.vocab_size)
    results: dict[str, float] = {}
    if options.do_train:
        results = training.train(task, run_config,
                                 _input_fn(options.input_file, schema, True, run_config.seed,
                                           electra_objective=electra_objective),
                                 strategy)
        if options.export_google_checkpoint and training.is_chief(strategy):
            prefix = os.path.join(run_config.output_dir, GOOGLE_CHECKPOINT_DIR, "bert_model.ckpt")
            checkpoints.export_google_checkpoint(training.load_model(task, run_config), prefix)
    if options.do_eval:
        results = training.evaluate(task, run_config,
                                    _input_fn(eval_files, schema, False, run_config.seed,
                                              repeat=_repeat_eval(options, run_config),
                                              electra_objective=electra_objective),
                                    strategy)
        if training.is_chief(strategy):
            _write_eval_results(run_config.output_dir, results,
                                electra.METRIC_NAMES if electra_objective else
                                EVAL_RESULT_NAMES)
    if options.export_hf_dir and training.is_chief(strategy):
        hf_export.export_hf_directory(
            training.load_model(task, run_config), options.export_hf_dir,
            hf_export.TokenizerFiles(options.vocab_file, options.spm_model_file,
                                     options.do_lower_case, options.max_seq_length),
            dtype=options.export_hf_dtype)
    return results


def _repeat_eval(options: PretrainingOptions, run_config: training.RunConfig) -> bool:
    """Whether eval repeats its records: the original's fixed number of batches, unless one
    pass is asked for (or no number of batches is given, where repeating would never end)."""
    return not options.eval_one_pass and run_config.max_eval_steps is not None


def _check_first_record(files: list[str], schema: features.Schema, vocab_size: int) -> None:
    """Decodes the first record of the first local file, so that records written for another
    --max_seq_length/--max_predictions_per_seq, or with a vocabulary larger than the config's
    vocab_size, fail here naming the file, not deep in tf.data or in the embedding lookup.
    Unmasked records (--dynamic_masking) are checked against their own schema."""
    local = [path for path in files if "://" not in path][:1]
    if local and dynamic_masking.is_unmasked_file(local[0]):
        schema = features.unmasked_pretraining_schema(schema.by_name["input_ids"].length)
    for path in local:
        for record in tfrecord.read_records(path, limit=1):
            values = schema.decode(record, source=str(path))
            largest = max(int(values[name].max()) for name in ("input_ids", "masked_lm_ids")
                          if name in values)
            if largest >= vocab_size:
                raise UserError(f"{path}: the first record holds token id {largest}, but the model's "
                                f"config has vocab_size {vocab_size}; write the records with the "
                                "model's vocabulary (or give a config that fits them)")


def _write_eval_results(output_dir: str, results: Mapping[str, float],
                        names: tuple[str, ...]) -> None:
    """eval_results.txt with the original's keys (`names`) and number formats (float32, int
    step)."""
    values = {name: np.float32(results[name]) for name in names}
    values["global_step"] = int(results["global_step"])
    path = os.path.join(output_dir, "eval_results.txt")
    training_log.write_eval_results(path, values)
    logging.info("***** Eval results *****\n%s",
                 training_log.format_eval_results(values).rstrip())
