"""Adds tokens to a BERT checkpoint's vocabulary (new vocab.txt, bert_config.json, checkpoint).

Reuse `[unusedN]` slots (the checkpoint is unchanged):

  python extend_vocab.py --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
    --vocab_file=$BERT_BASE_DIR/vocab.txt --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --new_tokens=covid,mrna --output_dir=/tmp/bert_extended

or grow the embedding table and the masked-LM output bias by one row per token:

  python extend_vocab.py ... --new_tokens_file=my_tokens.txt --mode=append --output_dir=...

--init_checkpoint also accepts a bert_tf output_dir or a Hugging Face directory; --bert_config_file
may be left out when a bert_config.json (or a Hugging Face config.json) lies beside the
checkpoint. Point later runs at --output_dir's three files.

A SentencePiece (ALBERT) checkpoint grows the same way, by appended user-defined pieces:

  python extend_vocab.py --init_checkpoint=$ALBERT_DIR/model.ckpt-best \
    --spm_model_file=$ALBERT_DIR/30k-clean.model --albert_config_file=$ALBERT_DIR/albert_config.json \
    --new_tokens=covid,mrna --mode=append --output_dir=/tmp/albert_extended
"""

from absl import app, flags

from bert_tf import cli, filesystem
from bert_tf.checkpoints import model_config, vocab_extension
from bert_tf.cli import flags as training_flags

FLAGS = flags.FLAGS

# --init_checkpoint (whose vocabulary grows), --vocab_file or --spm_model_file, --bert_config_file
# (alias --albert_config_file), --do_lower_case, --output_dir: the scripts' shared model flags.
training_flags.define_model_flags()
flags.DEFINE_list("new_tokens", [], "Tokens to add, comma-separated.")
flags.DEFINE_string("new_tokens_file", None, "Tokens to add, one per line (added after --new_tokens).")
flags.DEFINE_enum("mode", "unused", list(vocab_extension.MODES),
                  "unused: take [unusedN] slots; append: grow the tables.")
flags.DEFINE_integer("seed", 12345, "Seed for the new embedding rows (--mode=append).")


def main(argv):
    del argv
    tokens = list(FLAGS.new_tokens)
    if FLAGS.new_tokens_file:
        tokens += [line.strip() for line in filesystem.read_text(FLAGS.new_tokens_file).splitlines() if line.strip()]
    if not tokens:
        raise app.UsageError("give the tokens to add with --new_tokens or --new_tokens_file")
    if bool(FLAGS.vocab_file) == bool(FLAGS.spm_model_file):
        raise app.UsageError("give --vocab_file (WordPiece) or --spm_model_file (SentencePiece)")
    config = model_config.resolve_model_config(FLAGS.bert_config_file, FLAGS.init_checkpoint)
    result = vocab_extension.extend_vocabulary(
        FLAGS.init_checkpoint, FLAGS.vocab_file, config, tokens, FLAGS.output_dir, mode=FLAGS.mode,
        do_lower_case=FLAGS.do_lower_case, seed=FLAGS.seed, spm_model_file=FLAGS.spm_model_file)
    for token, token_id in result.added.items():
        print(f"{token_id}\t{token}")
    print(f"vocab_size={result.vocab_size}; skipped (already present): {len(result.already_present)}")


def run():
    flags.mark_flags_as_required(["init_checkpoint", "output_dir"])
    cli.run_main(main)


if __name__ == "__main__":
    run()
