"""run_pretraining.py end to end: outputs, exact resume after kill -9, Google export, errors."""

import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import name_map as checkpoints
from bert_tf.model import models
from bert_tf.model.config import BertConfig
from bert_tf.tasks.pretraining import task as pretraining_task
from bert_tf.training import loop as training
from support.pretraining_records import PRED, SEQ, TINY_CONFIG, pretraining_arrays, write_records, \
    write_tiny_config, write_unmasked_records
from support.pretraining_runs import start, wait, weights

pytestmark = pytest.mark.heavy  # scheduled first: see conftest.py


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    directory = tmp_path_factory.mktemp("pretraining_data")
    return {"train": write_records(directory / "train.tfrecord", pretraining_arrays(96, 0)),
            "eval": write_records(directory / "eval.tfrecord", pretraining_arrays(24, 1)),
            "config": write_tiny_config(directory),
            "unmasked": write_unmasked_records(directory / "unmasked.tfrecord", 40, 2)}


def _flags(data, output_dir, **overrides):
    flags = dict(input_file=data["train"], eval_input_file=data["eval"], output_dir=output_dir,
                 bert_config_file=data["config"], max_seq_length=SEQ,
                 max_predictions_per_seq=PRED, do_train=True, train_batch_size=8,
                 eval_batch_size=8, num_train_steps=12, num_warmup_steps=2, learning_rate=1e-3,
                 save_checkpoints_steps=4, log_every_n_steps=4, iterations_per_loop=2)
    flags.update(overrides)
    return [f"--{name}={value}" for name, value in flags.items()]


@pytest.fixture(scope="module")
def runs(data, tmp_path_factory, script_runner):
    """The same command run straight through, and killed (kill -9) then re-run, each in a
    process of its own (forked by `script_runner`)."""
    directory = tmp_path_factory.mktemp("runs")
    straight, resumed = str(directory / "straight"), str(directory / "resumed")
    # Eval and export come after the last update: they do not change the weights compared.
    uninterrupted = start(script_runner, _flags(
        data, straight, do_eval=True, export_google_checkpoint=True, keep_checkpoint_max=2,
        max_eval_steps=2))
    # Killed while about to write ckpt-8: ckpt-4 survives, steps 5-8 are lost.
    wait(start(script_runner, ["--kill_at_checkpoint=8", *_flags(data, resumed)]),
         returncode=-9)
    assert tf.train.latest_checkpoint(resumed).endswith("ckpt-4")
    wait(start(script_runner, _flags(data, resumed)))  # the same command again resumes
    wait(uninterrupted)
    return straight, resumed


def test_kill_and_resume_ends_with_the_weights_of_an_uninterrupted_run(runs):
    straight, resumed = runs
    expected, got = weights(straight + "/ckpt-12"), weights(resumed + "/ckpt-12")
    assert set(got) == set(expected) and any(name.startswith("optimizer/") for name in got)
    assert any(name.startswith("rng/") for name in got)  # dropout RNG states
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    assert int(expected["global_step/.ATTRIBUTES/VARIABLE_VALUE"]) == 12


def test_kill_and_resume_with_dynamic_masking_ends_with_the_uninterrupted_weights(
        data, tmp_path, script_runner):
    """Masks drawn in tf.data (40 records, 12 steps of 8: every record seen in 2-3 epochs).

    Killed in the middle of saving the last checkpoint, ckpt-12: its files are complete (the
    run made all 12 steps without interruption) but not committed, so ckpt-8 is still the one
    chosen and the same command again redoes steps 9-12 over them. The uncommitted ckpt-12 is
    the uninterrupted run's end: a copy of it is the reference, no other run is needed."""
    resumed, straight = tmp_path / "resumed", tmp_path / "straight"
    dynamic = dict(input_file=data["unmasked"], eval_input_file=data["unmasked"])
    wait(start(script_runner, ["--kill_while_saving=12", *_flags(data, str(resumed), **dynamic)]),
         returncode=-9)
    assert os.path.exists(resumed / "ckpt-12.index")
    assert tf.train.latest_checkpoint(resumed).endswith("ckpt-8")
    straight.mkdir()
    for path in resumed.glob("ckpt-12.*"):
        shutil.copy(path, straight)
    wait(start(script_runner, _flags(data, str(resumed), **dynamic)))
    # Saved again by the resumed run (a run that took the uncommitted files for its own would
    # find nothing to train and leave ckpt-8 the latest).
    assert tf.train.latest_checkpoint(resumed).endswith("ckpt-12")
    expected, got = weights(straight / "ckpt-12"), weights(resumed / "ckpt-12")
    assert set(got) == set(expected)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


