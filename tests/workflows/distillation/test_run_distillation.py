"""run_distillation end to end on a tiny classifier (in process): a 2-layer teacher run by
run_classifier, distilled into a narrower 1-layer student through both stages; the student's
directory is an ordinary run (its export reproduces its --do_predict in a fresh process), its
distillation_results.json holds both models' figures; and the errors."""

import dataclasses
import json
import os
import shutil

import numpy as np
import pytest

from bert_tf.errors import UserError
from bert_tf.serving.saved_model import SIGNATURE_KEY
from bert_tf.tasks.classifier import task as classifier_task
from bert_tf.training import loop as training
from bert_tf.workflows.distillation import run as distillation
from conftest import require_extra
from support.serving_client import run_client
from support.tiny_models import REPO, words_of, write_tiny_model

pytestmark = pytest.mark.heavy  # scheduled first: see conftest.py

DEMO = os.path.join(REPO, "demo", "data", "classification")
STUDENT = dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=4, intermediate_size=19,
               max_position_embeddings=64, type_vocab_size=2)


def _write_task(directory) -> list[str]:
    """SST-2-format train/dev/test files from the demo set (24 / 16 / 12 sentences)."""
    with open(os.path.join(DEMO, "train.tsv"), encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:53]
    os.makedirs(directory)
    for name, part in (("train.tsv", rows[:24]), ("dev.tsv", rows[24:40])):
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            f.write("sentence\tlabel\n")
            f.writelines(f"{text}\t{label}\n" for text, label in part)
    test = [text for text, _ in rows[40:52]]
    with open(os.path.join(directory, "test.tsv"), "w", encoding="utf-8") as f:
        f.write("index\tsentence\n")
        f.writelines(f"{i}\t{text}\n" for i, text in enumerate(test))
    return [text for text, _ in rows]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The teacher's run directory and the student's, distilled with both stages."""
    directory = tmp_path_factory.mktemp("distill")
    texts = _write_task(str(directory / "data"))
    vocab_file, config_file = write_tiny_model(directory, words_of(texts))
    options = classifier_task.ClassifierOptions(
        task_name="sst-2", data_dir=str(directory / "data"), vocab_file=vocab_file,
        max_seq_length=16, do_train=True, num_train_epochs=2.0, bert_config_file=config_file)
    teacher_dir = str(directory / "teacher")
    classifier_task.run_classifier(options, training.RunConfig(
        output_dir=teacher_dir, train_batch_size=8, learning_rate=1e-3))
    student_config = str(directory / "student_config.json")
    with open(student_config, "w", encoding="utf-8") as f:
        json.dump({**STUDENT, "vocab_size": len(open(vocab_file).read().split())}, f)
    student_options = classifier_task.ClassifierOptions(
        task_name="sst-2", data_dir=str(directory / "data"), vocab_file=vocab_file,
        max_seq_length=16, do_eval=True, do_predict=True, num_train_epochs=1.0,
        export_dir=str(directory / "export"))
    out = distillation.run_distillation(
        "classifier", student_options,
        training.RunConfig(output_dir=str(directory / "student"), train_batch_size=8,
                           eval_batch_size=8, predict_batch_size=8, learning_rate=1e-3),
        distillation.DistillationOptions(teacher_dir=teacher_dir, student_config=student_config,
                                         intermediate_epochs=1.0, intermediate_learning_rate=1e-3,
                                         temperature=2.0, alpha=0.5))
    return {"dir": directory, "teacher": teacher_dir, "student": str(directory / "student"),
            "vocab_file": vocab_file, "student_config": student_config, "out": out,
            "options": student_options, "test": texts[40:52]}


def _parameters(config: dict, num_labels: int) -> int:
    """BERT's weight count by formula: embeddings, blocks, pooler, classifier."""
    h, i = config["hidden_size"], config["intermediate_size"]
    embeddings = (config["vocab_size"] + config["max_position_embeddings"]
                  + config["type_vocab_size"]) * h + 2 * h
    block = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
    head = num_labels * h + num_labels
    return embeddings + config["num_hidden_layers"] * block + (h * h + h) + head


