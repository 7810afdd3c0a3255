"""Layer-wise learning-rate decay (--layerwise_lr_decay): each depth's first update is ξ times the
one above it, head and embeddings included, with AdamW and LAMB, on one device and two replicas,
through the loop with gradient accumulation; ALBERT's shared layers are refused."""

from support.distribute_utils import configure_two_cpus, two_cpu_strategy

configure_two_cpus()  # before TensorFlow starts (pytest imports every test module first)

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_tf.errors import UserError  # noqa: E402
from bert_tf.model import models  # noqa: E402
from bert_tf.model.albert.config import AlbertConfig  # noqa: E402
from bert_tf.model.config import BertConfig  # noqa: E402
from bert_tf.records import datasets, features  # noqa: E402
from bert_tf.tasks.pretraining import task as pretraining_task  # noqa: E402
from bert_tf.training import loop as training, optimizers, schedules  # noqa: E402
from support.pretraining_records import PRED, SEQ, TINY_CONFIG, pretraining_arrays, \
    write_records  # noqa: E402

XI, LR = 0.5, 1e-2
# The first update without bias correction: lr·(1−β1)/√(1−β2) per coordinate where |g| ≫ ε.
ADAM_STEP = 0.1 / np.sqrt(0.001)
LAYERS = 3  # TINY_CONFIG's sizes with one more layer, so that two adjacent blocks exist
CONFIG = BertConfig(**{**TINY_CONFIG, "num_hidden_layers": LAYERS})


def classifier(strategy=None):
    strategy = strategy or tf.distribute.get_strategy()
    keras.utils.set_random_seed(5)
    with strategy.scope():
        model = models.classifier_model(CONFIG, num_labels=3)
        model(model.dummy_inputs())
    return model


def expected_exponents(model) -> list[int]:
    """ξ's exponent for each trainable variable, from the model's structure: L+1 the embeddings,
    L−i block i, 0 the pooler and the classifier head."""
    encoder = model.encoder
    groups = [(encoder.embeddings, LAYERS + 1), (encoder.pooler, 0), (model.classifier, 0)]
    groups += [(block, LAYERS - i) for i, block in enumerate(encoder.transformer_layers)]
    exponents = {id(v): exponent for layer, exponent in groups for v in layer.trainable_variables}
    assert len(exponents) == len(model.trainable_variables)
    return [exponents[id(v)] for v in model.trainable_variables]


def test_factors_follow_depth_with_ratio_xi_between_adjacent_depths():
    model = classifier()
    factors = schedules.layerwise_rate_factors(model.encoder, model.trainable_variables, XI)
    exponents = expected_exponents(model)
    assert sorted(set(exponents)) == [0, 1, 2, 3, 4]
    assert factors == [XI ** k for k in exponents]
    assert schedules.layerwise_rate_factors(model.encoder, model.trainable_variables, 1.0) == [
        1.0] * len(factors)


def random_gradients(model, seed=0) -> list[np.ndarray]:
    rng = np.random.RandomState(seed)
    return [rng.randn(*v.shape).astype(np.float32) for v in model.trainable_variables]


def first_update(optimizer_type: str, decay: float, strategy=None
                 ) -> tuple[keras.Model, list[np.ndarray], list[np.ndarray]]:
    """(the classifier, θ before, θ after) for one update of a new classifier on fixed gradients
    (weight decay and clipping off, constant rate), which two replicas of `strategy` give ¼ and
    ¾ of."""
    strategy = strategy or tf.distribute.get_strategy()
    model = classifier(strategy)
    variables = model.trainable_variables
    with strategy.scope():
        optimizer = optimizers.build_optimizer(
            LR, 10, 0, optimizer_type=optimizer_type, weight_decay_rate=0.0, clip_norm=None,
            lr_schedule="constant",
            variable_rate_factors=schedules.layerwise_rate_factors(model.encoder, variables,
                                                                   decay))
        optimizer.build(variables)
    before = [v.numpy() for v in variables]
    grads = [tf.constant(g) for g in random_gradients(model)]

    def replica_step():
        # Distinct tensors per replica: tf.distribute would take one tensor given by every
        # replica for an already-reduced value.
        share = 1.0
        if strategy.num_replicas_in_sync == 2:
            first = tf.distribute.get_replica_context().replica_id_in_sync_group == 0
            share = tf.where(first, 0.25, 0.75)
        optimizer.apply([g * share for g in grads], variables)

    tf.function(lambda: strategy.run(replica_step))()
    return model, before, [v.numpy() for v in variables]


def assert_moved_by(before, after, updates, names):
    """θ after = θ before + update, up to float32's rounding of θ (two units in its last place)."""
    for old, new, update, name in zip(before, after, updates, names):
        np.testing.assert_allclose(new - old, update, rtol=1e-5,
                                   atol=2 * np.spacing(np.abs(new).max()), err_msg=name)


def numpy_first_adam_update(grads: list[np.ndarray], factors: list[float]) -> list[np.ndarray]:
    """The original's first update without bias correction: −lr·f·m/(√v + ε); ≈ −3.16·lr·f·sign(g)
    for |g| ≫ ε."""
    updates = []
    for g, factor in zip(grads, factors):
        g = g.astype(np.float64)
        m, v = 0.1 * g, 0.001 * g * g
        updates.append(-LR * factor * m / (np.sqrt(v) + 1e-6))
    return updates


