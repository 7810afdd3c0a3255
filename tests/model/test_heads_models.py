"""Heads and models: output contracts, the original's weight layouts and formulas, the tied MLM
table, mixed precision logits and checkpoint sharing between models."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.model import heads, models
from support import numpy_reference

B, S, P = 7, 13, 3


def _features(config, seed=0):
    rng = np.random.default_rng(seed)
    mask = (np.arange(S)[None, :] < rng.integers(4, S + 1, size=(B, 1))).astype(np.int32)
    ids = rng.integers(1, config.vocab_size, size=(B, S)).astype(np.int32) * mask
    positions = np.sort(rng.integers(1, 4, size=(B, P)), axis=1).astype(np.int32)
    return {"input_ids": tf.constant(ids), "input_mask": tf.constant(mask),
            "segment_ids": tf.zeros_like(tf.constant(ids)),
            "masked_lm_positions": tf.constant(positions)}


def _randomise(layer, seed=3):
    rng = np.random.default_rng(seed)
    for w in layer.weights:
        w.assign(rng.normal(0.0, 0.3, w.shape))


def _out_by_in(head, x):
    """The original's output layer: x @ output_weights^T + output_bias (weights [out, in])."""
    return x @ head.output_weights.numpy().T + head.output_bias.numpy()


def _masked_lm(model, sequence, positions):
    """The original's MLM head on the gathered positions, in numpy, with the tied table."""
    mlm = model.masked_lm
    gathered = np.take_along_axis(sequence, positions[:, :, None], axis=1)  # [B,P,H]
    x = numpy_reference.gelu_tanh(gathered @ mlm.transform.kernel.numpy()
                                  + mlm.transform.bias.numpy())
    x = numpy_reference.layer_norm(x, mlm.layer_norm)
    return x @ model.encoder.embedding_table.numpy().T + mlm.output_bias.numpy()


def _head_outputs(model, features):
    """What each model's head must give, computed in numpy from its encoder's outputs."""
    encoded = model.encoder(features, compute_padding=True)
    sequence = encoded["sequence_output"].numpy().astype(np.float64)
    pooled = encoded["pooled_output"].numpy().astype(np.float64)
    if isinstance(model, models.PretrainingModel):
        return {"masked_lm_logits": _masked_lm(model, sequence,
                                               features["masked_lm_positions"].numpy()),
                "next_sentence_logits": _out_by_in(model.next_sentence, pooled)}
    if isinstance(model, models.SpanModel):
        start_end = _out_by_in(model.span, sequence)
        return {"start_logits": start_end[..., 0], "end_logits": start_end[..., 1]}
    if isinstance(model, models.TokenClassifierModel):
        return {"logits": _out_by_in(model.token_classifier, sequence)}
    return {"logits": _out_by_in(model.classifier, pooled)}


@pytest.mark.parametrize("policy", [None, "mixed_bfloat16"])
def test_models_output_contracts(tiny_config, policy):
    features = _features(tiny_config)
    v, nl = tiny_config.vocab_size, 5
    cases = [
        (models.pretraining_model(tiny_config, policy),
         {"masked_lm_logits": (B, P, v), "next_sentence_logits": (B, 2)}),
        (models.classifier_model(tiny_config, nl, policy), {"logits": (B, nl)}),
        (models.span_model(tiny_config, policy), {"start_logits": (B, S), "end_logits": (B, S)}),
        (models.token_classifier_model(tiny_config, nl, policy), {"logits": (B, S, nl)}),
    ]
    # Under mixed_bfloat16 the heads' bfloat16 matmuls round their inputs (8-bit mantissa): the
    # logits, of order 1-5 here, move by up to ~1e-2.
    tolerance = 1e-5 if policy is None else 2e-2
    real = features["input_mask"].numpy().astype(bool)
    for model, want in cases:
        for head in model.layers:
            if head is not model.encoder:
                _randomise(head)  # its initial weights are small: logits near the bias
        out = model(features)
        assert {k: tuple(t.shape) for k, t in out.items()} == want, type(model).__name__
        assert all(t.dtype == tf.float32 for t in out.values())
        assert model.encoder.config is tiny_config
        reference = _head_outputs(model, features)
        for key, value in out.items():  # per-position outputs: the real positions
            kept = real if value.shape[:2] == (B, S) else ...
            np.testing.assert_allclose(value.numpy()[kept], reference[key][kept], atol=tolerance,
                                       err_msg=f"{type(model).__name__} {key}")


