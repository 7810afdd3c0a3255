"""BertEncoder: shapes, the original's formulas (checked against a numpy forward), masking,
initialisation, mixed precision, XLA and checkpoint tracking."""

import dataclasses
import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.model import encoder as encoder_lib
from bert_tf.model.encoder import BertEncoder
from support import numpy_reference

B, S = 7, 13


def _features(config, seed=0, lengths=None):
    """Random ids; rows padded after `lengths[i]` tokens (zeros in ids, mask and segments)."""
    rng = np.random.default_rng(seed)
    lengths = lengths if lengths is not None else rng.integers(2, S + 1, size=B)
    mask = (np.arange(S)[None, :] < np.asarray(lengths)[:, None]).astype(np.int32)
    ids = rng.integers(1, config.vocab_size, size=(B, S)).astype(np.int32) * mask
    segments = (rng.random((B, S)) < 0.5).astype(np.int32) * mask
    return {"input_ids": tf.constant(ids), "input_mask": tf.constant(mask),
            "segment_ids": tf.constant(segments)}


# ---------------------------------------------------------------- numpy reference forward


def _np_dense(x, layer):
    return x @ layer.kernel.numpy() + layer.bias.numpy()


def _np_encoder(encoder, features):
    """The original BERT forward pass written out in numpy (float64) from the encoder's weights,
    with the numpy reference of the config's `hidden_act`."""
    cfg = encoder.config
    activation = numpy_reference.ACTIVATIONS[cfg.hidden_act]
    ids, mask, seg = (features[k].numpy() for k in ("input_ids", "input_mask", "segment_ids"))
    emb = encoder.embeddings
    x = (emb.word_embeddings.numpy()[ids] + emb.token_type_embeddings.numpy()[seg]
         + emb.position_embeddings.numpy()[None, :ids.shape[1]]).astype(np.float64)
    x = numpy_reference.layer_norm(x, emb.layer_norm)
    n, d = cfg.num_attention_heads, cfg.head_size
    adder = (1.0 - mask[:, None, None, :]) * -10000.0  # [B,1,1,S]
    for block in encoder.transformer_layers:
        def heads(t):  # [B,S,H] -> [B,N,S,D]
            return t.reshape(B, S, n, d).transpose(0, 2, 1, 3)
        q, k, v = (heads(_np_dense(x, l)) for l in (block.query, block.key, block.value))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + adder
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(B, S, n * d)
        x = numpy_reference.layer_norm(_np_dense(context, block.attention_output) + x,
                                       block.attention_layer_norm)
        hidden = _np_dense(activation(_np_dense(x, block.intermediate)), block.output_dense)
        x = numpy_reference.layer_norm(hidden + x, block.output_layer_norm)
    pooled = np.tanh(_np_dense(x[:, 0], encoder.pooler))
    return x, pooled


def _randomise(encoder, seed=1):
    """Zero biases, unit gammas or the small initial kernels would hide a swapped gamma/beta, a
    missing bias, or the wrong GELU (the tanh and erf forms only differ for |x| of order 1)."""
    rng = np.random.default_rng(seed)
    for w in encoder.weights:
        w.assign(rng.normal(1.0 if w.path.endswith("gamma") else 0.0, 0.3, w.shape))


# ---------------------------------------------------------------- tests


def test_gelu_is_the_tanh_approximation_and_gelu_exact_the_erf_form():
    x = np.array([-3.0, -1.0, -0.3, 0.0, 0.5, 1.7, 4.0])
    np.testing.assert_allclose(encoder_lib.gelu(tf.constant(x)).numpy(),
                               numpy_reference.gelu_tanh(x), atol=1e-12)
    exact = np.array([0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x])
    # (TensorFlow evaluates the erf form through erfc, more precise for negative x.)
    np.testing.assert_allclose(encoder_lib.gelu_exact(tf.constant(x)).numpy(), exact, rtol=1e-6)
    assert np.abs(numpy_reference.gelu_tanh(x) - exact).max() > 1e-4  # the two really differ
    assert encoder_lib.get_activation("relu")(tf.constant(-2.0)).numpy() == 0.0
    with pytest.raises(ValueError, match="unknown hidden_act"):
        encoder_lib.get_activation("swish")


