"""The models: `config` (BertConfig, the original's bert_config.json), `encoder` (BertEncoder),
`heads`, `losses`, `models` (the encoder with a task's head), `crf` (linear-chain CRF and
constrained decoding as TensorFlow ops), `tf1_names` (the original's variable names) and
`compat`/`compat_helpers` (the original modeling.py's BertModel and helpers, which the
`bert_tf.modeling` facade re-exports). The families live in `bert/`, `albert/` and `electra/`,
each declaring itself in its `family.py` (`family.ModelFamily`), registered once in `families`.
May import `bert_tf.errors` only (not checkpoints, records, training, tasks).
"""
