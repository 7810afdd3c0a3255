"""Checkpoints made by google-research/electra's and google-research/albert's own code
(tests/testdata/google_reference, written by its generate.py) give the reference code's outputs
in bert_tf, layer by layer, read with the config a user writes for them; bert_tf's exports of them
hold the reference's tensors under the reference's names, and the reference code ran on them
gave the same outputs.

ELECTRA's "gelu" is the erf form in google-research/electra's code: read as BERT's tanh form,
every layer would differ by up to ~1e-3 here (the test that a transformers-made checkpoint, whose
config already says the function by another name, cannot make)."""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import model_config
from bert_tf.checkpoints import name_map as checkpoints
from bert_tf.errors import UserError
from bert_tf.model import models
from bert_tf.model.albert.config import AlbertConfig
from bert_tf.model.config import GELU_ERF, GELU_TANH, ConfigError
from bert_tf.model.electra.config import ElectraConfig
from bert_tf.model.electra.modeling import DiscriminatorModel
from bert_tf.training import loop

REFERENCE = os.path.join(os.path.dirname(__file__), "..", "testdata", "google_reference")
TOLERANCE = 1e-5
ELECTRA_CASES = ("electra_projected", "electra_same_width")


def _prefix(case: str) -> str:
    return os.path.join(REFERENCE, case, "model.ckpt-0")


def _reference(case: str) -> dict:
    with np.load(os.path.join(REFERENCE, case, "reference.npz")) as values:
        return dict(values)


def _inputs(reference: dict) -> dict:
    return {key: reference[key] for key in ("input_ids", "input_mask", "segment_ids")}


def _close(ours, theirs, mask) -> None:
    np.testing.assert_allclose(np.asarray(ours)[mask], theirs[mask], atol=TOLERANCE, rtol=0)


@pytest.fixture(scope="module", params=ELECTRA_CASES)
def electra(request):
    """google's discriminator read by bert_tf, and bert_tf's outputs on google's inputs."""
    prefix = _prefix(request.param)
    config = model_config.resolve_model_config(None, prefix)
    model = DiscriminatorModel(config)
    report = checkpoints.init_from_checkpoint(model, prefix)
    reference = _reference(request.param)
    inputs = _inputs(reference)
    encoded = model.encoder(inputs)
    return {"case": request.param, "config": config, "model": model, "report": report,
            "reference": reference, "mask": inputs["input_mask"].astype(bool),
            "encoded": encoded, "logits": model(inputs)["discriminator_logits"]}


def test_electra_config_means_googles_gelu(electra):
    """The electra_config.json a user writes with google's values ("gelu") means the erf form."""
    written = json.load(open(os.path.join(REFERENCE, electra["case"], "electra_config.json")))
    assert written["hidden_act"] == "gelu"
    config = electra["config"]
    assert isinstance(config, ElectraConfig) and config.activation == GELU_ERF
    assert config.projects_embeddings == (electra["case"] == "electra_projected")


def test_electra_reads_googles_training_checkpoint(electra):
    """Every discriminator weight loads; the generator, its head and the Adam slots do not."""
    report = electra["report"]
    assert not report.missing and not report.mismatched, report
    assert report.unused and all(name.startswith(("generator", "generator_predictions"))
                                 for name in report.unused), report.unused
    assert report.ignored > len(report.loaded)  # adam_m, adam_v and global_step


def test_electra_every_layer_matches_googles_code(electra):
    reference, mask, encoded = electra["reference"], electra["mask"], electra["encoded"]
    _close(encoded["embedding_output"], reference["embedding_output"], mask)
    layers = encoded["encoder_outputs"]
    assert len(layers) == 2
    for index, layer in enumerate(layers):
        _close(layer, reference[f"layer_{index}"], mask)
    _close(electra["logits"], reference["discriminator_logits"], mask)


def test_electra_data_tells_the_two_gelus_apart(electra):
    """Read with BERT's tanh GELU, the same checkpoint is 10x the tolerance away from google's
    outputs: the comparison above would catch the wrong function."""
    model = DiscriminatorModel(electra["config"].replace(hidden_act="gelu_tanh"))
    checkpoints.init_from_checkpoint(model, _prefix(electra["case"]))
    mask = electra["mask"]
    last = model.encoder(_inputs(electra["reference"]))["encoder_outputs"][-1]
    gap = np.abs(np.asarray(last)[mask] - electra["reference"]["layer_1"][mask]).max()
    assert gap > 10 * TOLERANCE


def test_electra_export_is_googles_checkpoint_and_runs_there(electra, tmp_path):
    """bert_tf's export holds google's tensors under google's names, bit for bit; google's code
    on bert_tf's export (when the data was made) gave bert_tf's outputs."""
    prefix = checkpoints.export_google_checkpoint(electra["model"], tmp_path / "bert_model.ckpt")
    google = tf.train.load_checkpoint(_prefix(electra["case"]))
    exported = tf.train.load_checkpoint(prefix)
    names = set(exported.get_variable_to_shape_map())
    expected = {name for name in google.get_variable_to_shape_map()
                if name.startswith(("electra/", "discriminator_predictions/"))
                and "/adam_" not in name}
    assert names == expected
    for name in names:
        np.testing.assert_array_equal(exported.get_tensor(name), google.get_tensor(name), name)
    written = json.loads((tmp_path / "electra_config.json").read_text())
    assert written["hidden_act"] == "gelu_exact"
    reference, mask = electra["reference"], electra["mask"]
    for index, layer in enumerate(electra["encoded"]["encoder_outputs"]):
        _close(layer, reference[f"export_layer_{index}"], mask)
    _close(electra["logits"], reference["export_discriminator_logits"], mask)


