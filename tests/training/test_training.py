"""The shared loop on a tiny pretraining model: learning, eval and predict figures, accumulation;
variables the loss does not reach are left alone on every path of the train step."""

import gc
import logging
import math
import types

from support.distribute_utils import configure_two_cpus, two_cpu_strategy

configure_two_cpus()  # before TensorFlow starts (pytest imports every test module first)

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_tf.model.config import BertConfig  # noqa: E402
from bert_tf.records import datasets, features  # noqa: E402
from bert_tf.tasks.pretraining import task as pretraining_task  # noqa: E402
from bert_tf.training import best_checkpoint, loop as training  # noqa: E402
from bert_tf.training.log import summarize  # noqa: E402
from support.pretraining_records import PRED, SEQ, TINY_CONFIG, pretraining_arrays, \
    write_records  # noqa: E402

SCHEMA = features.pretraining_schema(SEQ, PRED)
EVAL_ROWS = 20


def _input_fn(path, is_training, drop_remainder=None):
    def input_fn(context, batch_size):
        return datasets.record_dataset(path, SCHEMA, batch_size, is_training=is_training,
                                       input_context=context, drop_remainder=drop_remainder)
    return input_fn


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    directory = tmp_path_factory.mktemp("training_data")
    return {"train": write_records(directory / "train.tfrecord", pretraining_arrays(96, 0)),
            "eval": write_records(directory / "eval.tfrecord", pretraining_arrays(EVAL_ROWS, 1))}


def _train_tiny(files, output_dir, dtype="float32", task=None, evaluate_every=None):
    """40 steps of a tiny model on records with a learnable pattern; with `evaluate_every`, a
    BestCheckpoint evaluates `task` on the eval records every that many steps while it trains.

    Returns the task, the RunConfig, the last figures and the results of those evaluations."""
    task = task or pretraining_task.PretrainingTask(BertConfig(**TINY_CONFIG))
    config = training.RunConfig(output_dir=output_dir, train_batch_size=8, eval_batch_size=8,
                                num_train_steps=40, num_warmup_steps=4, learning_rate=2e-3,
                                log_every_n_steps=10, save_checkpoints_steps=20, dtype=dtype)
    eval_input = _input_fn(files["eval"], False)
    evaluated = []

    def evaluate(checkpoint):
        evaluated.append(training.evaluate(task, config, eval_input, checkpoint=checkpoint))
        return evaluated[-1]

    evaluator = None if evaluate_every is None else best_checkpoint.BestCheckpoint(
        output_dir, evaluate, best_checkpoint.parse_metric("loss"), periods=[evaluate_every])
    figures = training.train(task, config, _input_fn(files["train"], True), evaluator=evaluator)
    return task, config, figures, evaluated


@pytest.fixture(scope="module")
def trained(files, tmp_path_factory):
    """The float32 run, evaluated while it trains every 10 steps (10 and 30 save no checkpoint
    but for the evaluation), its task counting eval traces: (task, config, figures,
    evaluations, traces when training ended)."""
    task = _CountsTraces(BertConfig(**TINY_CONFIG))
    run = _train_tiny(files, str(tmp_path_factory.mktemp("run")), task=task, evaluate_every=10)
    return *run, task.traces


def test_losses_fall_from_their_value_at_initialisation(trained, files):
    task, config, figures, _, _ = trained
    results = training.evaluate(task, config, _input_fn(files["train"], False))
    # At initialisation the heads are near uniform: ln(V) for the masked LM, ln(2) for NSP.
    assert figures["global_step"] == 40 and results["global_step"] == 40
    assert results["masked_lm_loss"] < 0.3 * math.log(TINY_CONFIG["vocab_size"])
    assert results["masked_lm_accuracy"] > 0.9
    assert results["next_sentence_loss"] < math.log(2)
    for name in ("loss", "masked_lm_loss", "next_sentence_loss", "gradient_norm",
                 "learning_rate", "sequences_per_second", "masked_lm_accuracy"):
        assert np.isfinite(figures[name]), name
    # The rate of the last update (the 40th, step index 39): linear decay counted from step 0.
    assert figures["learning_rate"] == pytest.approx(2e-3 * (1 - 39 / 40), rel=1e-5)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_mixed_precision_follows_the_float32_loss_curve(trained, files, tmp_path, dtype):
    _, _, expected, _, _ = trained
    task, config, figures, _ = _train_tiny(files, str(tmp_path), dtype)
    # Both curves fall from ln(V) + ln(2) ≈ 5.3 to ≈ 0.6. The masked-LM part stays within 1% of
    # that drop; the next-sentence part, half-learned after 40 steps, moves by ±0.1 with any
    # change of the dropout draws, so it is only required to have been learned in both.
    initial = math.log(TINY_CONFIG["vocab_size"]) + math.log(2)
    assert abs(figures["masked_lm_loss"] - expected["masked_lm_loss"]) < 0.01 * initial
    assert max(figures["next_sentence_loss"], expected["next_sentence_loss"]) < math.log(2)
    assert figures["masked_lm_accuracy"] > 0.9
    # Master weights stay float32; the compute dtype is the policy's.
    model = training.load_model(task, config)
    assert {w.dtype for w in model.weights} == {"float32"}
    assert model.dtype_policy.compute_dtype == dtype


