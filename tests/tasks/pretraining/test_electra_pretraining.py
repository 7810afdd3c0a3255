"""run_pretraining's --objective=electra: the loss of a fixed batch with fixed sampling noise
against google-research/electra's formula in numpy; ELECTRA's masks (85% [MASK], 15% kept, no
random id); a tiny run that logs its metrics, exports both networks under google's names, resumes
exactly from a checkpoint and restores into a classifier; the errors."""

import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import name_map as checkpoints
from bert_tf.checkpoints.model_config import load_model_config
from bert_tf.errors import UserError
from bert_tf.model import models
from bert_tf.model.config import BertConfig, ConfigError
from bert_tf.model.electra.config import ElectraConfig
from bert_tf.model.electra.modeling import ElectraEncoder, sampling_uniforms
from bert_tf.records import features
from bert_tf.tasks.pretraining import dynamic_masking, electra
from bert_tf.tasks.pretraining import task as pretraining_task
from bert_tf.training import distribution, log as training_log, loop as training
from support import numpy_reference
from support.pretraining_records import PRED, SEQ, TINY_CONFIG, write_unmasked_records

CONFIG = ElectraConfig(**{**TINY_CONFIG, "hidden_size": 64, "intermediate_size": 70,
                          "embedding_size": 24, "hidden_dropout_prob": 0.0,
                          "attention_probs_dropout_prob": 0.0})
MASK_ID = 3  # write_unmasked_records' [MASK]


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    directory = tmp_path_factory.mktemp("electra_records")
    return write_unmasked_records(directory / "unmasked.tfrecord", 64, seed=1)


def _dataset(records: str, batch_size: int, seed: int, repeat: bool = False) -> tf.data.Dataset:
    """ELECTRA's eval input: each batch's masks and sampling noise drawn from `seed` and the
    batch's number."""
    return dynamic_masking.pretraining_dataset(
        records, features.pretraining_schema(SEQ, PRED), batch_size, is_training=False,
        input_context=None, seed=seed, drop_remainder=True, repeat=repeat, electra=True)


def _batch(records: str, batch_size: int, seed: int) -> dict:
    return next(iter(_dataset(records, batch_size, seed)))


def _sigmoid_cross_entropy(logits, labels):
    return np.maximum(logits, 0) - logits * labels + np.log1p(np.exp(-np.abs(logits)))


def test_loss_matches_googles_formula(records):
    """Sampling, replacement, labels and the weighted sum, recomputed in numpy from the model's
    own generator and discriminator logits and the batch's noise."""
    task = electra.ElectraTask(CONFIG, generator_hidden_size=0.5, disc_weight=50.0)
    model = task.build_model()
    batch = _batch(records, 8, seed=4)
    outputs = model(batch)
    terms = task.losses(batch, outputs)
    normalizers = task.loss_normalizers(batch)
    total = sum(float(terms[t]) / (float(normalizers[t]) + task.loss_epsilons[t]) for t in terms)

    logits = outputs["masked_lm_logits"].numpy().astype(np.float64)  # [B,P,V]
    uniforms = sampling_uniforms(batch["sampling_seed"], tf.shape(logits)).numpy()
    gumbel = -np.log(-np.log(uniforms + 1e-9) + 1e-9)
    sampled = np.argmax(logits + gumbel, -1)
    ids, positions = batch["masked_lm_ids"].numpy(), batch["masked_lm_positions"].numpy()
    weights = batch["masked_lm_weights"].numpy()
    originals = batch["input_ids"].numpy().copy()
    fake = originals.copy()
    for row in range(len(fake)):
        for slot in np.flatnonzero(weights[row]):
            originals[row, positions[row, slot]] = ids[row, slot]
            fake[row, positions[row, slot]] = sampled[row, slot]
    replaced = (fake != originals).astype(np.float64)
    np.testing.assert_array_equal(outputs["sampled_ids"].numpy()[weights > 0], sampled[weights > 0])
    np.testing.assert_array_equal(outputs["replaced"].numpy(), replaced)

    log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
        - logits.max(-1, keepdims=True)
    mlm = -np.take_along_axis(log_probs, ids[..., None], -1)[..., 0]
    mask = batch["input_mask"].numpy().astype(np.float64)
    disc = _sigmoid_cross_entropy(outputs["discriminator_logits"].numpy().astype(np.float64),
                                  replaced)
    expected = ((weights * mlm).sum() / (weights.sum() + 1e-6)
                + 50.0 * (mask * disc).sum() / (mask.sum() + 1e-6))
    assert total == pytest.approx(expected, rel=1e-5)
    assert 0 < replaced.sum() <= weights.sum()  # some masked tokens replaced, nothing else
    # The XLA/TPU steps' call (every position computed, all S keys): the same logits.
    static = model(batch, static_shapes=True)
    real = batch["input_mask"].numpy() > 0
    np.testing.assert_allclose(static["masked_lm_logits"].numpy(), logits, atol=1e-4)
    np.testing.assert_allclose(static["discriminator_logits"].numpy()[real],
                               outputs["discriminator_logits"].numpy()[real], atol=1e-4)


