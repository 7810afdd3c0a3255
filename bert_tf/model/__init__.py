"""The model family: `config` (BertConfig, the original's bert_config.json), `heads`, `losses`,
`models` (the encoder with a task's head), `crf` (linear-chain CRF and constrained decoding as
TensorFlow ops), `albert/`, `tf1_names` (the original's variable names) and
`compat`/`compat_helpers` (the original modeling.py's BertModel and helpers, which the
`bert_tf.modeling` facade re-exports); the encoder itself is `encoder` (BertEncoder).
May import `bert_tf.errors` only (not checkpoints, records, training, tasks).
"""
