"""SavedModel export: reloaded with TensorFlow alone, the signature matches the Keras model."""

import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.model import models
from bert_tf.tasks.classifier import export as serving


def _batch(vocab_size, batch=5, seq=13):
    rng = np.random.default_rng(0)
    ids = rng.integers(1, vocab_size, (batch, seq)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[:, 9:] = 0  # padding
    ids[:, 9:] = 0
    segments = np.zeros_like(ids)
    segments[:, 5:9] = 1
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


@pytest.mark.parametrize("regression", [False, True])
def test_export_reload_matches_keras(tmp_path, tiny_config, regression):
    model = models.classifier_model(tiny_config, 1 if regression else 3)
    labels = None if regression else ["neg", "neutral", "pos"]
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "stale.txt").write_text("from an earlier export")
    export_dir = serving.export_classifier(model, str(tmp_path / "export"), labels, regression)
    # The old export is replaced as a whole, and no temporary directory is left behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]
    assert not (tmp_path / "export" / "stale.txt").exists()

    loaded = tf.saved_model.load(export_dir)
    signature = loaded.signatures[serving.SIGNATURE_KEY]
    assert sorted(signature.structured_input_signature[1]) == ["input_ids", "input_mask", "segment_ids"]
    features = _batch(tiny_config.vocab_size)
    got = signature(**{k: tf.constant(v) for k, v in features.items()})
    expected = serving.predict_outputs(model, features, regression).numpy()
    key = "predictions" if regression else "probabilities"
    assert list(got) == [key]
    assert got[key].shape == ((5,) if regression else (5, 3))
    np.testing.assert_allclose(got[key].numpy(), expected, rtol=1e-5, atol=1e-6)
    if not regression:
        np.testing.assert_allclose(got[key].numpy().sum(axis=1), 1.0, rtol=1e-5)
    assert [label.decode() for label in loaded.labels.numpy()] == (labels or [])
    # Any batch size and sequence length the model accepts.
    short = _batch(tiny_config.vocab_size, batch=2, seq=7)
    short["input_mask"][:] = 1
    got = signature(**{k: tf.constant(v) for k, v in short.items()})[key].numpy()
    np.testing.assert_allclose(got, serving.predict_outputs(model, short, regression).numpy(),
                               rtol=1e-5, atol=1e-6)


class _Killed(BaseException):
    """A process stopped at this point (nothing after it runs)."""


def test_a_crash_while_the_previous_export_is_removed_leaves_a_whole_export(
        tmp_path, tiny_config, monkeypatch):
    model = models.classifier_model(tiny_config, 3)
    export_dir = serving.export_classifier(model, str(tmp_path / "export"), ["a", "b", "c"])

    def killed_while_removing(path, *args, **kwargs):
        os.remove(os.path.join(path, "saved_model.pb"))
        raise _Killed
    monkeypatch.setattr(serving.shutil, "rmtree", killed_while_removing)
    with pytest.raises(_Killed):
        serving.export_classifier(model, export_dir, ["a", "b", "c"])
    loaded = tf.saved_model.load(export_dir)
    assert [label.decode() for label in loaded.labels.numpy()] == ["a", "b", "c"]
