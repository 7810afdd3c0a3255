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
"""

from absl import app, flags

from bert_tf import cli
from bert_tf.checkpoints import model_config, vocab_extension

FLAGS = flags.FLAGS

flags.DEFINE_string("init_checkpoint", None, "Checkpoint whose vocabulary grows (TF1 prefix or "
                    "directory, bert_tf output_dir, or Hugging Face directory).")
flags.DEFINE_string("vocab_file", None, "The checkpoint's vocab.txt.")
flags.DEFINE_string("bert_config_file", None, "The checkpoint's bert_config.json (default: the "
                    "one beside --init_checkpoint, or a Hugging Face directory's config.json).")
flags.DEFINE_list("new_tokens", [], "Tokens to add, comma-separated.")
flags.DEFINE_string("new_tokens_file", None, "Tokens to add, one per line (added after --new_tokens).")
flags.DEFINE_enum("mode", "unused", list(vocab_extension.MODES),
                  "unused: take [unusedN] slots; append: grow the tables.")
flags.DEFINE_string("output_dir", None, "Receives vocab.txt, bert_config.json, bert_model.ckpt.*.")
flags.DEFINE_bool("do_lower_case", True, "How the vocabulary is used; tokens the tokenizer could "
                  "never produce (e.g. upper case when lower-casing) are refused.")
flags.DEFINE_integer("seed", 12345, "Seed for the new embedding rows (--mode=append).")


def main(argv):
    del argv
    tokens = list(FLAGS.new_tokens)
    if FLAGS.new_tokens_file:
        with open(FLAGS.new_tokens_file, encoding="utf-8") as f:
            tokens += [line.strip() for line in f if line.strip()]
    if not tokens:
        raise app.UsageError("give the tokens to add with --new_tokens or --new_tokens_file")
    config = model_config.resolve_model_config(FLAGS.bert_config_file, FLAGS.init_checkpoint)
    result = vocab_extension.extend_vocabulary(
        FLAGS.init_checkpoint, FLAGS.vocab_file, config, tokens, FLAGS.output_dir, mode=FLAGS.mode,
        do_lower_case=FLAGS.do_lower_case, seed=FLAGS.seed)
    for token, token_id in result.added.items():
        print(f"{token_id}\t{token}")
    print(f"vocab_size={result.vocab_size}; skipped (already present): {len(result.already_present)}")


def run():
    flags.mark_flags_as_required(["init_checkpoint", "vocab_file", "output_dir"])
    cli.run_main(main)


if __name__ == "__main__":
    run()
