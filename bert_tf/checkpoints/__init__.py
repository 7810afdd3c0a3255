"""Checkpoints: the one TF1 name map (`name_map`), formats and discovery (`files`), Hugging Face
weights, ALBERT names, the config that goes with a checkpoint (`model_config`), vocab extension.
May import the model (`bert_tf.model`), text and infrastructure; not training.
"""