def test_output_shapes_and_dtypes(tiny_config):
    encoder = BertEncoder(tiny_config)
    out = encoder(_features(tiny_config))
    h = tiny_config.hidden_size
    assert out["sequence_output"].shape == (B, S, h)
    assert out["pooled_output"].shape == (B, h)
    assert len(out["encoder_outputs"]) == tiny_config.num_hidden_layers
    assert all(t.shape == (B, S, h) for t in out["encoder_outputs"])
    assert out["encoder_outputs"][-1] is out["sequence_output"]
    assert out["sequence_output"].dtype == tf.float32
    assert encoder.embedding_table is encoder.embeddings.word_embeddings
    assert encoder.embedding_table.shape == (tiny_config.vocab_size, h)


def test_forward_equals_numpy_reference_with_padding(tiny_config):
    encoder = BertEncoder(tiny_config)
    _randomise(encoder)
    features = _features(tiny_config, lengths=[13, 1, 5, 12, 2, 13, 7])
    out = encoder(features)
    want_seq, want_pooled = _np_encoder(encoder, features)
    real = features["input_mask"].numpy().astype(bool)
    real[:, 0] = True  # the first position is always computed (the pooler reads it)
    np.testing.assert_allclose(out["sequence_output"].numpy()[real], want_seq[real], atol=2e-5)
    np.testing.assert_allclose(out["pooled_output"].numpy(), want_pooled, atol=2e-5)
    # Padding positions are not computed at all: their outputs are zeros...
    assert not out["sequence_output"].numpy()[~real].any()
    # ...unless the call asks for them (or for static shapes, for XLA): every position is then
    # the original's.
    for kept in (encoder(features, compute_padding=True), encoder(features, static_shapes=True)):
        np.testing.assert_allclose(kept["sequence_output"].numpy(), want_seq, atol=2e-5)
        np.testing.assert_allclose(kept["pooled_output"].numpy(), want_pooled, atol=2e-5)


def test_compute_padding_is_the_encoders_own_choice_wherever_it_is_traced(tiny_config):
    """BertEncoder(compute_padding=True) computes every position as the original, also in a
    tf.function of the caller's; the default skips padding (zeros there)."""
    original = BertEncoder(tiny_config, compute_padding=True)
    _randomise(original)
    skipping = BertEncoder(tiny_config)
    skipping.set_weights(original.get_weights())
    features = _features(tiny_config, lengths=[13, 1, 5, 12, 2, 13, 7])
    want_seq, want_pooled = _np_encoder(original, features)
    real = features["input_mask"].numpy().astype(bool)
    real[:, 0] = True
    for encoder, computed in ((original, np.ones_like(real)), (skipping, real)):
        out = tf.function(lambda f, e=encoder: e(f))(features)  # traced here, no context
        np.testing.assert_allclose(out["sequence_output"].numpy()[computed], want_seq[computed],
                                   atol=2e-5)
        np.testing.assert_allclose(out["pooled_output"].numpy(), want_pooled, atol=2e-5)
        assert not out["sequence_output"].numpy()[~computed].any()


@pytest.mark.parametrize("built_with, called_with", [(False, True), (True, None)])
def test_output_positions_with_attention_cut_at_the_longest_row(tiny_config, built_with,
                                                                called_with):
    """Padding computed (the call's choice, else the encoder's own) attends the first K keys;
    output_positions still reads the original's values, at real positions and at padding ones."""
    encoder = BertEncoder(tiny_config, compute_padding=built_with)
    _randomise(encoder)
    features = _features(tiny_config, lengths=[9, 3, 5, 8, 2, 9, 7])  # K = 9 < S
    positions = tf.constant([[1, 8, 0], [2, 1, 12], [4, 3, 1], [7, 5, 10], [1, 0, 3],
                             [8, 2, 6], [6, 5, 11]], tf.int32)  # 12, 10, 3, 11: padding
    want = np.take_along_axis(_np_encoder(encoder, features)[0],
                              positions.numpy()[:, :, None], axis=1)
    selected = encoder(features, output_positions=positions, compute_padding=called_with)
    np.testing.assert_allclose(selected["selected_output"].numpy(), want, atol=2e-5)


