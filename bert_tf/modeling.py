"""The original modeling.py's names, for code written against it (`from bert_tf import modeling`).

Nothing is implemented here. The encoder is `bert_tf.model.encoder` (`BertEncoder`, the
Transformer block, the activations); the original's `BertModel`, `BertConfig` and checkpoint
helpers are `bert_tf.model.compat`, its tensor helpers `bert_tf.model.compat_helpers`
(docs/migrating.md).
"""

from bert_tf.model.compat import (BertConfig, BertModel, get_assignment_map_from_checkpoint,
                                  init_from_checkpoint, reset_variable_scopes, variable_name)
from bert_tf.model.compat_helpers import (assert_rank, create_attention_mask_from_input_mask,
                                          create_initializer, dropout, embedding_lookup,
                                          embedding_postprocessor, get_shape_list, layer_norm,
                                          layer_norm_and_dropout, reshape_from_matrix,
                                          reshape_to_matrix)
from bert_tf.model.encoder import BertEncoder, gelu, gelu_exact, get_activation

__all__ = [
    "BertConfig", "BertEncoder", "BertModel", "assert_rank",
    "create_attention_mask_from_input_mask", "create_initializer", "dropout", "embedding_lookup",
    "embedding_postprocessor", "gelu", "gelu_exact", "get_activation",
    "get_assignment_map_from_checkpoint", "get_shape_list", "init_from_checkpoint", "layer_norm",
    "layer_norm_and_dropout", "reset_variable_scopes", "reshape_from_matrix", "reshape_to_matrix",
    "variable_name",
]