def test_masked_lm_formula_and_tied_table(tiny_config):
    model = models.pretraining_model(tiny_config)
    _randomise(model.masked_lm)
    features = _features(tiny_config)
    sequence = model.encoder(features)["sequence_output"].numpy()
    positions = features["masked_lm_positions"].numpy()
    mlm = model.masked_lm
    gathered = np.take_along_axis(sequence, positions[:, :, None], axis=1)  # [B,P,H]
    x = numpy_reference.gelu_tanh(gathered @ mlm.transform.kernel.numpy()
                                   + mlm.transform.bias.numpy())
    x = numpy_reference.layer_norm(x, mlm.layer_norm)
    want = x @ model.encoder.embedding_table.numpy().T + mlm.output_bias.numpy()
    got = model(features)["masked_lm_logits"].numpy()
    np.testing.assert_allclose(got, want, atol=1e-4)
    assert mlm.output_bias.shape == (tiny_config.vocab_size,)
    # Tied: one table, reached by the MLM loss's gradient, stored once.
    with tf.GradientTape() as tape:
        logits = model(features)["masked_lm_logits"]
        loss = tf.reduce_sum(logits[..., 17])
    grad = tf.convert_to_tensor(tape.gradient(loss, model.encoder.embedding_table))
    assert np.abs(grad.numpy()[17]).sum() > 0
    assert sum(w is model.encoder.embedding_table for w in model.weights) == 1
    assert len({id(w) for w in model.weights}) == len(model.weights)


def test_next_sentence_and_classifier_weights_are_out_by_in(tiny_config):
    model = models.pretraining_model(tiny_config)
    _randomise(model.next_sentence)
    features = _features(tiny_config)
    pooled = model.encoder(features)["pooled_output"].numpy()
    nsp = model.next_sentence
    assert nsp.output_weights.shape == (2, tiny_config.hidden_size)
    assert nsp.output_bias.shape == (2,)
    want = pooled @ nsp.output_weights.numpy().T + nsp.output_bias.numpy()
    np.testing.assert_allclose(model(features)["next_sentence_logits"].numpy(), want, atol=1e-5)

    clf = models.classifier_model(tiny_config, num_labels=3)
    _randomise(clf.classifier)
    head = clf.classifier
    assert head.output_weights.shape == (3, tiny_config.hidden_size)
    pooled = clf.encoder(features)["pooled_output"].numpy()
    want = pooled @ head.output_weights.numpy().T + head.output_bias.numpy()
    np.testing.assert_allclose(clf(features)["logits"].numpy(), want, atol=1e-5)
    # Dropout 0.1 on the pooled output while training only.
    assert np.abs(clf(features, training=True)["logits"].numpy() - want).max() > 1e-4


def test_span_and_token_classifier_formulas(tiny_config):
    model = models.span_model(tiny_config)
    _randomise(model.span)
    features = _features(tiny_config)
    # The span model computes every position, as the original.
    sequence = model.encoder(features, compute_padding=True)["sequence_output"].numpy()
    w, b = model.span.output_weights.numpy(), model.span.output_bias.numpy()
    assert w.shape == (2, tiny_config.hidden_size)
    for out in (model(features), model(features, static_shapes=True)):  # the latter: XLA's step
        np.testing.assert_allclose(out["start_logits"].numpy(), sequence @ w[0] + b[0], atol=1e-5)
        np.testing.assert_allclose(out["end_logits"].numpy(), sequence @ w[1] + b[1], atol=1e-5)

    tagger = models.token_classifier_model(tiny_config, num_labels=4)
    _randomise(tagger.token_classifier)
    head = tagger.token_classifier
    sequence = tagger.encoder(features)["sequence_output"].numpy()
    want = sequence @ head.output_weights.numpy().T + head.output_bias.numpy()
    np.testing.assert_allclose(tagger(features)["logits"].numpy(), want, atol=1e-5)


def test_mixed_precision_logits_close_to_float32(tiny_config):
    full = models.pretraining_model(tiny_config)
    mixed = models.pretraining_model(tiny_config, "mixed_bfloat16")
    mixed.set_weights(full.get_weights())
    features = _features(tiny_config)
    want, got = full(features), mixed(features)
    for key in want:
        assert np.abs(got[key].numpy() - want[key].numpy()).max() < 0.05


