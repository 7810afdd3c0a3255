"""The flags the scripts share, and how parsed flags become a strategy, a RunConfig and options.

Scripts call `define_flags()` (the loop's flags) and, as they need them, `define_model_flags()`
and `define_finetuning_flags()` at import time, then in `main()` pass their parsed FLAGS to
`strategy_from_flags`, `run_config_from_flags` and `options_from_flags`; library code never
reads FLAGS itself.

The rule that keeps scripts short: a flag with the name of a `RunConfig` field, or of a field of
the script's options dataclass, sets that field.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, TypeVar

from absl import flags

from bert_tf.training import distribution, loop as training, schedules

Options = TypeVar("Options")


def define_model_flags(*, tokenizer: bool = True, output_dir: bool = True,
                       flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """The pre-trained model's flags, defaults as the original's: --bert_config_file (aliases
    --albert_config_file, --electra_config_file), --init_checkpoint, with `tokenizer` --vocab_file, --spm_model_file, --do_lower_case, and with
    `output_dir` --output_dir."""
    string = functools.partial(flags.DEFINE_string, flag_values=flag_values)
    string("bert_config_file", None, "bert_config.json of the pre-trained model: it specifies "
           "the architecture. Default: the config --init_checkpoint brings (bert_config.json "
           "beside it, or a Hugging Face config.json); an ALBERT albert_config.json or an "
           "ELECTRA electra_config.json works too.")
    _define_config_alias("albert_config_file", flag_values["bert_config_file"], flag_values)
    _define_config_alias("electra_config_file", flag_values["bert_config_file"], flag_values)
    string("init_checkpoint", None, "Weights to start from: an original TF1 checkpoint, a "
           "bert_tf run directory or a Hugging Face directory.")
    if tokenizer:
        string("vocab_file", None, "vocab.txt the model was trained with.")
        string("spm_model_file", None, "SentencePiece model, instead of --vocab_file.")
        flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (True for uncased "
                          "models).", flag_values=flag_values)
    if output_dir:
        string("output_dir", None, "Checkpoints, cached records, predictions and results go "
               "here.")


class _ConfigFileAlias(flags.Flag):
    """--albert_config_file, --electra_config_file: set --bert_config_file; giving both with different values is an
    error (in either order), not a silent choice."""

    def __init__(self, original: flags.Flag, name: str):
        super().__init__(original.parser, original.serializer, name, None,
                         f"Alias for --{original.name}.")
        self.original = original
        self.given = None

    def parse(self, argument: str) -> None:
        value = self.original.parser.parse(argument)
        if self.original.present and self.original.value != value:
            raise flags.IllegalFlagValueError(
                f"--{self.name}={value} and --{self.original.name}={self.original.value} differ: "
                f"give one of them")
        self.original.parse(argument)
        self.given = value
        self.present += 1

    @property
    def value(self):
        return self.original.value

    @value.setter
    def value(self, value) -> None:
        if getattr(self, "original", None) is not None:  # Flag.__init__ sets it before `original`
            self.original.value = value


def _define_config_alias(name: str, original: flags.Flag, flag_values: flags.FlagValues) -> None:
    alias = _ConfigFileAlias(original, name)
    flags.DEFINE_flag(alias, flag_values)
    # The alias given first, then --bert_config_file: only the final value shows the conflict.
    flags.register_validator(original.name,
                             lambda value: not alias.present or value == alias.given,
                             message=f"--{name} and --{original.name} differ: give one of them",
                             flag_values=flag_values)


def define_finetuning_flags(*, with_eval: bool = True,
                            flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """What to run and for how long, defaults as the original's: --do_train, --do_eval,
    --do_predict, --train_batch_size, --eval_batch_size, --predict_batch_size, --learning_rate,
    --num_train_epochs, --warmup_proportion, and the new --layerwise_lr_decay (without
    `with_eval` no --do_eval and --eval_batch_size, as the original run_squad.py)."""
    boolean = functools.partial(flags.DEFINE_bool, flag_values=flag_values)
    integer = functools.partial(flags.DEFINE_integer, flag_values=flag_values)
    number = functools.partial(flags.DEFINE_float, flag_values=flag_values)
    boolean("do_train", False, "Whether to fine-tune on the training file or split.")
    if with_eval:
        boolean("do_eval", False, "Whether to evaluate on the dev file or split "
                "(eval_results.txt).")
    boolean("do_predict", False, "Whether to predict the test or predict file.")
    integer("train_batch_size", 32, "Total batch size for training.")
    if with_eval:
        integer("eval_batch_size", 8, "Total batch size for eval.")
    integer("predict_batch_size", 8, "Total batch size for predict.")
    number("learning_rate", 5e-5, "The initial learning rate for Adam.")
    number("num_train_epochs", 3.0, "Passes over the training data.")
    number("warmup_proportion", 0.1, "Fraction of training spent in linear warm-up (0.1 = the "
           "first 10%).")
    number("layerwise_lr_decay", 1.0, "Layer-wise learning-rate decay ξ in (0, 1]: the head "
           "learns at --learning_rate, each encoder layer at ξ times the rate of the layer above, "
           "the embeddings at ξ times the first layer's. 1.0: off (docs/optimization.md).")


def define_hf_export_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """--export_hf_dir and --export_hf_dtype: the model as a Hugging Face directory
    (bert_tf.checkpoints.hf_export; docs/checkpoints.md)."""
    flags.DEFINE_string("export_hf_dir", None, "At the end, also write the model as a Hugging "
                        "Face directory here (config.json, model.safetensors, the tokenizer) "
                        "that transformers' from_pretrained loads.", flag_values=flag_values)
    flags.DEFINE_enum("export_hf_dtype", "float32", ["float32", "bfloat16"], "The weights' "
                      "dtype in --export_hf_dir.", flag_values=flag_values)


def define_selection_flags(default_metric: str = "the task's main metric",
                           flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Evaluation during training, the best checkpoint and early stopping (run_classifier.py,
    run_ner.py; see bert_tf.training.best_checkpoint and docs/training.md)."""
    integer = functools.partial(flags.DEFINE_integer, flag_values=flag_values)
    integer("eval_every_n_steps", 0, "With --do_train: evaluate on the dev file every N steps "
            "(and at the end), keeping the best checkpoint in output_dir/best/. 0: off.")
    flags.DEFINE_bool("eval_every_epoch", False, "With --do_train: evaluate after every epoch "
                      "(and at the end), as --eval_every_n_steps.", flag_values=flag_values)
    flags.DEFINE_string("best_metric", None, "Key of eval_results.txt that picks the best "
                        "checkpoint, optionally with :max or :min (default "
                        f"{default_metric}; keys ending in loss are minimised). Setting it alone "
                        "evaluates at the end of training.", flag_values=flag_values)
    integer("early_stopping_patience", 0, "Stop training after N evaluations in a row without "
            "a better --best_metric. 0: never.")
    flags.DEFINE_enum("predict_from", "best", ["best", "last"], "Checkpoint that --do_predict "
                      "(and the export) use: best = output_dir/best/ when evaluation during "
                      "training kept one, else the last; last = the latest checkpoint.",
                      flag_values=flag_values)


