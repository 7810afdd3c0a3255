"""ELECTRA checkpoints: random-init transformers ELECTRA models saved with save_pretrained, and the
same weights written in google-research/electra's TF1 layout (names from a table written here,
generator included), give transformers' discriminator outputs in our ElectraEncoder; the TF1
export reads back bit-identical under google's names; generator, BERT and ELECTRA checkpoints are
not mixed up. Nothing is downloaded."""

import json
import os

os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import transformers  # noqa: E402

from bert_tf.checkpoints import model_config  # noqa: E402
from bert_tf.checkpoints import name_map as checkpoints  # noqa: E402
from bert_tf.checkpoints.files import CheckpointError, write_tf1_checkpoint  # noqa: E402
from bert_tf.checkpoints.hf_weights import bert_config_from_hf  # noqa: E402
from bert_tf.model import models  # noqa: E402
from bert_tf.model.config import BertConfig  # noqa: E402
from bert_tf.model.electra.config import ElectraConfig  # noqa: E402
from bert_tf.model.electra.modeling import DiscriminatorModel, ElectraEncoder  # noqa: E402
from bert_tf.model.encoder import BertEncoder  # noqa: E402
from support import hf_parity  # noqa: E402

TOLERANCE = 1e-5
LAYERS = 2
# embedding_size 24 < hidden 32 (ELECTRA-Small's shape: embeddings_project), and equal widths.
WIDTHS = {"projected": 24, "same_width": 32}


def _hf_config(embedding_size: int, hidden_size: int = 32) -> transformers.ElectraConfig:
    return transformers.ElectraConfig(
        vocab_size=97, embedding_size=embedding_size, hidden_size=hidden_size,
        num_hidden_layers=LAYERS, num_attention_heads=4, intermediate_size=37,
        max_position_embeddings=40, type_vocab_size=2, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0)


# hf_dir: a random-init ElectraForPreTraining (the discriminator) per width, saved with
# save_pretrained; reference: transformers' ElectraModel output (`base`), the discriminator's
# logits and its weights on `batch`.
hf_dir, batch, reference = hf_parity.fixtures(
    transformers.ElectraForPreTraining,
    {name: _hf_config(width) for name, width in WIDTHS.items()}, base="electra",
    batch=hf_parity.padded_batch(vocab_size=97, seed=5), construction_seed=WIDTHS.get,
    perturb_seed=3)


def _google_arrays(state: dict, generator_seed: int = 0) -> dict:
    """The discriminator's weights under google-research/electra's TF1 names (a table of its own,
    not the library's), plus a random one-layer generator as google's checkpoints hold one."""
    arrays = {}
    for name, value in state.items():
        parts = name.split(".")
        if parts[-1] in ("position_ids", "token_type_ids") or parts[0] != "electra" and "discriminator" not in name:
            continue
        if parts[0] == "discriminator_predictions":
            scope = {"dense": "dense", "dense_prediction": "dense_1"}[parts[1]]
            tf1 = f"discriminator_predictions/{scope}/{'kernel' if parts[2] == 'weight' else 'bias'}"
            arrays[tf1] = value.T if parts[2] == "weight" else value
            continue
        if parts[1] == "embeddings" and parts[2].endswith("_embeddings"):
            arrays[f"electra/embeddings/{parts[2]}"] = value
            continue
        leaf = parts[-1]
        if parts[-2] == "LayerNorm":
            leaf = {"weight": "gamma", "bias": "beta"}[leaf]
        elif leaf == "weight":
            leaf, value = "kernel", value.T
        scope = "/".join(parts[1:-1]).replace("encoder/layer/", "encoder/layer_")
        arrays[f"electra/{scope}/{leaf}"] = value
    rng = np.random.default_rng(generator_seed)
    arrays.update({"generator/encoder/layer_0/attention/self/query/kernel":
                   rng.standard_normal([8, 8]).astype(np.float32),
                   "generator_predictions/output_bias": np.zeros([97], np.float32)})
    return arrays


@pytest.fixture(scope="module")
def google_dir(reference, hf_dir, tmp_path_factory):
    """The same discriminator in google-research/electra's layout, with electra_config.json."""
    config = bert_config_from_hf(hf_dir)
    directory = tmp_path_factory.mktemp("google")
    write_tf1_checkpoint(_google_arrays(reference.state), directory / "model.ckpt-0",
                         {"electra_config.json": config.to_json_string()})
    return directory


def _check_outputs(model, batch, reference):
    assert isinstance(model.encoder, ElectraEncoder)
    outputs = model.encoder(batch)
    mask = batch["input_mask"].astype(bool)
    np.testing.assert_allclose(outputs["sequence_output"].numpy()[mask],
                               reference.base.last_hidden_state.numpy()[mask], atol=TOLERANCE)
    # No pooler: the pooled output is [CLS]'s vector, unchanged.
    np.testing.assert_array_equal(outputs["pooled_output"].numpy(),
                                  outputs["sequence_output"].numpy()[:, 0])
    logits = model(batch)["discriminator_logits"].numpy()
    np.testing.assert_allclose(logits[mask], reference.pretraining.logits.numpy()[mask],
                               atol=TOLERANCE)


