"""AlbertEncoder: BertEncoder's forward pass over ALBERT's factorised embeddings and shared blocks.

Variables by attribute path on an `AlbertEncoder` named `encoder` (E = embedding_size; G =
num_hidden_groups; K = inner_group_num; TF1 names under `bert/` as google-research/albert writes
them, `.../` abbreviating `encoder/transformer/group_{g}/inner_group_{k}/`):

  attribute path                                     shape       original TF1 name
  embeddings.word_embeddings                         [V,E]       embeddings/word_embeddings
  embeddings.token_type_embeddings                   [T,E]       embeddings/token_type_embeddings
  embeddings.position_embeddings                     [P,E]       embeddings/position_embeddings
  embeddings.layer_norm.{gamma,beta}                 [E]         embeddings/LayerNorm/*
  embeddings.embedding_hidden_mapping_in.{kernel,bias}  [E,H],[H]  encoder/embedding_hidden_mapping_in/*
  group_{g}.inner_group_{k}.query.{kernel,bias}      [H,H],[H]   .../attention_1/self/query/*
  (key, value likewise)                                          .../attention_1/self/{key,value}/*
  group_{g}.inner_group_{k}.attention_output.*       [H,H],[H]   .../attention_1/output/dense/*
  group_{g}.inner_group_{k}.attention_layer_norm.*   [H]         .../LayerNorm/*
  group_{g}.inner_group_{k}.intermediate.*           [H,I],[I]   .../ffn_1/intermediate/dense/*
  group_{g}.inner_group_{k}.output_dense.*           [I,H],[H]   .../ffn_1/intermediate/output/dense/*
  group_{g}.inner_group_{k}.output_layer_norm.*      [H]         .../LayerNorm_1/*
  pooler.{kernel,bias}                               [H,H],[H]   pooler/dense/*

Each `inner_group_{k}` is a `bert_tf.model.encoder.TransformerBlock`, unchanged: google-research/
albert's attention → add & LayerNorm → FFN → add & LayerNorm_1 block is BERT's post-LN block.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from bert_tf.model.albert.config import AlbertConfig
from bert_tf.model.encoder import BertEncoder, TokenLayout, TransformerBlock


class AlbertLayerGroup(keras.layers.Layer):
    """One group: `inner_group_num` TransformerBlocks (`inner_group_0` …) applied in order.

    Takes the arguments of TransformerBlock.call; `query_rows` goes to the last block only (the
    earlier ones compute every row, which the last one's keys and values need).
    """

    def __init__(self, config: AlbertConfig, **kwargs):
        super().__init__(**kwargs)
        for k in range(config.inner_group_num):
            setattr(self, f"inner_group_{k}",
                    TransformerBlock(config, name=f"inner_group_{k}", dtype=self.dtype_policy))
        self.inner_group_num = config.inner_group_num
        self.built = True

    @property
    def blocks(self) -> list[TransformerBlock]:
        return [getattr(self, f"inner_group_{k}") for k in range(self.inner_group_num)]

    def call(self, x: tf.Tensor, layout: TokenLayout, training=False,
             query_rows: tf.Tensor | None = None) -> tf.Tensor:
        blocks = self.blocks
        for block in blocks[:-1]:
            x = block(x, layout=layout, training=training)
        return blocks[-1](x, layout=layout, training=training, query_rows=query_rows)


class AlbertEncoder(BertEncoder):
    """The ALBERT encoder: the inputs and outputs of BertEncoder (`encoder_outputs` holds one
    [B,S,H] tensor per layer, L in all) and its `call`, unchanged.

    `transformer_layers` lists what layer i runs: the block of group `group_of_layer(i)` (the
    same object for every layer of a group), or the group itself when it holds several blocks.
    """

    def _make_blocks(self, config: AlbertConfig, policy) -> None:
        """G shared groups `group_{g}`, not L blocks."""
        for g in range(config.num_hidden_groups):
            setattr(self, f"group_{g}", AlbertLayerGroup(config, name=f"group_{g}", dtype=policy))

    @property
    def groups(self) -> list[AlbertLayerGroup]:
        """The G groups in order (the attributes `group_0` … `group_{G-1}`)."""
        return [getattr(self, f"group_{g}") for g in range(self.config.num_hidden_groups)]

    @property
    def transformer_layers(self) -> list[TransformerBlock | AlbertLayerGroup]:
        """What each of the L layers runs, in order (shared objects repeat)."""
        groups = self.groups
        layers = [groups[self.config.group_of_layer(i)]
                  for i in range(self.config.num_hidden_layers)]
        if self.config.inner_group_num == 1:  # the block itself, so callers see TransformerBlocks
            layers = [group.inner_group_0 for group in layers]
        return layers

