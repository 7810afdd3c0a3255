"""Streaming pretraining metrics on hand-made batches."""

import numpy as np
import tensorflow as tf

from distribute_utils import configure_two_cpus, two_cpu_strategy

configure_two_cpus()

from bert_tf.tasks.pretraining import metrics as pretraining  # noqa: E402

LOG_2 = np.log(2.0)
# Batch 1: 2 examples, 2 MLM slots each; logits make argmax and CE easy to read off.
# Slot logits [0, 0] have CE log 2 and argmax 0.
BATCH_1 = dict(
    masked_lm_logits=np.array([[[5.0, 0.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 5.0]]], np.float32),
    masked_lm_ids=np.array([[0, 1], [0, 0]], np.int32),
    masked_lm_weights=np.array([[1.0, 1.0], [1.0, 0.0]], np.float32),
    next_sentence_logits=np.array([[0.0, 0.0], [0.0, 0.0]], np.float32),
    next_sentence_labels=np.array([[0], [1]], np.int32))
# Batch 2: one example, one real slot, predicted right; next sentence wrong.
BATCH_2 = dict(
    masked_lm_logits=np.array([[[0.0, 0.0], [0.0, 0.0]]], np.float32),
    masked_lm_ids=np.array([[0, 1]], np.int32),
    masked_lm_weights=np.array([[1.0, 0.0]], np.float32),
    next_sentence_logits=np.array([[0.0, 0.0]], np.float32),
    next_sentence_labels=np.array([[1]], np.int32))


def ce(logits, label):
    return np.log(np.exp(logits).sum()) - logits[label]


def test_streaming_values_over_two_batches():
    metrics = pretraining.PretrainingMetrics()
    metrics.update(**BATCH_1, loss=1.0)
    metrics.update(**BATCH_2, loss=4.0)
    result = metrics.result()
    # MLM real slots: b1 (5,0)->0 right, (0,0)->1 wrong (argmax 0), (0,0)->0 right; b2 right.
    np.testing.assert_allclose(result["masked_lm_accuracy"], 3 / 4)
    mlm_ce = [ce(np.array([5.0, 0.0]), 0), LOG_2, LOG_2, LOG_2]
    np.testing.assert_allclose(result["masked_lm_loss"], sum(mlm_ce) / 4, rtol=1e-6)
    # NSP: argmax 0 everywhere; labels 0, 1, 1.
    np.testing.assert_allclose(result["next_sentence_accuracy"], 1 / 3, rtol=1e-6)
    np.testing.assert_allclose(result["next_sentence_loss"], LOG_2, rtol=1e-6)
    np.testing.assert_allclose(result["loss"], 2.5)  # Mean over batches.
    assert all(isinstance(value, np.float32) for value in result.values())
    metrics.reset()
    metrics.update(**BATCH_2)
    assert metrics.result() == {"masked_lm_accuracy": 1.0, "masked_lm_loss": np.float32(LOG_2),
                                "next_sentence_accuracy": 0.0,
                                "next_sentence_loss": np.float32(LOG_2)}


def test_two_replicas_give_the_one_device_result():
    batch = {key: np.concatenate([BATCH_1[key], BATCH_2[key]]) for key in BATCH_1}
    single = pretraining.PretrainingMetrics()
    single.update(**batch, loss=3.0)
    strategy = two_cpu_strategy()
    with strategy.scope():
        mirrored = pretraining.PretrainingMetrics()
    names = list(batch)
    dataset = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices(tuple(batch[k] for k in names)).batch(3))

    @tf.function
    def update(*values):
        def replica_update(*values):
            # Each replica passes its share of the batch loss 3.0: 1.0 per example here.
            share = tf.cast(tf.shape(values[0])[0], tf.float32)
            mirrored.update(**dict(zip(names, values)), loss=share)
        strategy.run(replica_update, args=values)

    update(*next(iter(dataset)))
    want, got = single.result(), mirrored.result()
    assert want.keys() == got.keys()
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-6, err_msg=key)
