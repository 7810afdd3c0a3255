"""Distils a fine-tuned BERT (the teacher) into a smaller student: TinyBERT's two stages.

--task=classifier (default), ner, squad or multiple_choice (every task family of
bert_tf/tasks/families.py) takes that task's flags (those of run_classifier.py, run_ner.py,
run_squad.py or run_swag.py: data, tokenizer, evaluation, export); --num_train_epochs and
--learning_rate are the prediction stage's. Example (the MRPC teacher of run_classifier.py into
a 4-layer student of its width):

  python run_distillation.py --task=classifier --task_name=MRPC --data_dir=$GLUE_DIR/MRPC \
    --vocab_file=$BERT_BASE_DIR/vocab.txt --teacher_dir=/tmp/mrpc_output --student_layers=4 \
    --stages=intermediate,prediction --intermediate_epochs=10 --num_train_epochs=3 \
    --learning_rate=3e-5 --do_eval --output_dir=/tmp/mrpc_student

The student's output_dir is an ordinary run directory: run_classifier.py --do_predict or
--export_dir reads it as it reads its own (docs/distillation.md).
"""

import sys

from absl import flags

from bert_tf import cli
from bert_tf.cli import flags as training_flags, run_lock
from bert_tf.tasks import families
from bert_tf.workflows.distillation import run as distillation
from bert_tf.workflows.distillation.task import STAGES


def _task_in(argv: list[str]) -> str:
    """--task's value in the command line (the task's flags are defined before parsing)."""
    for i, arg in enumerate(argv):
        if arg.startswith("--task="):
            return arg.split("=", 1)[1]
        if arg == "--task" and i + 1 < len(argv):
            return argv[i + 1]
    return "classifier"


# The chosen task family's flags are this command's (all of them: data, tokenizer, loop, export);
# an unknown --task is refused by the enum below, with the classifier's flags defined.
TASK = next((family for family in families.FAMILIES if family.name == _task_in(sys.argv)),
            families.FAMILIES[0])
TASK.define_flags()
FLAGS = flags.FLAGS

flags.DEFINE_enum("task", "classifier", families.names(), "The fine-tuning task: its "
                  "script's flags are this command's.")
flags.DEFINE_string("teacher_dir", None, "The teacher: a bert_tf fine-tuning output_dir (its "
                    "bert_config.json, best or last checkpoint and label_list.txt).")
flags.DEFINE_string("teacher_checkpoint", None, "The teacher as a fine-tuned checkpoint with "
                    "this task's head (bert_tf, TF1 or Hugging Face), config from "
                    "--bert_config_file or beside it; instead of --teacher_dir.")
flags.DEFINE_string("student_config", None, "The student's bert_config.json (e.g. TinyBERT-4: "
                    "4 layers, hidden 312, 12 heads, intermediate 1200).")
flags.DEFINE_integer("student_layers", None, "The student is the teacher's width with this "
                     "many layers, initialised from every k-th teacher layer.")
flags.DEFINE_string("student_init_checkpoint", None, "The student's first weights (e.g. a "
                    "general TinyBERT); any checkpoint --init_checkpoint takes. Default: random, "
                    "or the teacher's layers with --student_layers.")
flags.DEFINE_list("stages", list(STAGES), "Stages in order: intermediate (attention and hidden "
                  "states), prediction (soft labels).")
flags.DEFINE_float("intermediate_epochs", 10.0, "Epochs of the intermediate stage.")
flags.DEFINE_float("intermediate_learning_rate", 5e-5, "Learning rate of the intermediate "
                   "stage (--learning_rate is the prediction stage's).")
flags.DEFINE_float("temperature", 1.0, "Prediction stage: the logits are divided by it.")
flags.DEFINE_float("alpha", 1.0, "Prediction stage: weight of the soft loss; the gold-label "
                   "loss weighs 1 - alpha.")
flags.DEFINE_string("augment_checkpoint", None, "Augment the classifier's training set with "
                    "this pretrained BERT's masked LM (its cls/predictions head); both stages "
                    "train on it.")
flags.DEFINE_integer("augment_copies", 20, "--augment_checkpoint: variants of each training "
                     "example.")
flags.DEFINE_float("augment_probability", 0.4, "--augment_checkpoint: chance that a word "
                   "(a Chinese character) is replaced.")
flags.DEFINE_integer("augment_top_k", 15, "--augment_checkpoint: a replacement is one of the "
                     "masked LM's this many best whole words.")


def main(argv):
    del argv
    options = training_flags.options_from_flags(FLAGS, distillation.DistillationOptions,
                                                stages=tuple(FLAGS.stages))
    with run_lock.output_lock(FLAGS.output_dir):
        distillation.run_distillation(
            FLAGS.task, TASK.options_from_flags(FLAGS),
            training_flags.run_config_from_flags(FLAGS), options,
            training_flags.strategy_from_flags(FLAGS))


def run():
    flags.mark_flags_as_required(["output_dir"])
    cli.run_main(main)


if __name__ == "__main__":
    run()
