"""Fine-tunes BERT on multiple choice: SWAG (the BERT paper's fourth task) or your JSON lines.

Each of a question's N choices is packed `[CLS] context [SEP] stem ending [SEP]`; one score per
choice from its pooled vector, a softmax over the N. Example (SWAG's train.csv and val.csv in
$SWAG_DIR):

  python run_swag.py --do_train --do_eval --data_dir=$SWAG_DIR \
    --vocab_file=$BERT_BASE_DIR/vocab.txt --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --max_seq_length=80 \
    --train_batch_size=16 --learning_rate=2e-5 --num_train_epochs=3.0 \
    --output_dir=/tmp/swag_output --export_dir=/tmp/swag_output/saved_model

Your own questions: --train_file=train.jsonl (one {"context", "stem", "choices", "label"} a line;
docs/multiple_choice.md).
"""

from absl import flags

from bert_tf import cli
from bert_tf.cli import flags as training_flags, run_lock
from bert_tf.tasks.multiple_choice import flags as multiple_choice_flags
from bert_tf.tasks.multiple_choice.family import MULTIPLE_CHOICE

FLAGS = flags.FLAGS

MULTIPLE_CHOICE.define_flags()
flags.adopt_module_key_flags(multiple_choice_flags)  # --help lists them


def main(argv):
    del argv
    options = MULTIPLE_CHOICE.options_from_flags(FLAGS)
    with run_lock.output_lock(FLAGS.output_dir):
        return MULTIPLE_CHOICE.run(options, training_flags.run_config_from_flags(FLAGS),
                                   training_flags.strategy_from_flags(FLAGS))


def run():
    flags.mark_flags_as_required(["data_dir", "output_dir"])
    cli.run_main(main)


if __name__ == "__main__":
    run()
