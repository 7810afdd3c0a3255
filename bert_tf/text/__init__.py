"""Text: the fast tokenizer internals (`fast_basic`, `fast_wordpiece`), vocabulary building,
sentence-pair trimming, `chinese/`, the sample texts; the tokenizers are `tokenizers` (re-exported
under the original's name by the `bert_tf.tokenization` facade).
May import `bert_tf.filesystem` and `bert_tf.errors` only.
"""