def test_output_positions_at_padding_is_an_error_while_padding_is_skipped(tiny_config):
    encoder = BertEncoder(tiny_config)
    features = _features(tiny_config, lengths=[9, 3, 5, 8, 2, 9, 7])
    real = tf.constant([[1, 8, 0]] * B, tf.int32) % features["input_mask"].numpy().sum(1)[:, None]
    encoder(features, output_positions=real)  # real tokens and [CLS]: fine
    at_padding = tf.tensor_scatter_nd_update(real, [[1, 2]], [4])  # row 1 has 3 tokens
    with pytest.raises(tf.errors.InvalidArgumentError, match="compute_padding=True"):
        encoder(features, output_positions=at_padding)
    with pytest.raises(tf.errors.InvalidArgumentError, match="padding position"):
        tf.function(lambda f, p: encoder(f, output_positions=p))(features, at_padding)


def test_attention_stops_at_the_longest_row_with_the_same_numbers(tiny_config):
    """Every row ends by padding (longest 9 of 13): attention reads 9 keys, yet every position's
    output and every gradient is that of all 13 keys (the numpy reference, the static layout)."""
    encoder = BertEncoder(tiny_config)
    _randomise(encoder)
    features = _features(tiny_config, lengths=[9, 1, 5, 8, 2, 9, 7])
    assert encoder_lib.TokenLayout(features["input_mask"], False).key_length == 9
    mask = features["input_mask"]
    assert encoder_lib.TokenLayout(mask, False, static_shapes=True).key_length is None
    with_empty_row = tf.concat([features["input_mask"][:6], tf.zeros([1, S], tf.int32)], 0)
    assert encoder_lib.TokenLayout(with_empty_row, False).key_length == S  # it attends all S evenly
    weights = tf.constant(np.random.default_rng(3).normal(size=[tiny_config.hidden_size]),
                          tf.float32)

    def outputs_and_gradients(static_shapes):
        with tf.GradientTape() as tape:
            sequence = encoder(features, compute_padding=True,
                               static_shapes=static_shapes)["sequence_output"]  # [B,S,H]
            # A span-like loss: a softmax over every position, padding included.
            logits = tf.einsum("bsh,h->bs", sequence, weights)
            loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(
                tf.range(B) % 3, logits))
        return sequence.numpy(), tape.gradient(loss, encoder.trainable_variables)

    trimmed, trimmed_grads = outputs_and_gradients(static_shapes=False)
    full, full_grads = outputs_and_gradients(static_shapes=True)
    np.testing.assert_allclose(trimmed, _np_encoder(encoder, features)[0], atol=2e-5)
    np.testing.assert_allclose(trimmed, full, atol=1e-5)  # float32 rounding of other matmul shapes
    assert [g is None for g in trimmed_grads] == [g is None for g in full_grads]  # the pooler
    pairs = [(v.path, tf.convert_to_tensor(got).numpy(), tf.convert_to_tensor(want).numpy())
             for v, got, want in zip(encoder.trainable_variables, trimmed_grads, full_grads)
             if want is not None]
    # One scale for all: the key bias's gradient is 0 up to rounding (softmax ignores a shift).
    scale = max(np.abs(want).max() for _, _, want in pairs)
    for path, got, want in pairs:
        np.testing.assert_allclose(got, want, atol=1e-5 * scale, err_msg=path)


def test_static_shapes_attend_all_keys_whatever_the_padding_choice(tiny_config, monkeypatch):
    """static_shapes (XLA's step, passed down through the span model that computes padding)
    keeps all S keys and every position; padding computed alone cuts attention at the longest
    row; padding removed needs no cut (its batches are already cut to their longest row)."""
    layouts = []

    class RecordedLayout(encoder_lib.TokenLayout):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            layouts.append(self)

    monkeypatch.setattr(encoder_lib, "TokenLayout", RecordedLayout)
    encoder = BertEncoder(tiny_config)
    features = _features(tiny_config, lengths=[9, 1, 5, 8, 2, 9, 7])
    encoder(features, compute_padding=True)
    encoder(features, compute_padding=True, static_shapes=True)
    encoder(features, static_shapes=True)
    encoder(features)
    assert [layout.key_length is None for layout in layouts] == [False, True, True, True]
    assert int(layouts[0].key_length) == 9
    assert [layout.token_index is None for layout in layouts] == [True, True, True, False]