def test_pretraining_checkpoint_initialises_a_classifier_encoder(tiny_config, tmp_path):
    pretrained = models.pretraining_model(tiny_config)
    _randomise(pretrained.encoder)
    path = tf.train.Checkpoint(model=pretrained).write(str(tmp_path / "ckpt"))
    names = {name for name, _ in tf.train.list_variables(path)}
    assert "model/encoder/embeddings/word_embeddings/.ATTRIBUTES/VARIABLE_VALUE" in names
    assert "model/masked_lm/output_bias/.ATTRIBUTES/VARIABLE_VALUE" in names
    clf = models.classifier_model(tiny_config, num_labels=2)
    # Restore only the encoder subtree (the heads differ); every encoder variable must match.
    root = tf.train.Checkpoint(model=tf.train.Checkpoint(encoder=clf.encoder))
    root.read(path).expect_partial().assert_existing_objects_matched()
    features = _features(tiny_config)
    np.testing.assert_array_equal(clf.encoder(features)["pooled_output"].numpy(),
                                  pretrained.encoder(features)["pooled_output"].numpy())


def test_heads_alone_accept_any_batch(tiny_config):
    nsp = heads.NextSentence(tiny_config)
    assert nsp(tf.ones([4, tiny_config.hidden_size])).shape == (4, 2)
    start, end = heads.Span(tiny_config)(tf.ones([2, 5, tiny_config.hidden_size]))
    assert start.shape == end.shape == (2, 5)


def test_dropout_runs_at_the_originals_rates_and_places(tiny_config, monkeypatch):
    """Training drops at the original's five sites: the embeddings, the attention probabilities,
    the attention output and the feed-forward output (the two residual branches) at the config's
    rates, and the classifier's input at 0.1. On the real tokens (padding keys, whose
    probabilities are exactly 0, and padding query rows left out), the fraction zeroed at each
    site is within 5 standard deviations of the rate, and the kept values are scaled by 1/(1-rate)."""
    config = tiny_config.replace(hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.2)
    model = models.classifier_model(config, 3)
    batch = 64
    rng = np.random.default_rng(5)
    mask = (np.arange(S)[None, :] < rng.integers(2, S + 1, size=(batch, 1))).astype(np.int32)
    ids = rng.integers(1, config.vocab_size, size=(batch, S)).astype(np.int32) * mask
    features = {"input_ids": tf.constant(ids), "input_mask": tf.constant(mask),
                "segment_ids": tf.zeros_like(tf.constant(ids))}
    sites = {id(model.encoder.embeddings.dropout): "embeddings",
             id(model.classifier.dropout): "classifier"}
    for block in model.encoder.transformer_layers:
        sites[id(block.attention_dropout)] = "attention probabilities"
        sites[id(block.hidden_dropout)] = "residual branch"
    seen = {}  # site → [(rate, inputs, outputs)]
    dropout_call = keras.layers.Dropout.call

    def recording_call(layer, inputs, training=False):
        outputs = dropout_call(layer, inputs, training=training)
        seen.setdefault(sites[id(layer)], []).append((layer.rate, inputs.numpy(), outputs.numpy()))
        return outputs

    monkeypatch.setattr(keras.layers.Dropout, "call", recording_call)
    model(features, training=True)
    # Two residual branches per block: its attention output, then its feed-forward output.
    assert {site: len(calls) for site, calls in seen.items()} == {
        "embeddings": 1, "attention probabilities": 2, "residual branch": 4, "classifier": 1}
    want_rates = {"embeddings": 0.3, "attention probabilities": 0.2, "residual branch": 0.3,
                  "classifier": 0.1}
    for site, calls in seen.items():
        for rate, inputs, outputs in calls:
            assert rate == want_rates[site], site
            considered = inputs != 0
            if site == "attention probabilities" and inputs.shape[2] == S:
                considered &= mask.astype(bool)[:, None, :, None]  # real query rows
            n = considered.sum()
            dropped = (outputs[considered] == 0).mean()
            assert abs(dropped - rate) <= 5 * np.sqrt(rate * (1 - rate) / n), (site, n, dropped)
            kept = considered & (outputs != 0)
            np.testing.assert_allclose(outputs[kept], inputs[kept] / (1 - rate), rtol=1e-5)