def test_both_stages_train_and_the_results_compare_teacher_and_student(runs):
    stages = runs["out"]["stages"]
    assert set(stages) == {"intermediate", "prediction"}
    # Stage 1 in its own run directory, with the attention and hidden terms; stage 2 the soft
    # loss mixed with the gold-label loss (alpha 0.5).
    assert {"attention_loss", "hidden_loss"} <= set(stages["intermediate"]["train"])
    assert {"distillation_loss", "classifier_loss"} <= set(stages["prediction"]["train"])
    assert os.path.isfile(os.path.join(runs["student"], "intermediate", "checkpoint"))
    with open(os.path.join(runs["student"], "distillation_results.json"), encoding="utf-8") as f:
        results = json.load(f)
    assert results == runs["out"]["results"]
    assert results["metric"] == "eval_accuracy"
    with open(os.path.join(runs["teacher"], "bert_config.json"), encoding="utf-8") as f:
        teacher_config = json.load(f)
    with open(runs["student_config"], encoding="utf-8") as f:
        student_config = json.load(f)
    assert results["teacher"]["parameters"] == _parameters(teacher_config, 2)
    assert results["student"]["parameters"] == _parameters(student_config, 2)
    eval_lines = open(os.path.join(runs["student"], "eval_results.txt")).read()
    assert f"eval_accuracy = {np.float32(results['student']['dev'])}" in eval_lines
    teacher_eval = open(os.path.join(runs["student"], "teacher", "eval_results.txt")).read()
    assert f"eval_accuracy = {np.float32(results['teacher']['dev'])}" in teacher_eval
    assert results["dev_examples"] == 16
    assert results["teacher"]["examples_per_second"] > 0
    assert results["student"]["examples_per_second"] > 0


def test_the_teacher_evaluated_is_the_teacher_run(runs):
    # The teacher's dev accuracy measured by bert-distill equals what run_classifier --do_eval
    # gives in the teacher's own directory (a copy, so the teacher stays untouched).
    copy = str(runs["dir"] / "teacher_copy")
    shutil.copytree(runs["teacher"], copy)
    options = classifier_task.ClassifierOptions(
        task_name="sst-2", data_dir=str(runs["dir"] / "data"), vocab_file=runs["vocab_file"],
        max_seq_length=16, do_eval=True)
    own = classifier_task.run_classifier(options, training.RunConfig(output_dir=copy))["eval"]
    assert runs["out"]["results"]["teacher"]["dev"] == pytest.approx(own["eval_accuracy"])


def test_student_export_reproduces_its_predictions_in_a_fresh_process(runs, tmp_path):
    expected = np.loadtxt(os.path.join(runs["student"], "test_results.tsv"), delimiter="\t",
                          ndmin=2)
    outputs = run_client(tmp_path, [{"export_dir": str(runs["dir"] / "export"),
                                     "signature": SIGNATURE_KEY,
                                     "inputs": {"text_a": runs["test"]}}])
    np.testing.assert_allclose(np.asarray(outputs[0]["probabilities"]), expected, atol=1e-5)


def _distill(runs, name: str, do_eval: bool = True, **changes):
    """A prediction-stage distillation into runs/<name> (no predictions, no export; without
    do_eval, no evaluation of either model and no distillation_results.json)."""
    options = dict(teacher_dir=runs["teacher"], student_config=runs["student_config"],
                   stages=("prediction",), intermediate_epochs=1.0)
    options.update(changes)
    task_options = dataclasses.replace(runs["options"], do_eval=do_eval, do_predict=False,
                                       export_dir=None)
    if options.get("teacher_checkpoint"):
        task_options = dataclasses.replace(task_options, bert_config_file=os.path.join(
            runs["teacher"], "bert_config.json"))
    return distillation.run_distillation(
        "classifier", task_options,
        training.RunConfig(output_dir=str(runs["dir"] / name), train_batch_size=8),
        distillation.DistillationOptions(**options))


