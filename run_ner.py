"""Fine-tunes BERT for token tagging (named-entity recognition) on CoNLL or char-per-line files.

The classifier's common flags (same names and defaults), the shared distribution/precision
flags, and the tagging flags --data_format, --tag_scheme, --labels and the file names. Example
(CoNLL-2003 English: train.txt, dev.txt, test.txt in $CONLL_DIR):

  python run_ner.py --do_train --do_eval --do_predict --data_dir=$CONLL_DIR \
    --vocab_file=$BERT_BASE_DIR/vocab.txt --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --do_lower_case=False \
    --max_seq_length=128 --train_batch_size=32 --learning_rate=5e-5 --num_train_epochs=3.0 \
    --output_dir=/tmp/ner_output

Chinese, one character and its tag per line: add --data_format=char (docs/ner.md). BERT-CRF:
add --crf (and --lstm_size=128 for BERT-BiLSTM-CRF); keep the best dev checkpoint: add
--eval_every_epoch --best_metric=eval_f1.
--export_dir=/tmp/ner_output/saved_model writes a SavedModel that tags raw text (docs/serving.md).
"""

from absl import flags

from bert_tf import cli, run_lock
from bert_tf.serving import openvino, precision
from bert_tf.tasks.ner import data as tagging
from bert_tf.tasks.ner import task as ner_task
from bert_tf.text.chinese.conversion import define_chinese_conversion_flag
from bert_tf.training import flags as training_flags

FLAGS = flags.FLAGS

flags.DEFINE_string("data_dir", None, "Directory of the tagging files (see --train_file).")
flags.DEFINE_integer("max_seq_length", 128, "WordPieces per window; longer sentences are split "
                     "into overlapping windows.")
flags.DEFINE_enum("data_format", "conll", list(tagging.DATA_FORMATS),
                  "conll: word first, tag in the last column; char: one character and its tag "
                  "per line. Blank lines separate sentences.")
flags.DEFINE_enum("tag_scheme", "bio", list(tagging.TAG_SCHEMES),
                  "Tags the model learns and predicts; the files' tags (BIO, IOB1 or BIOES) are "
                  "converted to it.")
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


def main(argv):
    del argv
    options = task_options(FLAGS)
    with run_lock.output_lock(FLAGS.output_dir):
        ner_task.run_ner(options, training_flags.run_config_from_flags(FLAGS),
                         training_flags.strategy_from_flags(FLAGS))


def run():
    flags.mark_flags_as_required(["data_dir", "output_dir"])
    cli.run_main(main)


if __name__ == "__main__":
    run()