def define_padding_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """--dynamic_padding and --group_by_length (run_classifier.py and run_ner.py)."""
    flags.DEFINE_bool("dynamic_padding", True, "Trim every batch to its longest sequence (rounded "
                      "up to a multiple of 8): the same outputs, less work on short inputs. Off "
                      "under --use_tpu and --use_xla, which want one shape.", flag_values=flag_values)
    flags.DEFINE_bool("group_by_length", False, "Training: batches of examples of similar "
                      "length (seeded), so that --dynamic_padding saves more; changes which "
                      "examples share a batch.", flag_values=flag_values)


def define_dtype_flag(choices: tuple[str, ...] = ("float32", "bfloat16", "float16", "auto"),
                      flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """--dtype: the compute dtype of the model (variables stay float32), one of `choices`;
    "auto" becomes what the devices run fastest (`distribution.resolve_dtype`)."""
    loss_scaling = " float16 adds dynamic loss scaling." if "float16" in choices else ""
    flags.DEFINE_enum("dtype", "float32", list(choices),
                      f"Compute dtype; variables stay float32.{loss_scaling} auto: what the "
                      "devices run fastest (bfloat16 on TPUs, on GPUs of compute capability 8+ "
                      "and on CPUs with AMX-BF16; float16 on older GPUs; else float32), logged "
                      "once.", flag_values=flag_values)


def define_flags() -> None:
    """Defines the loop's flags (the original's TPU/checkpoint flags with their defaults, plus
    distribution, precision and optimizer flags)."""
    flags.DEFINE_bool("use_tpu", False, "Whether to use TPU (same as --distribution_strategy=tpu).")
    flags.DEFINE_string("tpu_name", None, "The Cloud TPU to use for training: its name or a "
                        "grpc:// address.")
    flags.DEFINE_string("tpu_zone", None, "GCE zone of the Cloud TPU (found from metadata if "
                        "not given).")
    flags.DEFINE_string("gcp_project", None, "GCP project of the Cloud TPU (found from metadata "
                        "if not given).")
    flags.DEFINE_string("master", None, "TPU master address, used when --tpu_name is not given.")
    flags.DEFINE_integer("num_tpu_cores", 8, "Kept for compatibility: TPUStrategy uses every "
                         "core of the TPU it connects to.")
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save a checkpoint.")
    flags.DEFINE_integer("iterations_per_loop", 1000, "Most steps run in one compiled loop "
                         "(one host round trip).")
    flags.DEFINE_enum("distribution_strategy", None, list(distribution.STRATEGIES),
                      "Default: tpu with --use_tpu; multi_worker_mirrored when TF_CONFIG names "
                      "several tasks; mirrored with 2+ GPUs; else one_device.")
    flags.DEFINE_integer("num_gpus", None, "GPUs for the mirrored strategy (default: all).")
    flags.DEFINE_integer("worker_timeout_seconds", distribution.DEFAULT_WORKER_TIMEOUT_SECONDS,
                         "multi_worker_mirrored: a worker silent (no heartbeat) for this long is "
                         "lost, and the others stop naming it (docs/cluster.md).")
    define_dtype_flag()
    flags.DEFINE_bool("use_xla", False, "Compile the training step with XLA.")
    flags.DEFINE_enum("lr_schedule", "linear", list(schedules.SCHEDULES),
                      "Learning-rate curve after the warm-up: linear (the original's), cosine "
                      "(to --lr_end), constant, polynomial (to --lr_end, power --lr_power), "
                      "inverse_sqrt (docs/optimization.md).")
    flags.DEFINE_float("lr_end", 0.0, "The rate --lr_schedule=cosine and polynomial end at.")
    flags.DEFINE_float("lr_power", 1.0, "The exponent of --lr_schedule=polynomial.")
    flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"],
                      "adamw: the original's Adam with decoupled weight decay; lamb: for large "
                      "batches.")
    flags.DEFINE_integer("gradient_accumulation_steps", 1, "Split each batch into this many "
                         "micro-batches and sum their gradients: one update per batch, less "
                         "memory.")
    flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints kept in output_dir.")
    flags.DEFINE_integer("log_every_n_steps", 100, "Log line and summaries every N steps.")
    flags.DEFINE_integer("seed", 12345, "Seed of the initialisation, dropout and input order.")