def test_electra_masks_are_mask_or_kept_never_random(records):
    masked, kept = 0, 0
    # One input: each batch draws its own masks. 24 batches of 16 rows mask several hundred.
    for batch in _dataset(records, 16, seed=0, repeat=True).take(24):
        positions = batch["masked_lm_positions"].numpy()
        real = batch["masked_lm_weights"].numpy() > 0
        at = np.take_along_axis(batch["input_ids"].numpy(), positions, 1)[real]
        ids = batch["masked_lm_ids"].numpy()[real]
        assert np.all((at == MASK_ID) | (at == ids))  # no random replacement
        masked += int((at == MASK_ID).sum())
        kept += int(((at == ids) & (at != MASK_ID)).sum())
    fraction = masked / (masked + kept)
    # 85% [MASK]; the count (several hundred) puts 0.85 within ±0.06 (4 standard deviations).
    assert abs(fraction - 0.85) < 0.06, (masked, kept)


def _run(records, output_dir, steps=6, do_eval=True, **changes):
    options = pretraining_task.PretrainingOptions(
        input_file=records, bert_config_file=changes.pop("config_file"), max_seq_length=SEQ,
        max_predictions_per_seq=PRED, do_train=True, do_eval=do_eval,
        export_google_checkpoint=do_eval, objective="electra", generator_hidden_size=0.5)
    run_config = training.RunConfig(
        output_dir=str(output_dir), train_batch_size=8, eval_batch_size=8, learning_rate=2e-3,
        num_train_steps=steps, num_warmup_steps=1, max_eval_steps=2, log_every_n_steps=3,
        save_checkpoints_steps=3, seed=3, **changes)
    return pretraining_task.run_pretraining(options, run_config, distribution.get_strategy())


@pytest.fixture(scope="module")
def run(records, tmp_path_factory):
    directory = tmp_path_factory.mktemp("electra_run")
    config_file = str(directory / "electra_config.json")
    CONFIG.to_json_file(config_file)
    results = _run(records, directory / "out", config_file=config_file)
    return directory, config_file, results


@pytest.fixture(scope="module")
def eval_outputs(run, records) -> list[tuple[dict, dict]]:
    """(batch, outputs) of the restored model on the run's eval batches: the same masks and
    samples (drawn from --seed and the batch's number), its max_eval_steps of them."""
    directory, _, _ = run
    task = electra.ElectraTask(CONFIG, generator_hidden_size=0.5)
    model = training.load_model(task, training.RunConfig(output_dir=str(directory / "out")))
    return [(batch, model(batch, training=False))
            for batch in _dataset(records, 8, seed=3, repeat=True).take(2)]