def test_fully_padded_row_attends_like_the_original(tiny_config):
    """-10000 (not -inf) on every key of a row cancels out in the softmax: the row's outputs are
    those of the same row unmasked."""
    encoder = BertEncoder(tiny_config)
    _randomise(encoder)
    features = _features(tiny_config, lengths=[0, 4, 5, 12, 2, 13, 7])
    unmasked = dict(features, input_mask=tf.ones_like(features["input_mask"]))
    got = encoder(features)["sequence_output"].numpy()[0]
    want = encoder(unmasked)["sequence_output"].numpy()[0]
    np.testing.assert_allclose(got, want, atol=1e-2)  # f32 spacing near 10000 is 1e-3


@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_exact", "relu"])
def test_the_blocks_use_the_configured_activation(tiny_config, hidden_act):
    """Each block's intermediate layer applies `hidden_act`: the encoder equals the numpy forward
    with that function's reference (the randomised weights put the intermediate values where
    the three functions differ by far more than the tolerance)."""
    encoder = BertEncoder(tiny_config.replace(hidden_act=hidden_act), compute_padding=True)
    _randomise(encoder)
    features = _features(tiny_config)
    want_seq, want_pooled = _np_encoder(encoder, features)
    out = encoder(features)
    np.testing.assert_allclose(out["sequence_output"].numpy(), want_seq, atol=2e-5)
    np.testing.assert_allclose(out["pooled_output"].numpy(), want_pooled, atol=2e-5)


def test_skipping_padding_gives_the_gradients_of_computing_it(tiny_config):
    """Padding skipped (`TokenLayout.pad` gathers the rows onto the [B,S] grid, its gradient
    gathers them back) against padding computed, on a loss over the real positions and [CLS]."""
    encoder = BertEncoder(tiny_config)
    _randomise(encoder)
    features = _features(tiny_config, lengths=[13, 3, 5, 12, 2, 9, 7])
    real = tf.cast(features["input_mask"], tf.float32)[:, :, tf.newaxis]  # [B,S,1]
    weights = tf.constant(np.random.default_rng(5).normal(size=[tiny_config.hidden_size]),
                          tf.float32)

    def gradients(compute_padding):
        with tf.GradientTape() as tape:
            outputs = encoder(features, compute_padding=compute_padding)
            loss = (tf.reduce_sum(tf.tanh(outputs["sequence_output"]) * real * weights)
                    + tf.reduce_sum(outputs["pooled_output"] * weights))
        return [tf.convert_to_tensor(g).numpy()
                for g in tape.gradient(loss, encoder.trainable_variables)]

    skipped, computed = gradients(False), gradients(True)
    scale = max(np.abs(g).max() for g in computed)
    for variable, got, want in zip(encoder.trainable_variables, skipped, computed):
        np.testing.assert_allclose(got, want, atol=1e-5 * scale, err_msg=variable.path)
    assert np.abs(computed[0]).max() > 0  # the word embeddings: reached through every block


def test_padding_tokens_do_not_change_real_outputs(tiny_config):
    encoder = BertEncoder(tiny_config)
    features = _features(tiny_config, lengths=[13, 3, 5, 12, 2, 9, 7])
    mask = features["input_mask"].numpy()
    changed = dict(features)
    changed["input_ids"] = tf.where(mask == 1, features["input_ids"], 42)
    changed["segment_ids"] = tf.where(mask == 1, features["segment_ids"], 1)
    real = mask.astype(bool)
    # With the padding kept in the computation (XLA's static shapes) the padded positions see the
    # changed ids, so the test is not vacuous; without it they are never computed.
    a, b = encoder(features, static_shapes=True), encoder(changed, static_shapes=True)
    padded_change = a["sequence_output"].numpy()[~real] - b["sequence_output"].numpy()[~real]
    assert np.abs(padded_change).max() > 1e-3
    for a, b in ((a, b), (encoder(features), encoder(changed))):
        np.testing.assert_allclose(a["sequence_output"].numpy()[real],
                                   b["sequence_output"].numpy()[real], atol=1e-6)
        np.testing.assert_allclose(a["pooled_output"].numpy(), b["pooled_output"].numpy(),
                                   atol=1e-5)