def test_hf_config_translates(hf_dir):
    config = bert_config_from_hf(hf_dir)
    assert isinstance(config, ElectraConfig)
    assert config.embedding_width == transformers.ElectraConfig.from_pretrained(hf_dir).embedding_size
    assert config.projects_embeddings == (config.embedding_width != 32)
    assert config.hidden_act == "gelu_exact"  # Hugging Face "gelu" is the erf form


def test_hf_directory_matches_transformers(hf_dir, batch, reference):
    model = DiscriminatorModel(bert_config_from_hf(hf_dir))
    report = checkpoints.init_from_checkpoint(model, hf_dir)
    assert not report.missing and not report.unused, report
    _check_outputs(model, batch, reference)


def test_google_layout_matches_transformers(google_dir, batch, reference):
    """The config comes from electra_config.json beside the checkpoint (not read as Hugging
    Face's: our activation names); the generator's weights are reported unused."""
    source = model_config.config_source(None, str(google_dir / "model.ckpt-0"))
    assert os.path.basename(source) == "electra_config.json"
    assert not model_config.is_hf_config(source)
    config = model_config.resolve_model_config(None, str(google_dir / "model.ckpt-0"))
    model = DiscriminatorModel(config)
    report = checkpoints.init_from_checkpoint(model, str(google_dir / "model.ckpt-0"))
    assert not report.missing, report
    assert report.unused == ["generator/encoder/layer_0/attention/self/query/kernel",
                             "generator_predictions/output_bias"]
    _check_outputs(model, batch, reference)


def test_classifier_reads_the_cls_vector(google_dir, hf_dir, batch, reference):
    """A fine-tuning model on an ELECTRA config: ElectraEncoder, no pooler weights missing."""
    model = models.classifier_model(bert_config_from_hf(hf_dir), num_labels=3)
    report = checkpoints.init_from_checkpoint(model, str(google_dir / "model.ckpt-0"))
    assert report.missing == ["output_weights", "output_bias"], report
    pooled = model.encoder(batch, output_positions=np.zeros([3, 0], np.int32))["pooled_output"]
    np.testing.assert_allclose(pooled.numpy(), reference.base.last_hidden_state.numpy()[:, 0],
                               atol=TOLERANCE)


def test_google_export_reads_back_bit_identical(hf_dir, tmp_path):
    config = bert_config_from_hf(hf_dir)
    model = DiscriminatorModel(config)
    checkpoints.init_from_checkpoint(model, hf_dir)
    prefix = checkpoints.export_google_checkpoint(model, tmp_path / "out" / "model.ckpt")
    names = dict(tf.train.list_variables(prefix))
    assert names["electra/embeddings/word_embeddings"] == [97, config.embedding_width]
    assert names["electra/encoder/layer_1/output/dense/kernel"] == [37, 32]
    assert names["discriminator_predictions/dense_1/kernel"] == [32, 1]
    assert ("electra/embeddings_project/kernel" in names) == config.projects_embeddings
    assert not any("pooler" in name or name.startswith("bert/") for name in names)
    written = json.loads((tmp_path / "out" / "electra_config.json").read_text())
    assert written["model_type"] == "electra" and written["hidden_act"] == "gelu_exact"
    assert model_config.load_model_config(tmp_path / "out" / "electra_config.json") == config
    again = DiscriminatorModel(config)
    report = checkpoints.init_from_checkpoint(again, prefix)
    assert not report.missing and not report.unused and len(report.loaded) == len(names)
    for a, b in zip(model.weights, again.weights):
        assert a.path == b.path and np.array_equal(a.numpy(), b.numpy()), a.path


def test_a_generator_is_not_a_discriminator(tmp_path):
    """A Hugging Face ElectraForMaskedLM (a generator) where the discriminator is needed: one
    error naming what to give, not a small encoder loaded silently."""
    generator = transformers.ElectraForMaskedLM(_hf_config(24, hidden_size=16))
    generator = hf_parity.perturbed(generator, seed=4)
    generator.save_pretrained(tmp_path / "generator")
    model = DiscriminatorModel(bert_config_from_hf(str(tmp_path / "generator")))
    with pytest.raises(CheckpointError, match="holds an ELECTRA generator .* no discriminator"):
        checkpoints.init_from_checkpoint(model, str(tmp_path / "generator"))


def test_bert_and_electra_checkpoints_are_told_apart(google_dir, hf_dir, tmp_path):
    bert_config = BertConfig(vocab_size=97, hidden_size=32, num_hidden_layers=LAYERS,
                             num_attention_heads=4, intermediate_size=37,
                             max_position_embeddings=40, type_vocab_size=2)
    bert_prefix = checkpoints.export_google_checkpoint(BertEncoder(bert_config),
                                                       tmp_path / "b" / "bert_model.ckpt")
    with pytest.raises(CheckpointError, match="is an ELECTRA discriminator checkpoint but the "
                                              "model config is not ELECTRA"):
        checkpoints.init_from_checkpoint(BertEncoder(bert_config), str(google_dir / "model.ckpt-0"))
    with pytest.raises(CheckpointError, match="is a BERT/ALBERT checkpoint but the model config "
                                              "is ELECTRA"):
        checkpoints.init_from_checkpoint(ElectraEncoder(bert_config_from_hf(hf_dir)), bert_prefix)