def strategy_from_flags(flag_values: flags.FlagValues):
    """The tf.distribute strategy the flags ask for."""
    return distribution.get_strategy(
        flag_values.distribution_strategy, use_tpu=flag_values.use_tpu,
        num_gpus=flag_values.num_gpus, tpu_name=flag_values.tpu_name,
        tpu_zone=flag_values.tpu_zone, gcp_project=flag_values.gcp_project,
        master=flag_values.master, worker_timeout_seconds=flag_values.worker_timeout_seconds)


def _field_values(flag_values: flags.FlagValues, cls: type) -> dict[str, Any]:
    """{field: flag value} for the fields of dataclass `cls` that are defined flags."""
    return {field.name: flag_values[field.name].value for field in dataclasses.fields(cls)
            if field.name in flag_values}


def run_config_from_flags(flag_values: flags.FlagValues, **fields: Any) -> training.RunConfig:
    """A RunConfig from the flags named like its fields (the loop's flags, --output_dir, batch
    sizes, --learning_rate, --init_checkpoint, ...) and `fields`, which take precedence."""
    values = {**_field_values(flag_values, training.RunConfig), **fields}
    if values.get("dtype") == "auto":
        use_tpu = (flag_values["use_tpu"].value if "use_tpu" in flag_values else False) or (
            "distribution_strategy" in flag_values
            and flag_values["distribution_strategy"].value == "tpu")
        values["dtype"] = distribution.resolve_dtype("auto", use_tpu=use_tpu)
    return training.RunConfig(**values)


def options_from_flags(flag_values: flags.FlagValues, options_class: type[Options],
                       **fields: Any) -> Options:
    """The script's options dataclass from the flags named like its fields and `fields` (values
    that need parsing first), which take precedence."""
    return options_class(**{**_field_values(flag_values, options_class), **fields})
