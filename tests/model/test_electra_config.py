"""ElectraConfig: its file (model_type electra, read back as ELECTRA, not as Hugging Face's), the
generator's sizes as google-research/electra's get_generator_config, the --electra_config_file
alias, and the values it refuses."""

import pytest
from absl import flags

from bert_tf.checkpoints import model_config
from bert_tf.model.albert.config import AlbertConfig
from bert_tf.model.config import ConfigError
from bert_tf.model.electra.config import ElectraConfig, electra_config_from_hf
from bert_tf.model import models
from bert_tf.cli import flags as training_flags
from bert_tf.training import schedules

SMALL = dict(vocab_size=30522, embedding_size=128, hidden_size=256, num_hidden_layers=12,
             num_attention_heads=4, intermediate_size=1024)


def test_the_file_round_trips_as_electra(tmp_path):
    config = ElectraConfig(**SMALL)
    path = tmp_path / "electra_config.json"
    config.to_json_file(path)
    assert '"model_type": "electra"' in path.read_text()
    assert not model_config.is_hf_config(str(path))
    read = model_config.load_model_config(path)
    assert isinstance(read, ElectraConfig) and not isinstance(read, AlbertConfig)
    assert read == config and read.extra == {}
    assert (read.embedding_width, read.projects_embeddings) == (128, True)
    assert ElectraConfig(vocab_size=9, hidden_size=64, num_attention_heads=4).embedding_width == 64


def test_generator_sizes_are_googles():
    # ELECTRA-Small: 256 × 0.25 = 64 wide, 4 × 64 intermediate, one head; the tables stay E.
    generator = ElectraConfig(**SMALL).generator(0.25)
    assert (generator.hidden_size, generator.intermediate_size, generator.num_attention_heads,
            generator.embedding_width) == (64, 256, 1, 128)
    base = ElectraConfig(**{**SMALL, "embedding_size": 768, "hidden_size": 768,
                            "num_attention_heads": 12, "intermediate_size": 3072})
    assert (base.generator(1 / 3).hidden_size, base.generator(1 / 3).num_attention_heads) == (256, 4)
    with pytest.raises(ConfigError, match=r"hidden fraction must be in \(0, 1\]"):
        base.generator(0.0)


def test_bad_values_and_hf_translation():
    with pytest.raises(ConfigError, match="embedding_size must be a positive integer"):
        ElectraConfig(**{**SMALL, "embedding_size": 0})
    translated = electra_config_from_hf({**SMALL, "model_type": "electra", "hidden_act": "gelu"})
    assert translated.hidden_act == "gelu_exact" and translated.embedding_size == 128
    assert electra_config_from_hf({**SMALL, "layer_norm_eps": 1e-5}).layer_norm_eps == 1e-5
    with pytest.raises(ConfigError, match="x/config.json: layer_norm_eps must be positive"):
        electra_config_from_hf({**SMALL, "layer_norm_eps": -1.0}, "x/config.json")


def test_electra_config_file_is_an_alias():
    values = flags.FlagValues()
    training_flags.define_model_flags(flag_values=values)
    values(["script", "--electra_config_file=e.json"])
    assert values.bert_config_file == "e.json"
    conflicting = flags.FlagValues()
    training_flags.define_model_flags(flag_values=conflicting)
    with pytest.raises(flags.IllegalFlagValueError, match="differ: give one of them"):
        conflicting(["script", "--electra_config_file=e.json", "--bert_config_file=b.json"])


def test_layerwise_decay_on_an_electra_classifier():
    """ELECTRA has no pooler: the projection decays with the embeddings, the head keeps the
    full rate (docs/electra.md's recipe with --layerwise_lr_decay)."""
    config = ElectraConfig(vocab_size=11, embedding_size=8, hidden_size=16, num_hidden_layers=2,
                           num_attention_heads=2, intermediate_size=20, max_position_embeddings=8)
    model = models.classifier_model(config, num_labels=2)
    variables = model.trainable_variables
    factors = dict(zip(map(id, variables),
                       schedules.layerwise_rate_factors(model.encoder, variables, 0.8)))
    encoder = model.encoder
    assert factors[id(encoder.embeddings.embeddings_project.kernel)] == pytest.approx(0.8 ** 3)
    assert factors[id(encoder.embeddings.word_embeddings)] == pytest.approx(0.8 ** 3)
    assert factors[id(encoder.layer_0.query.kernel)] == pytest.approx(0.8 ** 2)
    assert factors[id(encoder.layer_1.query.kernel)] == pytest.approx(0.8)
    assert factors[id(model.classifier.output_weights)] == 1.0
