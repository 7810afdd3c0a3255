"""Pretrains BERT (masked LM + next sentence) on the records of create_pretraining_data.py.

The original's flags and defaults, plus distribution, precision and optimizer flags. Re-running
the same command resumes from the latest checkpoint in --output_dir.

  python run_pretraining.py \
    --input_file=/tmp/tf_examples.tfrecord \
    --output_dir=/tmp/pretraining_output \
    --do_train=True --do_eval=True \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
    --train_batch_size=32 --max_seq_length=128 --max_predictions_per_seq=20 \
    --num_train_steps=20 --num_warmup_steps=10 --learning_rate=2e-5
"""

from absl import flags

from bert_tf import cli
from bert_tf.cli import flags as training_flags, run_lock
from bert_tf.tasks.pretraining import task as pretraining_task

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None, "Input TF example files: comma-separated globs, files "
                    "or directories.")
flags.DEFINE_integer("max_seq_length", 128, "The maximum total input sequence length after "
                     "WordPiece tokenization; must match the data.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum number of masked LM predictions "
                     "per sequence; must match the data.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training (global, across "
                     "replicas).")
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.")
flags.DEFINE_bool("eval_one_pass", False, "Evaluate one pass over the eval records (at most "
                  "--max_eval_steps batches) instead of repeating them until --max_eval_steps "
                  "batches, as the original does.")
flags.DEFINE_string("eval_input_file", None, "Records to evaluate on (default: --input_file).")
flags.DEFINE_bool("export_google_checkpoint", False, "At the end of training, also write the "
                  "model in the original's TF1 layout to <output_dir>/google_checkpoint/.")
flags.DEFINE_enum("objective", "bert", ["bert", "electra"], "bert: masked LM + next sentence; "
                  "electra: ELECTRA's replaced-token detection (a generator and a discriminator; "
                  "--dynamic_masking records, an ELECTRA config; docs/electra.md).")
flags.DEFINE_float("generator_hidden_size", 0.25, "--objective=electra: the generator's hidden "
                   "size as a fraction of the discriminator's.")
flags.DEFINE_float("disc_weight", 50.0, "--objective=electra: the weight of the discriminator's "
                   "loss against the generator's.")
training_flags.define_model_flags()  # the tokenizer flags: what --export_hf_dir ships
training_flags.define_hf_export_flags()
training_flags.define_flags()
flags.mark_flags_as_required(["input_file", "output_dir"])


def main(argv):
    del argv
    options = training_flags.options_from_flags(FLAGS, pretraining_task.PretrainingOptions)
    with run_lock.output_lock(FLAGS.output_dir):
        pretraining_task.run_pretraining(options, training_flags.run_config_from_flags(FLAGS),
                                         training_flags.strategy_from_flags(FLAGS))


def run():
    cli.run_main(main)


if __name__ == "__main__":
    run()