def test_default_mask_and_segments(tiny_config):
    encoder = BertEncoder(tiny_config)
    ids = _features(tiny_config)["input_ids"]
    full = {"input_ids": ids, "input_mask": tf.ones_like(ids), "segment_ids": tf.zeros_like(ids)}
    np.testing.assert_allclose(encoder({"input_ids": ids})["sequence_output"].numpy(),
                               encoder(full)["sequence_output"].numpy(), atol=1e-6)


def test_too_long_sequence_is_a_clear_error(tiny_config):
    encoder = BertEncoder(tiny_config.replace(max_position_embeddings=8))
    with pytest.raises(ValueError, match="exceeds max_position_embeddings"):
        encoder({"input_ids": tf.ones([2, 9], tf.int32)})


def test_initialisation_follows_the_original(tiny_config):
    config = tiny_config.replace(initializer_range=0.05)
    encoder = BertEncoder(config)
    block = encoder.transformer_layers[0]
    kernel = block.intermediate.kernel.numpy()
    assert np.abs(kernel).max() <= 2 * 0.05  # truncated at two standard deviations
    assert 0.03 < kernel.std() < 0.05  # truncation shrinks the std to ~0.88 σ
    assert not block.intermediate.bias.numpy().any()
    np.testing.assert_array_equal(block.output_layer_norm.gamma.numpy(), 1.0)
    assert not block.output_layer_norm.beta.numpy().any()
    assert 0.03 < encoder.embedding_table.numpy().std() < 0.05


def test_variable_shapes_match_the_documented_table(tiny_config):
    c = tiny_config
    h, i, t, p = (c.hidden_size, c.intermediate_size, c.type_vocab_size,
                  c.max_position_embeddings)
    e = BertEncoder(c)
    assert e.embeddings.token_type_embeddings.shape == (t, h)
    assert e.embeddings.position_embeddings.shape == (p, h)
    assert len(e.transformer_layers) == c.num_hidden_layers
    assert e.transformer_layers[1] is e.layer_1
    block = e.layer_1
    for layer in (block.query, block.key, block.value, block.attention_output):
        assert layer.kernel.shape == (h, h) and layer.bias.shape == (h,)
    assert block.intermediate.kernel.shape == (h, i) and block.intermediate.bias.shape == (i,)
    assert block.output_dense.kernel.shape == (i, h)
    assert e.pooler.kernel.shape == (h, h)
    # 5 embedding variables, 16 per block, 2 for the pooler; no duplicates.
    assert len(e.weights) == 5 + 16 * c.num_hidden_layers + 2


def test_dropout_only_in_training(tiny_config):
    encoder = BertEncoder(tiny_config)
    features = _features(tiny_config)
    a = encoder(features, training=False)["sequence_output"]
    b = encoder(features, training=False)["sequence_output"]
    c = encoder(features, training=True)["sequence_output"]
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert np.abs(a.numpy() - c.numpy()).max() > 1e-3


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_dropout_drops_the_units_float32_drops_in_every_dtype(dtype):
    """From the same seed, the encoder's Dropout drops the same units of a bfloat16 (float16)
    input as of a float32 one, whose draws are Keras's own; the kept values are the input times
    1/(1 - rate) in its dtype, and each call draws a new mask."""
    rate, rows = 0.3, 64 * 96
    x = tf.constant(np.random.default_rng(0).uniform(0.5, 1.5, (64, 96)), tf.float32)

    def two_calls(layer, inputs):
        return [layer(inputs, training=True).numpy().astype(np.float32) for _ in range(2)]

    keras_float32 = two_calls(keras.layers.Dropout(rate, seed=7), x)
    float32 = two_calls(encoder_lib.Dropout(rate, seed=7), x)
    half = two_calls(encoder_lib.Dropout(rate, seed=7, dtype=f"mixed_{dtype}"), tf.cast(x, dtype))
    scaled = (tf.cast(x, dtype) * tf.constant(1 / (1 - rate), dtype)).numpy().astype(np.float32)
    for want, ours, got in zip(keras_float32, float32, half):
        np.testing.assert_array_equal(ours, want)
        np.testing.assert_array_equal(got == 0, want == 0)
        np.testing.assert_array_equal(got[got != 0], scaled[got != 0])
        assert abs((got == 0).mean() - rate) <= 5 * np.sqrt(rate * (1 - rate) / rows)
    assert (half[0] == 0).tolist() != (half[1] == 0).tolist()


