"""The learning-rate curves (--lr_schedule) against their formulas in numpy and against
transformers' schedulers of the same names; a resumed run follows the uninterrupted run's curve."""

import glob
import math
import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.errors import UserError
from bert_tf.model.config import BertConfig
from bert_tf.records import datasets, features
from bert_tf.tasks.pretraining import task as pretraining_task
from bert_tf.training import loop as training, optimizers, schedules
from support.pretraining_records import PRED, SEQ, TINY_CONFIG, pretraining_arrays, write_records

LR, TOTAL, WARMUP = 0.3, 20, 4


def numpy_rate(schedule, step, lr=LR, total=TOTAL, warmup=WARMUP, lr_end=0.0, power=1.0):
    """docs/optimization.md's formulas, in float64."""
    if step < warmup:
        return lr * step / warmup
    if schedule == "linear":
        return lr * (1 - min(step, total) / total)
    if schedule == "constant":
        return lr
    if schedule == "inverse_sqrt":
        timescale = warmup or 10_000
        return lr * math.sqrt(timescale / (step - warmup + timescale))
    progress = min((step - warmup) / max(1, total - warmup), 1.0)
    if schedule == "cosine":
        return lr_end + (lr - lr_end) * 0.5 * (1 + math.cos(math.pi * progress))
    return lr_end + (lr - lr_end) * (1 - progress) ** power


CASES = [("linear", {}), ("cosine", {}), ("cosine", {"lr_end": 0.05}), ("constant", {}),
         ("polynomial", {}), ("polynomial", {"lr_end": 0.01, "lr_power": 2.0}),
         ("polynomial", {"lr_end": 0.02, "lr_power": 0.5}), ("inverse_sqrt", {})]


@pytest.mark.parametrize("warmup", [WARMUP, 0])
@pytest.mark.parametrize("schedule,options", CASES)
def test_each_schedule_follows_its_formula(schedule, options, warmup):
    curve = schedules.learning_rate_schedule(schedule, LR, TOTAL, warmup, **options)
    steps = list(range(TOTAL + 6))  # past the end too: the decaying curves stay at lr_end
    got = [float(curve(step)) for step in steps]
    want = [numpy_rate(schedule, step, warmup=warmup, lr_end=options.get("lr_end", 0.0),
                       power=options.get("lr_power", 1.0)) for step in steps]
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-8)
    assert got[0] == (0.0 if warmup else pytest.approx(LR, rel=1e-6))
    if warmup:
        assert got[warmup] == pytest.approx(LR * (1 - warmup / TOTAL) if schedule == "linear"
                                            else LR, rel=1e-6)


def transformers_rates(name, steps, warmup, **kwargs) -> list[float]:
    """The rate transformers' `get_scheduler(name)` gives to the update after `step` updates."""
    import torch  # test-only references, installed with the test extras
    from transformers import get_scheduler

    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([parameter], lr=LR)
    scheduler = get_scheduler(name, optimizer, num_warmup_steps=warmup,
                              num_training_steps=TOTAL, scheduler_specific_kwargs=kwargs)
    rates = []
    for _ in range(steps):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return rates


@pytest.mark.parametrize("warmup", [WARMUP, 0])
@pytest.mark.parametrize("ours,options,theirs,their_options", [
    ("cosine", {}, "cosine", {}),
    ("cosine", {"lr_end": 0.05}, "cosine_with_min_lr", {"min_lr": 0.05}),
    ("constant", {}, "constant_with_warmup", {}),
    ("polynomial", {"lr_end": 0.01, "lr_power": 2.0}, "polynomial", {"lr_end": 0.01, "power": 2.0}),
    ("polynomial", {}, "linear", {}),  # transformers' linear: the decay starts after warm-up
    ("inverse_sqrt", {}, "inverse_sqrt", {})])
def test_schedules_equal_transformers_up_to_the_last_step(ours, options, theirs, their_options,
                                                          warmup):
    curve = schedules.learning_rate_schedule(ours, LR, TOTAL, warmup, **options)
    want = transformers_rates(theirs, TOTAL + 1, warmup, **their_options)
    np.testing.assert_allclose([float(curve(step)) for step in range(TOTAL + 1)], want,
                               rtol=2e-6, atol=1e-8)


def test_linear_is_the_originals_not_transformers():
    """The default keeps the original's decay counted from step 0: below transformers' linear
    after the warm-up (there the original is at lr·(1 − W/T), transformers' at lr)."""
    ours = schedules.learning_rate_schedule("linear", LR, TOTAL, WARMUP)
    theirs = transformers_rates("linear", WARMUP + 1, WARMUP)
    assert float(ours(WARMUP)) == pytest.approx(LR * (1 - WARMUP / TOTAL), rel=1e-6)
    assert theirs[WARMUP] == pytest.approx(LR)


