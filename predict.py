"""Runs an exported model (run_classifier.py / run_ner.py / run_squad.py / extract_features.py
--export_dir) on raw text: one JSON line of outputs per input line. Example:

    python predict.py \
      --export_dir=/tmp/mrpc_output/saved_model \
      --input_file=pairs.tsv \
      --output_file=/tmp/predictions.jsonl --batch_size=32

`pairs.tsv` has a header row naming the inputs (`text_a<TAB>text_b`); plain lines feed a
single-input signature (`text_a`, `text`), `.jsonl` lines are objects with the inputs by name.
See docs/serving.md.
"""

import sys

from absl import flags

from bert_tf import cli

FLAGS = flags.FLAGS

flags.DEFINE_string("export_dir", None, "The SavedModel directory written by --export_dir.")
flags.DEFINE_string("input_file", None, "Raw text: lines, .tsv with a header row, or .jsonl.")
flags.DEFINE_string("output_file", None, "Where to write the JSON lines (written whole at the "
                    "end); standard output when not given.")
flags.DEFINE_enum("input_format", None, ["lines", "tsv", "jsonl"],
                  "The input's format; by default from its extension (.tsv, .jsonl), else lines.")
flags.DEFINE_string("signature", "serving_default", "The signature to run.")
flags.DEFINE_integer("batch_size", 32, "Examples per call of the model.")


def main(argv):
    del argv
    from bert_tf.serving import predict

    options = dict(input_format=FLAGS.input_format, signature=FLAGS.signature,
                   batch_size=FLAGS.batch_size)
    if FLAGS.output_file:
        count = predict.predict_to_file(FLAGS.export_dir, FLAGS.input_file, FLAGS.output_file, **options)
        print(f"wrote {count} predictions to {FLAGS.output_file}", file=sys.stderr)
    else:
        predict.predict_file(FLAGS.export_dir, FLAGS.input_file, sys.stdout, **options)


def run():
    flags.mark_flags_as_required(["export_dir", "input_file"])
    cli.run_main(main)


if __name__ == "__main__":
    run()
