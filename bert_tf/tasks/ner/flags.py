"""run_ner.py's flags (also bert-distill's with --task=ner), and the options they give."""

from absl import flags

from bert_tf.serving import openvino, precision
from bert_tf.tasks.ner import data as tagging
from bert_tf.tasks.ner import task as ner_task
from bert_tf.text.chinese.conversion import define_chinese_conversion_flag
from bert_tf.cli import flags as training_flags


def define_flags() -> None:
    """Defines run_ner.py's flags: the tagging ones and the shared model, padding, fine-tuning,
    export and loop flags."""
    flags.DEFINE_string("data_dir", None, "Directory of the tagging files (see --train_file).")
    flags.DEFINE_integer("max_seq_length", 128, "WordPieces per window; longer sentences are split "
                         "into overlapping windows.")
    flags.DEFINE_enum("data_format", "conll", list(tagging.DATA_FORMATS),
                      "conll: word first, tag in the last column; char: one character and its tag "
                      "per line. Blank lines separate sentences.")
    flags.DEFINE_enum("tag_scheme", "bio", list(tagging.TAG_SCHEMES),
                      "Tags the model learns and predicts; the files' tags (BIO, IOB1 or BIOES) "
                      "are converted to it.")
    flags.DEFINE_list("labels", None, "Tags in output order, e.g. O,B-PER,I-PER (default: every "
                      "tag of the training file's entity types, O first).")
    flags.DEFINE_string("train_file", "train.txt", "Training file, in --data_dir (or a full path).")
    flags.DEFINE_string("dev_file", "dev.txt", "Evaluation file, in --data_dir (or a full path).")
    flags.DEFINE_string("test_file", "test.txt", "File to tag, in --data_dir (or a full path); it "
                        "may lack the tag column.")
    flags.DEFINE_integer("window_overlap", 32, "WordPieces that consecutive windows of a long "
                         "sentence share (at most half a window).")
    flags.DEFINE_bool("crf", False, "A linear-chain CRF over the word scores (learned "
                      "transitions, Viterbi decoding) instead of a per-word softmax.")
    flags.DEFINE_integer("lstm_size", 0, "Units of each direction of a BiLSTM between the encoder "
                         "and the tag scores (BERT-BiLSTM-CRF with --crf). 0: none.")
    flags.DEFINE_float("crf_learning_rate", None, "Peak learning rate of the CRF's scores (same "
                       "warm-up and decay as --learning_rate; default: --learning_rate).")
    flags.DEFINE_enum("decode", "constrained", ["constrained", "argmax"], "constrained: the best "
                      "tag sequence the --tag_scheme allows (no I-X after O, ...); argmax: each "
                      "word's best tag on its own (may predict ill-formed spans).")
    flags.DEFINE_string("export_dir", None, "Write a SavedModel that tags raw text here "
                        "(docs/serving.md).")
    precision.define_flag(int8=True)
    openvino.define_flags()
    training_flags.define_model_flags()
    define_chinese_conversion_flag()
    training_flags.define_padding_flags()
    training_flags.define_finetuning_flags()
    training_flags.define_hf_export_flags()
    training_flags.define_selection_flags(ner_task.DEFAULT_BEST_METRIC)
    training_flags.define_flags()


def task_options(flag_values: flags.FlagValues) -> ner_task.NerOptions:
    """The tagger's options from its parsed flags (also bert-distill's for --task=ner)."""
    return training_flags.options_from_flags(
        flag_values, ner_task.NerOptions,
        labels=tuple(flag_values.labels) if flag_values.labels else None)
