"""The optimizer against numpy re-implementations of the original's formulas, step by step."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from support.distribute_utils import configure_two_cpus, two_cpu_strategy

configure_two_cpus()

from bert_tf.training import optimizers, schedules  # noqa: E402
from bert_tf.model import losses  # noqa: E402

DECAYED = ("word_embeddings", "dense/kernel", "logits/kernel")
EXCLUDED = ("dense/bias", "LayerNorm/gamma", "LayerNorm/beta", "layer_normalization",
            "output_bias", "logits/bias")


class OutputBias(keras.layers.Layer):
    def build(self, input_shape):
        self.output_bias = self.add_weight(shape=(input_shape[-1],), name="output_bias")

    def call(self, x):
        return x + self.output_bias


def toy_model() -> keras.Model:
    """Tiny model whose variables are named like the encoder's (LayerNorm, biases, embeddings)."""
    keras.utils.set_random_seed(7)
    ids = keras.Input((4,), dtype="int32")
    h = keras.layers.Embedding(11, 6, name="word_embeddings")(ids)
    h = keras.layers.Dense(6, name="dense", bias_initializer="random_normal")(h)
    h = keras.layers.LayerNormalization(name="LayerNorm", gamma_initializer="random_normal")(h)
    h = keras.layers.LayerNormalization()(h)
    h = keras.layers.Dense(5, name="logits")(h)
    return keras.Model(ids, OutputBias(name="masked_lm")(h))


def decay_flags(variables) -> list[bool]:
    return [not any(name in v.path for name in EXCLUDED) for v in variables]


def gradient_steps(variables, scales, seed=0):
    """One list of gradients per step; step i has global norm scales[i]."""
    rng = np.random.RandomState(seed)
    steps = []
    for scale in scales:
        grads = [rng.randn(*v.shape) for v in variables]
        norm = np.sqrt(sum(np.sum(g * g) for g in grads))
        steps.append([(g * scale / norm).astype(np.float32) for g in grads])
    return steps


def numpy_schedule(step, lr, total, warmup):
    return lr * step / warmup if step < warmup else lr * (1.0 - min(step, total) / total)


def numpy_clip(grads, clip_norm):
    norm = np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in grads))
    return [g * clip_norm / max(norm, clip_norm) for g in grads], norm


