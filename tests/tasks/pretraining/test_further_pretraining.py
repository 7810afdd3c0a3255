"""Further pretraining from released checkpoints: run_pretraining's --init_checkpoint restores the
masked-LM and next-sentence heads from a Google TF1 checkpoint and from a Hugging Face
BertForPreTraining directory, so the loss before any update is the checkpoint's own; a
checkpoint without heads leaves them initialised, and the log says which."""

import logging
import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_tf.checkpoints import name_map as checkpoints  # noqa: E402
from bert_tf.model import models  # noqa: E402
from bert_tf.model.config import BertConfig  # noqa: E402
from bert_tf.tasks.pretraining import task as pretraining_task  # noqa: E402
from bert_tf.training import loop as training  # noqa: E402
from support.pretraining_records import (  # noqa: E402
    PRED, SEQ, TINY_CONFIG, pretraining_arrays, write_records)

COUNT = 8  # records: one eval batch
RESTORED = ("heads found: masked_lm, next_sentence; loaded: masked_lm, next_sentence; newly "
            "initialised: none")


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    arrays = pretraining_arrays(COUNT, seed=3)
    path = write_records(tmp_path_factory.mktemp("records") / "eval.tfrecord", arrays)
    return path, arrays


def _evaluate(records_path, init_checkpoint, output_dir):
    """run_pretraining --do_eval on the checkpoint's weights (no update has happened)."""
    options = pretraining_task.PretrainingOptions(
        input_file=records_path, max_seq_length=SEQ, max_predictions_per_seq=PRED, do_eval=True)
    config = training.RunConfig(output_dir=str(output_dir), eval_batch_size=COUNT,
                                init_checkpoint=str(init_checkpoint))
    return pretraining_task.run_pretraining(options, config, tf.distribute.get_strategy())


def _perturbed_pretraining_model(config: BertConfig, seed: int):
    """A pretraining model whose every weight (biases, LayerNorms, heads) differs from its
    initial value, so that an initialised head could not pass for a restored one."""
    model = models.pretraining_model(config)
    model({"input_ids": np.ones((1, SEQ), np.int32), "input_mask": np.ones((1, SEQ), np.int32),
           "segment_ids": np.zeros((1, SEQ), np.int32),
           "masked_lm_positions": np.zeros((1, PRED), np.int32)})
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(variable.numpy() + rng.normal(0, 0.2, variable.shape).astype(np.float32))
    return model


def _our_losses(model, arrays):
    """Masked-LM Σw·CE/(Σw + 1e-5) and next-sentence mean CE of `model` on the records (numpy)."""
    outputs = model({name: arrays[name].astype(np.int32) for name in
                     ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")})
    log_probs = tf.nn.log_softmax(outputs["masked_lm_logits"]).numpy().reshape(COUNT, PRED, -1)
    picked = np.take_along_axis(log_probs, arrays["masked_lm_ids"][..., None], -1)[..., 0]
    weights = arrays["masked_lm_weights"]
    masked_lm = -(weights * picked).sum() / (weights.sum() + 1e-5)
    nsp = tf.nn.log_softmax(outputs["next_sentence_logits"]).numpy()
    next_sentence = -np.take_along_axis(nsp, arrays["next_sentence_labels"], -1).mean()
    return masked_lm, next_sentence


def test_google_checkpoint_heads_are_restored(records, tmp_path, caplog):
    records_path, arrays = records
    config = BertConfig(**TINY_CONFIG)
    model = _perturbed_pretraining_model(config, seed=1)
    masked_lm, next_sentence = _our_losses(model, arrays)
    with_heads = checkpoints.export_google_checkpoint(model, tmp_path / "google" / "bert_model.ckpt")
    encoder_only = checkpoints.export_google_checkpoint(model.encoder,
                                                        tmp_path / "encoder" / "bert_model.ckpt")
    with caplog.at_level(logging.INFO, logger="absl"):
        restored = _evaluate(records_path, with_heads, tmp_path / "run-heads")
    assert RESTORED in caplog.text
    assert restored["masked_lm_loss"] == pytest.approx(masked_lm, rel=1e-5)
    assert restored["next_sentence_loss"] == pytest.approx(next_sentence, rel=1e-5)
    assert restored["loss"] == pytest.approx(masked_lm + next_sentence, rel=1e-5)

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="absl"):
        initialised = _evaluate(records_path, encoder_only, tmp_path / "run-encoder")
    assert "heads found: none; loaded: none; newly initialised: masked_lm, next_sentence" in caplog.text
    # New heads are drawn from the process's random state: far from the restored heads' losses
    # (which match to 1e-5), by an amount that depends on the draw.
    assert abs(initialised["masked_lm_loss"] - masked_lm) > 1e-3
    assert abs(initialised["next_sentence_loss"] - next_sentence) > 1e-3


@pytest.fixture(scope="module")
def hf_pretraining(tmp_path_factory):
    """A perturbed transformers BertForPreTraining saved with save_pretrained."""
    import torch
    import transformers

    hf_config = transformers.BertConfig(
        vocab_size=TINY_CONFIG["vocab_size"], hidden_size=TINY_CONFIG["hidden_size"],
        num_hidden_layers=TINY_CONFIG["num_hidden_layers"],
        num_attention_heads=TINY_CONFIG["num_attention_heads"],
        intermediate_size=TINY_CONFIG["intermediate_size"],
        max_position_embeddings=TINY_CONFIG["max_position_embeddings"], type_vocab_size=2)
    torch.manual_seed(0)
    reference = transformers.BertForPreTraining(hf_config).eval()
    with torch.no_grad():
        for parameter in reference.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.2)
    directory = tmp_path_factory.mktemp("hf_pretraining")
    reference.save_pretrained(directory)
    return directory, reference