def test_electra_with_tanh_gelu_is_not_exported_for_googles_code(electra, tmp_path):
    """google's code reads no config and runs "gelu" as the erf form: a tanh model is refused."""
    model = DiscriminatorModel(electra["config"].replace(hidden_act="gelu_tanh"))
    with pytest.raises(ConfigError, match="google-research/electra's code runs every ELECTRA"):
        checkpoints.export_google_checkpoint(model, tmp_path / "bert_model.ckpt")
    assert not os.listdir(tmp_path)


# ----------------------------------------------------------- run directories written before

def _legacy_run(tmp_path, electra) -> str:
    """A bert_tf run directory as bert_tf wrote it while ELECTRA's "gelu" meant the tanh form."""
    run = tmp_path / "run"
    tf.train.CheckpointManager(tf.train.Checkpoint(model=electra["model"]), str(run), 1,
                               checkpoint_name="ckpt").save(checkpoint_number=1)
    values = {**electra["config"].to_dict(), "hidden_act": "gelu"}
    (run / "bert_config.json").write_text(json.dumps(values, indent=2, sort_keys=True))
    return str(run)


def test_a_run_directory_written_before_keeps_its_tanh_gelu(electra, tmp_path, caplog):
    run = _legacy_run(tmp_path, electra)
    config = model_config.resolve_model_config(None, run)
    assert config.activation == GELU_TANH and config.hidden_act == "gelu_tanh"
    assert "read as the one the run was trained with ('gelu_tanh')" in caplog.text
    # The same file anywhere else is a user's, in google's meaning.
    shutil.copy(os.path.join(run, "bert_config.json"), tmp_path / "electra_config.json")
    assert model_config.load_model_config(tmp_path / "electra_config.json").activation == GELU_ERF
    # What bert_tf writes now says the function by a name no family reads otherwise.
    assert json.loads(config.to_json_string())["hidden_act"] == "gelu_tanh"


def test_resuming_a_run_with_another_gelu_is_refused(electra, tmp_path):
    run = _legacy_run(tmp_path, electra)
    with pytest.raises(UserError, match=r"trained with the activation gelu_tanh but the model "
                                        r"config given now means gelu_exact: set \"hidden_act\": "
                                        r"\"gelu_tanh\""):
        loop._write_bert_config(electra["model"], run)


# ------------------------------------------------------------------------------------- ALBERT

@pytest.fixture(scope="module")
def albert():
    prefix = _prefix("albert")
    config = model_config.resolve_model_config(None, prefix)
    model = models.pretraining_model(config)
    report = checkpoints.init_from_checkpoint(model, prefix)
    reference = _reference("albert")
    inputs = {**_inputs(reference), "masked_lm_positions": reference["masked_lm_positions"]}
    return {"config": config, "model": model, "report": report, "reference": reference,
            "inputs": inputs, "mask": inputs["input_mask"].astype(bool)}


def test_albert_reads_googles_training_checkpoint(albert):
    config, report = albert["config"], albert["report"]
    assert isinstance(config, AlbertConfig) and config.activation == GELU_TANH
    assert not report.missing and not report.mismatched and not report.unused, report
    assert report.ignored > len(report.loaded)  # the LAMB slots and global_step


def test_albert_every_layer_and_head_matches_googles_code(albert):
    reference, mask, inputs = albert["reference"], albert["mask"], albert["inputs"]
    encoder = albert["model"].encoder
    encoded = encoder(inputs, compute_padding=True)
    google = tf.train.load_checkpoint(_prefix("albert"))
    mapping = "bert/encoder/embedding_hidden_mapping_in/"
    # google's embedding output is E wide; the blocks read it mapped to H.
    mapped = (reference["embedding_output"] @ google.get_tensor(mapping + "kernel")
              + google.get_tensor(mapping + "bias"))
    _close(encoded["embedding_output"], mapped, mask)
    for index, layer in enumerate(encoded["encoder_outputs"]):
        _close(layer, reference[f"layer_{index}"], mask)
    np.testing.assert_allclose(encoded["pooled_output"], reference["pooled_output"],
                               atol=TOLERANCE, rtol=0)
    outputs = albert["model"](inputs)
    log_probs = tf.nn.log_softmax(outputs["masked_lm_logits"]).numpy().reshape(-1, 97)
    np.testing.assert_allclose(log_probs, reference["masked_lm_log_probs"], atol=TOLERANCE,
                               rtol=0)
    np.testing.assert_allclose(tf.nn.log_softmax(outputs["next_sentence_logits"]),
                               reference["sentence_order_log_probs"], atol=TOLERANCE, rtol=0)


def test_albert_export_is_googles_checkpoint(albert, tmp_path):
    prefix = checkpoints.export_google_checkpoint(albert["model"], tmp_path / "model.ckpt")
    google = tf.train.load_checkpoint(_prefix("albert"))
    exported = tf.train.load_checkpoint(prefix)
    names = set(exported.get_variable_to_shape_map())
    expected = {name for name in google.get_variable_to_shape_map()
                if name != "global_step" and not name.endswith(("/adam_m", "/adam_v"))}
    assert names == expected
    for name in names:
        np.testing.assert_array_equal(exported.get_tensor(name), google.get_tensor(name), name)
    assert json.loads((tmp_path / "albert_config.json").read_text())["hidden_act"] == "gelu"
