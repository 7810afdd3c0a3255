"""Multi-label classification: metrics against scikit-learn, threshold tuning, the readers, and
run_classifier --multi_label end to end (tuned thresholds, the best checkpoint, test_results)."""

import dataclasses
import json
import os

import numpy as np
import pytest
from sklearn import metrics as sk

from bert_tf.tasks.classifier import multi_label
from bert_tf.tasks.classifier import processors as classification
from bert_tf.tasks.classifier import task as classifier_task
from bert_tf.training import loop as training
from conftest import TESTDATA
from support.tiny_models import read_results, words_of_files, write_tiny_model

DATA = os.path.join(TESTDATA, "multi_label")
LABELS = ("sports", "politics", "science", "music")
SPEC = {"text_a": "text", "label": "labels", "multi_label": True, "labels": list(LABELS)}


@pytest.mark.parametrize("seed", [0, 1])
def test_metrics_equal_scikit_learn(seed):
    rng = np.random.default_rng(seed)
    gold = rng.random((40, 5)) < 0.3
    predicted = rng.random((40, 5)) < 0.3
    gold[:, 4] = predicted[:, 4] = False  # a label never given nor predicted: F1 0, not NaN
    predicted[:3] = gold[:3]
    names = list("abcde")
    got = multi_label.results_entries(gold, predicted, names)
    assert got["eval_micro_f1"] == pytest.approx(sk.f1_score(gold, predicted, average="micro"))
    assert got["eval_macro_f1"] == pytest.approx(sk.f1_score(gold, predicted, average="macro",
                                                             zero_division=0))
    assert got["eval_micro_precision"] == pytest.approx(
        sk.precision_score(gold, predicted, average="micro"))
    assert got["eval_micro_recall"] == pytest.approx(
        sk.recall_score(gold, predicted, average="micro"))
    assert got["eval_subset_accuracy"] == pytest.approx(sk.accuracy_score(gold, predicted))
    p, r, f, _ = sk.precision_recall_fscore_support(gold, predicted, zero_division=0)
    for c, name in enumerate(names):
        assert (got[f"eval_{name}_precision"], got[f"eval_{name}_recall"],
                got[f"eval_{name}_f1"]) == pytest.approx((p[c], r[c], f[c]))
    assert sorted(got) == sorted(multi_label.result_keys(names))


def test_tuned_thresholds_reach_the_best_f1_of_any_threshold():
    rng = np.random.default_rng(2)
    gold = rng.random((30, 3)) < 0.4
    probabilities = np.clip(gold * 0.3 + rng.random((30, 3)) * 0.7, 0, 1)
    thresholds = multi_label.tune_thresholds(gold, probabilities)
    for c in range(3):
        # Every decision a threshold can make: at each distinct score, or above them all.
        best = max(sk.f1_score(gold[:, c], probabilities[:, c] >= t, zero_division=0)
                   for t in [*np.unique(probabilities[:, c]), 2.0])
        chosen = sk.f1_score(gold[:, c], probabilities[:, c] >= thresholds[c], zero_division=0)
        assert chosen == pytest.approx(best)
    # Well-separated scores: any threshold between the classes works; the one nearest 0.5 wins.
    separated = multi_label.tune_thresholds(np.array([[1], [1], [0]]), np.array([[.9], [.8], [.1]]))
    assert separated.tolist() == [0.5]


def test_readers_delimited_and_0_1_columns_and_their_errors(tmp_path):
    task = classification.custom_task(SPEC)
    examples = classification.read_examples(task, DATA, "dev")
    columns = classification.custom_task({"text_a": "text", "label_columns": list(LABELS),
                                          "dev_file": "dev_columns.tsv"})
    assert columns.labels == LABELS and columns.multi_label
    assert [e.label for e in classification.read_examples(columns, DATA, "dev")] == [
        tuple(sorted(e.label, key=LABELS.index)) for e in examples]
    assert classification.infer_labels(dataclasses.replace(task, labels=None), DATA).labels == \
        tuple(sorted(LABELS))

    (tmp_path / "dev.tsv").write_text("text\tlabels\nfine\tsports\nbad\tsports|weather\n")
    with pytest.raises(ValueError, match=r"dev.tsv:3: unknown label 'weather' in "
                                         r"'sports\|weather'"):
        classification.read_examples(task, str(tmp_path), "dev")
    (tmp_path / "dev.tsv").write_text("text\tsports\nfine\tyes\n")
    with pytest.raises(ValueError, match="dev.tsv:2: label column 'sports' holds 'yes'"):
        classification.read_examples(classification.custom_task(
            {"text_a": "text", "label_columns": ["sports"]}), str(tmp_path), "dev")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    directory = tmp_path_factory.mktemp("model")
    write_tiny_model(directory, words_of_files(
        [os.path.join(DATA, name) for name in ("train.tsv", "dev.tsv")]))
    return directory


def test_multi_label_run_tunes_thresholds_and_predicts_from_the_best(model, tmp_path):
    options = classifier_task.ClassifierOptions(
        task_name="custom", data_dir=DATA, custom_spec=SPEC,
        bert_config_file=str(model / "bert_config.json"), vocab_file=str(model / "vocab.txt"),
        max_seq_length=24, do_train=True, do_predict=True, num_train_epochs=4.0,
        tune_thresholds=True, eval_every_n_steps=12, best_metric="eval_macro_f1")
    run_config = training.RunConfig(output_dir=str(tmp_path), train_batch_size=8,
                                    eval_batch_size=5, predict_batch_size=5, learning_rate=2e-3)
    out = classifier_task.run_classifier(options, run_config)
    assert out["train"]["global_step"] == 24 and out["num_predictions"] == 12
    best = read_results(tmp_path / "best" / "eval_results.txt")
    state = json.loads((tmp_path / "best_state.json").read_text())
    assert best["eval_macro_f1"] == state["best_score"] and state["last_step"] == 24
    thresholds = json.loads((tmp_path / "best" / "thresholds.json").read_text())
    assert thresholds["labels"] == list(LABELS)

    # test.tsv is dev.tsv's text: its probabilities at best/'s thresholds give best/'s figures.
    rows = [line.rstrip("\n").split("\t") for line in open(tmp_path / "test_results.tsv")]
    assert all(len(row) == len(LABELS) + 1 for row in rows)
    probabilities = np.array([[float(v) for v in row[:4]] for row in rows])
    predicted = probabilities >= np.array(thresholds["thresholds"])
    assert [row[4] for row in rows] == ["|".join(np.array(LABELS)[p]) for p in predicted]
    gold = np.array([[label in e.label for label in LABELS] for e in classification.read_examples(
        classification.custom_task(SPEC), DATA, "dev")])
    assert best["eval_macro_f1"] == pytest.approx(
        sk.f1_score(gold, predicted, average="macro", zero_division=0), abs=1e-6)
    assert best["eval_subset_accuracy"] == pytest.approx(sk.accuracy_score(gold, predicted),
                                                         abs=1e-6)
    # The fitted model beats predicting nothing (macro F1 0) on this separable set.
    assert best["eval_macro_f1"] > 0.5