def _transformers_losses(reference, arrays):
    """transformers' own masked-LM and next-sentence losses on the records."""
    import torch

    labels = np.full(arrays["input_ids"].shape, -100, np.int64)
    rows, slots = np.nonzero(arrays["masked_lm_weights"])
    labels[rows, arrays["masked_lm_positions"][rows, slots]] = arrays["masked_lm_ids"][rows, slots]
    with torch.no_grad():
        outputs = reference(input_ids=torch.tensor(arrays["input_ids"]),
                            attention_mask=torch.tensor(arrays["input_mask"]),
                            token_type_ids=torch.tensor(arrays["segment_ids"]))
    cross_entropy = torch.nn.CrossEntropyLoss()
    masked_lm = cross_entropy(outputs.prediction_logits.reshape(-1, TINY_CONFIG["vocab_size"]),
                              torch.tensor(labels).reshape(-1))
    next_sentence = cross_entropy(outputs.seq_relationship_logits,
                                  torch.tensor(arrays["next_sentence_labels"]).reshape(-1))
    return float(masked_lm), float(next_sentence)


def test_hugging_face_pretraining_heads_are_restored(records, hf_pretraining, tmp_path, caplog):
    records_path, arrays = records
    directory, reference = hf_pretraining
    masked_lm, next_sentence = _transformers_losses(reference, arrays)
    with caplog.at_level(logging.INFO, logger="absl"):
        results = _evaluate(records_path, directory, tmp_path / "run")
    assert RESTORED in caplog.text
    # transformers divides by the count of masked tokens, we by the count + 1e-5 (the original's).
    assert results["masked_lm_loss"] == pytest.approx(masked_lm, rel=1e-4)
    assert results["next_sentence_loss"] == pytest.approx(next_sentence, rel=1e-4)


def test_hugging_face_file_with_only_the_decoder_bias(hf_pretraining, tmp_path):
    """Some files keep the masked-LM output bias only as its tied copy cls.predictions.decoder.bias."""
    import shutil

    from safetensors.numpy import load_file, save_file

    directory, _ = hf_pretraining
    tensors = load_file(os.path.join(directory, "model.safetensors"))
    tensors["cls.predictions.decoder.bias"] = tensors.pop("cls.predictions.bias")
    renamed = tmp_path / "renamed"
    renamed.mkdir()
    shutil.copy(os.path.join(directory, "config.json"), renamed / "config.json")
    save_file(tensors, str(renamed / "model.safetensors"))
    model = models.pretraining_model(checkpoints.bert_config_from_hf(renamed))
    report = checkpoints.init_from_checkpoint(model, renamed)
    assert "cls/predictions/output_bias" in report.loaded and not report.missing
    np.testing.assert_array_equal(model.masked_lm.output_bias.numpy(),
                                  tensors["cls.predictions.decoder.bias"])
