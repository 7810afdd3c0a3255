"""run_ner end to end on a tiny model: the bundled CoNLL set learns well above chance through the
script (started first, checked last, so that the in-process tests run meanwhile), the char format
with BIOES and windows through the library, and the run's errors."""

import dataclasses
import os

import pytest
import tensorflow as tf

from bert_tf.model.config import BertConfig
from bert_tf.tasks.ner import data as tagging
from bert_tf.tasks.ner import metrics as tag_metrics
from bert_tf.tasks.ner import task as ner_task
from bert_tf.text.tokenizers import FullTokenizer
from bert_tf.training import loop as training
from conftest import TESTDATA
from support.tiny_models import REPO, ScriptRun, demo_model_flags, read_results

DEMO = os.path.join(REPO, "demo", "data", "ner")
NER = os.path.join(TESTDATA, "ner")


@pytest.fixture(scope="module", autouse=True)
def demo_run(tmp_path_factory, script_runner):
    """run_ner.py on the bundled CoNLL set, started before this module's first test: the
    in-process tests run meanwhile, `test_demo_set_learns_through_the_script` (last) checks it."""
    directory = tmp_path_factory.mktemp("demo")
    # One encoder layer: it reaches eval F1 0.97 (each type 0.95 or more) on this set.
    model_flags = demo_model_flags(DEMO, ("train.txt", "dev.txt", "test.txt"), directory,
                                   num_hidden_layers=1)
    run = ScriptRun(
        script_runner, "run_ner.py", [
            *model_flags, "--do_train", "--do_eval", "--do_predict", "--max_seq_length=24",
            "--window_overlap=8", "--train_batch_size=16", "--eval_batch_size=32",
            "--predict_batch_size=32", "--learning_rate=5e-3", "--num_train_epochs=3",
            "--log_every_n_steps=50"])
    out = directory / "run"
    yield run, out
    run.stop()


def test_char_format_bioes_windows_eval_and_predict(char_model, tmp_path):
    options = ner_task.NerOptions(
        data_dir=NER, bert_config_file=str(char_model / "bert_config.json"),
        vocab_file=str(char_model / "vocab.txt"), max_seq_length=6, do_train=True, do_eval=True,
        do_predict=True, num_train_epochs=2.0, data_format="char", tag_scheme="bioes",
        train_file="char_train.txt", dev_file="char_dev.txt", test_file="char_test.txt",
        window_overlap=2)
    run_config = training.RunConfig(output_dir=str(tmp_path), train_batch_size=2,
                                    eval_batch_size=3, predict_batch_size=4, learning_rate=1e-2)
    out = ner_task.run_ner(options, run_config)
    assert out["labels"] == ["O", "B-LOC", "I-LOC", "E-LOC", "S-LOC",
                             "B-PER", "I-PER", "E-PER", "S-PER"]
    # 7, 5 and 7 characters in windows of 4 sharing 2: 3 + 2 + 3 windows; int(8 / 2 × 2 epochs).
    assert out["train"]["global_step"] == 8

    # The loop's token accuracy (weighted first pieces) is the stitched words' accuracy, and
    # eval_loss its loss: the weights count each word once, in one window.
    dev = ner_task.prepare_split(os.path.join(NER, "char_dev.txt"), tagging.read_sentences(
        os.path.join(NER, "char_dev.txt"), "char"), options, out["labels"], _tokenizer(char_model),
        str(tmp_path / "check.tf_record"), 3)
    assert dev.features.num_windows == 6 and int(dev.features.arrays["label_weights"].sum()) == 14
    task = ner_task.make_task(options, _config(char_model), out["labels"], 1e-2)
    loop = training.evaluate(task, run_config, ner_task.input_fn(dev, 6, False))
    assert out["eval"]["eval_accuracy"] == pytest.approx(loop["accuracy"], abs=1e-6)
    assert out["eval"]["eval_loss"] == pytest.approx(loop["tagging_loss"], rel=1e-6)
    assert "test" not in out  # the test file has no tags

    lines = (tmp_path / "test_predictions.txt").read_text(encoding="utf-8").splitlines()
    source = open(os.path.join(NER, "char_test.txt"), encoding="utf-8").read().splitlines()
    assert [line[:1] for line in lines] == [line[:1] for line in source]
    predicted = [line.split(" ")[1] for line in lines if line]
    assert len(predicted) == 12 and set(predicted) <= set(out["labels"])
    # Decoded under the BIOES constraints (the default): every sentence's spans are well formed.
    for block in "\n".join(lines).split("\n\n"):
        tags = [line.split(" ")[1] for line in block.splitlines()]
        assert tags == tag_metrics.tags_from_entities(tag_metrics.entities(tags), len(tags),
                                                      "bioes")

    # A predict-only run reads label_list.txt and tags the same way.
    again = ner_task.run_ner(dataclasses.replace(options, do_train=False, do_eval=False), run_config)
    assert again["labels"] == out["labels"]
    assert (tmp_path / "test_predictions.txt").read_text(encoding="utf-8").splitlines() == lines
    # The checkpoints have one output per label of label_list.txt: another list is refused.
    with pytest.raises(ValueError, match="differ from .*label_list.txt"):
        ner_task.run_ner(dataclasses.replace(options, do_train=False, labels=("O", "B-PER")),
                         run_config)