def largest_steps(before, after, exponents) -> list[float]:
    """max |Δθ| / (lr·ADAM_STEP) over the variables of each depth, head (0) to embeddings."""
    return [max(np.abs(new - old).max() for old, new, k in zip(before, after, exponents)
                if k == depth) / (LR * ADAM_STEP) for depth in range(LAYERS + 2)]


@pytest.mark.parametrize("replicas", [1, 2])
def test_first_adamw_update_of_each_depth_is_xi_times_the_one_above(replicas):
    model, before, after = first_update("adamw", XI,
                                        two_cpu_strategy() if replicas == 2 else None)
    exponents = expected_exponents(model)
    want = numpy_first_adam_update(random_gradients(model), [XI ** k for k in exponents])
    assert_moved_by(before, after, want, [v.path for v in model.trainable_variables])
    np.testing.assert_allclose(largest_steps(before, after, exponents),
                               [XI ** k for k in range(LAYERS + 2)], rtol=1e-3)


def test_first_lamb_update_of_each_depth_is_xi_times_the_undecayed_one():
    """LAMB's trust ratio ‖θ‖/‖u‖ does not depend on the rate: the factor passes through."""
    model, before, decayed = first_update("lamb", XI)
    exponents = expected_exponents(model)
    _, _, plain = first_update("lamb", 1.0)
    assert all(np.abs(new - old).max() > 0 for old, new in zip(before, plain))
    assert_moved_by(before, decayed, [XI ** k * (new - old) for old, new, k
                                      in zip(before, plain, exponents)],
                    [v.path for v in model.trainable_variables])


@pytest.mark.parametrize("groups", [1, 2])
def test_albert_shared_layers_are_refused(groups):
    config = AlbertConfig(**{**TINY_CONFIG, "num_hidden_layers": 4, "embedding_size": 16,
                             "num_hidden_groups": groups})
    model = models.classifier_model(config, num_labels=2)
    model(model.dummy_inputs())
    with pytest.raises(UserError, match=f"^--layerwise_lr_decay cannot be used with this model: "
                                        f"its 4 layers share {groups} set"):
        schedules.layerwise_rate_factors(model.encoder, model.trainable_variables, XI)


def test_albert_without_sharing_decays_like_bert():
    """One group per layer: every layer has weights of its own, so each has a depth."""
    config = AlbertConfig(**{**TINY_CONFIG, "embedding_size": 16, "num_hidden_groups": 2})
    model = models.classifier_model(config, num_labels=2)
    model(model.dummy_inputs())
    factors = schedules.layerwise_rate_factors(model.encoder, model.trainable_variables, XI)
    encoder = model.encoder
    by_id = {id(v): f for v, f in zip(model.trainable_variables, factors)}
    assert {by_id[id(v)] for v in encoder.embeddings.trainable_variables} == {XI ** 3}
    assert {by_id[id(v)] for v in encoder.group_0.trainable_variables} == {XI ** 2}
    assert {by_id[id(v)] for v in encoder.group_1.trainable_variables} == {XI}


@pytest.mark.parametrize("decay", [0.0, -0.5, 1.5])
def test_decay_outside_zero_to_one_is_refused(decay):
    with pytest.raises(UserError, match=rf"^--layerwise_lr_decay={decay} must be in \(0, 1\]"):
        training.RunConfig(output_dir="out", layerwise_lr_decay=decay)


SCHEMA = features.pretraining_schema(SEQ, PRED)


def test_loop_with_accumulation_decays_each_depth(tmp_path):
    """One update of the loop summing two micro-batches, weight decay and clipping off: the
    largest step of each depth is ξ times the one above (to 1%: ε in m/(√v + ε) shortens the
    steps of small gradients). The pretraining model's encoder decays as the classifier's; its
    two heads and the pooler learn at --learning_rate."""
    records = write_records(tmp_path / "train.tfrecord", pretraining_arrays(16, 0))
    task = pretraining_task.PretrainingTask(CONFIG)
    config = training.RunConfig(output_dir=str(tmp_path / "run"), train_batch_size=8,
                                num_train_steps=1, learning_rate=LR, weight_decay_rate=0.0,
                                clip_norm=None,
                                gradient_accumulation_steps=2, layerwise_lr_decay=XI)

    def input_fn(context, batch_size):
        return datasets.record_dataset(records, SCHEMA, batch_size, is_training=True,
                                       input_context=context)
    training.train(task, config, input_fn)
    # The loop initialises after keras.utils.set_random_seed(seed): the same draws give θ before.
    keras.utils.set_random_seed(config.seed)
    model = task.build_model()
    before = [v.numpy() for v in model.trainable_variables]
    tf.train.Checkpoint(model=model).read(str(tmp_path / "run" / "ckpt-1")).expect_partial()
    after = [v.numpy() for v in model.trainable_variables]
    factors = schedules.layerwise_rate_factors(model.encoder, model.trainable_variables, XI)
    exponents = [round(np.log(f) / np.log(XI)) for f in factors]
    assert sorted(set(exponents)) == list(range(LAYERS + 2))
    assert {exponents[i] for i, v in enumerate(model.trainable_variables)
            if v.path.startswith(("masked_lm/", "next_sentence/", "pooler/"))} == {0}
    np.testing.assert_allclose(largest_steps(before, after, exponents),
                               [XI ** k for k in range(LAYERS + 2)], rtol=1e-2)
