"""Extracts BERT activations of every token (JSON lines, the original's format and flags).

Example (one sentence, or `text_a ||| text_b`, per line):

  echo 'Who was Jim Henson ? ||| Jim Henson was a puppeteer' > /tmp/input.txt
  python extract_features.py --input_file=/tmp/input.txt --output_file=/tmp/output.jsonl \
    --vocab_file=$BERT_BASE_DIR/vocab.txt --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --layers=-1,-2,-3,-4 \
    --max_seq_length=128 --batch_size=8

--export_dir=/tmp/features_model also writes a SavedModel that takes raw text (docs/serving.md);
with --export_runtime=openvino --export_dtype=int8 its encoder runs on OpenVINO in int8, calibrated
on --input_file's lines and compared with float32 on others (the vectors' cosine similarity).

--dtype=bfloat16 computes the encoder in bfloat16 (float32 weights, float32 values written);
--dtype=auto picks it on CPUs with AMX-BF16 (docs/modeling.md).

--init_checkpoint also takes a bert_tf output_dir or a Hugging Face directory;
--spm_model_file replaces --vocab_file for SentencePiece models.
"""

from absl import app, flags, logging

from bert_tf import cli
from bert_tf.serving import openvino, precision
from bert_tf.tasks.features import extraction as features_extraction
from bert_tf.cli import flags as training_flags

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None, "Text, one example per line: `text` or `text_a ||| text_b`.")
flags.DEFINE_string("output_file", None, "JSON lines, one per input line.")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "Comma-separated encoder layers (-1 = last).")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per example after WordPiece; longer are trimmed.")
flags.DEFINE_integer("batch_size", 32, "Examples per encoder call.")
flags.DEFINE_string("export_dir", None, "Also write a SavedModel that takes raw text and returns "
                    "cls/pooled/mean vectors and the --layers per token (docs/serving.md); "
                    "--input_file and --output_file are then optional.")
precision.define_flag(int8=True)
openvino.define_flags()
training_flags.define_dtype_flag(choices=("float32", "bfloat16", "auto"))
training_flags.define_model_flags(output_dir=False)
# The original's TPU flags, accepted so its command lines keep working; this script runs on the
# local default device (GPU if one is visible).
flags.DEFINE_bool("use_tpu", False, "Accepted for compatibility; ignored.")
flags.DEFINE_string("master", None, "Accepted for compatibility; ignored.")
flags.DEFINE_integer("num_tpu_cores", 8, "Accepted for compatibility; ignored.")
flags.DEFINE_bool("use_one_hot_embeddings", False, "Accepted for compatibility; ignored.")


def main(argv):
    del argv
    if not (FLAGS.vocab_file or FLAGS.spm_model_file):
        raise app.UsageError("give --vocab_file (WordPiece) or --spm_model_file (SentencePiece)")
    if not FLAGS.export_dir and not (FLAGS.input_file and FLAGS.output_file):
        raise app.UsageError("give --input_file and --output_file (or --export_dir)")
    if FLAGS.use_tpu:
        logging.warning("--use_tpu is ignored: extract_features runs on the local default device")
    try:
        layers = tuple(int(x) for x in FLAGS.layers.split(","))
    except ValueError:
        raise app.UsageError(f"--layers={FLAGS.layers}: expected comma-separated integers") from None
    options = training_flags.options_from_flags(FLAGS, features_extraction.ExtractionOptions,
                                                layers=layers)
    count = features_extraction.extract_features(options)
    logging.info("wrote features of %d lines to %s", count, FLAGS.output_file)


def run():
    flags.mark_flags_as_required(["init_checkpoint"])
    cli.run_main(main)


if __name__ == "__main__":
    run()
