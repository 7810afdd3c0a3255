"""A tiny ALBERT through the scripts' code paths: sentence-order records from the bundled corpus,
pretraining with LAMB (the masked-LM loss falls well below its initial log V), the run's
checkpoint restored into a classifier, and run_classifier.py taking `--albert_config_file` and
learning the bundled sentiment set above chance (started first, checked last)."""

import math
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import name_map as checkpoints
from bert_tf.checkpoints.model_config import load_model_config
from bert_tf.model import models
from bert_tf.model.albert.config import AlbertConfig
from bert_tf.model.albert.modeling import AlbertEncoder
from bert_tf.records import features, tfrecord
from bert_tf.tasks.pretraining import task as pretraining_task
from bert_tf.tasks.pretraining.instances import InstanceOptions
from bert_tf.tasks.pretraining.pipeline import PretrainingDataConfig, create_pretraining_data
from bert_tf.training import distribution, loop as training
from support.pretraining_records import TINY_CONFIG
from support.tiny_models import REPO, ScriptRun, read_results, words_of_files, write_tiny_model

CORPUS = os.path.join(REPO, "demo", "data", "corpus.txt")
DEMO = os.path.join(REPO, "demo", "data", "classification")
SEQ, PRED = 32, 5
# E = 16 and one group of blocks shared by 3 layers: sizes that never coincide.
ALBERT_SIZES = dict(embedding_size=16, num_hidden_layers=3, num_hidden_groups=1,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _write_albert_model(directory, files) -> tuple[str, str]:
    """vocab.txt over the words of `files` and an albert_config.json of the tiny sizes."""
    vocab_file, bert_config_file = write_tiny_model(directory, words_of_files(files))
    vocab_size = load_model_config(bert_config_file).vocab_size
    config_file = os.path.join(os.fspath(directory), "albert_config.json")
    AlbertConfig(**{**TINY_CONFIG, "vocab_size": vocab_size, **ALBERT_SIZES}).to_json_file(
        config_file)
    os.remove(bert_config_file)
    return vocab_file, config_file


@pytest.fixture(scope="module", autouse=True)
def classifier_run(tmp_path_factory, script_runner):
    directory = tmp_path_factory.mktemp("albert_classifier")
    vocab_file, config_file = _write_albert_model(
        directory, [os.path.join(DEMO, name) for name in ("train.tsv", "dev.tsv", "test.tsv")])
    out = directory / "run"
    run = ScriptRun(script_runner, "run_classifier.py", [
        "--task_name=SST-2", f"--data_dir={DEMO}", f"--vocab_file={vocab_file}",
        f"--albert_config_file={config_file}", f"--output_dir={out}", "--do_train", "--do_eval",
        "--max_seq_length=16", "--train_batch_size=16", "--eval_batch_size=16",
        "--learning_rate=5e-4", "--num_train_epochs=3", "--log_every_n_steps=50"])
    yield run, out
    run.stop()


def test_sop_records_pretrain_with_lamb_and_restore_into_a_classifier(tmp_path):
    corpus = tmp_path / "corpus.txt"
    with open(CORPUS, encoding="utf-8") as f:
        corpus.write_text("".join(f.readlines()[:1200]), encoding="utf-8")
    vocab_file, config_file = _write_albert_model(tmp_path, [corpus])
    records = str(tmp_path / "sop.tfrecord")
    summary = create_pretraining_data(PretrainingDataConfig(
        input_file=str(corpus), output_file=records, vocab_file=vocab_file,
        instance=InstanceOptions(max_seq_length=SEQ, max_predictions_per_seq=PRED,
                                 sentence_order=True),
        dupe_factor=1, num_workers=1))
    assert summary.lines()
    options = pretraining_task.PretrainingOptions(
        input_file=records, bert_config_file=config_file, max_seq_length=SEQ,
        max_predictions_per_seq=PRED, do_train=True, do_eval=True, export_google_checkpoint=True)
    run_config = training.RunConfig(
        output_dir=str(tmp_path / "pretraining"), train_batch_size=32, eval_batch_size=32,
        learning_rate=0.1, num_train_steps=40, num_warmup_steps=4, optimizer="lamb",
        max_eval_steps=4, log_every_n_steps=20, save_checkpoints_steps=40, seed=3)
    results = pretraining_task.run_pretraining(options, run_config, distribution.get_strategy())
    vocab_size = load_model_config(config_file).vocab_size
    # A random init predicts uniformly: log V.
    assert results["masked_lm_loss"] < 0.75 * math.log(vocab_size), results
    # The sentence-order figures are those of the restored model on the 4 eval batches (the
    # records in order, repeated), and the records hold both orders. Whether the head learns
    # is checked on an order it can learn in 40 steps (test_the_sentence_order_head_learns).
    restored = training.load_model(pretraining_task.PretrainingTask(
        load_model_config(config_file)), run_config)
    eval_rows = _first_records(records, 4 * 32, SEQ, PRED)
    logits = restored(_tensors(eval_rows), training=False)["next_sentence_logits"].numpy()
    labels = eval_rows["next_sentence_labels"][:, 0]
    assert 0.3 < labels.mean() < 0.7, labels.mean()
    log_probs = logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)
    assert results["next_sentence_loss"] == pytest.approx(
        -log_probs[np.arange(len(labels)), labels].mean(), rel=1e-5), results
    assert results["next_sentence_accuracy"] == pytest.approx(
        (logits.argmax(-1) == labels).mean(), abs=1e-6), results

    # The run directory is a whole ALBERT model: its config and its object checkpoint.
    config = load_model_config(tmp_path / "pretraining" / "bert_config.json")
    assert isinstance(config, AlbertConfig) and config.embedding_size == 16
    classifier = models.classifier_model(config, num_labels=2)
    assert isinstance(classifier.encoder, AlbertEncoder)
    report = checkpoints.init_from_checkpoint(classifier, tmp_path / "pretraining")
    # Embeddings 5 + projection 2 + one shared block 16 + pooler 2; the pretraining heads unused.
    assert len(report.loaded) == 25 and report.missing == ["output_weights", "output_bias"], report
    assert any("masked_lm" in name for name in report.unused), report
    # The TF1 export (google-research/albert's names) holds the same encoder, bit for bit.
    exported = models.classifier_model(config, num_labels=2)
    checkpoints.init_from_checkpoint(exported, tmp_path / "pretraining" / "google_checkpoint")
    for a, b in zip(classifier.encoder.weights, exported.encoder.weights):
        assert np.array_equal(a.numpy(), b.numpy()), a.path