def _googles_metrics(eval_outputs) -> dict[str, float]:
    """google-research/electra's eval metrics in numpy: each a weighted mean over all the eval
    batches (weights: the masked slots for the generator's, the real tokens for the
    discriminator's; precision over the tokens called replaced, recall over those replaced),
    0 where the weights are (the eval log's rule)."""
    sums: dict[str, list[float]] = {}

    def add(name, values, weights):
        total, weight = sums.setdefault(name, [0.0, 0.0])
        sums[name] = [total + float((values * weights).sum()), weight + float(weights.sum())]

    for batch, outputs in eval_outputs:
        logits = outputs["masked_lm_logits"].numpy().astype(np.float64)
        ids, weights = batch["masked_lm_ids"].numpy(), batch["masked_lm_weights"].numpy()
        log_probs = numpy_reference.log_softmax(logits)
        add("masked_lm_loss", -np.take_along_axis(log_probs, ids[..., None], -1)[..., 0], weights)
        add("masked_lm_accuracy", logits.argmax(-1) == ids, weights)
        add("sampled_masked_lm_accuracy", outputs["sampled_ids"].numpy() == ids, weights)
        mask = batch["input_mask"].numpy().astype(np.float64)
        disc_logits = outputs["discriminator_logits"].numpy().astype(np.float64)
        labels = outputs["replaced"].numpy()
        predicted = (disc_logits > 0).astype(labels.dtype)
        add("replaced_token_loss", 50.0 * _sigmoid_cross_entropy(disc_logits, labels), mask)
        add("disc_accuracy", predicted == labels, mask)
        add("disc_precision", predicted == labels, mask * predicted)
        add("disc_recall", predicted == labels, mask * labels)
        add("replaced_fraction", labels, mask)
    metrics = {name: total / weight if weight else 0.0 for name, (total, weight) in sums.items()}
    metrics["loss"] = metrics["masked_lm_loss"] + metrics["replaced_token_loss"]
    return metrics


def test_run_logs_googles_electra_metrics(run, eval_outputs):
    """eval_results.txt holds google-research/electra's metrics, recomputed in numpy from the
    restored model on the run's eval batches."""
    directory, _, results = run
    text = (directory / "out" / "eval_results.txt").read_text()
    for name in electra.METRIC_NAMES + ("global_step",):
        assert f"{name} = " in text, text
    assert "next_sentence" not in text
    assert results["global_step"] == 6
    written = training_log.read_eval_results(str(directory / "out" / "eval_results.txt"))
    expected = _googles_metrics(eval_outputs)
    for name, value in expected.items():
        assert written[name] == pytest.approx(value, rel=1e-4, abs=1e-6), name
        assert results[name] == pytest.approx(value, rel=1e-4, abs=1e-6), name
    # Only masked tokens (about 15% of the real ones) can be replaced, and an untrained
    # generator seldom samples the original back.
    assert 0.05 < expected["replaced_fraction"] < 0.2


def test_metrics_on_known_outputs():
    """The metric pairs (sum, weight) on outputs chosen by hand: after 6 steps the run's
    discriminator calls no token replaced, so its precision and recall are checked here."""
    task = electra.ElectraTask(CONFIG)
    features = {"input_mask": tf.constant([[1, 1, 1, 1, 1, 0]]),
                "masked_lm_ids": tf.constant([[2, 1]]),
                "masked_lm_weights": tf.constant([[1.0, 1.0]])}
    outputs = {"masked_lm_logits": tf.constant([[[0.0, 1.0, 3.0], [5.0, 0.0, 0.0]]]),
               "sampled_ids": tf.constant([[1, 1]]),
               # Called replaced at 0, 1, 4 (and the padding); replaced at 0 and 2 (and padding).
               "discriminator_logits": tf.constant([[2.0, 1.0, -1.0, -2.0, 3.0, 5.0]]),
               "replaced": tf.constant([[1, 0, 1, 0, 0, 1]])}
    got = {name: float(total) / float(weight)
           for name, (total, weight) in task.metrics(features, outputs).items()}
    assert got == pytest.approx({
        "masked_lm_accuracy": 1 / 2, "sampled_masked_lm_accuracy": 1 / 2,
        "disc_accuracy": 2 / 5,  # right at 0 and 3 of the 5 real tokens
        "disc_precision": 1 / 3,  # of the 3 real tokens called replaced, 0 is
        "disc_recall": 1 / 2,  # of the 2 real tokens replaced, 0 is found
        "replaced_fraction": 2 / 5})


def _googles_auc(labels: tf.Tensor, probabilities: tf.Tensor, weights: tf.Tensor | None = None
                 ) -> float:
    metric = keras.metrics.AUC(num_thresholds=200)  # tf.compat.v1.metrics.auc's curve
    metric.update_state(labels, probabilities, sample_weight=weights)
    return float(metric.result())


