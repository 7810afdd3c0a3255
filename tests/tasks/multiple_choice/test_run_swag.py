"""run_swag.py end to end on a tiny model, trained once (in process) and reused: eval and test
results against a numpy reference, the raw-text export reproduced without bert_tf and by
bert-predict, Hugging Face both ways against transformers' *ForMultipleChoice, ALBERT and
ELECTRA encoders under the head, the OpenVINO int8 export, and distillation and search through
the task-family interface."""

import csv
import io
import json
import logging
import os
import sys

import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers

from bert_tf.checkpoints import name_map as checkpoints
from bert_tf.checkpoints.hf_weights import bert_config_from_hf
from bert_tf.errors import UserError
from bert_tf.model.electra.config import ElectraConfig
from bert_tf.model.families import build_encoder
from bert_tf.serving import openvino, ops
from bert_tf.serving import predict as bert_predict
from bert_tf.tasks.multiple_choice import data
from bert_tf.tasks.multiple_choice import task as multiple_choice
from bert_tf.text.tokenizers import FullTokenizer
from bert_tf.tasks import finetuning
from bert_tf.training import loop as training
from bert_tf.workflows.distillation import run as distillation
from bert_tf.workflows.multitask.run import MultitaskOptions, run_multitask
from bert_tf.workflows.search import trials
from conftest import require_extra
from support.in_process import run_script
from support.serving_client import run_client
from support.tiny_models import REPO, read_results, write_tiny_model

pytestmark = pytest.mark.heavy  # scheduled first: see conftest.py

HEADER = ["video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
          *(f"ending{i}" for i in range(4)), "label"]
COLORS = ["red", "blue", "green", "black", "white", "yellow", "grey"]
SEQ = 14


def _questions(count: int, seed: int) -> list[data.Example]:
    """Which colour the context named (the right ending also starts "clear", the others
    "dull": what a tiny model learns in a few steps); long pairs are cut (SEQ)."""
    rng = np.random.default_rng(seed)
    out = []
    for q in range(count):
        right = COLORS[q % len(COLORS)]
        endings = [right, *rng.choice([c for c in COLORS if c != right], 3, replace=False)]
        rng.shuffle(endings)
        words = " ".join(rng.choice(["the", "sky", "was", "very", "today"], q % 6))
        out.append(data.Example(str(q), f"the sky is {right} {words}", "so it looks",
                                tuple(f"{'clear' if e == right else 'dull'} {e} and "
                                      f"{'bright ' * (q % 3)}sky" for e in endings),
                                endings.index(right)))
    return out


def _write_csv(path, examples, labelled=True) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(HEADER if labelled else HEADER[:-1])
        for e in examples:
            writer.writerow([f"v{e.guid}", e.guid, "x", e.context, e.stem, "gold", *e.endings,
                             *([e.label] if labelled else [])])


@pytest.fixture(scope="module")
def swag(tmp_path_factory):
    """run_swag.py trained once on 56 questions (dev = test's 13 questions, the test file
    without labels), evaluating, predicting and exporting both ways."""
    root = tmp_path_factory.mktemp("swag")
    (root / "data").mkdir()
    train, dev = _questions(56, 0), _questions(13, 1)
    _write_csv(root / "data" / "train.csv", train)
    _write_csv(root / "data" / "val.csv", dev)
    _write_csv(root / "data" / "test.csv", dev, labelled=False)
    words = "the sky is so it looks and bright clear dull was very today".split() + COLORS
    vocab, config = write_tiny_model(root, words, num_hidden_layers=1)
    model_flags = [f"--data_dir={root / 'data'}", f"--vocab_file={vocab}",
                   f"--bert_config_file={config}", f"--max_seq_length={SEQ}"]
    out = run_script("run_swag.py", [
        *model_flags, f"--output_dir={root / 'run'}", "--do_train", "--do_eval",
        "--do_predict", "--train_batch_size=8", "--eval_batch_size=5",
        "--predict_batch_size=5", "--learning_rate=1e-3", "--num_train_epochs=4",
        f"--export_dir={root / 'export'}", f"--export_hf_dir={root / 'hf'}"])
    return {"root": root, "out": out, "dev": dev, "vocab": vocab, "model_flags": model_flags,
            "results": np.loadtxt(root / "run" / "test_results.tsv", delimiter="\t", ndmin=2)}