def _first_records(path: str, count: int, seq: int, pred: int) -> dict:
    """The first `count` records of `path`, read again from the start until there are that many
    (as evaluation reads them), as numpy arrays."""
    schema = features.pretraining_schema(seq, pred)
    rows = [schema.decode(record) for record in tfrecord.read_records(path)]
    rows = [rows[i % len(rows)] for i in range(count)]
    return {name: np.stack([row[name] for row in rows]) for name in rows[0]}


def _tensors(arrays: dict) -> dict:
    return {name: tf.constant(value, tf.float32 if value.dtype == np.float32 else tf.int32)
            for name, value in arrays.items()}


def test_the_sentence_order_head_learns_an_order_it_can_learn(tmp_path):
    """Records whose order shows in the words (the second segment's words come from one half
    of the vocabulary when the order is kept, the other half when swapped): through the loop, a
    tiny ALBERT learns it in 40 steps (measured 1.0 and 0.95 accuracy with two seeds; chance is 0.5)."""
    rng = np.random.default_rng(0)
    count, seq, pred, vocab_size = 1024, 24, 3, 60
    labels = rng.integers(0, 2, count)
    ids = rng.integers(5, vocab_size, (count, seq))
    half = vocab_size // 2
    ids[:, seq // 2:] = np.where(labels[:, None] == 1, rng.integers(5, half, (count, seq - seq // 2)),
                                 rng.integers(half, vocab_size, (count, seq - seq // 2)))
    ids[:, 0] = 2
    positions = np.tile(np.arange(1, 1 + pred), (count, 1))
    arrays = {"input_ids": ids, "input_mask": np.ones_like(ids),
              "segment_ids": (np.arange(seq)[None] >= seq // 2) * np.ones_like(ids),
              "masked_lm_positions": positions,
              "masked_lm_ids": np.take_along_axis(ids, positions, 1),
              "masked_lm_weights": np.ones((count, pred), np.float32),
              "next_sentence_labels": labels[:, None]}
    records = str(tmp_path / "order.tfrecord")
    features.write_records(records, arrays, features.pretraining_schema(seq, pred))
    config_file = str(tmp_path / "albert_config.json")
    AlbertConfig(**{**TINY_CONFIG, "vocab_size": vocab_size, **ALBERT_SIZES}).to_json_file(
        config_file)
    options = pretraining_task.PretrainingOptions(
        input_file=records, bert_config_file=config_file, max_seq_length=seq,
        max_predictions_per_seq=pred, do_train=True, do_eval=True)
    run_config = training.RunConfig(
        output_dir=str(tmp_path / "run"), train_batch_size=32, eval_batch_size=32,
        learning_rate=2e-3, num_train_steps=40, max_eval_steps=4, log_every_n_steps=40,
        save_checkpoints_steps=40, seed=3)
    results = pretraining_task.run_pretraining(options, run_config, distribution.get_strategy())
    assert results["next_sentence_accuracy"] > 0.85, results
    assert results["next_sentence_loss"] < 0.6, results


def test_run_classifier_learns_with_albert_config_file(classifier_run):
    run, out = classifier_run
    output = run.wait()
    results = read_results(out / "eval_results.txt")
    assert results["global_step"] == 150
    assert results["eval_accuracy"] >= 0.8, (results, output[-2000:])
