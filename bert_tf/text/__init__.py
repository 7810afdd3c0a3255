"""Text: the fast tokenizer internals (`fast_basic`, `fast_wordpiece`), vocabulary building,
sentence-pair trimming, `chinese/`, the sample texts; the tokenizers are `bert_tf.tokenization`.
May import `bert_tf.tokenization`, `bert_tf.filesystem` and `bert_tf.errors` only.
"""