def test_a_teacher_checkpoint_teaches_as_its_run_directory_does(runs):
    checkpoint = os.path.join(runs["teacher"], "ckpt-6")
    out = _distill(runs, "from_checkpoint", teacher_dir=None, teacher_checkpoint=checkpoint)
    assert out["results"]["teacher"]["dev"] == runs["out"]["results"]["teacher"]["dev"]
    assert out["results"]["teacher"]["parameters"] == runs["out"]["results"]["teacher"][
        "parameters"]


def test_label_lists_in_another_order_are_refused(runs):
    teacher = str(runs["dir"] / "reordered_teacher")
    shutil.copytree(runs["teacher"], teacher)
    with open(os.path.join(teacher, "label_list.txt"), "w", encoding="utf-8") as f:
        f.write("1\n0\n")
    with pytest.raises(UserError, match=r"the student's data \(--data_dir=.*\): labels "
                                        r"\['0', '1'\] differ from the teacher's "
                                        r"\['1', '0'\].*order"):
        _distill(runs, "reordered", teacher_dir=teacher)
    # Found before any data was converted or anything written.
    assert not os.path.exists(runs["dir"] / "reordered")


def test_the_teachers_vocabulary_is_the_default(runs):
    teacher = str(runs["dir"] / "teacher_with_vocab")
    shutil.copytree(runs["teacher"], teacher)
    options = dict(teacher_dir=teacher, student_config=runs["student_config"],
                   stages=("prediction",))
    task_options = dataclasses.replace(runs["options"], vocab_file=None, do_eval=False,
                                       do_predict=False, export_dir=None)
    run_config = training.RunConfig(output_dir=str(runs["dir"] / "teacher_vocab"),
                                    train_batch_size=8)
    with pytest.raises(UserError, match=r"--vocab_file is required: the teacher \(.*"
                                        r"teacher_with_vocab\) has no vocab.txt"):
        distillation.run_distillation("classifier", task_options, run_config,
                                      distillation.DistillationOptions(**options))
    assert not os.path.exists(run_config.output_dir)
    shutil.copy(runs["vocab_file"], os.path.join(teacher, "vocab.txt"))
    out = distillation.run_distillation("classifier", task_options, run_config,
                                        distillation.DistillationOptions(**options))
    assert out["stages"]["prediction"]["train"]["global_step"] == 3  # 24 sentences, batch 8


def test_attention_distillation_needs_equal_head_counts(runs):
    config = str(runs["dir"] / "two_heads.json")
    with open(runs["student_config"], encoding="utf-8") as f:
        values = json.load(f)
    with open(config, "w", encoding="utf-8") as f:
        json.dump({**values, "num_attention_heads": 2}, f)
    with pytest.raises(UserError, match="num_attention_heads=2, the teacher 4"):
        _distill(runs, "heads", student_config=config, stages=("intermediate", "prediction"))


