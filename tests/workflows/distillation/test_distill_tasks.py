"""bert-distill for the tagger and for SQuAD, on tiny teachers (in process): the per-word and
start/end soft losses train, --student_layers starts from the teacher's mapped layers, and the
results compare the task's main metric; bert-distill's own error line through the script."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.tasks.ner import task as ner_task
from bert_tf.tasks.squad import task as squad_task
from bert_tf.training import loop as training
from bert_tf.workflows.distillation import run as distillation
from bert_tf.workflows.distillation.task import prediction_term
from conftest import TESTDATA
from support import numpy_reference
from support.tiny_models import REPO, words_of, write_tiny_model

pytestmark = pytest.mark.heavy  # scheduled first: see conftest.py

NER = os.path.join(TESTDATA, "ner")
SQUAD = os.path.join(TESTDATA, "squad", "v1_train.json")


def _soft_cross_entropy(student: np.ndarray, teacher: np.ndarray, temperature: float):
    """Per row: −Σ softmax(teacher / T) · log softmax(student / T), over the last axis."""
    return -(numpy_reference.softmax(teacher / temperature)
             * numpy_reference.log_softmax(student / temperature)).sum(-1)


def test_soft_losses_per_word_and_for_start_and_end(tiny_config):
    """The prediction stage's soft loss of each task, against numpy on chosen logits: the
    tagger's per word (each word's first piece, `label_weights`), over the words; SQuAD's the
    mean of its start and end losses, over the windows."""
    rng = np.random.default_rng(5)
    temperature = 2.0
    student, teacher = rng.normal(0.0, 2.0, (2, 3, 6, 4))
    label_weights = np.array([[1, 0, 1, 1, 0, 0], [0, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 0]])
    tagger = prediction_term(ner_task.TaggingTask(tiny_config, 4).soft_targets())
    features = {"input_ids": tf.zeros([3, 6], tf.int32),
                "label_weights": tf.constant(label_weights, tf.int32)}
    loss = tagger.loss(features, {"logits": tf.constant(student, tf.float32)},
                       {"logits": tf.constant(teacher, tf.float32)}, temperature)
    per_word = label_weights * _soft_cross_entropy(student, teacher, temperature)
    np.testing.assert_allclose(float(loss), per_word.sum(), rtol=1e-5)
    assert float(tagger.weight(features)) == label_weights.sum()

    span = prediction_term(squad_task.SpanTask(tiny_config).soft_targets())
    student, teacher = rng.normal(0.0, 2.0, (2, 2, 3, 6))  # [start|end][B,S]
    names = ("start_logits", "end_logits")
    loss = span.loss(features, dict(zip(names, tf.constant(student, tf.float32))),
                     dict(zip(names, tf.constant(teacher, tf.float32))), temperature)
    per_window = _soft_cross_entropy(student, teacher, temperature)  # [2, B]
    np.testing.assert_allclose(float(loss), per_window.sum() / 2, rtol=1e-5)
    assert float(span.weight(features)) == 3  # the windows


def test_tagger_distils_per_word(tmp_path):
    write_tiny_model(tmp_path, "张三李四王五在去北京上海工作开会")
    options = ner_task.NerOptions(
        data_dir=NER, vocab_file=str(tmp_path / "vocab.txt"), max_seq_length=6, do_train=True,
        num_train_epochs=2.0, data_format="char", train_file="char_train.txt",
        dev_file="char_dev.txt", test_file="char_test.txt", window_overlap=2,
        bert_config_file=str(tmp_path / "bert_config.json"))
    teacher = str(tmp_path / "teacher")
    ner_task.run_ner(options, training.RunConfig(output_dir=teacher, train_batch_size=2,
                                                 learning_rate=1e-2))
    student = ner_task.NerOptions(**{**options.__dict__, "bert_config_file": None,
                                     "do_eval": True, "num_train_epochs": 1.0})
    out = distillation.run_distillation(
        "ner", student, training.RunConfig(output_dir=str(tmp_path / "student"),
                                           train_batch_size=2, eval_batch_size=3),
        distillation.DistillationOptions(teacher_dir=teacher, student_layers=1,
                                         intermediate_epochs=1.0))
    assert {"attention_loss", "hidden_loss"} <= set(out["stages"]["intermediate"]["train"])
    assert out["stages"]["prediction"]["train"]["distillation_loss"] > 0
    results = out["results"]
    assert results["metric"] == "eval_f1"
    student_eval = out["stages"]["prediction"]["eval"]
    assert results["student"]["dev"] == pytest.approx(student_eval["eval_f1"])
    assert results["dev_examples"] == 6  # the dev file's windows (test_run_ner counts them)
    assert results["student"]["parameters"] < results["teacher"]["parameters"]


def test_squad_distils_start_and_end(tmp_path):
    with open(SQUAD, encoding="utf-8") as f:
        data = json.load(f)
    texts = [p["context"] + " " + q["question"] for d in data["data"] for p in d["paragraphs"]
             for q in p["qas"]]
    vocab, config_file = write_tiny_model(tmp_path, words_of(texts))
    options = squad_task.SquadOptions(
        vocab_file=vocab, train_file=SQUAD, predict_file=SQUAD, do_train=True,
        num_train_epochs=1.0, max_seq_length=40, doc_stride=16, max_query_length=12,
        bert_config_file=config_file)
    teacher = str(tmp_path / "teacher")
    squad_task.run_squad(options, training.RunConfig(output_dir=teacher, train_batch_size=2))
    student = squad_task.SquadOptions(**{**options.__dict__, "bert_config_file": None,
                                         "do_predict": True})
    out = distillation.run_distillation(
        "squad", student, training.RunConfig(output_dir=str(tmp_path / "student"),
                                             train_batch_size=2, predict_batch_size=4),
        distillation.DistillationOptions(teacher_dir=teacher, student_layers=1,
                                         stages=("prediction",), temperature=3.0))
    assert set(out["stages"]) == {"prediction"}
    assert np.isfinite(out["stages"]["prediction"]["train"]["distillation_loss"])
    results = out["results"]
    assert results["metric"] == "f1"
    assert results["teacher"]["dev"] == pytest.approx(
        json.load(open(os.path.join(tmp_path, "student", "teacher", "eval_results.json")))["f1"])


def test_script_takes_the_task_flags_and_prints_one_error_line(tmp_path, script_runner):
    # --task=ner: the tagger's flags (--data_format) parse; no teacher given: one error line.
    [done] = script_runner.run_all([(
        [os.path.join(REPO, "run_distillation.py"), "--task=ner",
         "--data_format=char", f"--data_dir={NER}", f"--output_dir={tmp_path / 'out'}",
         "--student_layers=1"], REPO)])
    assert done.returncode == 1, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert errors == ["error: give one of --teacher_dir (a bert_tf fine-tuning run) and "
                      "--teacher_checkpoint"]