def test_eval_and_test_results_agree_with_a_numpy_reference(swag):
    results = read_results(swag["root"] / "run" / "eval_results.txt")
    assert sorted(results) == ["eval_accuracy", "eval_loss", "global_step", "loss"]
    assert results["global_step"] == 28  # 56 questions / 8 × 4 epochs
    probabilities = swag["results"]
    labels = np.array([e.label for e in swag["dev"]])
    assert probabilities.shape == (13, 4)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1, atol=1e-6)
    # dev = test's questions: the figures of one are those of the other's probabilities.
    assert results["eval_accuracy"] == pytest.approx(
        np.mean(probabilities.argmax(axis=1) == labels), abs=1e-6)
    assert results["eval_loss"] == pytest.approx(
        -np.mean(np.log(probabilities[np.arange(13), labels])), abs=1e-5)
    assert results["eval_accuracy"] > 0.5  # it learned (chance: 0.25)


def test_loss_and_accuracy_are_the_weighted_softmax_cross_entropy():
    rng = np.random.default_rng(2)
    logits = rng.normal(0, 2, [6, 3]).astype(np.float32)
    labels = np.array([0, 2, 1, 1, 0, 2], np.int32)
    real = np.array([1, 1, 1, 1, 0, 0], np.int32)
    features = {"label_ids": tf.constant(labels), "is_real_example": tf.constant(real)}
    task = multiple_choice.MultipleChoiceTask(None, SEQ)
    outputs = {"logits": tf.constant(logits)}
    log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    expected = -log_p[np.arange(6), labels][:4].mean()
    loss = task.losses(features, outputs)["multiple_choice"] / task.loss_normalizers(
        features)["multiple_choice"]
    assert float(loss) == pytest.approx(expected, rel=1e-6)
    total, weight = task.metrics(features, outputs)["accuracy"]
    assert float(total) == np.sum((logits.argmax(axis=1) == labels)[:4]) and float(weight) == 4


def _client_inputs(examples) -> dict:
    return {"context": [e.context for e in examples], "stem": [e.stem for e in examples],
            **{f"choice_{i}": [e.endings[i] for e in examples] for i in range(4)}}


def _without_stem_inputs(examples) -> dict:
    """`without_stem`'s inputs for `examples` whose stem moved into each ending."""
    stemless = [data.Example(e.guid, e.context, "", tuple(f"so it looks {x}" for x in e.endings),
                             e.label) for e in examples]
    return {k: v for k, v in _client_inputs(stemless).items() if k != "stem"}


def test_export_reproduces_test_results_without_bert_tf_and_through_bert_predict(swag):
    export_dir = str(swag["root"] / "export")
    inputs = _client_inputs(swag["dev"])
    without_stem = _without_stem_inputs(swag["dev"])
    got, empty, no_stem = run_client(swag["root"], [
        {"export_dir": export_dir, "signature": "serving_default", "inputs": inputs},
        {"export_dir": export_dir, "signature": "serving_default",
         "inputs": {name: [] for name in inputs}},
        {"export_dir": export_dir, "signature": "without_stem", "inputs": without_stem}])
    np.testing.assert_allclose(got["probabilities"], swag["results"], atol=1e-5)
    assert got["prediction"] == swag["results"].argmax(axis=1).tolist()
    assert empty["probabilities"] == [] and empty["prediction"] == []
    # "so it looks" moved from the stem into each ending: the same pieces, the same packing.
    np.testing.assert_allclose(no_stem["probabilities"], swag["results"], atol=1e-5)
    assert ops.unservable_ops(export_dir) == []
    lines = swag["root"] / "questions.jsonl"
    lines.write_text("".join(json.dumps({k: v[i] for k, v in inputs.items()}) + "\n"
                             for i in range(13)), encoding="utf-8")
    out = swag["root"] / "predictions.jsonl"
    assert bert_predict.predict_to_file(export_dir, str(lines), str(out), batch_size=4,
                                        progress=None) == 13
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    np.testing.assert_allclose([r["probabilities"] for r in rows], swag["results"], atol=1e-5)


