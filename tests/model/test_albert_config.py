"""AlbertConfig (google-research/albert's keys), the one config dispatcher, the Hugging Face
translation, the --albert_config_file alias, and which shared block each layer runs."""

import json

import numpy as np
import pytest
import tensorflow as tf
from absl import flags

from bert_tf.checkpoints.model_config import load_model_config
from bert_tf.model.albert.config import AlbertConfig, albert_config_from_hf
from bert_tf.model.albert.modeling import AlbertEncoder, AlbertLayerGroup
from bert_tf.model.config import BertConfig, ConfigError
from bert_tf.model.encoder import TokenLayout, TransformerBlock
from bert_tf.cli import flags as training_flags

# google-research/albert's albert_base v2 albert_config.json, as released.
ALBERT_BASE_RELEASE = {
    "attention_probs_dropout_prob": 0, "hidden_act": "gelu", "hidden_dropout_prob": 0,
    "embedding_size": 128, "hidden_size": 768, "initializer_range": 0.02,
    "intermediate_size": 3072, "max_position_embeddings": 512, "num_attention_heads": 12,
    "num_hidden_layers": 12, "num_hidden_groups": 1, "net_structure_type": 0, "gap_size": 0,
    "num_memory_blocks": 0, "inner_group_num": 1, "down_scale_factor": 1, "type_vocab_size": 2,
    "vocab_size": 30000,
}
TINY = dict(vocab_size=99, embedding_size=16, hidden_size=32, num_attention_heads=4,
            intermediate_size=37, max_position_embeddings=64, type_vocab_size=2)


def test_release_config_loads_and_round_trips(tmp_path):
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps({**ALBERT_BASE_RELEASE, "some_future_key": "kept"}))
    config = load_model_config(path)
    assert isinstance(config, AlbertConfig)
    assert (config.embedding_size, config.embedding_width, config.hidden_size) == (128, 128, 768)
    assert config.extra == {"some_future_key": "kept"}
    out = tmp_path / "out.json"
    config.to_json_file(out)
    assert json.loads(out.read_text()) == {**ALBERT_BASE_RELEASE, "some_future_key": "kept"}
    assert load_model_config(out) == config


def test_bert_configs_stay_bert(tmp_path):
    path = tmp_path / "bert_config.json"
    BertConfig(vocab_size=99, hidden_size=32, num_attention_heads=4).to_json_file(path)
    config = load_model_config(path)
    assert type(config) is BertConfig and config.embedding_width == 32


@pytest.mark.parametrize("changes, message", [
    ({"net_structure_type": 1}, "net_structure_type=1 is not supported"),
    ({"gap_size": 2}, "gap_size=2 is not supported"),
    ({"down_scale_factor": 2}, "down_scale_factor=2 is not supported"),
    ({"num_memory_blocks": 1}, "num_memory_blocks=1 is not supported"),
    ({"num_hidden_groups": 13}, r"num_hidden_groups \(13\) must not exceed num_hidden_layers"),
    ({"embedding_size": 0}, "embedding_size must be a positive integer"),
    ({"inner_group_num": 1.5}, "inner_group_num must be a positive integer"),
    ({"hidden_size": 30}, "divisible"),  # BERT's own checks still apply
])
def test_unsupported_values_name_the_file_and_key(tmp_path, changes, message):
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps({**ALBERT_BASE_RELEASE, **changes}))
    with pytest.raises(ConfigError, match=f"albert_config.json: .*{message}"):
        load_model_config(path)


@pytest.mark.parametrize("hf_act, ours", [("gelu_new", "gelu"), ("gelu", "gelu_exact"),
                                          ("relu", "relu")])
def test_hf_config_translation(hf_act, ours):
    values = {"model_type": "albert", "vocab_size": 30000, "embedding_size": 128,
              "hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 3072,
              "num_hidden_groups": 1, "inner_group_num": 1, "hidden_act": hf_act,
              "layer_norm_eps": 1e-12, "classifier_dropout_prob": 0.1, "pad_token_id": 0}
    config = albert_config_from_hf(values)
    assert config.hidden_act == ours and config.embedding_size == 128 and config.extra == {}
    assert albert_config_from_hf({**values, "layer_norm_eps": 1e-5}).layer_norm_eps == 1e-5
    with pytest.raises(ConfigError, match="x/config.json: layer_norm_eps must be positive"):
        albert_config_from_hf({**values, "layer_norm_eps": 0}, "x/config.json")


def _parse(argv):
    values = flags.FlagValues()
    training_flags.define_model_flags(flag_values=values)
    values(["script", *argv])
    return values


def test_albert_config_file_is_an_alias():
    assert _parse(["--albert_config_file=a.json"]).bert_config_file == "a.json"
    assert _parse(["--bert_config_file=a.json", "--albert_config_file=a.json"]).bert_config_file \
        == "a.json"
    for argv in (["--bert_config_file=b.json", "--albert_config_file=a.json"],
                 ["--albert_config_file=a.json", "--bert_config_file=b.json"]):
        with pytest.raises(flags.IllegalFlagValueError, match="differ: give one of them"):
            _parse(argv)


@pytest.mark.parametrize("layers, groups, expected", [
    (4, 1, [0, 0, 0, 0]), (4, 2, [0, 0, 1, 1]), (6, 4, [0, 0, 1, 2, 2, 3]), (3, 3, [0, 1, 2])])
def test_layers_run_google_research_albert_groups(layers, groups, expected):
    config = AlbertConfig(**TINY, num_hidden_layers=layers, num_hidden_groups=groups)
    assert [config.group_of_layer(i) for i in range(layers)] == expected
    encoder = AlbertEncoder(config)
    blocks = encoder.transformer_layers
    assert all(isinstance(b, TransformerBlock) for b in blocks)
    assert [[b is g.inner_group_0 for g in encoder.groups].index(True) for b in blocks] == expected
    # Parameters: one set per group, however many layers share it.
    per_block = sum(int(np.prod(v.shape)) for v in blocks[0].weights)
    assert sum(int(np.prod(v.shape)) for v in encoder.weights) == (
        (99 + 2 + 64) * 16 + 2 * 16 + 16 * 32 + 32 + groups * per_block + 32 * 32 + 32)


def test_inner_groups_apply_their_blocks_in_order():
    config = AlbertConfig(**TINY, num_hidden_layers=2, num_hidden_groups=1, inner_group_num=2)
    encoder = AlbertEncoder(config)
    group = encoder.transformer_layers[0]
    assert isinstance(group, AlbertLayerGroup) and encoder.transformer_layers[1] is group
    ids = np.array([[5, 6, 7, 0]], np.int32)
    mask = np.array([[1, 1, 1, 0]], np.int32)
    outputs = encoder({"input_ids": ids, "input_mask": mask})
    layout = TokenLayout(tf.constant(mask), remove_padding=True)
    x = encoder.embeddings(ids, np.zeros_like(ids), layout=layout)  # [T,H], the 3 real tokens
    for _ in range(2):
        x = group.inner_group_1(group.inner_group_0(x, layout=layout), layout=layout)
    np.testing.assert_allclose(outputs["sequence_output"].numpy()[0, :3], x.numpy(), atol=1e-6)
    assert len(outputs["encoder_outputs"]) == 2
