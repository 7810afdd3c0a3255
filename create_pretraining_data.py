"""Creates masked-LM / next-sentence pretraining TFRecords from raw text (the original's flags).

Input: text files, one sentence per line, a blank line between documents; or a fine-tuning
task's own files (`--input_format=tsv|csv|squad|conll`, docs/further_pretraining.md). Example:

    python create_pretraining_data.py \
      --input_file=demo/data/corpus.txt \
      --output_file=/tmp/pretrain.tfrecord \
      --vocab_file=$BERT_BASE_DIR/vocab.txt --do_lower_case=True \
      --max_seq_length=128 --max_predictions_per_seq=20 \
      --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=5 --num_workers=2

`--output_file=out/train.tfrecord@64` writes 64 shards. The same records with Apache Beam
(`pip install -e '.[cpu,beam]'`):

    python create_pretraining_data.py ... --runner=beam \
      --beam_pipeline_options="--runner=DirectRunner --direct_num_workers=2 --direct_running_mode=multi_processing"

See docs/pretraining_data.md.
"""

import logging

from absl import flags

from bert_tf import cli
from bert_tf.cli import run_lock
from bert_tf.tasks.pretraining.beam import BEAM_LOG_OPTIONS, create_pretraining_data_on_beam
from bert_tf.tasks.pretraining.instances import InstanceOptions
from bert_tf.tasks.pretraining.pipeline import PretrainingDataConfig, prepare_run, write_prepared
from bert_tf.tasks.pretraining.task_text import INPUT_FORMATS, TaskTextOptions
from bert_tf.text.chinese.conversion import define_chinese_conversion_flag

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None, "Input raw text file(s): comma-separated globs or directories.")
flags.DEFINE_string("output_file", None, "Output TFRecord file(s), comma-separated (records go round-robin); "
                    "`path@N` means N shards.")
flags.DEFINE_string("vocab_file", None, "The WordPiece vocabulary the BERT model was trained on.")
flags.DEFINE_string("spm_model_file", None, "A SentencePiece model instead of --vocab_file.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (True for uncased models).")
flags.DEFINE_bool("do_whole_word_mask", False, "Mask whole words instead of single word pieces.")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum number of masked LM predictions per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
flags.DEFINE_integer("dupe_factor", 10, "Number of times to duplicate the input data (with different masks). "
                     "Default 1 with --dynamic_masking, which draws new masks every epoch.")
flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
flags.DEFINE_float("short_seq_prob", 0.1, "Probability of creating sequences shorter than the maximum length.")
flags.DEFINE_integer("num_workers", 1, "Worker processes (the output does not depend on it).")
flags.DEFINE_integer("document_buffer_size", 1000, "Documents per block: 'random next' segments are drawn "
                     "from the same block, and memory grows with it (not with the corpus).")
flags.DEFINE_bool("pre_segmented", False, "Input words are separated by spaces (e.g. segmented Chinese): "
                  "whole-word masking masks every token of a word together.")
flags.DEFINE_bool("sentence_order", False, "Sentence-order prediction (ALBERT): label 1 = A and B swapped, "
                  "B always from the same document.")
flags.DEFINE_integer("ngram", 1, "ALBERT's n-gram masking: mask spans of 1..N words (whole-word "
                     "masking) or tokens, P(n) proportional to 1/n; 1 = the original's masking.")
define_chinese_conversion_flag()
flags.DEFINE_enum("chinese_segmenter", None, ["jieba"], "Segment raw Chinese text into words for "
                  "whole-word masking, as --pre_segmented does on segmented text (needs the 'chinese' extra).")
flags.DEFINE_bool("dynamic_masking", False, "Write unmasked instances (a smaller, different record "
                  "format); run_pretraining.py draws new masks each time it reads them. --dupe_factor is 1 "
                  "unless given.")
flags.DEFINE_enum("input_format", "text", list(INPUT_FORMATS), "text: one sentence per line, a "
                  "blank line between documents; or a fine-tuning task's own files: tsv/csv (a "
                  "document per row, --text_columns), squad (a document per article, its "
                  "paragraph contexts), conll (a document per -DOCSTART- block, its sentences).")
flags.DEFINE_list("text_columns", None, "--input_format=tsv/csv: the text columns, 0-based indices "
                  "or header names (as run_classifier.py's custom task).")
flags.DEFINE_bool("has_header", True, "--input_format=tsv/csv: the files start with a header row.")
flags.DEFINE_bool("split_sentences", False, "Task formats: cut each cell, context or sentence "
                  "after ., ! or ? followed by a capital letter (and after 。！？).")
flags.DEFINE_bool("progress", True, "Print progress to stderr.")
flags.DEFINE_enum("runner", "local", ["local", "beam"], "local: worker processes on this machine; beam: an "
                  "Apache Beam pipeline (DirectRunner, Dataflow, Flink, Spark), the same records.")
flags.DEFINE_string("beam_pipeline_options", "", "With --runner=beam: Beam's own options, e.g. "
                    "\"--runner=DataflowRunner --project=P --region=R --temp_location=gs://B/tmp\".")


def main(argv):
    del argv
    # The masks differ every epoch already: ten copies of the corpus would only repeat it.
    dupe_default = FLAGS.dynamic_masking and not FLAGS["dupe_factor"].present
    config = PretrainingDataConfig(
        input_file=FLAGS.input_file, output_file=FLAGS.output_file, vocab_file=FLAGS.vocab_file,
        spm_model_file=FLAGS.spm_model_file, do_lower_case=FLAGS.do_lower_case,
        instance=InstanceOptions(
            max_seq_length=FLAGS.max_seq_length, max_predictions_per_seq=FLAGS.max_predictions_per_seq,
            masked_lm_prob=FLAGS.masked_lm_prob, short_seq_prob=FLAGS.short_seq_prob,
            do_whole_word_mask=FLAGS.do_whole_word_mask, sentence_order=FLAGS.sentence_order,
            ngram=FLAGS.ngram),
        random_seed=FLAGS.random_seed, dupe_factor=1 if dupe_default else FLAGS.dupe_factor,
        num_workers=FLAGS.num_workers,
        document_buffer_size=FLAGS.document_buffer_size, pre_segmented=FLAGS.pre_segmented,
        progress=FLAGS.progress, chinese_conversion=FLAGS.chinese_conversion,
        chinese_segmenter=FLAGS.chinese_segmenter, dynamic_masking=FLAGS.dynamic_masking,
        task_text=TaskTextOptions(input_format=FLAGS.input_format,
                                  text_columns=tuple(FLAGS.text_columns or ()),
                                  has_header=FLAGS.has_header, split_sentences=FLAGS.split_sentences))
    if FLAGS.runner == "beam":
        # Beam's INFO lines only when asked for: --verbosity above 0, or Beam's own log options.
        quiet = FLAGS.verbosity <= 0 and not any(
            option in FLAGS.beam_pipeline_options for option in BEAM_LOG_OPTIONS)
        summary = create_pretraining_data_on_beam(config, FLAGS.beam_pipeline_options,
                                                  logging.WARNING if quiet else None)
    else:
        prepared = prepare_run(config)  # the checks first: bad input leaves no lock file
        with run_lock.output_file_lock(prepared.first_output, "--output_file"):
            summary = write_prepared(prepared)
    lines = summary.lines()
    if dupe_default:
        lines.append("dupe_factor: 1 (--dynamic_masking without --dupe_factor; pass --dupe_factor=N for N copies)")
    print("\n".join(lines))


def run():
    flags.mark_flags_as_required(["input_file", "output_file"])
    cli.run_main(main)


if __name__ == "__main__":
    run()
