"""Fine-tunes BERT on SQuAD v1.1 or v2.0, predicts answers and evaluates them.

Same flags and defaults as the original run_squad.py, plus the distribution/precision flags and
--spm_model_file; --null_score_diff_threshold also accepts `auto`. When --predict_file has
answers, the official metrics go to eval_results.txt / eval_results.json. SQuAD 1.1:

  python run_squad.py --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --do_train --do_predict \
    --train_file=$SQUAD_DIR/train-v1.1.json --predict_file=$SQUAD_DIR/dev-v1.1.json \
    --train_batch_size=12 --learning_rate=3e-5 --num_train_epochs=2.0 \
    --max_seq_length=384 --doc_stride=128 --output_dir=/tmp/squad_base

SQuAD 2.0: add --version_2_with_negative (and --null_score_diff_threshold=auto to pick the
threshold on the predict file); see docs/squad.md. --export_dir=/tmp/squad_base/saved_model writes
a SavedModel that answers questions on raw text (docs/serving.md); with --export_runtime=openvino
--export_dtype=int8 its model runs on OpenVINO in int8, calibrated on --train_file's questions and
compared with float32 on --predict_file's answers before it is written.
"""

from absl import flags

from bert_tf import cli
from bert_tf.cli import flags as training_flags, run_lock
from bert_tf.tasks.squad import flags as squad_flags
from bert_tf.tasks.squad.family import SQUAD

FLAGS = flags.FLAGS

SQUAD.define_flags()
flags.adopt_module_key_flags(squad_flags)  # --help lists them


def main(argv):
    del argv
    options = SQUAD.options_from_flags(FLAGS)
    with run_lock.output_lock(FLAGS.output_dir):
        results = SQUAD.run(options, training_flags.run_config_from_flags(FLAGS),
                            training_flags.strategy_from_flags(FLAGS))
    for key, value in sorted(results.get("eval", {}).items()):
        print(f"{key} = {value}")


def run():
    flags.mark_flags_as_required(["output_dir"])
    cli.run_main(main)


if __name__ == "__main__":
    run()
