"""The model family: `config` (BertConfig, the original's bert_config.json), `heads`, `losses`,
`models` (the encoder with a task's head) and `albert/`; the encoder itself is `bert_tf.modeling`.
May import `bert_tf.modeling` and `bert_tf.errors` only (not checkpoints, records, training, tasks).
"""
