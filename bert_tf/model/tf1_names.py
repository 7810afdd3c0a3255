"""The original's TF1 names of the encoder's variables, as attribute paths on a `BertEncoder`.

One table, read by the checkpoint name map (bert_tf.checkpoints.name_map, every import and
export) and by `modeling.BertModel` (`modeling.variable_name`), so that both name a variable
alike.
"""

from __future__ import annotations

# Under "bert/" → attribute paths on a BertEncoder.
EMBEDDING_NAMES = {
    "embeddings/word_embeddings": "embeddings.word_embeddings",
    "embeddings/token_type_embeddings": "embeddings.token_type_embeddings",
    "embeddings/position_embeddings": "embeddings.position_embeddings",
    "embeddings/LayerNorm/gamma": "embeddings.layer_norm.gamma",
    "embeddings/LayerNorm/beta": "embeddings.layer_norm.beta",
}
LAYER_NAMES = {  # under "bert/encoder/layer_{i}/" → under transformer_layers[i]
    "attention/self/query/kernel": "query.kernel",
    "attention/self/query/bias": "query.bias",
    "attention/self/key/kernel": "key.kernel",
    "attention/self/key/bias": "key.bias",
    "attention/self/value/kernel": "value.kernel",
    "attention/self/value/bias": "value.bias",
    "attention/output/dense/kernel": "attention_output.kernel",
    "attention/output/dense/bias": "attention_output.bias",
    "attention/output/LayerNorm/gamma": "attention_layer_norm.gamma",
    "attention/output/LayerNorm/beta": "attention_layer_norm.beta",
    "intermediate/dense/kernel": "intermediate.kernel",
    "intermediate/dense/bias": "intermediate.bias",
    "output/dense/kernel": "output_dense.kernel",
    "output/dense/bias": "output_dense.bias",
    "output/LayerNorm/gamma": "output_layer_norm.gamma",
    "output/LayerNorm/beta": "output_layer_norm.beta",
}
POOLER_NAMES = {"pooler/dense/kernel": "pooler.kernel", "pooler/dense/bias": "pooler.bias"}


def bert_encoder_names(num_layers: int) -> dict[str, str]:
    """TF1 name → attribute path for every variable of a BertEncoder of `num_layers` blocks, in
    the original's order (embeddings, blocks, pooler)."""
    names = {"bert/" + k: v for k, v in EMBEDDING_NAMES.items()}
    for i in range(num_layers):
        names.update({f"bert/encoder/layer_{i}/{k}": f"transformer_layers[{i}].{v}"
                      for k, v in LAYER_NAMES.items()})
    names.update({"bert/" + k: v for k, v in POOLER_NAMES.items()})
    return names


def attribute(root, path: str):
    """Follows "a.b[3].c" from root."""
    for part in path.split("."):
        name, _, index = part.partition("[")
        root = getattr(root, name)
        if index:
            root = root[int(index[:-1])]
    return root
