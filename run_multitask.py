"""Fine-tunes one BERT encoder on several tasks at once (classifier and NER tasks), one head per
task, then evaluates, predicts and exports each task as its own script would; --refine then
fine-tunes each task alone from the shared model (MT-DNN's second stage). Example:

  python run_multitask.py --tasks=tasks.json --task_sampling=annealed \
    --do_train --do_eval --do_predict --refine \
    --vocab_file=$BERT_BASE_DIR/vocab.txt --init_checkpoint=$BERT_BASE_DIR \
    --max_seq_length=128 --train_batch_size=32 --learning_rate=5e-5 --num_train_epochs=3 \
    --output_dir=/tmp/multitask --export_dir=/tmp/multitask_exports

tasks.json lists the tasks (docs/multitask.md):

  {"tasks": [{"name": "sst", "type": "classifier", "task_name": "sst-2", "data_dir": "SST-2"},
             {"name": "ner", "type": "ner", "data_dir": "conll2003", "weight": 0.5}]}
"""

from absl import flags

from bert_tf import cli
from bert_tf.cli import flags as training_flags, run_lock
from bert_tf.tasks import finetuning
from bert_tf.workflows.multitask import sampling
from bert_tf.workflows.multitask.run import MultitaskOptions, run_multitask

FLAGS = flags.FLAGS

flags.DEFINE_string("tasks", None, "tasks.json: the tasks, each with its data, labels and weight.")
flags.DEFINE_enum("task_sampling", "proportional", list(sampling.SAMPLINGS), "Which task each "
                  "batch comes from: proportional (p ∝ examples), uniform, or annealed (p ∝ "
                  "examples^α, α from 1 to 0.2 over training).")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per example, the same for every task.")
flags.DEFINE_string("export_dir", None, "Write one raw-text SavedModel per task here, in "
                    "<export_dir>/<task>/.")
flags.DEFINE_bool("refine", False, "Then fine-tune each task alone from the multi-task model "
                  "(<output_dir>/<task>/refined/), with --num_train_epochs.")
training_flags.define_model_flags()
training_flags.define_finetuning_flags()
training_flags.define_selection_flags("mean: the mean of the tasks' main metrics; or "
                                      "<task>_<key>, e.g. sst_eval_accuracy")
training_flags.define_flags()


def main(argv):
    del argv
    options = MultitaskOptions(
        tasks_file=FLAGS.tasks,
        shared=training_flags.options_from_flags(FLAGS, finetuning.FinetuningOptions),
        task_sampling=FLAGS.task_sampling, do_eval=FLAGS.do_eval, export_dir=FLAGS.export_dir,
        refine=FLAGS.refine)
    with run_lock.output_lock(FLAGS.output_dir):
        run_multitask(options, training_flags.run_config_from_flags(FLAGS),
                      training_flags.strategy_from_flags(FLAGS))


def run():
    flags.mark_flags_as_required(["tasks", "output_dir"])
    cli.run_main(main)


if __name__ == "__main__":
    run()
