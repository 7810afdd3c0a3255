"""Evaluation during training on a tiny pretraining model: the best checkpoint kept under best/,
early stopping, and a restart that keeps the best score and the patience count."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.model.config import BertConfig
from bert_tf.records import datasets, features
from bert_tf.tasks.pretraining import task as pretraining_task
from bert_tf.training import best_checkpoint, loop as training
from support.pretraining_records import PRED, SEQ, TINY_CONFIG, pretraining_arrays, write_records
from support.tiny_models import read_results

# The score each evaluated step gets: best at 4, then two evaluations without improvement.
SCORES = {2: 0.5, 4: 0.7, 6: 0.6, 8: 0.65, 10: 0.9, 12: 1.0}


class Crash(Exception):
    pass


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    return write_records(tmp_path_factory.mktemp("data") / "train.tfrecord",
                         pretraining_arrays(48, 0))


def _train(records, output_dir, patience=2, crash_at=None):
    """12 steps evaluated every 2 with SCORES; raises Crash when evaluating `crash_at`."""
    evaluated = []

    def evaluate(checkpoint):
        step = int(checkpoint.rsplit("-", 1)[1])
        evaluated.append(step)
        if step == crash_at:
            raise Crash
        return {"eval_accuracy": SCORES[step], "global_step": step}

    schema = features.pretraining_schema(SEQ, PRED)

    def input_fn(context, batch_size):
        return datasets.record_dataset(records, schema, batch_size, is_training=True,
                                       input_context=context)

    config = training.RunConfig(output_dir=str(output_dir), train_batch_size=4,
                                num_train_steps=12, learning_rate=1e-3, save_checkpoints_steps=5)
    keeper = best_checkpoint.BestCheckpoint(
        str(output_dir), evaluate, best_checkpoint.parse_metric("eval_accuracy"), periods=[2],
        patience=patience, reported_keys=["eval_accuracy", "global_step"])
    # One encoder layer: the checks are on the keeper's files and the checkpoints' equality,
    # which the model's depth does not change.
    task = pretraining_task.PretrainingTask(BertConfig(**{**TINY_CONFIG, "num_hidden_layers": 1}))
    figures = training.train(task, config, input_fn, evaluator=keeper)
    return figures, evaluated


@pytest.fixture(scope="module")
def whole(records, tmp_path_factory):
    """The uninterrupted run: (output directory, figures, evaluated steps)."""
    directory = tmp_path_factory.mktemp("whole")
    return (directory, *_train(records, directory))


def _variables(checkpoint):
    reader = tf.train.load_checkpoint(checkpoint)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name.startswith("model/")}


def test_best_checkpoint_kept_and_training_stops_early(records, whole):
    tmp_path, figures, evaluated = whole
    assert evaluated == [2, 4, 6, 8] and figures["global_step"] == 8
    best = tmp_path / "best"
    assert tf.train.latest_checkpoint(str(best)) == str(best / "ckpt-4")
    assert read_results(best / "eval_results.txt") == {"eval_accuracy": 0.7, "global_step": 4}
    assert (best / "bert_config.json").read_text() == (tmp_path / "bert_config.json").read_text()
    kept, original = _variables(str(best / "ckpt-4")), _variables(str(tmp_path / "ckpt-4"))
    assert kept.keys() == original.keys() and all(
        np.array_equal(kept[name], original[name]) for name in kept)
    state = json.loads((tmp_path / "best_state.json").read_text())
    assert state == {"metric": "eval_accuracy", "mode": "max", "best_score": 0.7, "best_step": 4,
                     "bad_evaluations": 2, "last_step": 8, "stopped": True}
    assert not [p for p in os.listdir(tmp_path) if p.startswith("best.")]
    # A stopped run is not trained on when started again.
    assert _train(records, tmp_path) == ({"global_step": 8.0}, [])
    assert best_checkpoint.prediction_checkpoint(str(tmp_path), "best") == str(best / "ckpt-4")
    assert best_checkpoint.prediction_checkpoint(str(tmp_path), "last") is None


def test_restart_keeps_best_score_and_patience_exactly(records, whole, tmp_path):
    with pytest.raises(Crash):
        _train(records, tmp_path / "resumed", crash_at=8)
    # Step 8's checkpoint was saved but not evaluated: the restart evaluates it first, and with
    # the saved count (6 was already one evaluation without improvement) stops there.
    figures, evaluated = _train(records, tmp_path / "resumed")
    assert evaluated == [8] and figures["global_step"] == 8
    for name in ("best_state.json", "best/eval_results.txt"):
        assert (tmp_path / "resumed" / name).read_text() == (whole[0] / name).read_text()
    resumed = _variables(str(tmp_path / "resumed" / "ckpt-8"))
    uninterrupted = _variables(str(whole[0] / "ckpt-8"))
    assert all(np.array_equal(resumed[name], uninterrupted[name]) for name in resumed)


def test_interrupted_swap_is_completed_and_leftovers_removed(tmp_path):
    (tmp_path / ".best.old-17-0123abcd").mkdir()
    (tmp_path / ".best.old-17-0123abcd" / "eval_results.txt").write_text("eval_f1 = 0.5\n")
    (tmp_path / ".best.tmp-18-4567cdef").mkdir()
    best_checkpoint.BestCheckpoint(str(tmp_path), dict, best_checkpoint.parse_metric("eval_f1"))
    assert sorted(os.listdir(tmp_path)) == ["best"]
    assert (tmp_path / "best" / "eval_results.txt").read_text() == "eval_f1 = 0.5\n"


def test_metric_directions_and_errors(tmp_path):
    assert best_checkpoint.parse_metric("eval_loss") == best_checkpoint.Metric("eval_loss", "min")
    assert best_checkpoint.parse_metric("eval_f1") == best_checkpoint.Metric("eval_f1", "max")
    assert best_checkpoint.parse_metric("eval_mcc:min").mode == "min"
    with pytest.raises(ValueError, match="--best_metric=eval_f1:up"):
        best_checkpoint.parse_metric("eval_f1:up")
    with pytest.raises(ValueError, match="--best_metric=eval_f2: this task reports eval_f1, "
                                         "eval_loss; pick one"):
        best_checkpoint.BestCheckpoint(str(tmp_path), dict,
                                       best_checkpoint.parse_metric("eval_f2"),
                                       reported_keys=["eval_loss", "eval_f1"])
