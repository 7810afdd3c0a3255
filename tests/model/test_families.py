"""The model-family registry: each family is found from its config, its config file's keys and
its Hugging Face model_type, and builds its own encoder."""

import json

import pytest

from bert_tf.checkpoints import model_config
from bert_tf.model import families, heads, names
from bert_tf.model.albert.config import AlbertConfig
from bert_tf.model.albert.modeling import AlbertEncoder
from bert_tf.model.config import BertConfig, ConfigError
from bert_tf.model.electra.config import ElectraConfig
from bert_tf.model.electra.modeling import ElectraEncoder, ElectraPretrainingModel, GeneratorEncoder
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


# Encoders with every optional part: ALBERT with several groups of several blocks, ELECTRA with
# and without its projection.
NAMED = {**CONFIGS,
         "ALBERT groups": AlbertConfig(embedding_size=16, num_hidden_groups=2, inner_group_num=2,
                                       **SIZES),
         "ELECTRA E=H": ElectraConfig(**SIZES)}


def _round_trips(table, hf_names, layer):
    """The variables (by id) that `layer`'s names (`table`) reach, each name having gone from
    attribute to TF1 and back, and from TF1 to Hugging Face (`hf_names`: the family's, as a
    directory is read) and back."""
    entries = table.entries(layer)
    for entry in entries:
        assert table.translate(entry.attribute, names.ATTRIBUTE, names.TF1)[0] == entry.tf1
        assert table.translate(entry.tf1, names.TF1, names.ATTRIBUTE)[0] == entry.attribute
        assert hf_names.translate(entry.tf1, names.TF1, names.HF)[0] == entry.hf
        assert hf_names.hf_to_tf1(entry.hf) == (entry.tf1, entry.transpose)
    return [id(names.attribute(layer, entry.attribute)) for entry in entries]


@pytest.mark.parametrize("name", list(NAMED))
def test_every_name_of_an_encoder_goes_both_ways_and_reaches_each_weight_once(name):
    config = NAMED[name]
    family = families.family_of(config)
    encoder = families.build_encoder(config)
    reached = _round_trips(family.names, family.hf_names(), encoder)
    assert sorted(reached) == sorted({id(weight) for weight in encoder.weights})


@pytest.mark.parametrize("name", ["BERT", "ALBERT"])
def test_every_head_name_goes_both_ways_under_its_family(name):
    config, family = CONFIGS[name], families.family_of(CONFIGS[name])
    for head in family.heads:
        layer = (head(config, 3) if issubclass(head, heads.Classifier) else head(config))
        reached = _round_trips(family.head_names(head), family.hf_names(), layer)
        assert sorted(reached) == sorted(id(weight) for weight in layer.weights)


def test_electra_names_its_generator_and_heads_both_ways():
    config = CONFIGS["ELECTRA"]
    model = ElectraPretrainingModel(config, config.generator(0.5))
    family = families.family_of(config)
    hf_names = family.hf_names()
    for layer in (model.discriminator, model.generator_predictions):
        reached = _round_trips(family.head_names(type(layer)), hf_names, layer)
        assert sorted(reached) == sorted(id(weight) for weight in layer.weights)
    generator = GeneratorEncoder.CHECKPOINT_NAMES
    entries = generator.entries(model.generator)
    assert [e.tf1 for e in entries[:3]] == ["generator/embeddings_project/kernel",
                                            "generator/embeddings_project/bias",
                                            "generator/encoder/layer_0/attention/self/query/kernel"]
    # A generator's Hugging Face directory is read under its own scope, embeddings included.
    directory = family.hf_names(["generator_predictions.dense.weight"])
    assert directory.hf_to_tf1("embeddings.word_embeddings.weight") == (
        "generator/embeddings/word_embeddings", False)
    assert directory.hf_to_tf1(entries[2].hf) == (entries[2].tf1, True)


def test_the_original_names_are_kept():
    albert = families.build_encoder(NAMED["ALBERT groups"])
    assert [e.tf1 for e in families.family_of(albert.config).names.entries(albert)][5:8] == [
        "bert/encoder/embedding_hidden_mapping_in/kernel",
        "bert/encoder/embedding_hidden_mapping_in/bias",
        "bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/kernel"]
    assert heads.Classifier.CHECKPOINT_NAMES.entries(None) == [
        names.Entry("output_weights", "output_weights", "classifier.weight", False),
        names.Entry("output_bias", "output_bias", "classifier.bias", False)]
    albert_family = families.family_of(NAMED["ALBERT"])
    assert albert_family.head_names(heads.NextSentence).hf_to_tf1(
        "sop_classifier.classifier.weight") == ("cls/seq_relationship/output_weights", False)
    assert albert_family.head_names(heads.MaskedLM).hf_to_tf1("predictions.bias") == (
        "cls/predictions/output_bias", False)


def test_the_tables_that_grow_with_the_vocabulary_are_named_by_each_family():
    bert = ("bert/embeddings/word_embeddings", "cls/predictions/output_bias")
    assert {name: families.family_of(config).vocabulary_names()
            for name, config in CONFIGS.items()} == {
        "BERT": bert, "ALBERT": bert,
        "ELECTRA": ("electra/embeddings/word_embeddings", "generator_predictions/output_bias")}
