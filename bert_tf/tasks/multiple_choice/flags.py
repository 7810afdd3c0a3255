"""run_swag.py's flags (also bert-distill's with --task=multiple_choice), and the options they
give."""

from absl import flags

from bert_tf.cli import flags as training_flags
from bert_tf.serving import openvino, precision
from bert_tf.tasks.multiple_choice import task as multiple_choice
from bert_tf.text.chinese.conversion import define_chinese_conversion_flag


def define_flags() -> None:
    """Defines run_swag.py's flags: the files and the shared model, fine-tuning, export and
    loop flags."""
    flags.DEFINE_string("data_dir", None, "Directory of the question files (see --train_file).")
    flags.DEFINE_integer("max_seq_length", 128, "WordPieces per choice ([CLS] context [SEP] "
                         "stem ending [SEP]); longer pairs are cut longest first.")
    flags.DEFINE_string("train_file", "train.csv", "Training questions, in --data_dir (or a "
                        "full path): SWAG's CSV, or JSON lines when named *.jsonl / *.json.")
    flags.DEFINE_string("dev_file", "val.csv", "Evaluation questions, in --data_dir (or a full "
                        "path).")
    flags.DEFINE_string("test_file", "test.csv", "Questions to predict, in --data_dir (or a "
                        "full path); they may lack labels.")
    flags.DEFINE_string("export_dir", None, "Write a SavedModel that answers raw-text "
                        "questions here (docs/multiple_choice.md).")
    precision.define_flag(int8=True)
    openvino.define_flags()
    training_flags.define_model_flags()
    define_chinese_conversion_flag()
    training_flags.define_finetuning_flags()
    training_flags.define_hf_export_flags()
    training_flags.define_selection_flags(multiple_choice.DEFAULT_BEST_METRIC)
    training_flags.define_flags()


def task_options(flag_values: flags.FlagValues) -> multiple_choice.MultipleChoiceOptions:
    """The options from the parsed flags (also bert-distill's for --task=multiple_choice)."""
    return training_flags.options_from_flags(flag_values, multiple_choice.MultipleChoiceOptions)