def _direct_eval(model, arrays, batch_size):
    """The original's eval figures computed with numpy from the model's outputs."""
    outputs = model({k: tf.constant(v, tf.int32 if v.dtype != np.float32 else tf.float32)
                     for k, v in arrays.items()}, training=False)
    log_probs = tf.nn.log_softmax(outputs["masked_lm_logits"]).numpy()
    ids, weights = arrays["masked_lm_ids"], arrays["masked_lm_weights"]
    mlm_ce = -np.take_along_axis(log_probs, ids[..., None], -1)[..., 0]
    nsp_log_probs = tf.nn.log_softmax(outputs["next_sentence_logits"]).numpy()
    nsp_labels = arrays["next_sentence_labels"][:, 0]
    nsp_ce = -nsp_log_probs[np.arange(len(nsp_labels)), nsp_labels]
    batches = [slice(i, i + batch_size) for i in range(0, len(ids), batch_size)]
    batch_losses = [(mlm_ce[b] * weights[b]).sum() / (weights[b].sum() + 1e-5) + nsp_ce[b].mean()
                    for b in batches]
    return {"masked_lm_loss": (mlm_ce * weights).sum() / weights.sum(),
            "masked_lm_accuracy": ((log_probs.argmax(-1) == ids) * weights).sum() / weights.sum(),
            "next_sentence_loss": nsp_ce.mean(),
            "next_sentence_accuracy": (nsp_log_probs.argmax(-1) == nsp_labels).mean(),
            "loss": np.mean(batch_losses)}


def test_evaluate_streams_the_originals_metrics_over_every_batch(trained, files):
    task, config, *_ = trained
    results = training.evaluate(task, config, _input_fn(files["eval"], False))
    arrays = pretraining_arrays(EVAL_ROWS, 1)
    model = training.load_model(task, config)
    expected = _direct_eval(model, arrays, config.eval_batch_size)
    for name, value in expected.items():
        assert results[name] == pytest.approx(value, rel=1e-5), name
    limited = training.evaluate(task, config.replace(max_eval_steps=1),
                                _input_fn(files["eval"], False))
    expected = _direct_eval(model, {name: value[:8] for name, value in arrays.items()}, 8)
    assert limited["masked_lm_loss"] == pytest.approx(expected["masked_lm_loss"], rel=1e-5)


class _WithIds(pretraining_task.PretrainingTask):
    def predictions(self, features, outputs):
        return {"input_ids": features["input_ids"], **outputs}


def test_predict_yields_every_example_in_input_order(trained, files):
    task, config, *_ = trained
    rows = list(training.predict(_WithIds(task.bert_config), config,
                                 _input_fn(files["eval"], False)))
    arrays = pretraining_arrays(EVAL_ROWS, 1)
    assert len(rows) == EVAL_ROWS  # 8 + 8 + a partial batch of 4
    np.testing.assert_array_equal(np.stack([r["input_ids"] for r in rows]), arrays["input_ids"])
    model = training.load_model(task, config)
    logits = model({k: tf.constant(v[-4:]) for k, v in arrays.items()},
                   training=False)["next_sentence_logits"].numpy()
    np.testing.assert_allclose(np.stack([r["next_sentence_logits"] for r in rows[-4:]]), logits,
                               rtol=1e-5, atol=1e-6)


class _CountsTraces(pretraining_task.PretrainingTask):
    """Counts the eval and predict steps' forward passes run in Python (training=False): a
    tf.function runs them only while it traces; and the models it builds."""

    def __init__(self, bert_config):
        super().__init__(bert_config)
        self.traces = 0
        self.builds = 0

    def build_model(self):
        self.builds += 1
        return super().build_model()

    def forward(self, model, features, training, static_shapes=False):
        self.traces += not training
        return super().forward(model, features, training, static_shapes)