def test_jit_compile_gives_the_same_outputs(tiny_config):
    encoder = BertEncoder(tiny_config)
    features = _features(tiny_config)
    eager = encoder(features)
    compiled = tf.function(lambda f: encoder(f), jit_compile=True)(features)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(compiled[key].numpy(), eager[key].numpy(), atol=1e-5)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_close_to_float32(tiny_config, policy):
    full = BertEncoder(tiny_config)
    mixed = BertEncoder(tiny_config, dtype=policy)
    mixed.set_weights(full.get_weights())
    assert all(w.dtype == "float32" for w in mixed.weights)
    features = _features(tiny_config)
    want, got = full(features), mixed(features)
    # The residual stream stays float32; the pooler is a product in the compute dtype.
    compute = keras.DTypePolicy(policy).compute_dtype
    assert got["sequence_output"].dtype == "float32" and got["pooled_output"].dtype == compute
    tolerance = 0.1 if policy == "mixed_bfloat16" else 0.02  # bf16 keeps 8 bits of mantissa
    for key in ("sequence_output", "pooled_output"):
        diff = np.abs(tf.cast(got[key], tf.float32).numpy() - want[key].numpy())
        assert diff.max() < tolerance and diff.mean() < tolerance / 5


# bfloat16's unit roundoff (8 significant bits) and float32's: a float32 sum of n positive
# bfloat16-rounded terms, rounded to bfloat16, is within 2·2⁻⁸ + n·2⁻²⁴ of the exact sum
# (relative). BiasAddGrad's bfloat16 sum of 1024 terms near 1 stops at about 512.
BFLOAT16_UNIT_ROUNDOFF, FLOAT32_UNIT_ROUNDOFF = 2.0 ** -8, 2.0 ** -24
ROWS = 1024


def test_bfloat16_dense_bias_gradient_sums_the_rows_in_float32(tiny_config):
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(ROWS, 16)), tf.float32)
    upstream = rng.uniform(0.5, 1.5, (ROWS, 8))  # positive: no cancellation in the sum
    full = encoder_lib.Dense(tiny_config, 8, 16)
    mixed = encoder_lib.Dense(tiny_config, 8, 16, dtype="mixed_bfloat16")
    mixed.set_weights(full.get_weights())

    def bias_gradient(layer):
        with tf.GradientTape() as tape:
            y = layer(x)
        return tape.gradient(y, layer.bias, output_gradients=tf.cast(upstream, y.dtype))

    exact = upstream.sum(axis=0)
    float32_bound = ROWS * FLOAT32_UNIT_ROUNDOFF
    np.testing.assert_allclose(bias_gradient(full).numpy(), exact, rtol=float32_bound)
    got = bias_gradient(mixed)
    assert got.dtype == tf.float32
    np.testing.assert_allclose(got.numpy(), exact, rtol=2 * BFLOAT16_UNIT_ROUNDOFF + float32_bound)


