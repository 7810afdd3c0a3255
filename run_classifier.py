"""Fine-tunes BERT on a sentence (pair) classification or regression task: GLUE, XNLI, your files.

Same flags and defaults as the original run_classifier.py, plus distribution/precision flags,
--spm_model_file, the custom-task flags and --export_dir. Example (MRPC from GLUE):

  python run_classifier.py --task_name=MRPC --do_train --do_eval --do_predict \
    --data_dir=$GLUE_DIR/MRPC --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --max_seq_length=128 \
    --train_batch_size=32 --learning_rate=2e-5 --num_train_epochs=3.0 \
    --output_dir=/tmp/mrpc_output --export_dir=/tmp/mrpc_output/saved_model

Your own files: --task_name=custom with --task_spec=spec.json, or --text_a_column=sentence
--label_column=label [--text_b_column=...] (docs/classifier.md). Your own DataProcessor class
written for the original: --processor=my_processors.py:MyProcessor (docs/migrating.md).
"""

import sys

from absl import flags

from bert_tf import cli
from bert_tf.cli import flags as training_flags, run_lock
from bert_tf.tasks.classifier import flags as classifier_flags
from bert_tf.tasks.classifier.family import CLASSIFIER
# The original's names for processors written against it (`from run_classifier import ...`).
from bert_tf.tasks.classifier.compat import DataProcessor, InputExample  # noqa: F401

FLAGS = flags.FLAGS

CLASSIFIER.define_flags()
flags.adopt_module_key_flags(classifier_flags)  # --help lists them


def main(argv):
    del argv
    options = CLASSIFIER.options_from_flags(FLAGS)
    with run_lock.output_lock(FLAGS.output_dir):
        CLASSIFIER.run(options, training_flags.run_config_from_flags(FLAGS),
                       training_flags.strategy_from_flags(FLAGS))


def run():
    flags.mark_flags_as_required(["data_dir", "output_dir"])
    cli.run_main(main)


if __name__ == "__main__":
    # A processor module's `import run_classifier` then finds this script, not a second copy
    # (which would define every flag again).
    sys.modules.setdefault("run_classifier", sys.modules[__name__])
    run()