def test_openvino_int8_export_answers_as_the_tensorflow_export(swag, caplog, tmp_path):
    """The fixture's run exported on OpenVINO in int8 (calibrated on 8 training questions,
    N rows each): the dev accuracy of float32 and int8 side by side; both signatures within
    int8's tolerance of the TensorFlow export, through a process without bert_tf and through
    bert-predict, which names runtime and precision; refused past --export_max_relative_loss."""
    require_extra("openvino", "openvino")
    export_dir = swag["root"] / "int8"
    flags = [*swag["model_flags"], f"--output_dir={swag['root'] / 'run'}",
             "--export_runtime=openvino"]
    with caplog.at_level(logging.INFO, logger="absl"):
        run_script("run_swag.py", [*flags, f"--export_dir={export_dir}", "--export_dtype=int8",
                                   "--int8_calibration_examples=8"])
    manifest = json.loads((export_dir / openvino.MANIFEST).read_text(encoding="utf-8"))
    dev = manifest["dev"]
    assert (manifest["precision"], dev["metric"], dev["examples"]) == ("int8", "accuracy", 13)
    assert (export_dir / "model.xml").read_text().count('type="FakeQuantize"') >= 6
    assert dev["float32"] == pytest.approx(read_results(
        swag["root"] / "run" / "eval_results.txt")["eval_accuracy"], abs=1e-6)
    assert (f"{export_dir}: dev accuracy float32 {dev['float32']:.4f}, int8 {dev['int8']:.4f} ("
            in caplog.text)
    inputs = _client_inputs(swag["dev"])
    without_stem = _without_stem_inputs(swag["dev"])
    got, no_stem = run_client(swag["root"], [
        {"export_dir": str(export_dir), "signature": "serving_default", "inputs": inputs},
        {"export_dir": str(export_dir), "signature": "without_stem", "inputs": without_stem}])
    float32 = swag["results"]  # the TensorFlow export's probabilities (test above)
    np.testing.assert_allclose(got["probabilities"], float32, atol=0.05)
    assert np.mean(np.equal(got["prediction"], float32.argmax(axis=1))) == dev[
        "answers_unchanged"] >= 12 / 13
    # The stem moved into each ending: the same rows into the same model.
    np.testing.assert_allclose(no_stem["probabilities"], got["probabilities"], atol=1e-6)
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps({k: v[i] for k, v in inputs.items()}) + "\n"
                                 for i in range(13)), encoding="utf-8")
    out, progress = io.StringIO(), io.StringIO()
    bert_predict.predict_file(str(export_dir), str(questions), out, progress=progress)
    np.testing.assert_allclose([json.loads(line)["probabilities"] for line in
                                out.getvalue().splitlines()], got["probabilities"], atol=1e-6)
    assert progress.getvalue().splitlines()[:2] == [
        f"{export_dir}: int8 weights and compute",
        f"{export_dir}: runs on OpenVINO {openvino.require_openvino().get_version().split('-')[0]}"
        " (CPU, inference precision f32)"]
    # OpenVINO's float32 loses nothing here; refused when nothing may be lost.
    with pytest.raises(UserError, match=r"^the float32 export loses more than "
                                        r"--export_max_relative_loss=-1e-09: dev accuracy "
                                        r"float32 \d\.\d{4}, float32 \d\.\d{4} \([+-]0\.00% "
                                        r"relative\), 100\.0% of answers unchanged; not written"):
        run_script("run_swag.py", [*flags, f"--export_dir={swag['root'] / 'refused'}",
                                   "--export_max_relative_loss=-1e-9"])
    assert not (swag["root"] / "refused").exists()


