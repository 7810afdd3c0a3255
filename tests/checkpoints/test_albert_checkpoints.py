"""ALBERT weights both ways: a random-init transformers AlbertModel saved with save_pretrained
gives the same outputs in our AlbertEncoder (golden values, padding in the batch); the TF1 export
(google-research/albert's names) reads back bit-identical; BERT and ALBERT checkpoints are not
mixed up. Nothing is downloaded."""

import json
import os

os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import transformers  # noqa: E402

from bert_tf.checkpoints import name_map as checkpoints  # noqa: E402
from bert_tf.checkpoints.files import CheckpointError  # noqa: E402
from bert_tf.checkpoints.hf_weights import bert_config_from_hf  # noqa: E402
from bert_tf.model import models  # noqa: E402
from bert_tf.model.albert.config import AlbertConfig  # noqa: E402
from bert_tf.model.albert.modeling import AlbertEncoder  # noqa: E402
from bert_tf.model.config import BertConfig  # noqa: E402
from bert_tf.model.encoder import BertEncoder  # noqa: E402
from support import hf_parity  # noqa: E402

TOLERANCE = 1e-4
SHAPES = {"one_group": dict(num_hidden_groups=1, inner_group_num=1),
          "two_groups_two_inner": dict(num_hidden_groups=2, inner_group_num=2)}


def _hf_config(**sharing) -> transformers.AlbertConfig:
    return transformers.AlbertConfig(
        vocab_size=101, embedding_size=128, hidden_size=256, num_hidden_layers=4,
        num_attention_heads=4, intermediate_size=301, max_position_embeddings=64,
        type_vocab_size=2, hidden_act="gelu_new", hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, **sharing)


# hf_dir: a random-init AlbertForPreTraining per sharing shape, saved with save_pretrained;
# reference: transformers' AlbertModel outputs (`base`) and pretraining logits on `batch`.
hf_dir, batch, reference = hf_parity.fixtures(
    transformers.AlbertForPreTraining,
    {name: _hf_config(**sharing) for name, sharing in SHAPES.items()}, base="albert",
    batch=hf_parity.padded_batch(vocab_size=101, seed=7), construction_seed=len)


def test_hf_config_translates(hf_dir):
    config = bert_config_from_hf(hf_dir)
    assert isinstance(config, AlbertConfig)
    assert (config.embedding_size, config.hidden_size, config.intermediate_size) == (128, 256, 301)
    assert config.hidden_act == "gelu"  # Hugging Face gelu_new is the tanh form
    hf = transformers.AlbertConfig.from_pretrained(hf_dir)
    assert (config.num_hidden_groups, config.inner_group_num) == (hf.num_hidden_groups,
                                                                  hf.inner_group_num)


@pytest.fixture(scope="module")
def ours(hf_dir):
    """Our pretraining model (AlbertEncoder + heads) loaded from the Hugging Face directory."""
    model = models.pretraining_model(bert_config_from_hf(hf_dir))
    report = checkpoints.init_from_checkpoint(model, hf_dir)
    assert not report.missing and not report.unused, report
    return model


def test_golden_outputs_match_transformers(ours, reference, batch):
    assert isinstance(ours.encoder, AlbertEncoder)
    outputs = ours.encoder(batch)
    expected = reference.base
    mask = batch["input_mask"][..., None].astype(bool)  # padding positions are not compared
    np.testing.assert_allclose(np.where(mask, outputs["sequence_output"].numpy(), 0),
                               np.where(mask, expected.last_hidden_state.numpy(), 0),
                               atol=TOLERANCE)
    np.testing.assert_allclose(outputs["pooled_output"].numpy(), expected.pooler_output.numpy(),
                               atol=TOLERANCE)
    assert len(outputs["encoder_outputs"]) == 4


def test_pretraining_heads_match_transformers(ours, reference, batch):
    """The MLM head transforms to E and scores against the E-wide table; SOP is the NSP head."""
    expected = reference.pretraining
    positions = np.array([[0, 3, 10], [1, 2, 3], [0, 5, 8]], np.int32)
    logits = ours({**batch, "masked_lm_positions": positions})
    mlm = np.take_along_axis(expected.prediction_logits.numpy(), positions[..., None], axis=1)
    np.testing.assert_allclose(logits["masked_lm_logits"].numpy(), mlm, atol=TOLERANCE)
    np.testing.assert_allclose(logits["next_sentence_logits"].numpy(),
                               expected.sop_logits.numpy(), atol=TOLERANCE)


def test_tf1_export_reads_back_bit_identical(ours, tmp_path):
    model, config = ours, ours.config
    prefix = checkpoints.export_google_checkpoint(model, tmp_path / "albert" / "model.ckpt-0")
    names = dict(tf.train.list_variables(prefix))
    g_last = config.num_hidden_groups - 1
    assert names[f"bert/encoder/transformer/group_{g_last}/inner_group_"
                 f"{config.inner_group_num - 1}/ffn_1/intermediate/output/dense/kernel"] == [301, 256]
    assert names["bert/encoder/embedding_hidden_mapping_in/kernel"] == [128, 256]
    assert names["cls/predictions/transform/dense/kernel"] == [256, 128]
    assert not any("layer_" in name for name in names)
    written = json.loads((tmp_path / "albert" / "albert_config.json").read_text())
    assert written["embedding_size"] == 128 and written["num_hidden_groups"] == config.num_hidden_groups
    again = models.pretraining_model(config)
    report = checkpoints.init_from_checkpoint(again, prefix)
    assert not report.missing and not report.unused and len(report.loaded) == len(names)
    for a, b in zip(model.weights, again.weights):
        assert a.path == b.path and np.array_equal(a.numpy(), b.numpy()), a.path


def test_bert_and_albert_checkpoints_are_told_apart(ours, hf_dir, tmp_path):
    albert_prefix = checkpoints.export_google_checkpoint(ours, tmp_path / "a" / "model.ckpt")
    bert_config = BertConfig(vocab_size=101, hidden_size=32, num_hidden_layers=2,
                             num_attention_heads=4, intermediate_size=37)
    bert_prefix = checkpoints.export_google_checkpoint(BertEncoder(bert_config),
                                                       tmp_path / "b" / "bert_model.ckpt")
    with pytest.raises(CheckpointError, match="is an ALBERT checkpoint but the model config is BERT"):
        checkpoints.init_from_checkpoint(BertEncoder(bert_config), albert_prefix)
    with pytest.raises(CheckpointError, match="is a BERT checkpoint but the model config is ALBERT"):
        checkpoints.init_from_checkpoint(AlbertEncoder(bert_config_from_hf(hf_dir)), bert_prefix)


def test_a_config_with_other_groups_names_the_keys(ours, tmp_path):
    prefix = checkpoints.export_google_checkpoint(ours, tmp_path / "model.ckpt")
    more_groups = ours.config.replace(num_hidden_groups=4, inner_group_num=1)
    with pytest.raises(CheckpointError, match="check num_hidden_groups and inner_group_num"):
        checkpoints.init_from_checkpoint(AlbertEncoder(more_groups), prefix)
