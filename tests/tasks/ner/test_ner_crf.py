"""run_ner with a CRF, evaluation during training and the best checkpoint, on the tiny
char-format set; the BiLSTM under padding; the CRF's own learning rate; the run's errors."""

import dataclasses
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.training import optimizers
from bert_tf.model import models
from bert_tf.model.config import BertConfig
from bert_tf.tasks.ner import metrics as tag_metrics
from bert_tf.tasks.ner import task as ner_task
from bert_tf.training import loop as training
from conftest import TESTDATA
from support.pretraining_records import TINY_CONFIG
from support.tiny_models import read_results

NER = os.path.join(TESTDATA, "ner")


def _options(char_model, **changes):
    return ner_task.NerOptions(
        data_dir=NER, bert_config_file=str(char_model / "bert_config.json"),
        vocab_file=str(char_model / "vocab.txt"), max_seq_length=6, data_format="char",
        tag_scheme="bioes", train_file="char_train.txt", dev_file="char_dev.txt",
        test_file="char_dev.txt", window_overlap=2, **changes)


def _well_formed_bioes(tags):
    """BIOES by its definition: B/I continue into I/E of their type, nothing else does."""
    previous = "O"
    for tag in list(tags) + ["O"]:
        prefix, kind = tag_metrics.split_tag(tag)
        before, before_kind = tag_metrics.split_tag(previous)
        opened = before in ("B", "I") and before_kind == kind
        if (prefix in ("I", "E")) != opened:
            return False
        previous = tag
    return True


def test_crf_keeps_the_best_checkpoint_and_stops_early(char_model, tmp_path):
    # global_step:min makes the first evaluation the best and the next one worse: with patience
    # 1 the run stops at step 4 of 8, and predicts from step 2's checkpoint.
    options = _options(char_model, do_train=True, do_predict=True, num_train_epochs=2.0,
                       crf=True, crf_learning_rate=0.1, eval_every_n_steps=2,
                       best_metric="global_step:min", early_stopping_patience=1)
    run_config = training.RunConfig(output_dir=str(tmp_path), train_batch_size=2,
                                    eval_batch_size=3, predict_batch_size=4, learning_rate=1e-3)
    out = ner_task.run_ner(options, run_config)
    assert out["train"]["global_step"] == 4
    state = json.loads((tmp_path / "best_state.json").read_text())
    assert (state["best_step"], state["last_step"], state["stopped"]) == (2, 4, True)
    best = read_results(tmp_path / "best" / "eval_results.txt")
    assert best["global_step"] == 2 and "eval_PER_f1" in best
    # The test file is the dev file: tagging it from best/ gives best/'s figures.
    assert out["test"]["test_f1"] == pytest.approx(best["eval_f1"])
    assert out["test"]["test_accuracy"] == pytest.approx(best["eval_accuracy"])

    # The CRF's scores train at 0.1, 100x the encoder's rate. The original's Adam (no bias
    # correction) moves a weight by 3.16 x rate at the first step and at most 4.25 x rate at the
    # second (rates 0.1 and 0.0875, no warm-up in 8 steps): at most 0.69, at the encoder's rate
    # at most 0.0069.
    reader = tf.train.load_checkpoint(str(tmp_path / "best" / "ckpt-2"))
    moved = np.abs(reader.get_tensor("model/crf/transitions/.ATTRIBUTES/VARIABLE_VALUE")).max()
    assert 0.3 < moved < 0.69

    predicted = (tmp_path / "test_predictions.txt").read_text(encoding="utf-8").split("\n\n")
    sentences = [[line.split()[-1] for line in block.splitlines()] for block in predicted
                 if block.strip()]
    assert len(sentences) == 2 and all(_well_formed_bioes(tags) for tags in sentences)


def test_bilstm_sees_real_positions_only_and_round_trips(tmp_path):
    config = BertConfig(**{**TINY_CONFIG, "num_hidden_layers": 1})  # the BiLSTM is the subject
    model = models.token_classifier_model(config, 5, lstm_size=3, crf=True)
    rng = np.random.default_rng(0)
    # Random LSTM weights, biases too: as initialised (zero biases) a zero input leaves a zero
    # state as it is, so running over padding the encoder zeroed would go unnoticed.
    for variable in model.lstm.weights:
        variable.assign(rng.normal(0.0, 0.5, variable.shape).astype(np.float32))
    ids = rng.integers(5, config.vocab_size, size=(2, 7)).astype(np.int32)
    mask = np.array([[1] * 7, [1] * 4 + [0] * 3], np.int32)
    features = {"input_ids": ids * mask, "input_mask": mask, "segment_ids": 0 * ids}
    outputs = model(features)
    assert outputs["logits"].shape == (2, 7, 5) and outputs["transitions"].shape == (5, 5)
    # Row 1 alone, without its padding: the same scores at its 4 real positions (the backward
    # LSTM starts at the last real piece, not at the padding).
    short = {name: value[1:, :4] for name, value in features.items()}
    np.testing.assert_allclose(model(short)["logits"][0], outputs["logits"][1, :4], atol=1e-5)
    path = tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt"))
    again = models.token_classifier_model(config, 5, lstm_size=3, crf=True)
    tf.train.Checkpoint(model=again).read(path).assert_existing_objects_matched()
    np.testing.assert_array_equal(again(features)["logits"], outputs["logits"])


def test_crf_without_o_and_unknown_best_metric_are_refused(char_model, tmp_path):
    options = _options(char_model, do_train=True, crf=True)
    run_config = training.RunConfig(output_dir=str(tmp_path), train_batch_size=2)
    with pytest.raises(ValueError, match=r"--crf: the label list \['B-PER', 'I-PER'\] has no "
                                         "'O'"):
        ner_task.run_ner(dataclasses.replace(options, labels=("B-PER", "I-PER")), run_config)
    with pytest.raises(ValueError, match="--best_metric=eval_mcc: this task reports .*eval_f1"):
        ner_task.run_ner(dataclasses.replace(options, best_metric="eval_mcc"), run_config)


def test_learning_rate_multipliers_scale_matching_variables():
    a, b = tf.Variable([1.0, 1.0], name="a"), tf.Variable([1.0, 1.0], name="crf/b")
    optimizer = optimizers.AdamWeightDecay(learning_rate=0.01, weight_decay_rate=0.0,
                                             learning_rate_multipliers={"crf/": 30.0})
    optimizer.apply_gradients([(tf.constant([1.0, -1.0]), a), (tf.constant([1.0, -1.0]), b)])
    np.testing.assert_allclose(1.0 - b.numpy(), 30.0 * (1.0 - a.numpy()), rtol=1e-5)