def test_repeated_evaluate_and_predict_reuse_one_trace(trained, files):
    """A second evaluate()/predict() of the same task traces nothing new, and still evaluates
    the checkpoint it is given (restored into the first call's model); predict() runs on the
    model evaluate() built."""
    task, config, *_ = trained
    counting = _CountsTraces(task.bert_config)
    eval_input = _input_fn(files["eval"], False)
    latest = training.evaluate(counting, config, eval_input)
    traced = counting.traces
    assert traced == 1  # batches of 8, 8 and 4 rows: one trace for all
    assert training.evaluate(counting, config, eval_input) == latest
    earlier = training.evaluate(counting, config, eval_input,
                                checkpoint=f"{config.output_dir}/ckpt-20")
    assert counting.traces == traced
    assert earlier["global_step"] == 20 and earlier["loss"] != latest["loss"]
    assert earlier == training.evaluate(task, config, eval_input,
                                        checkpoint=f"{config.output_dir}/ckpt-20")
    assert training.evaluate(counting, config, eval_input) == latest
    first = list(training.predict(counting, config, eval_input))
    traced = counting.traces
    second = list(training.predict(counting, config, eval_input))
    assert counting.traces == traced and len(second) == EVAL_ROWS
    assert counting.builds == 1
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a["next_sentence_logits"], b["next_sentence_logits"])


def test_evaluations_during_training_trace_the_eval_step_once(trained):
    """Each evaluation during training (every 10 steps of 40) evaluates its own checkpoint with
    the eval step traced at the first one, for all its batch sizes (20 rows: 8, 8, 4)."""
    *_, evaluated, traces = trained
    assert [results["global_step"] for results in evaluated] == [10, 20, 30, 40]
    assert evaluated[0]["loss"] != evaluated[1]["loss"]
    assert traces == 1


def test_a_finished_run_is_not_trained_again(trained, files):
    task, config, *_ = trained
    assert training.train(task, config, _input_fn(files["train"], True)) == {"global_step": 40.0}


def test_steps_per_call_stop_at_logs_checkpoints_and_the_end():
    config = training.RunConfig(output_dir="x", num_train_steps=250, iterations_per_loop=1000,
                                log_every_n_steps=100, save_checkpoints_steps=30)
    steps, step = [], 0
    while step < config.num_train_steps:
        steps.append(training._steps_this_call(step, config))
        step += steps[-1]
    assert steps == [30, 30, 30, 10, 20, 30, 30, 20, 10, 30, 10]


def test_summarize_turns_sums_into_weighted_means():
    totals = {"loss": 6.0, "acc/sum": 3.0, "acc/weight": 4.0, "empty/sum": 0.0,
              "empty/weight": 0.0}
    assert summarize(totals, 3) == {"loss": 2.0, "acc": 0.75, "empty": 0.0}


def test_run_config_rejects_bad_values():
    with pytest.raises(ValueError, match="--dtype"):
        training.RunConfig(output_dir="x", dtype="float64")
    with pytest.raises(ValueError, match="--optimizer"):
        training.RunConfig(output_dir="x", optimizer="sgd")
    with pytest.raises(ValueError, match="--train_batch_size"):
        training.RunConfig(output_dir="x", train_batch_size=0)


class _PartlyUnusedModel(keras.Model):
    """y = x·w + b from a Dense layer; a second Dense layer is built but never called."""

    def __init__(self):
        super().__init__(name="partly_unused")
        self.used = keras.layers.Dense(1, name="used")
        self.unused = keras.layers.Dense(4, name="unused")
        self.used.build((None, 3))
        self.unused.build((None, 3))

    def call(self, features, training=False, static_shapes=False):
        # static_shapes: what the XLA step asks for; no shape here depends on the batch.
        return {"y": self.used(features["x"])[:, 0]}  # [B]


class _RegressionTask(training.Task):
    """Squared error of y = x·[1, -2, 3] + 0.5; the loss never reaches `unused`."""

    def build_model(self):
        return _PartlyUnusedModel()

    def loss_normalizers(self, features):
        return {"squared_error": tf.cast(tf.shape(features["x"])[0], tf.float32)}

    def losses(self, features, outputs):
        error = tf.cast(outputs["y"], tf.float32) - features["y"]
        return {"squared_error": tf.reduce_sum(tf.square(error))}


def _regression_input_fn(context, batch_size):
    x = np.random.RandomState(0).randn(64, 3).astype(np.float32)
    y = x @ np.array([1.0, -2.0, 3.0], np.float32) + 0.5
    dataset = tf.data.Dataset.from_tensor_slices({"x": x, "y": y}).repeat()
    return dataset.batch(batch_size, drop_remainder=True)