def test_disc_auc_is_googles_auc_of_the_restored_discriminator(run, eval_outputs):
    """google-research/electra's `tf.metrics.auc(labels * input_mask, probs * input_mask)` over
    the run's eval batches, recomputed from the restored model."""
    directory, _, results = run
    written = training_log.read_eval_results(str(directory / "out" / "eval_results.txt"))
    labels, probabilities, masks = [], [], []
    for batch, outputs in eval_outputs:
        masks.append(tf.cast(batch["input_mask"], tf.float32))
        labels.append(tf.cast(outputs["replaced"], tf.float32))
        probabilities.append(tf.sigmoid(outputs["discriminator_logits"]))
    labels, probabilities, mask = (tf.concat(x, 0) for x in (labels, probabilities, masks))
    expected = _googles_auc(labels * mask, probabilities * mask)
    assert written["disc_auc"] == pytest.approx(expected, abs=1e-6)
    assert results["disc_auc"] == pytest.approx(expected, abs=1e-6)
    # The padding counts, as in google's call: not the AUC over the real tokens alone.
    assert expected != pytest.approx(_googles_auc(labels, probabilities, mask), abs=1e-3)


def test_google_export_holds_both_networks(run):
    directory, _, _ = run
    names = dict(tf.train.list_variables(str(directory / "out" / "google_checkpoint" /
                                             "bert_model.ckpt")))
    assert names["electra/embeddings/word_embeddings"] == [99, 24]
    assert names["electra/embeddings_project/kernel"] == [24, 64]
    assert names["generator/embeddings_project/kernel"] == [24, 32]  # half of 64
    assert names["generator/encoder/layer_1/intermediate/dense/kernel"] == [32, 128]
    assert names["generator_predictions/dense/kernel"] == [32, 24]
    assert names["generator_predictions/output_bias"] == [99]
    assert names["discriminator_predictions/dense_1/kernel"] == [64, 1]
    assert not any(n.startswith("generator/embeddings/") or "pooler" in n for n in names)


def test_the_run_restores_into_a_classifier(run):
    directory, _, _ = run
    config = load_model_config(directory / "out" / "bert_config.json")
    assert isinstance(config, ElectraConfig)
    classifier = models.classifier_model(config, num_labels=2)
    assert isinstance(classifier.encoder, ElectraEncoder)
    for source in (directory / "out", directory / "out" / "google_checkpoint" / "bert_model.ckpt"):
        report = checkpoints.init_from_checkpoint(classifier, str(source))
        assert report.missing == ["output_weights", "output_bias"], report
        assert len(report.loaded) == 5 + 2 + 16 * 2, report


def test_resume_from_a_checkpoint_gives_the_uninterrupted_weights(run, records, tmp_path):
    directory, config_file, _ = run
    resumed = tmp_path / "resumed"
    shutil.copytree(directory / "out", resumed,
                    ignore=shutil.ignore_patterns("ckpt-6.*", "checkpoint", "eval*",
                                                  "google_checkpoint"))
    (resumed / "checkpoint").write_text('model_checkpoint_path: "ckpt-3"\n'
                                        'all_model_checkpoint_paths: "ckpt-3"\n')
    _run(records, resumed, do_eval=False, config_file=config_file)
    expected = tf.train.load_checkpoint(str(directory / "out" / "ckpt-6"))
    got = tf.train.load_checkpoint(str(resumed / "ckpt-6"))
    names = [n for n in expected.get_variable_to_shape_map() if "/.ATTRIBUTES/" in n]
    assert any("generator" in n for n in names)
    for name in names:
        np.testing.assert_array_equal(expected.get_tensor(name), got.get_tensor(name), name)


def test_errors(records, tmp_path):
    with pytest.raises(ConfigError, match="needs an ELECTRA config"):
        electra.ElectraTask(BertConfig(**TINY_CONFIG))
    static = tmp_path / "static.tfrecord"
    with tf.io.TFRecordWriter(str(static)) as writer:
        schema = features.pretraining_schema(SEQ, PRED)
        writer.write(schema.encode({
            "input_ids": np.ones(SEQ, np.int64), "input_mask": np.ones(SEQ, np.int64),
            "segment_ids": np.zeros(SEQ, np.int64), "masked_lm_positions": np.ones(PRED, np.int64),
            "masked_lm_ids": np.ones(PRED, np.int64), "masked_lm_weights": np.ones(PRED, np.float32),
            "next_sentence_labels": np.zeros(1, np.int64)}))
    with pytest.raises(UserError, match="--dynamic_masking"):
        dynamic_masking.pretraining_dataset(
            str(static), features.pretraining_schema(SEQ, PRED), 1, is_training=False,
            input_context=None, seed=0, drop_remainder=True, electra=True)
