"""Checkpoints: the one TF1 name map (`name_map`), formats and discovery (`files`), Hugging Face
weights (names from each model family's table), the config that goes with a checkpoint
(`model_config`), vocab extension.
May import the model (`bert_tf.model`), text and infrastructure; not training.
"""
