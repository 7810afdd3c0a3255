"""run_classifier.py's flags (also bert-distill's with --task=classifier), and the options they
give."""

from absl import flags

from bert_tf.serving import openvino, precision
from bert_tf.tasks.classifier import processors as classification
from bert_tf.tasks.classifier import task as classifier_task
from bert_tf.text import long_text
from bert_tf.text.chinese.conversion import define_chinese_conversion_flag
from bert_tf.cli import flags as training_flags


def define_flags() -> None:
    """Defines run_classifier.py's flags: the original's, the custom-task and long-text ones,
    and the shared model, padding, fine-tuning, export and loop flags."""
    flags.DEFINE_string("data_dir", None, "Directory of the task's .tsv (or .csv) files.")
    flags.DEFINE_string("task_name", None, "One of: " + ", ".join(classification.TASK_NAMES) + ".")
    flags.DEFINE_integer("max_seq_length", 128,
                         "Tokens per example after WordPiece, padded/trimmed.")
    flags.DEFINE_string("xnli_language", "zh", "XNLI language code (the original fixed it to zh).")
    flags.DEFINE_string("task_spec", None, "--task_name=custom: JSON spec of the files' columns.")
    flags.DEFINE_string("text_a_column", None,
                        "--task_name=custom: first text column (name or index).")
    flags.DEFINE_string("text_b_column", None, "--task_name=custom: second text column, if any.")
    flags.DEFINE_string("label_column", None, "--task_name=custom: label column (name or index).")
    flags.DEFINE_bool("has_header", True, "--task_name=custom: the files start with a header row.")
    flags.DEFINE_enum("file_format", "tsv", ["tsv", "csv"], "--task_name=custom: file format.")
    flags.DEFINE_list("label_list", None, "--task_name=custom: labels in output order (default: "
                      "the sorted labels of the training file).")
    flags.DEFINE_bool("regression", False, "--task_name=custom: a float score, trained with MSE.")
    flags.DEFINE_bool("multi_label", False, "--task_name=custom: each text has a set of labels, "
                      "in --label_column split at --label_separator (or in --label_columns); one "
                      "sigmoid per label, binary cross-entropy.")
    flags.DEFINE_string("label_separator", "|", "--multi_label: separator of the labels in "
                        "--label_column (e.g. politics|science; an empty cell: no label).")
    flags.DEFINE_list("label_columns", None, "--multi_label: one 0/1 column per label (names, or "
                      "0-based indices with --label_list), instead of --label_column.")
    flags.DEFINE_float("threshold", 0.5, "--multi_label: predict the labels whose probability is "
                       "at least this.")
    flags.DEFINE_bool("tune_thresholds", False,
                      "--multi_label: choose each label's threshold on the "
                      "dev set (best F1) at each evaluation, save it in thresholds.json beside the "
                      "checkpoints, and predict and export with it.")
    flags.DEFINE_string("export_dir", None, "Write a SavedModel of the fine-tuned classifier here.")
    precision.define_flag(int8=True)
    openvino.define_flags()
    flags.DEFINE_enum("truncation", "head", list(long_text.TRUNCATIONS),
                      "A single text longer than max_seq_length - 2 pieces keeps its head (the "
                      "original), its tail, or its head and tail (--truncation_head_tokens from "
                      "the start, the rest from the end). Pairs are cut longest first.")
    flags.DEFINE_integer("truncation_head_tokens", long_text.DEFAULT_HEAD_TOKENS,
                         "--truncation=head+tail: pieces kept from the start "
                         "(Sun et al.: 128 of 510).")
    flags.DEFINE_enum("long_text", "truncate", list(long_text.LONG_TEXT_MODES),
                      "chunks: split a single text longer than one row into windows; training "
                      "labels each window, evaluation, prediction and the export pool the windows' "
                      "logits per text (--chunk_pooling).")
    flags.DEFINE_integer("chunk_stride", None, "--long_text=chunks: pieces between the starts of "
                         "consecutive windows (default: the window's max_seq_length - 2, "
                         "no overlap).")
    flags.DEFINE_enum("chunk_pooling", "mean", list(long_text.POOLINGS),
                      "--long_text=chunks: mean or max of the windows' logits per text.")
    flags.DEFINE_string("processor", None,
                        "Your own DataProcessor class, written for the original: "
                        "module.path:Class or path/to/file.py:Class (docs/migrating.md).")
    training_flags.define_model_flags()
    define_chinese_conversion_flag()
    training_flags.define_padding_flags()
    training_flags.define_finetuning_flags()
    training_flags.define_hf_export_flags()
    training_flags.define_selection_flags("eval_accuracy; eval_pearson for regression")
    training_flags.define_flags()


def task_options(flag_values: flags.FlagValues) -> classifier_task.ClassifierOptions:
    """The classifier's options from its parsed flags (also bert-distill's for
    --task=classifier)."""
    custom_spec = None
    if flag_values.task_name and flag_values.task_name.lower() in ("custom", "generic"):
        custom_spec = (classification.load_task_spec(flag_values.task_spec)
                       if flag_values.task_spec else classification.spec_from_flags(
                           flag_values.text_a_column, flag_values.label_column,
                           flag_values.text_b_column, flag_values.has_header,
                           flag_values.file_format, flag_values.label_list,
                           flag_values.regression, flag_values.multi_label,
                           flag_values.label_separator, flag_values.label_columns))
    return training_flags.options_from_flags(flag_values, classifier_task.ClassifierOptions,
                                             custom_spec=custom_spec)