@pytest.mark.parametrize("training", [False, True])  # True: the fused query/key/value matmul
def test_bfloat16_encoder_bias_gradients_as_close_as_its_kernel_gradients(tiny_config,
                                                                          training):
    """Each dense layer's bias gradient and kernel gradient are sums over the same 1024 rows of
    the same upstream gradient, both accumulated in float32 (MatMul's accumulator), so the bias
    gradient may differ from float32's by the kernel gradient's relative error (what the
    bfloat16 forward and backward did to the rows) plus one bfloat16 rounding. The attention
    key biases' true gradient is 0 (softmax ignores a shift of a row's scores): not compared."""
    config = dataclasses.replace(tiny_config, hidden_dropout_prob=0.0,
                                 attention_probs_dropout_prob=0.0)
    full = BertEncoder(config)
    _randomise(full)
    mixed = BertEncoder(config, dtype="mixed_bfloat16")
    mixed.set_weights(full.get_weights())
    rng = np.random.default_rng(0)
    ids = tf.constant(rng.integers(1, config.vocab_size, (16, 64)), tf.int32)  # 1024 rows
    features = {"input_ids": ids, "input_mask": tf.ones_like(ids), "segment_ids": tf.zeros_like(ids)}
    weights = tf.constant(rng.uniform(0.5, 1.5, config.hidden_size), tf.float32)

    def dense_gradients(encoder):
        layers = [l for l in encoder._flatten_layers() if isinstance(l, encoder_lib.Dense)]
        with tf.GradientTape() as tape:
            outputs = encoder(features, training=training)
            loss = sum(tf.reduce_sum(tf.cast(outputs[key], tf.float32) * weights)
                       for key in ("sequence_output", "pooled_output"))
        gradients = tape.gradient(loss, [(l.kernel, l.bias) for l in layers])
        return [(l.name, [g.numpy() for g in pair]) for l, pair in zip(layers, gradients)]

    pairs = list(zip(dense_gradients(full), dense_gradients(mixed)))
    assert len(pairs) == 6 * config.num_hidden_layers + 1  # the pooler too
    for (name, want), (_, got) in pairs:
        kernel, bias = (np.linalg.norm(g - w) / np.linalg.norm(w) for g, w in zip(got, want))
        if name != "key":
            assert bias <= kernel + BFLOAT16_UNIT_ROUNDOFF, (name, bias, kernel)


def _optimized_forward_graph(encoder) -> "tf.compat.v1.GraphDef":
    """The encoder's forward (ids, mask, segments of any [B,S]) with its weights frozen, as
    Grappler rewrites it for the CPU before running it (constant folding, arithmetic, remapper)."""
    from tensorflow.core.protobuf import config_pb2  # noqa: PLC0415
    from tensorflow.python.framework import convert_to_constants, meta_graph  # noqa: PLC0415
    from tensorflow.python.grappler import tf_optimizer  # noqa: PLC0415

    spec = tf.TensorSpec([None, None], tf.int32)
    forward = tf.function(lambda ids, mask, segments: encoder(
        {"input_ids": ids, "input_mask": mask, "segment_ids": segments})["sequence_output"])
    frozen = convert_to_constants.convert_variables_to_constants_v2(
        forward.get_concrete_function(spec, spec, spec))
    graph_def = frozen.graph.as_graph_def()
    for node in graph_def.node:
        node.device = "/job:localhost/replica:0/task:0/device:CPU:0"
    meta = meta_graph.create_meta_graph_def(graph_def=graph_def, graph=frozen.graph)
    meta.collection_def["train_op"].node_list.value.extend(t.op.name for t in frozen.outputs)
    return tf_optimizer.OptimizeGraph(config_pb2.ConfigProto(), meta)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "bfloat16"])
def test_bfloat16_forward_keeps_the_residual_stream_and_the_scores_in_float32(tiny_config, policy):
    """As Grappler optimizes the forward for the CPU: every product in bfloat16 but the attention
    scores; per block exactly three casts down (the residual stream into the Q/K/V products and
    into the feed-forward, the attention probabilities into the context product) and four up
    (q and k for the scores, each sublayer's output into the residual sum), and no tensor cast
    and cast straight back."""
    graph = _optimized_forward_graph(BertEncoder(tiny_config, dtype=policy))
    nodes = {node.name: node for node in graph.node}
    bf16, f32 = tf.bfloat16.as_datatype_enum, tf.float32.as_datatype_enum
    casts = [n for n in graph.node if n.op == "Cast"]
    round_trips = [n.name for n in casts if nodes[n.input[0].split(":")[0].lstrip("^")].op == "Cast"]
    assert round_trips == []
    layers = tiny_config.num_hidden_layers
    down = [n for n in casts if n.attr["SrcT"].type == f32 and n.attr["DstT"].type == bf16]
    up = [n for n in casts if n.attr["SrcT"].type == bf16 and n.attr["DstT"].type == f32]
    assert len(down) == 3 * layers
    # The pure bfloat16 policy's tables are bfloat16: the three embedding rows are cast up too.
    assert len(up) == 4 * layers + 3 * (policy == "bfloat16")
    products = [n for n in graph.node if "MatMul" in n.op or n.op == "Einsum"]
    in_float32 = [n for n in products if n.attr["T"].type == f32]
    assert len(in_float32) == layers and all("BatchMatMul" in n.op for n in in_float32)
    assert all(n.attr["T"].type == bf16 for n in products if n not in in_float32)
    statistics = [n for n in graph.node if n.op in ("Mean", "Softmax")]
    assert statistics and all(n.attr["T"].type == f32 for n in statistics)


