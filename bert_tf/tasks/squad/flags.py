"""run_squad.py's flags (also bert-distill's with --task=squad), and the options they give."""

from absl import flags

from bert_tf.serving import openvino, precision
from bert_tf.tasks.squad import task as squad_task
from bert_tf.text.chinese.conversion import define_chinese_conversion_flag
from bert_tf.cli import flags as training_flags


def define_flags() -> None:
    """Defines run_squad.py's flags: the original's and the shared model, fine-tuning, export
    and loop flags."""
    flags.DEFINE_string("train_file", None, "SQuAD json for training, e.g. train-v1.1.json.")
    flags.DEFINE_string("predict_file", None, "SQuAD json for predictions, e.g. dev-v1.1.json.")
    flags.DEFINE_integer("max_seq_length", 384, "Tokens per window after WordPiece.")
    flags.DEFINE_integer("doc_stride", 128,
                         "Tokens between the starts of a long context's windows.")
    flags.DEFINE_integer("max_query_length", 64, "Questions are cut to this many tokens.")
    flags.DEFINE_integer("n_best_size", 20, "Answers kept per question in nbest_predictions.json.")
    flags.DEFINE_integer("max_answer_length", 30, "Longest answer, in tokens.")
    flags.DEFINE_bool("verbose_logging", False,
                      "Log why predictions could not be mapped to the text.")
    flags.DEFINE_bool("version_2_with_negative", False, "SQuAD 2.0: some questions have no answer.")
    flags.DEFINE_string("null_score_diff_threshold", "0.0", "Predict no answer when null score − "
                        "best non-null score exceeds this; `auto`: the F1-best value on "
                        "--predict_file.")
    flags.DEFINE_string("export_dir", None, "Write a SavedModel that answers questions on raw text "
                        "here (docs/serving.md).")
    precision.define_flag(int8=True)
    openvino.define_flags()
    training_flags.define_model_flags()
    define_chinese_conversion_flag()
    training_flags.define_finetuning_flags(with_eval=False)
    training_flags.define_hf_export_flags()
    training_flags.define_selection_flags("f1 (the --predict_file's, which needs answers)")
    training_flags.define_flags()


def task_options(flag_values: flags.FlagValues) -> squad_task.SquadOptions:
    """The SQuAD options from its parsed flags (also bert-distill's for --task=squad)."""
    return training_flags.options_from_flags(
        flag_values, squad_task.SquadOptions, null_score_diff_threshold=squad_task.parse_threshold(
            flag_values.null_score_diff_threshold))
