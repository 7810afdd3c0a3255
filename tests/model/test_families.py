"""The model-family registry: each family is found from its config, its config file's keys and
its Hugging Face model_type, and builds its own encoder."""

import json

import pytest

from bert_tf.checkpoints import model_config
from bert_tf.model import families
from bert_tf.model.albert.config import AlbertConfig
from bert_tf.model.albert.modeling import AlbertEncoder
from bert_tf.model.config import BertConfig, ConfigError
from bert_tf.model.electra.config import ElectraConfig
from bert_tf.model.electra.modeling import ElectraEncoder
from bert_tf.model.encoder import BertEncoder

SIZES = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=37, max_position_embeddings=13)
CONFIGS = {"BERT": BertConfig(**SIZES), "ALBERT": AlbertConfig(embedding_size=16, **SIZES),
           "ELECTRA": ElectraConfig(embedding_size=24, **SIZES)}
ENCODERS = {"BERT": BertEncoder, "ALBERT": AlbertEncoder, "ELECTRA": ElectraEncoder}


def test_every_family_is_registered_once_with_its_own_files():
    assert [f.name for f in families.FAMILIES] == ["BERT", "ALBERT", "ELECTRA"]
    assert families.config_files() == ("bert_config.json", "albert_config.json",
                                       "electra_config.json")
    assert len({f.hf_model_type for f in families.FAMILIES}) == len(families.FAMILIES)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_family_is_found_from_its_config_its_file_and_hugging_face(name, tmp_path):
    config = CONFIGS[name]
    family = families.family_of(config)
    assert family.name == name and family.config_class is type(config)
    written = json.loads(config.to_json_string())
    assert families.family_of_values(written) is family
    path = tmp_path / family.config_file
    path.write_text(config.to_json_string())
    assert model_config.load_model_config(path) == config
    assert families.family_of_hf({"model_type": family.hf_model_type}, "config.json") is family
    encoder = families.build_encoder(config, name="encoder")
    assert type(encoder) is ENCODERS[name] and encoder.name == "encoder"


def test_a_config_subclass_belongs_to_its_family():
    class Custom(AlbertConfig):
        pass

    assert families.family_of(Custom(**SIZES)).name == "ALBERT"


def test_an_unknown_hugging_face_model_type_is_refused_in_one_line():
    with pytest.raises(ConfigError, match=r"^x/config.json: model_type 'roberta' is not BERT "
                                          r"\(nor ALBERT, nor ELECTRA\); only their weights can "
                                          r"be imported$"):
        families.family_of_hf({"model_type": "roberta"}, "x/config.json")
