"""Runs a fine-tuning command over a grid of hyper-parameters and picks the best on the dev set
(the BERT paper's advice: batch 16/32, learning rate 5e-5/3e-5/2e-5, 2/3/4 epochs, "run an
exhaustive search ... and choose the model that performs best on the development set").
Example (MRPC, the paper's 18 runs, the fine-tuning command after --):

  python search.py --output_dir=/tmp/mrpc_search -- \
    python run_classifier.py --task_name=MRPC --do_train --do_eval \
    --data_dir=$GLUE_DIR/MRPC --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --max_seq_length=128

Each trial runs in <output_dir>/<trial>; trials.jsonl and best.json record the figures, and a
table is printed at the end. Every trial's flags are checked by the script's own definitions
before the first one runs. The trials die with the search (SIGTERM: they save the step in
flight); running the same command again resumes (docs/search.md).
"""

from absl import flags

from bert_tf import cli
from bert_tf.cli import run_lock
from bert_tf.workflows.search import grid

FLAGS = flags.FLAGS

flags.DEFINE_string("output_dir", None, "Where each trial's run directory, trials.jsonl and "
                    "best.json go.")
flags.DEFINE_string("grid", grid.PAPER_GRID, "Flags of the fine-tuning command and their "
                    "values: flag=v1,v2;flag=v1,... (default: the BERT paper's 18 runs).")
flags.DEFINE_integer("seeds", 1, "Runs of each grid point, with --seed = the command's seed "
                     "(12345 without one) + 0, 1, ...")


def main(argv):
    from bert_tf.workflows.search import script_flags, trials

    options = trials.SearchOptions(command=argv[1:], output_dir=FLAGS.output_dir,
                                   grid=FLAGS.grid, seeds=FLAGS.seeds)
    try:  # before the lock: a bad command or grid leaves nothing in --output_dir
        planned = trials.plan_search(options, FLAGS)
    except script_flags.TrialFlagError as error:
        cli.fail(str(error), cli.FLAG_ERROR_STATUS)
    with run_lock.output_lock(FLAGS.output_dir):
        result = trials.run_search(options, planned)
    failed = [record for record in result["trials"] if record["status"] != "done"]
    if failed:
        cli.fail(trials.failure_message(failed))


def run():
    flags.mark_flags_as_required(["output_dir"])
    cli.run_main(main)


if __name__ == "__main__":
    run()