def numpy_adamw(params, steps, lrs, decay, wd=0.01, b1=0.9, b2=0.999, eps=1e-6, clip_norm=1.0):
    """The original: m, v without bias correction; u = m/(√v+ε) + wd·θ; θ −= lr·u."""
    params = [p.astype(np.float64) for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for grads, lr in zip(steps, lrs):
        grads, _ = numpy_clip(grads, clip_norm)
        for i, g in enumerate(grads):
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            u = m[i] / (np.sqrt(v[i]) + eps) + (wd * params[i] if decay[i] else 0.0)
            params[i] = params[i] - lr * u
    return params


def numpy_lamb(params, steps, lrs, decay, adapt, wd=0.01, b1=0.9, b2=0.999, eps=1e-6,
               clip_norm=1.0):
    """LAMB: bias-corrected Adam direction + wd·θ, scaled by the trust ratio ‖θ‖/‖u‖."""
    params = [p.astype(np.float64) for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for t, (grads, lr) in enumerate(zip(steps, lrs), start=1):
        grads, _ = numpy_clip(grads, clip_norm)
        for i, g in enumerate(grads):
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            u = (m[i] / (1 - b1 ** t)) / (np.sqrt(v[i] / (1 - b2 ** t)) + eps)
            if decay[i]:
                u = u + wd * params[i]
            w_norm, u_norm = np.linalg.norm(params[i]), np.linalg.norm(u)
            ratio = w_norm / u_norm if adapt[i] and w_norm > 0 and u_norm > 0 else 1.0
            params[i] = params[i] - lr * ratio * u
    return params


# Global norms around the clip norm 1.0: clipping is active on steps 0, 2 and 4 only.
SCALES = (3.0, 0.4, 1.7, 0.05, 5.0, 0.9)
LR, TOTAL, WARMUP = 0.1, 8, 2


@pytest.mark.parametrize("optimizer_type,fuse_update",
                         [("adamw", True), ("adamw", False), ("lamb", True)])
def test_updates_equal_numpy_formula_step_by_step(optimizer_type, fuse_update):
    model = toy_model()
    variables = model.trainable_variables
    decay = decay_flags(variables)
    assert sum(decay) == 3 and len(decay) - sum(decay) == 7  # Both kinds present.
    optimizer = optimizers.build_optimizer(LR, TOTAL, WARMUP, optimizer_type=optimizer_type,
                                              fuse_update=fuse_update)
    steps = gradient_steps(variables, SCALES)
    params = [v.numpy() for v in variables]
    for n, grads in enumerate(steps):
        optimizer.apply([tf.constant(g) for g in grads], variables)
        lrs = [numpy_schedule(i, LR, TOTAL, WARMUP) for i in range(n + 1)]
        if optimizer_type == "adamw":
            want = numpy_adamw(params, steps[:n + 1], lrs, decay)
        else:
            want = numpy_lamb(params, steps[:n + 1], lrs, decay, adapt=decay)
        for variable, expected in zip(variables, want):
            np.testing.assert_allclose(variable.numpy(), expected, rtol=2e-5, atol=2e-6,
                                       err_msg=f"step {n}, {variable.path}")
        np.testing.assert_allclose(optimizer.gradient_norm.numpy(), SCALES[n], rtol=1e-5)
    assert int(optimizer.iterations.numpy()) == len(SCALES)


def test_weight_decay_rule_with_zero_gradients():
    """m = v = 0, so u = wd·θ exactly for decayed variables and θ is unchanged for the others."""
    model = toy_model()
    variables = model.trainable_variables
    optimizer = optimizers.AdamWeightDecay(learning_rate=0.5, weight_decay_rate=0.1)
    before = [v.numpy() for v in variables]
    optimizer.apply([tf.zeros_like(v) for v in variables], variables)
    for variable, old in zip(variables, before):
        decayed = not any(name in variable.path for name in EXCLUDED)
        assert optimizer.uses_weight_decay(variable) == decayed, variable.path
        np.testing.assert_allclose(variable.numpy(), old * (1 - 0.5 * 0.1) if decayed else old,
                                   rtol=1e-6, err_msg=variable.path)


def test_pretraining_model_excludes_layer_norm_and_biases(tiny_config):
    """On the real model the rule decays exactly the matrices (kernels, embeddings, weights)."""
    from bert_tf.model import models

    model = models.pretraining_model(tiny_config)
    batch, seq, predictions = 2, 13, 3
    model({"input_ids": tf.ones([batch, seq], tf.int32),
           "input_mask": tf.ones([batch, seq], tf.int32),
           "segment_ids": tf.zeros([batch, seq], tf.int32),
           "masked_lm_positions": tf.ones([batch, predictions], tf.int32)})
    optimizer = optimizers.AdamWeightDecay()
    optimizer.build(model.trainable_variables)
    for variable in model.trainable_variables:
        # BERT's only rank-1 variables are LayerNorm gammas/betas and biases.
        assert optimizer.uses_weight_decay(variable) == (len(variable.shape) == 2), variable.path
    excluded = [v.path for v in model.trainable_variables if not optimizer.uses_weight_decay(v)]
    assert any("output_bias" in path for path in excluded)
    assert sum("gamma" in path for path in excluded) == 2 * tiny_config.num_hidden_layers + 2


@pytest.mark.parametrize("step,expected", [
    (0, 0.0), (1, 0.5), (3, 1.5),        # warm-up: lr·step/warmup
    (4, 2.0 * (1 - 4 / 10)),             # at warm-up end: lr·(1 − warmup/total), not lr
    (7, 2.0 * (1 - 7 / 10)), (10, 0.0), (25, 0.0)])
def test_schedule_known_values(step, expected):
    schedule = schedules.WarmupLinearSchedule(2.0, num_train_steps=10, num_warmup_steps=4)
    np.testing.assert_allclose(float(schedule(step)), expected, rtol=1e-6, atol=1e-7)


def test_schedule_without_warmup_and_serialization():
    schedule = schedules.WarmupLinearSchedule(1e-4, num_train_steps=100, num_warmup_steps=0)
    np.testing.assert_allclose(float(schedule(0)), 1e-4, rtol=1e-6)
    np.testing.assert_allclose(float(schedule(50)), 5e-5, rtol=1e-6)
    optimizer = optimizers.build_optimizer(1e-4, 100, 10, optimizer_type="lamb")
    clone = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert isinstance(clone, optimizers.Lamb)
    assert clone.get_config() == optimizer.get_config()
    np.testing.assert_allclose(float(clone.learning_rate), 0.0)
    with pytest.raises(ValueError, match="num_train_steps"):
        schedules.WarmupLinearSchedule(1e-4, num_train_steps=0, num_warmup_steps=0)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="adamw, lamb"):
        optimizers.build_optimizer(1e-4, 10, 1, optimizer_type="sgd")
    with pytest.raises(ValueError, match="weight_decay_rate"):
        optimizers.AdamWeightDecay(weight_decay=0.01)
    with pytest.raises(ValueError, match="single replica"):
        with two_cpu_strategy().scope():
            optimizers.build_optimizer(1e-4, 10, 1, gradient_accumulation_steps=2)


def data(batch=8, seed=3):
    rng = np.random.RandomState(seed)
    ids = rng.randint(0, 11, (batch, 4)).astype(np.int32)
    labels = rng.randint(0, 5, (batch, 4)).astype(np.int32)
    weights = (rng.rand(batch, 4) > 0.4).astype(np.float32)
    return ids, labels, weights


def replica_share(parts: losses.LossParts) -> tf.Tensor:
    """This replica's share of the global batch's loss, as `bert_tf.training.steps` divides it."""
    context = tf.distribute.get_replica_context()
    normalizer = context.all_reduce(tf.distribute.ReduceOp.SUM, parts.normalizer)
    return parts.total / (normalizer + parts.epsilon)


def train(strategy=None, steps=3, jit_compile=False, checkpoint=None, restore=None, **kwargs):
    """A few MLM-style steps of the toy model; returns (weights, optimizer)."""
    strategy = strategy or tf.distribute.get_strategy()
    with strategy.scope():
        model = toy_model()
        optimizer = optimizers.build_optimizer(LR, TOTAL, WARMUP, **kwargs)
        optimizer.build(model.trainable_variables)
    if restore:
        tf.train.Checkpoint(model=model, optimizer=optimizer).read(restore).assert_consumed()

    def replica_step(ids, labels, weights):
        with tf.GradientTape() as tape:
            loss = replica_share(losses.masked_lm_loss(model(ids), labels, weights))
            scaled = optimizer.scale_loss(loss)
        optimizer.apply(tape.gradient(scaled, model.trainable_variables),
                        model.trainable_variables)

    @tf.function(jit_compile=jit_compile)
    def step(*batch):
        strategy.run(replica_step, args=batch)

    dataset = tf.data.Dataset.from_tensor_slices(data()).batch(8).repeat()
    batches = iter(strategy.experimental_distribute_dataset(dataset))
    for n in range(steps):
        if checkpoint and n == checkpoint[0]:
            tf.train.Checkpoint(model=model, optimizer=optimizer).write(checkpoint[1])
        step(*next(batches))
    return [v.numpy() for v in model.trainable_variables], optimizer


@pytest.fixture(scope="module")
def baseline():
    """`train()` on one device: the reference for the other set-ups."""
    return train()


def assert_close(a, b, atol):
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=0, atol=atol)


