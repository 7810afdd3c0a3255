"""The model family: `config` (BertConfig, the original's bert_config.json), `inputs` (MODEL_INPUTS,
the encoder's three inputs), `heads`, `losses`, `models` (the encoder with a task's head), `crf`
(linear-chain CRF and constrained decoding as TensorFlow ops), `names` (the one way checkpoint
names are declared and translated), the families (`family`, `families`, and a folder each: `bert/`,
`albert/`, `electra/`) and `compat`/`compat_helpers` (the original modeling.py's BertModel and
helpers, which the `bert_tf.modeling` facade re-exports); the encoder itself is `encoder`
(BertEncoder).
May import `bert_tf.errors` only (not checkpoints, records, training, tasks).
"""
