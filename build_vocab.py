"""Builds a WordPiece vocab.txt in the original's layout (and optionally a SentencePiece model)
from raw text, then prints its [UNK] rate and coverage on that text. Example:

    python build_vocab.py \
      --input_file=demo/data/corpus.txt \
      --output_file=/tmp/vocab/vocab.txt \
      --vocab_size=8000 --do_lower_case=True --num_unused=99 --min_frequency=2 \
      --spm_model_prefix=/tmp/vocab/spm

See docs/tokenization.md.
"""

from absl import flags

from bert_tf import cli
from bert_tf.text.chinese.conversion import define_chinese_conversion_flag
from bert_tf.text.vocab_builder import VocabBuildConfig, build_vocab, summary_lines

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None, "Input raw text file(s): comma-separated globs or directories.")
flags.DEFINE_string("output_file", None, "Where to write vocab.txt.")
flags.DEFINE_integer("vocab_size", 30522, "Entries in vocab.txt, special tokens included.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the text first (for uncased models).")
flags.DEFINE_integer("num_unused", 99, "[unusedN] placeholders after [PAD] (99 gives [UNK]=100, "
                     "[CLS]=101, [SEP]=102, [MASK]=103 as in the released vocabularies).")
flags.DEFINE_integer("min_frequency", 2, "A pair of pieces is merged only if it occurs this often.")
flags.DEFINE_string("spm_model_prefix", None, "Also train a SentencePiece model of the same size: "
                    "writes <prefix>.model and <prefix>.vocab (use with --spm_model_file).")
flags.DEFINE_float("spm_character_coverage", 0.99995, "Share of the text's characters the SentencePiece "
                   "model keeps (ALBERT's recipe; SentencePiece's own default 0.9995 makes rarer "
                   "symbols such as < > { } ~ $ % [UNK]). 1.0 keeps every character.")
define_chinese_conversion_flag()


def main(argv):
    del argv
    config = VocabBuildConfig(
        input_file=FLAGS.input_file, output_file=FLAGS.output_file, vocab_size=FLAGS.vocab_size,
        do_lower_case=FLAGS.do_lower_case, num_unused=FLAGS.num_unused,
        min_frequency=FLAGS.min_frequency, spm_model_prefix=FLAGS.spm_model_prefix,
        spm_character_coverage=FLAGS.spm_character_coverage, chinese_conversion=FLAGS.chinese_conversion)
    print("\n".join(summary_lines(build_vocab(config))))


def run():
    flags.mark_flags_as_required(["input_file", "output_file"])
    cli.run_main(main)


if __name__ == "__main__":
    run()