def test_checkpoint_round_trip(tiny_config, tmp_path):
    source = BertEncoder(tiny_config)
    _randomise(source)
    path = tf.train.Checkpoint(model=source).write(str(tmp_path / "ckpt"))
    names = {name for name, _ in tf.train.list_variables(path)}
    assert "model/layer_1/query/kernel/.ATTRIBUTES/VARIABLE_VALUE" in names
    target = BertEncoder(tiny_config)
    tf.train.Checkpoint(model=target).read(path).assert_consumed()
    features = _features(tiny_config)
    np.testing.assert_array_equal(target(features)["sequence_output"].numpy(),
                                  source(features)["sequence_output"].numpy())


def test_output_positions_compute_the_last_layer_only_where_asked(tiny_config):
    encoder = BertEncoder(tiny_config)
    _randomise(encoder)
    features = _features(tiny_config, lengths=[13, 3, 5, 12, 2, 9, 7])
    positions = tf.constant([[1, 12, 0], [2, 1, 0], [4, 3, 1], [11, 5, 0], [1, 0, 0],
                             [8, 2, 6], [6, 5, 4]], tf.int32)  # [B,3], 0 = a padding slot
    full = encoder(features)
    selected = encoder(features, output_positions=positions)
    assert set(selected) == {"selected_output", "pooled_output"}
    want = tf.gather(full["sequence_output"], positions, batch_dims=1)  # [B,3,H]
    np.testing.assert_allclose(selected["selected_output"].numpy(), want.numpy(), atol=1e-5)
    np.testing.assert_allclose(selected["pooled_output"].numpy(), full["pooled_output"].numpy(),
                               atol=1e-5)
    # No position at all: the last layer computes [CLS] only, for the pooler (the classifier).
    pooled_only = encoder(features, output_positions=tf.zeros([B, 0], tf.int32))
    assert pooled_only["selected_output"].shape == (B, 0, tiny_config.hidden_size)
    np.testing.assert_allclose(pooled_only["pooled_output"].numpy(),
                               full["pooled_output"].numpy(), atol=1e-5)


def test_inference_and_training_give_the_same_outputs(tiny_config):
    """Inference multiplies by each attention kernel, training by them side by side (the graph's
    shapes: benchmarks/encoder_graph.py); without dropout both give the same outputs."""
    config = tiny_config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    encoder = BertEncoder(config)
    _randomise(encoder)
    features = _features(config, lengths=[13, 1, 5, 12, 2, 13, 7])
    for positions in (None, tf.zeros([B, 1], tf.int32)):
        a = encoder(features, training=False, output_positions=positions)
        b = encoder(features, training=True, output_positions=positions)
        np.testing.assert_allclose(a["pooled_output"].numpy(), b["pooled_output"].numpy(),
                                   atol=1e-5)


@pytest.mark.parametrize("compute_padding", [False, True])
def test_a_batch_of_no_rows_gives_outputs_of_no_rows(tiny_config, compute_padding):
    """An empty request ([] texts) reaches the encoder as [0,S]: every output has 0 rows."""
    encoder = BertEncoder(tiny_config, compute_padding=compute_padding)
    empty = {name: tf.zeros([0, 7], tf.int32) for name in ("input_ids", "input_mask", "segment_ids")}
    call = tf.function(lambda f, p: encoder(f, output_positions=p), autograph=False)
    h = tiny_config.hidden_size
    full = encoder(empty)
    assert full["sequence_output"].shape == (0, 7, h) and full["pooled_output"].shape == (0, h)
    assert full["embedding_output"].shape == (0, 7, h)
    assert [o.shape for o in full["encoder_outputs"]] == [(0, 7, h)] * tiny_config.num_hidden_layers
    selected = call(empty, tf.zeros([0, 3], tf.int32))
    assert selected["selected_output"].shape == (0, 3, h)
    assert selected["pooled_output"].shape == (0, h)
