"""The CRF ops against pytorch-crf, and scheme-constrained decoding against brute force."""

import itertools

import numpy as np
import pytest
import tensorflow as tf
import torch
from torchcrf import CRF

from bert_tf.model import crf

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
BIOES_LABELS = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]


def _random_problem(seed: int, batch: int = 6, steps: int = 7, tags: int = 5):
    """Random emissions, tags, scores and ragged lengths (1 and `steps` included)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, steps + 1, size=batch)
    lengths[0], lengths[1] = 1, steps
    return (rng.normal(size=(batch, steps, tags)) * 3, rng.integers(0, tags, size=(batch, steps)),
            lengths, rng.normal(size=(tags, tags)), rng.normal(size=tags), rng.normal(size=tags))


def _torch_crf(transitions, start, end) -> CRF:
    model = CRF(len(start), batch_first=True).double()
    with torch.no_grad():
        model.transitions.copy_(torch.tensor(transitions))
        model.start_transitions.copy_(torch.tensor(start))
        model.end_transitions.copy_(torch.tensor(end))
    return model


@pytest.mark.parametrize("seed", [0, 1])
def test_log_likelihood_and_gradient_equal_pytorch_crf(seed):
    emissions, tags, lengths, transitions, start, end = _random_problem(seed)
    mask = np.arange(emissions.shape[1])[None] < lengths[:, None]
    reference = _torch_crf(transitions, start, end)
    torch_emissions = torch.tensor(emissions, requires_grad=True)
    expected = reference(torch_emissions, torch.tensor(tags), torch.tensor(mask),
                         reduction="none")
    expected.sum().backward()

    variables = [tf.Variable(x) for x in (emissions, transitions, start, end)]
    with tf.GradientTape() as tape:
        got = crf.crf_log_likelihood(variables[0], tags, lengths, *variables[1:])
        total = tf.reduce_sum(got)
    gradients = tape.gradient(total, variables)
    np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), rtol=0, atol=1e-5)
    for gradient, parameter in zip(gradients, [torch_emissions, reference.transitions,
                                               reference.start_transitions,
                                               reference.end_transitions]):
        np.testing.assert_allclose(gradient.numpy(), parameter.grad.numpy(), rtol=0, atol=1e-5)


def test_float32_log_likelihood_within_1e5_relative():
    emissions, tags, lengths, transitions, start, end = _random_problem(2)
    mask = np.arange(emissions.shape[1])[None] < lengths[:, None]
    expected = _torch_crf(transitions, start, end)(
        torch.tensor(emissions), torch.tensor(tags), torch.tensor(mask), reduction="none")
    got = crf.crf_log_likelihood(*(np.float32(x) if x.dtype.kind == "f" else x for x in
                                   (emissions, tags, lengths, transitions, start, end)))
    assert got.dtype == tf.float32
    np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), rtol=1e-5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_viterbi_paths_equal_pytorch_crf(seed):
    emissions, _, lengths, transitions, start, end = _random_problem(seed, batch=9, steps=6)
    mask = np.arange(emissions.shape[1])[None] < lengths[:, None]
    expected = _torch_crf(transitions, start, end).decode(torch.tensor(emissions),
                                                          torch.tensor(mask))
    paths, _ = crf.crf_decode(emissions, lengths, transitions, start, end)
    paths = paths.numpy()
    for row, length, path in zip(paths, lengths, expected):
        assert row[:length].tolist() == path
        assert not row[length:].any()


def test_empty_sequences_score_zero_and_decode_to_zeros():
    emissions, tags, _, transitions, start, end = _random_problem(3, batch=2)
    lengths = np.array([0, 3])
    likelihood = crf.crf_log_likelihood(emissions, tags, lengths, transitions, start, end)
    paths, best = crf.crf_decode(emissions, lengths, transitions, start, end)
    assert likelihood.numpy()[0] == 0 and best.numpy()[0] == 0
    assert not paths.numpy()[0].any()
    # Padding steps past a length change nothing.
    shorter = crf.crf_log_likelihood(emissions[:, :3], tags[:, :3], lengths, transitions, start,
                                     end)
    np.testing.assert_allclose(shorter.numpy(), likelihood.numpy(), atol=1e-12)


def _allowed(path, labels, scheme) -> bool:
    constraints = crf.scheme_constraints(labels, scheme)
    moves = [constraints.start[path[0]], constraints.end[path[-1]]]
    moves += [constraints.transitions[a, b] for a, b in zip(path, path[1:])]
    return all(np.isfinite(moves))


def _well_formed(tags, scheme) -> bool:
    """The scheme's definition, independent of `scheme_constraints`."""
    previous = "O"
    for tag in tags + ["O"]:
        prefix, kind = (tag.split("-", 1) + [""])[:2]
        before, before_kind = (previous.split("-", 1) + [""])[:2]
        opened = before in ("B", "I") and before_kind == kind
        if scheme == "bio" and prefix == "I" and not opened:
            return False
        if scheme == "bioes":
            if prefix in ("I", "E") and not opened:
                return False
            if before in ("B", "I") and prefix not in ("I", "E"):
                return False
        previous = tag
    return True