def _config(model_dir):
    return BertConfig.from_json_file(str(model_dir / "bert_config.json"))


def _tokenizer(model_dir):
    return FullTokenizer(str(model_dir / "vocab.txt"), do_lower_case=True)


def test_run_errors(char_model, tmp_path):
    base = ner_task.NerOptions(
        data_dir=NER, bert_config_file=str(char_model / "bert_config.json"),
        vocab_file=str(char_model / "vocab.txt"), max_seq_length=8, data_format="char",
        train_file="char_train.txt", dev_file="char_dev.txt", test_file="char_test.txt")
    run_config = training.RunConfig(output_dir=str(tmp_path / "run"))
    with pytest.raises(ValueError, match="nothing to do"):
        ner_task.run_ner(base, run_config)
    with pytest.raises(ValueError, match="max_position_embeddings=64"):
        ner_task.run_ner(dataclasses.replace(base, do_eval=True, max_seq_length=65), run_config)
    # The dev file holds PER entities the given label list lacks: file and line are named.
    with pytest.raises(ValueError, match=r"char_dev.txt:1: tag 'B-PER' is not in the label list"):
        ner_task.run_ner(dataclasses.replace(base, do_eval=True, labels=("O", "B-LOC", "I-LOC")),
                         run_config)
    with pytest.raises(ValueError, match="char_test.txt: no tag column"):
        ner_task.run_ner(dataclasses.replace(base, do_train=True, train_file="char_test.txt",
                                             labels=("O", "B-PER", "I-PER")),
                         training.RunConfig(output_dir=str(tmp_path / "other")))
    with pytest.raises(ValueError, match="make no full batch of 32"):
        ner_task.run_ner(dataclasses.replace(base, do_train=True),
                         training.RunConfig(output_dir=str(tmp_path / "third")))


def test_demo_set_learns_through_the_script(demo_run):
    run, out = demo_run
    run.wait()

    # Sentences of up to 42 words do not fit in 22 pieces: there are more windows than sentences.
    windows = sum(1 for _ in tf.data.TFRecordDataset(str(out / "train.tf_record")))
    assert windows > 600
    results = read_results(out / "eval_results.txt")
    types = ("LOC", "ORG", "PER")
    assert sorted(results) == sorted(
        ["eval_accuracy", "eval_f1", "eval_loss", "eval_precision", "eval_recall", "global_step",
         "loss"] + [f"eval_{t}_{m}" for t in types for m in ("f1", "precision", "recall")])
    assert results["global_step"] == int(windows / 16 * 3)
    # Chance is an F1 near 0 (a random tagger almost never gets a whole span right).
    assert results["eval_f1"] >= 0.85 and results["eval_accuracy"] >= 0.95, results
    assert min(results[f"eval_{t}_f1"] for t in types) >= 0.7, results
    assert read_results(out / "test_results.txt")["test_f1"] >= 0.85
    labels = (out / "label_list.txt").read_text().splitlines()
    assert labels == ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]

    # test_predictions.txt is test.txt with one more column, a tag for every word.
    source = open(os.path.join(DEMO, "test.txt"), encoding="utf-8").read().splitlines()
    written = (out / "test_predictions.txt").read_text(encoding="utf-8").splitlines()
    assert len(written) == len(source)
    for src, line in zip(source, written):
        if src and not src.startswith("-DOCSTART-"):
            assert line.startswith(src + " ") and line.split()[-1] in labels
        else:  # blank lines copied; -DOCSTART- gets an O column (conlleval's column count)
            assert line == (src + " O" if src else src)
