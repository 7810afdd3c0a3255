"""The AUC of `bert_tf.training.roc_auc` against tf.compat.v1.metrics.auc, keras.metrics.AUC and
the exact area; and a task's counts summed by the loop (replicas, micro-batches, the steps of one
loop call, eval batches) giving the AUC of all the examples at once."""

from support.distribute_utils import configure_two_cpus, two_cpu_strategy

configure_two_cpus()  # before TensorFlow starts (pytest imports every test module first)

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_tf.training import loop as training, roc_auc  # noqa: E402

ROWS, TOKENS = 64, 4


def _scores(rows: int, seed: int) -> dict[str, np.ndarray]:
    """Logits, labels that follow them loosely, and 0/1 weights (a padding mask)."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0.0, 2.0, (rows, TOKENS)).astype(np.float32)
    labels = (rng.random((rows, TOKENS)) < 1 / (1 + np.exp(-logits))).astype(np.float32)
    weights = (rng.random((rows, TOKENS)) < 0.8).astype(np.float32)
    return {"logit": logits, "label": labels, "weight": weights}


def _keras_auc(scores: dict[str, np.ndarray]) -> float:
    metric = keras.metrics.AUC(num_thresholds=200)
    metric.update_state(scores["label"], tf.sigmoid(scores["logit"]),
                        sample_weight=scores["weight"])
    return float(metric.result())


def _v1_auc(scores: dict[str, np.ndarray]) -> float:
    with tf.Graph().as_default():
        auc, update = tf.compat.v1.metrics.auc(scores["label"], tf.sigmoid(scores["logit"]),
                                               weights=scores["weight"])
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.local_variables_initializer())
            session.run(update)
            return float(session.run(auc))


def _exact_auc(scores: dict[str, np.ndarray]) -> float:
    """Σ over (positive, negative) pairs of w⁺·w⁻·([p⁺ > p⁻] + ½[p⁺ = p⁻]) / (W⁺·W⁻)."""
    p = tf.sigmoid(scores["logit"]).numpy().ravel().astype(np.float64)
    label, weight = scores["label"].ravel() > 0, scores["weight"].ravel().astype(np.float64)
    above = (p[label][:, None] > p[~label][None, :]) + 0.5 * (p[label][:, None] == p[~label][None, :])
    pairs = weight[label][:, None] * weight[~label][None, :]
    return float((above * pairs).sum() / pairs.sum())


def _histogram(scores: dict[str, np.ndarray]) -> np.ndarray:
    return roc_auc.roc_histogram(scores["label"], tf.sigmoid(scores["logit"]),
                                 scores["weight"]).numpy()


@pytest.mark.parametrize("seed", [0, 1])
def test_auc_is_the_originals_200_threshold_trapezoids(seed):
    scores = _scores(128, seed)
    histogram = _histogram(scores)
    assert histogram.shape == (2, 199)
    auc = roc_auc.roc_auc(histogram)
    assert auc == pytest.approx(_v1_auc(scores), abs=1e-6)
    assert auc == pytest.approx(_keras_auc(scores), abs=1e-6)
    # The thresholds only blur the order of a positive and a negative in one bucket: each such
    # pair moves the area by at most ½ of its weight.
    positives, negatives = histogram
    blur = 0.5 * np.sum(positives * negatives) / (positives.sum() * negatives.sum())
    assert 0 < blur < 0.01
    assert abs(auc - _exact_auc(scores)) <= blur + 1e-6


def test_histograms_of_parts_add_up_to_the_histogram_of_the_whole():
    scores = _scores(ROWS, 2)
    parts = [{name: value[i:i + 8] for name, value in scores.items()} for i in range(0, ROWS, 8)]
    summed = sum(_histogram(part) for part in parts)
    np.testing.assert_allclose(summed, _histogram(scores), atol=1e-5)
    assert roc_auc.roc_auc(summed) == pytest.approx(_keras_auc(scores), abs=1e-6)


class _Regression(keras.Model):
    """y = x·w + b: something for the loop to train."""

    def __init__(self):
        super().__init__(name="regression")
        self.dense = keras.layers.Dense(1)
        self.dense.build((None, 3))

    def call(self, features, training=False, static_shapes=False):
        return {"y": self.dense(features["x"])[:, 0]}


class _ScoredTask(training.Task):
    """Trains the regression and counts the ROC histogram of the features' own logits, labels
    and weights, which training does not change: the AUC the loop reports is that of exactly
    the examples it has seen."""

    def build_model(self):
        return _Regression()

    def loss_normalizers(self, features):
        return {"squared_error": tf.cast(tf.shape(features["x"])[0], tf.float32)}

    def losses(self, features, outputs):
        return {"squared_error": tf.reduce_sum(tf.square(outputs["y"] - features["y"]))}

    def counts(self, features, outputs):
        return {"roc": roc_auc.roc_histogram(features["label"], tf.sigmoid(features["logit"]),
                                             features["weight"])}

    def metrics_from_counts(self, counts):
        return {"auc": roc_auc.roc_auc(counts["roc"])}


def _examples(seed: int) -> dict[str, np.ndarray]:
    x = np.random.default_rng(seed).normal(size=(ROWS, 3)).astype(np.float32)
    return {"x": x, "y": x.sum(1), **_scores(ROWS, seed)}


def _input_fn(examples: dict[str, np.ndarray]):
    def input_fn(context, batch_size):
        # In order, no shuffling: replicas take consecutive batches, steps the next ones.
        return tf.data.Dataset.from_tensor_slices(examples).batch(batch_size, drop_remainder=True)
    return input_fn


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """6 updates of batch 8 in one loop call, over 2 replicas × 2 micro-batches."""
    task = _ScoredTask()
    config = training.RunConfig(output_dir=str(tmp_path_factory.mktemp("scored")),
                                train_batch_size=8, eval_batch_size=8, num_train_steps=6,
                                log_every_n_steps=6, gradient_accumulation_steps=2,
                                learning_rate=1e-2)
    figures = training.train(task, config, _input_fn(_examples(3)), two_cpu_strategy())
    return task, config, figures


def test_a_loop_call_reports_the_auc_of_every_example_of_its_steps(run):
    _, _, figures = run
    seen = {name: value[:6 * 8] for name, value in _examples(3).items()}
    assert figures["auc"] == pytest.approx(_keras_auc(seen), abs=1e-6)
    assert figures["auc"] != pytest.approx(_keras_auc(_examples(3)), abs=1e-4)


def test_evaluate_reports_the_auc_of_every_eval_example(run):
    task, config, _ = run
    examples = _examples(4)
    results = training.evaluate(task, config, _input_fn(examples), two_cpu_strategy())
    assert results["auc"] == pytest.approx(_keras_auc(examples), abs=1e-6)
    first_batch = {name: value[:8] for name, value in examples.items()}
    assert results["auc"] != pytest.approx(_keras_auc(first_batch), abs=1e-4)
    events = tf.io.gfile.glob(f"{config.output_dir}/eval/events.*")
    tags = {value.tag for path in events for event in tf.compat.v1.train.summary_iterator(path)
            for value in event.summary.value}
    assert "auc" in tags
