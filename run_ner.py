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

from bert_tf import cli
from bert_tf.cli import flags as training_flags, run_lock
from bert_tf.tasks.ner import flags as ner_flags
from bert_tf.tasks.ner.family import NER

FLAGS = flags.FLAGS

NER.define_flags()
flags.adopt_module_key_flags(ner_flags)  # --help lists them


def main(argv):
    del argv
    options = NER.options_from_flags(FLAGS)
    with run_lock.output_lock(FLAGS.output_dir):
        NER.run(options, training_flags.run_config_from_flags(FLAGS),
                training_flags.strategy_from_flags(FLAGS))


def run():
    flags.mark_flags_as_required(["data_dir", "output_dir"])
    cli.run_main(main)


if __name__ == "__main__":
    run()
