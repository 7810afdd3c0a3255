"""The model family: `config` (BertConfig, the original's bert_config.json), `heads`, `losses`,
`models` (the encoder with a task's head), `crf` (linear-chain CRF and constrained decoding as
TensorFlow ops), `albert/`, `tf1_names` (the original's variable names) and
`compat`/`compat_helpers` (the original modeling.py's BertModel and helpers, which
`bert_tf.modeling` re-exports); the encoder itself is `bert_tf.modeling`.
May import `bert_tf.modeling` and `bert_tf.errors` only (not checkpoints, records, training, tasks).
"""