def test_train_eval_export_writes_the_originals_files(runs):
    output_dir = runs[0]
    names = sorted(os.listdir(output_dir))
    assert [n for n in names if n.endswith(".index")] == ["ckpt-12.index", "ckpt-8.index"]
    assert {"bert_config.json", "eval_results.txt", "train", "eval"} <= set(names)
    assert BertConfig.from_json_file(os.path.join(output_dir, "bert_config.json")) == \
        BertConfig(**TINY_CONFIG)
    with open(os.path.join(output_dir, "eval_results.txt")) as f:
        lines = f.read().splitlines()
    assert [line.split(" = ")[0] for line in lines] == [
        "global_step", "loss", "masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
        "next_sentence_loss"]
    assert lines[0] == "global_step = 12"
    assert all(np.isfinite(float(line.split(" = ")[1])) for line in lines)

    # The Google-layout export holds the trained weights under the original names.
    config = BertConfig(**TINY_CONFIG)
    trained = training.load_model(pretraining_task.PretrainingTask(config),
                                  training.RunConfig(output_dir=output_dir))
    exported = models.pretraining_model(config)
    prefix = os.path.join(output_dir, "google_checkpoint", "bert_model.ckpt")
    checkpoints.init_from_checkpoint(exported, prefix)
    names = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    assert "bert/encoder/layer_1/output/LayerNorm/gamma" in names
    assert "cls/predictions/output_bias" in names
    for a, b in zip(trained.weights, exported.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


def test_a_new_run_starts_from_init_checkpoint(runs, tmp_path):
    """A fresh output_dir + --init_checkpoint (the export, or a run directory) loads its weights."""
    config = BertConfig(**TINY_CONFIG)
    task = pretraining_task.PretrainingTask(config)
    trained = training.load_model(task, training.RunConfig(output_dir=runs[0])).get_weights()
    for init in (os.path.join(runs[0], "google_checkpoint", "bert_model.ckpt"), runs[0]):
        fresh = training.load_model(task, training.RunConfig(
            output_dir=str(tmp_path / "fresh"), init_checkpoint=init)).get_weights()
        for a, b in zip(fresh, trained):
            np.testing.assert_array_equal(a, b)


def _options(data, **overrides):
    values = dict(input_file=data["train"], bert_config_file=data["config"],
                  max_seq_length=SEQ, max_predictions_per_seq=PRED, do_train=True)
    values.update(overrides)
    return pretraining_task.PretrainingOptions(**values)


def test_record_length_mismatch_names_the_file_and_the_flag(data, tmp_path):
    config = training.RunConfig(output_dir=str(tmp_path / "out"), train_batch_size=4,
                                num_train_steps=1)
    with pytest.raises(ValueError, match=r"train\.tfrecord.*input_ids.*--max_seq_length"):
        pretraining_task.run_pretraining(_options(data, max_seq_length=SEQ + 1), config,
                                         tf.distribute.get_strategy())
    with pytest.raises(ValueError, match=r"masked_lm_positions.*--max_predictions_per_seq"):
        pretraining_task.run_pretraining(_options(data, max_predictions_per_seq=PRED - 1),
                                         config, tf.distribute.get_strategy())


def test_missing_inputs_are_named(data, tmp_path):
    config = training.RunConfig(output_dir=str(tmp_path / "out"), num_train_steps=1)
    strategy = tf.distribute.get_strategy()
    with pytest.raises(FileNotFoundError, match=r"--input_file: nothing matches '.*nope-\*'"):
        pretraining_task.run_pretraining(
            _options(data, input_file=f"{data['train']},{tmp_path}/nope-*"), config, strategy)
    with pytest.raises(FileNotFoundError, match="--eval_input_file"):
        pretraining_task.run_pretraining(
            _options(data, do_train=False, do_eval=True, eval_input_file=str(tmp_path / "x")),
            config, strategy)
    with pytest.raises(FileNotFoundError, match="no checkpoint in .* and no init_checkpoint"):
        pretraining_task.run_pretraining(
            _options(data, do_train=False, do_eval=True), config, strategy)


def test_eval_repeats_the_records_for_max_eval_steps_batches(runs, data, tmp_path):
    """The original repeats the eval input and evaluates exactly --max_eval_steps batches: 24
    records in batches of 8 are 3 batches a pass, so 4 steps are the 3 of a pass and the first
    again; --eval_one_pass stops after the pass."""
    strategy = tf.distribute.get_strategy()

    def evaluate(max_eval_steps, **options):
        output_dir = tmp_path / f"eval-{max_eval_steps}-{len(options)}"
        shutil.copytree(runs[0], output_dir)
        config = training.RunConfig(output_dir=str(output_dir), eval_batch_size=8,
                                    max_eval_steps=max_eval_steps)
        return pretraining_task.run_pretraining(
            _options(data, do_train=False, do_eval=True, eval_input_file=data["eval"], **options),
            config, strategy)

    first, one_pass, four = evaluate(1), evaluate(3), evaluate(4)
    assert four["loss"] == pytest.approx((3 * one_pass["loss"] + first["loss"]) / 4, rel=1e-6)
    assert evaluate(4, eval_one_pass=True)["loss"] == pytest.approx(one_pass["loss"], rel=1e-6)
    # No number of batches (the Python API's default): one pass, never an endless eval.
    assert evaluate(None)["loss"] == pytest.approx(one_pass["loss"], rel=1e-6)
