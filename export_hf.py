"""Writes any checkpoint bert_tf reads as a Hugging Face directory that transformers loads.

  python export_hf.py --init_checkpoint=/tmp/mrpc_output --head=classifier \
    --vocab_file=$BERT_BASE_DIR/vocab.txt --max_seq_length=128 --export_hf_dir=/tmp/mrpc_hf

--init_checkpoint: a bert_tf run directory (its label_list.txt gives the labels), Google's TF1
layout or ALBERT's (the config beside it, or --bert_config_file), or a Hugging Face directory.
--head: pretraining (BertForPreTraining), classifier (BertForSequenceClassification), tagger
(BertForTokenClassification; --crf writes crf_transitions.json too), squad
(BertForQuestionAnswering) or encoder (BertModel); Albert* for an ALBERT config. See
docs/checkpoints.md for loading the result with transformers.
"""

from absl import flags

from bert_tf import cli
from bert_tf.checkpoints import hf_export
from bert_tf.tasks import families
from bert_tf.cli import flags as training_flags

FLAGS = flags.FLAGS

training_flags.define_model_flags(output_dir=False)
training_flags.define_hf_export_flags()
HEADS = families.export_heads()
flags.DEFINE_enum("head", "pretraining", list(HEADS), "Which of the checkpoint's heads "
                  "to write with the encoder.")
flags.DEFINE_list("label_list", None, "The classifier's or tagger's labels in output order "
                  "(default: label_list.txt beside the checkpoint, or a config.json's id2label).")
flags.DEFINE_enum("problem_type", None, list(hf_export.PROBLEM_TYPES), "--head=classifier: "
                  "default single_label_classification.")
flags.DEFINE_bool("crf", False, "--head=tagger: the tagger was trained with --crf.")
flags.DEFINE_integer("max_seq_length", 512, "The tokenizer's model_max_length (the "
                     "--max_seq_length the model was trained with).")


def main(argv):
    del argv
    tokenizer = hf_export.TokenizerFiles(FLAGS.vocab_file, FLAGS.spm_model_file,
                                         FLAGS.do_lower_case, FLAGS.max_seq_length)
    directory = hf_export.export_checkpoint(
        FLAGS.init_checkpoint, FLAGS.export_hf_dir, tokenizer, FLAGS.head, FLAGS.label_list,
        FLAGS.problem_type, FLAGS.bert_config_file, FLAGS.crf, FLAGS.export_hf_dtype, HEADS)
    print(directory)


def run():
    flags.mark_flags_as_required(["init_checkpoint", "export_hf_dir"])
    cli.run_main(main)


if __name__ == "__main__":
    run()