@pytest.mark.parametrize("optimizer_type", ["adamw", "lamb"])
def test_checkpoint_resume_gives_identical_updates(tmp_path, optimizer_type):
    path = str(tmp_path / "ckpt")
    straight, optimizer = train(steps=5, checkpoint=(3, path), optimizer_type=optimizer_type)
    resumed, restored = train(steps=2, restore=path, optimizer_type=optimizer_type)
    for a, b in zip(straight, resumed):
        np.testing.assert_array_equal(a, b)
    assert int(restored.iterations.numpy()) == int(optimizer.iterations.numpy()) == 5
    for a, b in zip(optimizer.variables, restored.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_mirrored_two_replicas_match_one_device(baseline):
    """Replica shares of the loss + all-reduce, then clipping: the same update as one device."""
    one, single = baseline
    two, mirrored = train(two_cpu_strategy())
    assert single.gradient_norm.numpy() > 1.0  # Clipping was active.
    np.testing.assert_allclose(mirrored.gradient_norm.numpy(), single.gradient_norm.numpy(),
                               rtol=1e-5)
    assert_close(one, two, atol=1e-5)


def test_jit_compiled_step_matches(baseline):
    compiled, _ = train(jit_compile=True)
    assert_close(baseline[0], compiled, atol=1e-5)


def test_loss_scaling_matches_unscaled_and_skips_overflow_on_any_replica(baseline):
    scaled, optimizer = train(loss_scale=True)
    assert isinstance(optimizer, optimizers.LossScaleOptimizer)
    assert_close(baseline[0], scaled, atol=1e-5)

    strategy = two_cpu_strategy()
    with strategy.scope():
        model = toy_model()
        optimizer = optimizers.build_optimizer(LR, TOTAL, 0, loss_scale=True)
        optimizer.build(model.trainable_variables)
    before = [v.numpy() for v in model.trainable_variables]

    @tf.function
    def overflow_on_second_replica(ids, labels, weights):
        def replica_step(ids, labels, weights):
            replica = tf.distribute.get_replica_context().replica_id_in_sync_group
            with tf.GradientTape() as tape:
                loss = replica_share(losses.masked_lm_loss(model(ids), labels, weights))
                loss *= tf.where(replica == 1, np.float32(np.inf), 1.0)
                scaled = optimizer.scale_loss(loss)
            optimizer.apply(tape.gradient(scaled, model.trainable_variables),
                            model.trainable_variables)
        strategy.run(replica_step, args=(ids, labels, weights))

    dataset = tf.data.Dataset.from_tensor_slices(data()).batch(8)
    overflow_on_second_replica(*next(iter(strategy.experimental_distribute_dataset(dataset))))
    for variable, old in zip(model.trainable_variables, before):
        np.testing.assert_array_equal(variable.numpy(), old)
    assert int(optimizer.iterations.numpy()) == 0
    assert float(optimizer.dynamic_scale.numpy()) == 2.0 ** 14


def test_gradient_accumulation_equals_one_big_batch():
    """Two equal micro-batches (mean losses) = one update on the whole batch; counts updates."""
    model = toy_model()
    variables = model.trainable_variables
    optimizer = optimizers.build_optimizer(LR, TOTAL, WARMUP, gradient_accumulation_steps=2)
    big = optimizers.build_optimizer(LR, TOTAL, WARMUP)
    steps = gradient_steps(variables, SCALES[:2])
    clone = toy_model().trainable_variables
    for grads in steps:
        half = [tf.constant(g * 0.5) for g in grads]
        optimizer.apply(half, variables)
        optimizer.apply([g * 3.0 for g in half], variables)  # Mean of 0.5·g and 1.5·g: g.
        big.apply([tf.constant(g) for g in grads], clone)
    assert int(optimizer.iterations.numpy()) == 2
    assert_close([v.numpy() for v in variables], [v.numpy() for v in clone], atol=1e-6)


@pytest.mark.parametrize("optimizer_type", ["adamw", "lamb"])
def test_replica_gradients_are_summed_exactly_once(optimizer_type):
    """Guards the Keras internals the optimizer overrides (`_clip_gradients` sums the replicas'
    gradients, `_all_reduce_sum_gradients` then does not; checked on Keras 3.15.1 / TF 2.21.0):
    with a large epsilon the first update is linear in the gradient, so a sum taken twice (2×),
    or never (each replica's own), moves the weight by the wrong amount."""
    epsilon, lr = 1e3, 0.5
    per_replica = np.array([[1.0, -2.0, 3.0], [4.0, 0.5, -1.0]], np.float32)
    strategy = two_cpu_strategy()
    with strategy.scope():
        variable = tf.Variable(np.ones(3, np.float32))
        optimizer = optimizers.build_optimizer(lr, 10, 0, optimizer_type=optimizer_type,
                                               clip_norm=None, weight_decay_rate=0.0,
                                               epsilon=epsilon)
        optimizer.build([variable])

    @tf.function
    def step(grads):
        strategy.run(lambda g: optimizer.apply([g], [variable]), args=(grads,))

    grads = strategy.experimental_distribute_values_from_function(
        lambda context: tf.constant(per_replica[context.replica_id_in_sync_group]))
    step(grads)
    g = per_replica.sum(0)
    m, v = 0.1 * g, 0.001 * g ** 2
    if optimizer_type == "lamb":  # bias-corrected, and scaled by ‖θ‖ / ‖update‖
        update = (m / 0.1) / (np.sqrt(v / 0.001) + epsilon)
        update *= np.linalg.norm(np.ones(3)) / np.linalg.norm(update)
    else:
        update = m / (np.sqrt(v) + epsilon)
    np.testing.assert_allclose(variable.numpy(), 1.0 - lr * update, rtol=1e-5)
    np.testing.assert_allclose(optimizer.gradient_norm.numpy(), np.linalg.norm(g), rtol=1e-6)
