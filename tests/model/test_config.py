import json

import pytest

from bert_tf.model.config import BertConfig, ConfigError

# The released BERT-Base Chinese config carries keys the model does not use; they must load.
CHINESE_RELEASE = {
    "attention_probs_dropout_prob": 0.1, "directionality": "bidi", "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1, "hidden_size": 768, "initializer_range": 0.02,
    "intermediate_size": 3072, "max_position_embeddings": 512, "num_attention_heads": 12,
    "num_hidden_layers": 12, "pooler_fc_size": 768, "pooler_num_attention_heads": 12,
    "pooler_num_fc_layers": 3, "pooler_size_per_head": 128, "pooler_type": "first_token_transform",
    "type_vocab_size": 2, "vocab_size": 21128,
}


def test_release_config_loads_and_round_trips(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(CHINESE_RELEASE))
    config = BertConfig.from_json_file(path)
    assert config.vocab_size == 21128 and config.type_vocab_size == 2
    assert config.head_size == 64
    assert config.extra["pooler_type"] == "first_token_transform"
    out = tmp_path / "out.json"
    config.to_json_file(out)
    assert json.loads(out.read_text()) == CHINESE_RELEASE
    assert BertConfig.from_json_file(out) == config


def test_defaults_are_the_originals():
    config = BertConfig(vocab_size=99)
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads) == (768, 12, 12)
    assert (config.intermediate_size, config.hidden_act, config.type_vocab_size) == (3072, "gelu", 16)
    assert config.initializer_range == 0.02 and config.max_position_embeddings == 512


@pytest.mark.parametrize("changes, message", [
    ({"hidden_size": 30, "num_attention_heads": 4}, "divisible"),
    ({"hidden_act": "swish"}, "unknown hidden_act"),
    ({"num_hidden_layers": 0}, "num_hidden_layers must be a positive integer"),
    ({"vocab_size": -5}, "vocab_size must be a positive integer"),
    ({"hidden_dropout_prob": 1.5}, "hidden_dropout_prob"),
    ({"initializer_range": 0.0}, "initializer_range"),
])
def test_inconsistent_values_are_rejected(changes, message):
    values = {"vocab_size": 99, "hidden_size": 32, "num_attention_heads": 4, **changes}
    with pytest.raises(ConfigError, match=message):
        BertConfig.from_dict(values)


def test_file_errors_name_the_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        BertConfig.from_json_file(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"vocab_size": 10,\n oops}')
    with pytest.raises(ConfigError, match=r"bad.json: line 2"):
        BertConfig.from_json_file(bad)
    no_vocab = tmp_path / "novocab.json"
    no_vocab.write_text('{"hidden_size": 32}')
    with pytest.raises(ConfigError, match="novocab.json: bert config has no vocab_size"):
        BertConfig.from_json_file(no_vocab)