def _packed(examples, vocab: str) -> dict[str, torch.Tensor]:
    packed = data.convert_examples(examples, SEQ, FullTokenizer(vocab, do_lower_case=True))
    return {"input_ids": torch.tensor(packed["input_ids"], dtype=torch.long),
            "attention_mask": torch.tensor(packed["input_mask"], dtype=torch.long),
            "token_type_ids": torch.tensor(packed["segment_ids"], dtype=torch.long)}


def test_transformers_loads_the_hf_export_and_gives_the_same_probabilities(swag):
    theirs = transformers.AutoModelForMultipleChoice.from_pretrained(
        swag["root"] / "hf", attn_implementation="eager").eval()
    assert theirs.config.architectures == ["BertForMultipleChoice"]
    with torch.no_grad():
        logits = theirs(**_packed(swag["dev"], swag["vocab"])).logits
    np.testing.assert_allclose(torch.softmax(logits, -1).numpy(), swag["results"], atol=1e-5)


def test_gradients_are_transformers_for_the_same_weights_and_questions(swag):
    """One training step's loss and every weight's gradient equal BertForMultipleChoice's
    (dropout off on both sides): what the two sides' training can differ in is the optimizer,
    the schedule and the random draws, not the model or its loss."""
    directory = swag["root"] / "hf"
    ours = multiple_choice.MultipleChoiceModel(bert_config_from_hf(directory))
    assert not checkpoints.init_from_checkpoint(ours, directory).missing
    theirs = transformers.BertForMultipleChoice.from_pretrained(
        directory, attn_implementation="eager").eval()
    batch, labels = _packed(swag["dev"], swag["vocab"]), [e.label for e in swag["dev"]]
    task = multiple_choice.MultipleChoiceTask(ours.encoder.config, SEQ)
    features = {"input_ids": batch["input_ids"], "input_mask": batch["attention_mask"],
                "segment_ids": batch["token_type_ids"]}
    features = {name: tf.constant(value.numpy(), tf.int32) for name, value in features.items()}
    features.update(label_ids=tf.constant(labels), is_real_example=tf.ones([len(labels)]))
    mappings = checkpoints.model_mappings(ours)
    with tf.GradientTape() as tape:
        loss = (task.losses(features, task.forward(ours, features, training=False))
                [multiple_choice.LOSS_TERM] / len(labels))
    gradients = tape.gradient(loss, [m.variable for m in mappings])
    expected = theirs(**batch, labels=torch.tensor(labels))
    expected.loss.backward()
    assert float(loss) == pytest.approx(float(expected.loss), abs=1e-6)
    theirs_by_name = dict(theirs.named_parameters())
    assert len(mappings) == len(theirs_by_name)
    # Gradients that are 0 in exact arithmetic (the score's bias, the keys' biases: a softmax
    # ignores what it adds to every score) are float32 noise on both sides: compared to the
    # largest gradient, not to themselves.
    scale = max(float(p.grad.abs().max()) for p in theirs_by_name.values())
    for mapping, gradient in zip(mappings, gradients):
        want = next(p for n, p in theirs_by_name.items() if n.endswith(mapping.hf_name)).grad
        want = want.numpy().T if mapping.transpose else want.numpy()
        got = np.asarray(tf.convert_to_tensor(gradient))
        np.testing.assert_allclose(got, want.reshape(got.shape), rtol=1e-4, atol=1e-6 * scale,
                                   err_msg=mapping.name)


