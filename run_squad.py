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

from bert_tf import cli, run_lock
from bert_tf.serving import openvino, precision
from bert_tf.tasks.squad import task as squad_task
from bert_tf.text.chinese.conversion import define_chinese_conversion_flag
from bert_tf.training import flags as training_flags

FLAGS = flags.FLAGS

flags.DEFINE_string("train_file", None, "SQuAD json for training, e.g. train-v1.1.json.")
flags.DEFINE_string("predict_file", None, "SQuAD json for predictions, e.g. dev-v1.1.json.")
flags.DEFINE_integer("max_seq_length", 384, "Tokens per window after WordPiece.")
flags.DEFINE_integer("doc_stride", 128, "Tokens between the starts of a long context's windows.")
flags.DEFINE_integer("max_query_length", 64, "Questions are cut to this many tokens.")
flags.DEFINE_integer("n_best_size", 20, "Answers kept per question in nbest_predictions.json.")
flags.DEFINE_integer("max_answer_length", 30, "Longest answer, in tokens.")
flags.DEFINE_bool("verbose_logging", False, "Log why predictions could not be mapped to the text.")
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


def main(argv):
    del argv
    options = task_options(FLAGS)
    with run_lock.output_lock(FLAGS.output_dir):
        results = squad_task.run_squad(options, training_flags.run_config_from_flags(FLAGS),
                                       training_flags.strategy_from_flags(FLAGS))
    for key, value in sorted(results.get("eval", {}).items()):
        print(f"{key} = {value}")


def run():
    flags.mark_flags_as_required(["output_dir"])
    cli.run_main(main)


if __name__ == "__main__":
    run()