def test_another_vocabulary_is_refused(runs):
    teacher = str(runs["dir"] / "other_vocab_teacher")
    shutil.copytree(runs["teacher"], teacher)
    with open(runs["vocab_file"], encoding="utf-8") as f:
        tokens = f.read().split()
    with open(os.path.join(teacher, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(tokens[:5] + tokens[6:] + tokens[5:6]) + "\n")
    with pytest.raises(UserError, match="vocab.txt \\(teacher\\) differs from --vocab_file"):
        _distill(runs, "vocab", teacher_dir=teacher)
    config = str(runs["dir"] / "bigger_vocab.json")
    with open(runs["student_config"], encoding="utf-8") as f:
        values = json.load(f)
    with open(config, "w", encoding="utf-8") as f:
        json.dump({**values, "vocab_size": values["vocab_size"] + 1}, f)
    with pytest.raises(UserError, match="vocab_size .* differs from the teacher's"):
        _distill(runs, "vocab_size", student_config=config)


def test_augmented_training_set_feeds_both_stages(runs):
    from bert_tf.model import models
    from bert_tf.model.config import BertConfig
    import tensorflow as tf

    mlm = runs["dir"] / "mlm"
    mlm.mkdir()
    config = BertConfig.from_json_file(os.path.join(runs["teacher"], "bert_config.json"))
    tf.train.Checkpoint(model=models.pretraining_model(config)).write(str(mlm / "ckpt-1"))
    config.to_json_file(str(mlm / "bert_config.json"))
    # Only the training set is checked: no evaluation (its teacher run and throughput timing).
    out = _distill(runs, "augmented", do_eval=False, augment_checkpoint=str(mlm / "ckpt-1"),
                   augment_copies=1)
    # 24 training sentences and one variant each: 48 examples, 6 batches of 8 in one epoch.
    assert out["stages"]["prediction"]["train"]["global_step"] == 6
    with open(runs["dir"] / "augmented" / "augmented_data" / "train.tsv", encoding="utf-8") as f:
        rows = f.read().splitlines()[1:]
    assert len(rows) == 48
    with open(os.path.join(runs["dir"], "data", "train.tsv"), encoding="utf-8") as f:
        originals = f.read().splitlines()[1:]
    assert rows[0::2] == originals  # each original, then its variant
    assert [r.split("\t")[1] for r in rows[1::2]] == [r.split("\t")[1] for r in originals]


def _openvino_distillation(runs, name: str, stages: tuple[str, ...], **export):
    """A distillation into runs/<name> (no evaluation) that exports to runs/<name>_export with
    `export`'s OpenVINO options."""
    require_extra("openvino", "openvino")
    task_options = dataclasses.replace(runs["options"], do_eval=False, do_predict=False,
                                       export_dir=str(runs["dir"] / f"{name}_export"),
                                       export_runtime="openvino", **export)
    return distillation.run_distillation(
        "classifier", task_options,
        training.RunConfig(output_dir=str(runs["dir"] / name), train_batch_size=8),
        distillation.DistillationOptions(teacher_dir=runs["teacher"],
                                         student_config=runs["student_config"],
                                         stages=stages, intermediate_epochs=1.0))


def test_openvino_export_flags_are_refused_before_the_first_stage(runs):
    with pytest.raises(UserError, match=r"^--int8_calibration_examples=0: give a positive "
                                        r"number$"):
        _openvino_distillation(runs, "no_calibration", ("intermediate", "prediction"),
                               export_dtype="int8",
                               int8_calibration_examples=0)
    # The intermediate stage (whose run does not export) was not trained first.
    assert not os.path.exists(runs["dir"] / "no_calibration")


def test_the_student_exports_to_openvino_int8(runs):
    from bert_tf.serving import openvino, predict

    out = _openvino_distillation(runs, "int8", ("prediction",), export_dtype="int8",
                                 int8_calibration_examples=24)
    export_dir = out["stages"]["prediction"]["export_dir"]
    with open(os.path.join(export_dir, openvino.MANIFEST), encoding="utf-8") as f:
        manifest = json.load(f)
    # Calibrated on the student's training sentences, compared with float32 on its 16 dev ones.
    assert manifest["runtime"] == "openvino" and manifest["precision"] == "int8"
    assert manifest["dev"]["metric"] == "accuracy" and manifest["dev"]["examples"] == 16
    with open(os.path.join(export_dir, "model.xml"), encoding="utf-8") as f:
        graph = f.read()
    assert graph.count('type="FakeQuantize"') >= 6  # the products' inputs, int8
    # The student's one layer, not the teacher's two.
    assert "/layer_0" in graph and "/layer_1" not in graph
    _, serve, _ = predict.load_signature(export_dir, SIGNATURE_KEY)
    probabilities = serve(text_a=np.array(runs["test"], dtype=object))["probabilities"]
    assert probabilities.shape == (12, 2)
    np.testing.assert_allclose(probabilities.sum(axis=-1), 1.0, atol=1e-5)