def _transformers_made(family: str, directory, vocab: str) -> str:
    """A random-init transformers multiple-choice model (biases and LayerNorms perturbed),
    saved with save_pretrained, the fixture's vocab.txt beside it."""
    sizes = dict(vocab_size=len(open(vocab).read().split()), hidden_size=32,
                 num_attention_heads=4, intermediate_size=37, max_position_embeddings=64)
    if family == "bert":
        model = transformers.BertForMultipleChoice(transformers.BertConfig(
            num_hidden_layers=2, hidden_act="gelu", **sizes))
    else:
        model = transformers.AlbertForMultipleChoice(transformers.AlbertConfig(
            num_hidden_layers=3, embedding_size=16, hidden_act="gelu_new", **sizes))
    torch.manual_seed(7)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias") or "LayerNorm" in name:
                param.add_(torch.randn_like(param) * 0.1)
    model.eval().save_pretrained(directory)
    with open(vocab, encoding="utf-8") as f, open(os.path.join(directory, "vocab.txt"), "w",
                                                    encoding="utf-8") as out:
        out.write(f.read())
    return str(directory)


def test_a_transformers_made_bert_predicts_here_unchanged(swag):
    directory = _transformers_made("bert", swag["root"] / "theirs_bert", swag["vocab"])
    run_script("run_swag.py", [
        *[flag for flag in swag["model_flags"] if not flag.startswith("--bert_config_file")],
        f"--init_checkpoint={directory}", f"--output_dir={swag['root'] / 'from_hf'}",
        "--do_predict", "--predict_batch_size=5"])
    ours = np.loadtxt(swag["root"] / "from_hf" / "test_results.tsv", delimiter="\t")
    theirs = transformers.BertForMultipleChoice.from_pretrained(
        directory, attn_implementation="eager").eval()
    with torch.no_grad():
        logits = theirs(**_packed(swag["dev"], swag["vocab"])).logits
    np.testing.assert_allclose(ours, torch.softmax(logits, -1).numpy(), atol=1e-5)


def test_albert_and_electra_encoders_under_the_head(swag, caplog):
    directory = _transformers_made("albert", swag["root"] / "theirs_albert", swag["vocab"])
    config = bert_config_from_hf(directory)
    ours = multiple_choice.MultipleChoiceModel(config)
    assert type(ours.encoder) is type(build_encoder(config))
    report = checkpoints.init_from_checkpoint(ours, directory)
    assert not report.unused and not report.mismatched, report
    batch = _packed(swag["dev"][:3], swag["vocab"])
    theirs = transformers.AlbertForMultipleChoice.from_pretrained(
        directory, attn_implementation="eager").eval()
    with torch.no_grad():
        expected = theirs(**batch).logits.numpy()
    got = ours({"input_ids": batch["input_ids"].numpy().astype(np.int32),
                "input_mask": batch["attention_mask"].numpy().astype(np.int32),
                "segment_ids": batch["token_type_ids"].numpy().astype(np.int32)})["logits"]
    np.testing.assert_allclose(got, expected, atol=1e-5)
    # ELECTRA: its encoder (embedding projection) under the same head, one score per choice.
    electra = ElectraConfig(vocab_size=30, embedding_size=16, hidden_size=32,
                            num_hidden_layers=1, num_attention_heads=4, intermediate_size=37,
                            max_position_embeddings=64)
    model = multiple_choice.MultipleChoiceModel(electra)
    assert type(model.encoder) is type(build_encoder(electra))
    ids = np.random.default_rng(0).integers(5, 30, [2, 3, 7]).astype(np.int32)
    ones = np.ones_like(ids)
    logits = model({"input_ids": ids, "input_mask": ones, "segment_ids": 0 * ones})["logits"]
    pooled = model.encoder({"input_ids": ids.reshape(6, 7), "input_mask": ones.reshape(6, 7),
                            "segment_ids": 0 * ones.reshape(6, 7)})["pooled_output"]
    np.testing.assert_allclose(logits, np.reshape(model.classifier(pooled), [2, 3]), atol=1e-5)


