"""ALBERT (Lan et al., 2019) on the BERT toolkit: factorised embeddings (E → H) and Transformer
blocks shared across layers, with google-research/albert's config keys (its TF1 checkpoint names
are declared in `names.py`). May import what `bert_tf.model` may.

The Transformer block is `bert_tf.model.encoder.TransformerBlock`, and the forward pass is
`BertEncoder.call`: ALBERT only changes which block serves which layer and what the embeddings
layer outputs.
"""
