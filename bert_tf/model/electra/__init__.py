"""ELECTRA (Clark et al., 2020) on the BERT toolkit: the discriminator is the one BertEncoder with
an embedding projection where the embedding width differs from the hidden size and no pooler
([CLS]'s vector is the pooled output), with google-research/electra's checkpoint names
(declared in `names.py`). May import what `bert_tf.model` may.
"""