def test_distils_through_the_task_family(swag):
    student = multiple_choice.MultipleChoiceOptions(
        data_dir=str(swag["root"] / "data"), vocab_file=swag["vocab"], max_seq_length=SEQ,
        do_train=True, do_eval=True, num_train_epochs=1.0)
    out = distillation.run_distillation(
        "multiple_choice", student,
        training.RunConfig(output_dir=str(swag["root"] / "student"), train_batch_size=8,
                           eval_batch_size=5),
        distillation.DistillationOptions(teacher_dir=str(swag["root"] / "run"),
                                         student_layers=1, intermediate_epochs=1.0))
    assert {"attention_loss", "hidden_loss"} <= set(out["stages"]["intermediate"]["train"])
    assert out["stages"]["prediction"]["train"]["distillation_loss"] > 0
    results = out["results"]
    assert results["metric"] == "eval_accuracy"
    assert results["teacher"]["dev"] == pytest.approx(
        read_results(swag["root"] / "run" / "eval_results.txt")["eval_accuracy"], abs=1e-6)


def test_search_knows_the_script_and_its_metric(swag):
    command = [sys.executable, os.path.join(REPO, "run_swag.py"), *swag["model_flags"],
               "--do_train", "--do_eval"]
    assert trials.command_script(command) == (os.path.join(REPO, "run_swag.py"), 2)
    assert trials.command_metric(command) == trials.command_metric(
        [*command, "--best_metric=eval_accuracy"])
    assert trials.command_metric(["bert-run-swag"]).key == "eval_accuracy"
    # The grid's values are parsed by run_swag.py's own flags before any trial runs.
    options = trials.SearchOptions(command=command, output_dir=str(swag["root"] / "search"),
                                   grid="learning_rate=5e-5,1e-4;max_seq_length=16")
    assert [trial.name for trial in trials.plan_search(options)] == [
        "learning_rate=5e-5__max_seq_length=16", "learning_rate=1e-4__max_seq_length=16"]


def test_mixes_with_a_classifier_through_the_task_family(swag):
    """tasks.json with a classifier and a multiple-choice task: one encoder, both heads trained
    on their own batches ([B,S] and [B,N·S]), each evaluated as its script evaluates."""
    sst = swag["root"] / "sst"
    sst.mkdir()
    for split, sentences in (("train", ["the sky is clear", "the sky is dull"] * 8),
                             ("dev", ["the sky is clear", "the sky is dull"])):
        (sst / f"{split}.tsv").write_text("sentence\tlabel\n" + "".join(
            f"{text}\t{int('clear' in text)}\n" for text in sentences))
    (swag["root"] / "tasks.json").write_text(json.dumps({"tasks": [
        {"name": "sst", "type": "classifier", "task_name": "sst-2", "data_dir": "sst"},
        {"name": "swag", "type": "multiple_choice", "data_dir": "data"}]}))
    model = dict(flag.lstrip("-").split("=", 1) for flag in swag["model_flags"][1:])
    shared = finetuning.FinetuningOptions(
        bert_config_file=model["bert_config_file"], vocab_file=model["vocab_file"],
        max_seq_length=SEQ, do_train=True, num_train_epochs=1.0)
    out = swag["root"] / "mix"
    run_multitask(MultitaskOptions(tasks_file=str(swag["root"] / "tasks.json"), shared=shared,
                                   do_eval=True),
                  training.RunConfig(output_dir=str(out), train_batch_size=8, eval_batch_size=5,
                                     learning_rate=1e-3))
    schedule = json.loads((out / "task_schedule.json").read_text())
    assert schedule["examples"] == {"sst": 16, "swag": 56}
    assert sum(schedule["batches"].values()) == 9 and min(schedule["batches"].values()) > 0
    results = read_results(out / "eval_results_swag.txt")
    assert sorted(results) == ["eval_accuracy", "eval_loss", "global_step", "loss"]
    assert results["global_step"] == 9