@pytest.mark.parametrize("schedule,options,message", [
    ("step", {}, "--lr_schedule=step is not a schedule: use one of linear, cosine, constant, "
                 "polynomial, inverse_sqrt"),
    ("linear", {"lr_end": 1e-6}, "--lr_end is for --lr_schedule=cosine or polynomial, not "
                                 "linear"),
    ("cosine", {"lr_power": 2.0}, "--lr_power is for --lr_schedule=polynomial, not cosine"),
    ("cosine", {"lr_end": LR}, "--lr_end=0.3 must be at least 0 and below --learning_rate=0.3"),
    ("polynomial", {"lr_end": -1e-6}, "--lr_end=-1e-06 must be at least 0"),
    ("polynomial", {"lr_power": 0.0}, "--lr_power=0.0 must be > 0")])
def test_bad_schedule_flags_are_refused_by_name(schedule, options, message):
    with pytest.raises(UserError, match="^" + message.replace("(", r"\(").replace(".", r"\.")):
        training.RunConfig(output_dir="out", learning_rate=LR, lr_schedule=schedule, **options)


@pytest.mark.parametrize("schedule,options", CASES)
def test_optimizer_with_each_schedule_serialises(schedule, options):
    optimizer = optimizers.build_optimizer(LR, TOTAL, WARMUP, lr_schedule=schedule, **options)
    clone = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert clone.get_config() == optimizer.get_config()
    for step in (0, WARMUP + 3, TOTAL):
        assert float(clone._learning_rate(step)) == float(optimizer._learning_rate(step))


SCHEMA = features.pretraining_schema(SEQ, PRED)
RESUME_STEPS, SAVED_AT = 8, 4


def _learning_rates(output_dir: str) -> dict[int, float]:
    """{step: learning_rate} from the loop's TensorBoard summaries in output_dir/train."""
    rates = {}
    for path in glob.glob(os.path.join(output_dir, "train", "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag == "learning_rate":
                    rates[event.step] = float(tf.make_ndarray(value.tensor))
    return rates


def _train(records: str, output_dir: str) -> None:
    """A cosine run with warm-up and lr_end: a log line every step, a checkpoint every 4. One
    encoder layer: the curve is the optimizer's, whatever the model's depth."""
    task = pretraining_task.PretrainingTask(BertConfig(**{**TINY_CONFIG, "num_hidden_layers": 1}))
    config = training.RunConfig(output_dir=output_dir, train_batch_size=4,
                                num_train_steps=RESUME_STEPS, num_warmup_steps=2,
                                learning_rate=1e-3, lr_schedule="cosine", lr_end=1e-4,
                                log_every_n_steps=1, save_checkpoints_steps=SAVED_AT,
                                keep_checkpoint_max=3)

    def input_fn(context, batch_size):
        return datasets.record_dataset(records, SCHEMA, batch_size, is_training=True,
                                       input_context=context)
    training.train(task, config, input_fn)


def test_a_resumed_run_keeps_the_uninterrupted_runs_curve(tmp_path):
    records = write_records(tmp_path / "train.tfrecord", pretraining_arrays(32, 0))
    straight, resumed = str(tmp_path / "straight"), str(tmp_path / "resumed")
    _train(records, straight)
    # The resumed run starts from the straight run's checkpoint at step 4, as after a kill there.
    os.makedirs(resumed)
    for path in glob.glob(os.path.join(straight, f"ckpt-{SAVED_AT}.*")):
        shutil.copy(path, resumed)
    tf.compat.v1.train.update_checkpoint_state(resumed, os.path.join(resumed, f"ckpt-{SAVED_AT}"))
    _train(records, resumed)
    expected = _learning_rates(straight)
    got = _learning_rates(resumed)
    assert sorted(expected) == list(range(1, RESUME_STEPS + 1))
    assert sorted(got) == list(range(SAVED_AT + 1, RESUME_STEPS + 1))
    for step in got:
        assert got[step] == expected[step], step
        # The figure at step s is the rate of the s-th update: the curve at s − 1.
        assert got[step] == pytest.approx(numpy_rate("cosine", step - 1, lr=1e-3,
                                                     total=RESUME_STEPS, warmup=2, lr_end=1e-4),
                                          rel=1e-6)