@pytest.mark.parametrize("path", ["one_device", "mirrored_accumulation", "float16_xla"])
def test_variables_without_gradient_are_left_alone(path, tmp_path):
    changes = {"mirrored_accumulation": dict(gradient_accumulation_steps=2),
               "float16_xla": dict(dtype="float16", use_xla=True)}.get(path, {})
    strategy = two_cpu_strategy() if path.startswith("mirrored") else None
    task = _RegressionTask()
    config = training.RunConfig(output_dir=str(tmp_path), train_batch_size=8, learning_rate=0.3,
                                num_train_steps=30, log_every_n_steps=10,
                                weight_decay_rate=0.1, **changes)
    keras.utils.set_random_seed(config.seed)  # the loop seeds the same way before it builds
    initial = task.build_model()
    figures = training.train(task, config, _regression_input_fn, strategy)
    trained = training.load_model(task, config)
    batch = next(iter(_regression_input_fn(None, 64)))
    initial_loss = np.mean((initial(batch)["y"].numpy() - batch["y"].numpy()) ** 2)
    assert figures["squared_error_loss"] < 0.05 * initial_loss, (figures, initial_loss)
    assert np.all(trained.used.kernel.numpy() != initial.used.kernel.numpy())
    # No update and no weight decay (0.1 · lr 0.3 would shrink them by 3% a step).
    assert np.any(initial.unused.kernel.numpy() != 0)
    np.testing.assert_array_equal(trained.unused.kernel.numpy(), initial.unused.kernel.numpy())
    np.testing.assert_array_equal(trained.unused.bias.numpy(), initial.unused.bias.numpy())


def test_train_frees_its_run_when_it_returns(tmp_path):
    """train()'s input iterator, and with its frame the model and optimizer, go as it returns,
    not at some later full garbage collection: a tf.data iterator freed by the collector can
    block it for seconds (its autotuning thread may miss the wake-up and sleep out its period).
    Garbage collection is off, so only what no reference cycle holds is freed."""
    config = training.RunConfig(output_dir=str(tmp_path), train_batch_size=8, learning_rate=0.3,
                                num_train_steps=4, log_every_n_steps=4)
    gc.collect()
    gc.disable()
    try:
        training.train(_RegressionTask(), config, _regression_input_fn)
        alive = [type(o).__name__ for o in gc.get_objects()
                 if isinstance(o, (tf.data.Iterator, tf.distribute.DistributedIterator))
                 or isinstance(o, types.FrameType) and o.f_code is training.train.__code__]
    finally:
        gc.enable()
    assert alive == []


def _finite_regression_input_fn(context, batch_size):
    return _regression_input_fn(context, batch_size).take(2)


@pytest.mark.parametrize("one_device", [False, True], ids=["default", "one_device_cpu"])
def test_one_cpu_replica_reads_its_input_without_tf_data_autotuning(one_device, tmp_path,
                                                                     monkeypatch):
    """Every tf.data iterator that train, evaluate and predict make for one replica on the CPU
    is one without autotuning: freeing an autotuned iterator waits for its autotuning thread,
    which TensorFlow 2.21 wakes before its cancellation counts, so that it sleeps out its
    period (up to a minute) while the script stands still. A distributed dataset of a
    OneDeviceStrategy makes a per-device iterator that always autotunes."""
    autotuned = []
    iterate = tf.data.Dataset.__iter__

    def recording_iter(dataset):
        autotuned.append(dataset.options().autotune.enabled is not False)
        return iterate(dataset)
    monkeypatch.setattr(tf.data.Dataset, "__iter__", recording_iter)
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0") if one_device else None
    config = training.RunConfig(output_dir=str(tmp_path), train_batch_size=8, learning_rate=0.3,
                                num_train_steps=4, log_every_n_steps=4)
    training.train(_RegressionTask(), config, _regression_input_fn, strategy)
    training.evaluate(_RegressionTask(), config, _finite_regression_input_fn, strategy)
    predictions = list(training.predict(_RegressionTask(), config, _finite_regression_input_fn,
                                        strategy))
    assert len(predictions) == 16
    assert autotuned == [False, False, False]


def test_a_distributed_input_is_freed_after_one_log_line(tmp_path, caplog):
    """Where the replicas read a distributed dataset (whose per-device iterators autotune),
    training ends with a line saying what freeing it may wait for, then frees it."""
    config = training.RunConfig(output_dir=str(tmp_path), train_batch_size=8, learning_rate=0.3,
                                num_train_steps=4, log_every_n_steps=4)
    with caplog.at_level(logging.INFO, logger="absl"):
        training.train(_RegressionTask(), config, _regression_input_fn, two_cpu_strategy())
    lines = [r.getMessage() for r in caplog.records if "autotuning" in r.getMessage()]
    assert lines == ["training ended: freeing its distributed input, whose tf.data autotuning "
                     "threads TensorFlow may wait up to a minute for"]
