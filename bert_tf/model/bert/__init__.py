"""BERT, the default model family: `bert_tf.model.config.BertConfig` and
`bert_tf.model.encoder.BertEncoder`, with google-research/bert's `bert_config.json`."""