@pytest.mark.parametrize("labels,scheme", [(LABELS, "bio"), (BIOES_LABELS, "bioes")])
def test_constraints_forbid_exactly_the_ill_formed_sequences(labels, scheme):
    for length in (1, 2, 3):
        for path in itertools.product(range(len(labels)), repeat=length):
            assert _allowed(path, labels, scheme) == _well_formed(
                [labels[i] for i in path], scheme), [labels[i] for i in path]


@pytest.mark.parametrize("labels,scheme", [(LABELS, "bio"), (BIOES_LABELS, "bioes")])
def test_constrained_decoding_never_emits_a_forbidden_transition(labels, scheme):
    rng = np.random.default_rng(4)
    constraints = crf.scheme_constraints(labels, scheme)
    logits = rng.normal(size=(200, 9, len(labels))) * 4
    lengths = rng.integers(1, 10, size=200)
    paths = crf.constrained_decode(tf.nn.log_softmax(logits), lengths, constraints).numpy()
    for row, length in zip(paths, lengths):
        assert _well_formed([labels[i] for i in row[:length]], scheme)
    # The unconstrained arg-max of the same scores is often ill-formed: the test has teeth.
    argmax = logits.argmax(-1)
    assert sum(not _well_formed([labels[i] for i in row[:n]], scheme)
               for row, n in zip(argmax, lengths)) > 50


@pytest.mark.parametrize("labels,scheme", [(LABELS, "bio"), (BIOES_LABELS, "bioes")])
def test_constrained_decoding_equals_brute_force(labels, scheme):
    rng = np.random.default_rng(5)
    log_probs = np.asarray(tf.nn.log_softmax(rng.normal(size=(12, 3, len(labels))) * 3))
    lengths = np.array([1, 2, 3] * 4)
    paths = crf.constrained_decode(log_probs, lengths,
                                   crf.scheme_constraints(labels, scheme)).numpy()
    for scores, length, row in zip(log_probs, lengths, paths):
        candidates = [p for p in itertools.product(range(len(labels)), repeat=length)
                      if _well_formed([labels[i] for i in p], scheme)]
        best = max(candidates, key=lambda p: sum(scores[t, tag] for t, tag in enumerate(p)))
        assert tuple(row[:length]) == best


def test_compact_and_expand_round_trip():
    rng = np.random.default_rng(6)
    mask = rng.random((4, 8)) < 0.5
    values = rng.integers(1, 100, size=(4, 8))
    packed, lengths, order = crf.compact(values, mask)
    assert lengths.numpy().tolist() == mask.sum(1).tolist()
    for b in range(4):
        assert packed.numpy()[b, :lengths.numpy()[b]].tolist() == values[b][mask[b]].tolist()
    np.testing.assert_array_equal(crf.expand(packed, order, mask).numpy(), values * mask)
