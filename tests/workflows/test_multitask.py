"""run_multitask on a tiny model: a classifier (SST-2 layout) and an NER task on one encoder.

Sampling proportions against the binomial bound; each task's figures equal those computed from
its head's weights directly; exports reproduced in a fresh process; exact resume; --refine; the
tasks file's errors."""

import dataclasses
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import name_map as checkpoints
from bert_tf.errors import UserError
from bert_tf.model.inputs import MODEL_INPUTS
from bert_tf.records import features as record_schemas
from bert_tf.serving.saved_model import SIGNATURE_KEY
from bert_tf.tasks.classifier import task as classifier_task
from bert_tf.tasks import finetuning
from bert_tf.training import best_checkpoint, loop as training
from bert_tf.training import steps as training_steps
from bert_tf.workflows.multitask import sampling
from bert_tf.workflows.multitask.run import (MultitaskOptions, MultitaskTask, mixed_input_fn,
                                             prepare_task, run_multitask)
from bert_tf.workflows.multitask.tasks_file import read_tasks_file
from conftest import REPO
from support.pretraining_runs import weights
from support.serving_client import run_client
from support.tiny_models import words_of_files, write_tiny_model

pytestmark = pytest.mark.heavy  # scheduled first: see conftest.py

DEMO = os.path.join(REPO, "demo", "data")
SEQ = 24
STEPS_PER_CHECKPOINT = 4
EVAL_EVERY = 8  # and at the last step: the best of two checkpoints is kept


# ------------------------------------------------------------------ sampling
def _binomial_bound(count: int, n: int, p: float) -> bool:
    """`count` of `n` draws within 4.5 standard deviations of n·p (fails by chance ~1e-5)."""
    return abs(count - n * p) <= 4.5 * np.sqrt(n * p * (1 - p))


@pytest.mark.parametrize("name, expected", [
    ("proportional", [100 / 1300, 300 / 1300, 900 / 1300]),  # sizes × weights [1, 1, 1.5]
    ("uniform", [1 / 3.5, 1 / 3.5, 1.5 / 3.5]),
])
def test_sampling_proportions_within_the_binomial_bound(name, expected):
    sizes, weights = [100, 300, 600], [1.0, 1.0, 1.5]
    np.testing.assert_allclose(sampling.probabilities(sizes, weights, sampling.alpha(name, 0, 10)),
                               expected)
    chosen = sampling.schedule(sizes, weights, name, 20000, seed=7)
    for k, p in enumerate(expected):
        assert _binomial_bound(int((chosen == k).sum()), len(chosen), p), (k, (chosen == k).sum())
    assert not np.array_equal(chosen, sampling.schedule(sizes, weights, name, 20000, seed=8))


def test_annealed_sampling_moves_from_proportional_to_alpha_0_2():
    sizes, weights, steps, window = [100, 900], [1.0, 1.0], 40000, 4000
    chosen = sampling.schedule(sizes, weights, "annealed", steps, seed=3)
    assert sampling.alpha("annealed", 0, steps) == 1.0
    assert sampling.alpha("annealed", steps - 1, steps) == pytest.approx(0.2)
    for start in (0, steps // 2, steps - window):  # the mean p of the window's steps
        p = np.mean([sampling.probabilities(sizes, weights, sampling.alpha("annealed", t, steps))[0]
                     for t in range(start, start + window)])
        assert _binomial_bound(int((chosen[start:start + window] == 0).sum()), window, p)
    first, last = (sampling.probabilities(sizes, weights, sampling.alpha("annealed", t, steps))[0]
                   for t in (0, steps - 1))
    assert first == pytest.approx(0.1) and last == pytest.approx(100**0.2 / (100**0.2 + 900**0.2))


@pytest.mark.parametrize("name", sampling.SAMPLINGS)
def test_schedule_takes_each_steps_task_by_the_reference_formula(name, monkeypatch):
    """Every step's task is the first whose cumulative p_i ∝ w_i · n_i^α(t) exceeds the step's
    uniform draw: the formula step by step, in plain Python floats, against the vectorised
    schedule (its only difference may be a draw within rounding of a boundary: none here), in
    one pass and in passes of 1000 steps."""
    sizes, weights, steps = [100, 300, 600, 7], [1.0, 1.0, 1.5, 3.0], 3001
    draws = np.random.default_rng(11).random(steps)
    expected = []
    for t in range(steps):
        exponent = {"proportional": 1.0, "uniform": 0.0,
                    "annealed": 1.0 - 0.8 * t / (steps - 1)}[name]
        scores = [w * n ** exponent for n, w in zip(sizes, weights)]
        cumulative = np.cumsum(np.array(scores) / sum(scores))
        expected.append(min(int((cumulative <= draws[t]).sum()), len(sizes) - 1))
    chosen = sampling.schedule(sizes, weights, name, steps, seed=11)
    assert chosen.dtype == np.int32
    np.testing.assert_array_equal(chosen, expected)
    monkeypatch.setattr(sampling, "SCHEDULE_CHUNK_STEPS", 1000)
    np.testing.assert_array_equal(sampling.schedule(sizes, weights, name, steps, seed=11), expected)


# ------------------------------------------------------------------ the tasks file
@pytest.mark.parametrize("entries, message", [
    ([], "at least one task"),
    ([{"name": "a", "type": "squad", "data_dir": "x"}], "'type' must be one of"),
    ([{"name": "a", "type": "ner", "data_dir": "x", "task_name": "sst-2"}],
     "unknown key(s) ['task_name'] for a ner task"),
    ([{"name": "a/b", "type": "ner", "data_dir": "x"}], "'name' must be a short name"),
    ([{"name": "a", "type": "ner", "data_dir": "x", "weight": 0}], "'weight' must be a positive"),
    ([{"name": "a", "type": "classifier", "data_dir": "x"}], "'task_name' is required"),
    ([{"name": "a", "type": "ner", "data_dir": "x"}, {"name": "a", "type": "ner", "data_dir": "y"}],
     "['a'] appear twice"),
])
def test_tasks_file_errors_name_the_file_and_task(tmp_path, entries, message):
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps({"tasks": entries}))
    with pytest.raises(UserError) as info:
        read_tasks_file(str(path), finetuning.FinetuningOptions())
    assert f"--tasks: {path}" in str(info.value) and message in str(info.value)


# ------------------------------------------------------------------ one step, one task
def _head_state(run, model, k: int) -> dict[str, np.ndarray]:
    """Task k's head variables and their AdamW moments, by path."""
    encoder = {id(v) for v in model.encoder.trainable_variables}
    state = {}
    for variable in model.task_models[k].trainable_variables:
        if id(variable) in encoder:
            continue
        index = run.optimizer._get_variable_index(variable)
        state[variable.path] = variable.numpy()
        state[f"{variable.path}/m"] = run.optimizer._momentums[index].numpy()
        state[f"{variable.path}/v"] = run.optimizer._velocities[index].numpy()
    return state


def test_a_step_on_one_tasks_batch_leaves_the_other_heads_and_their_moments_as_they_were(
        setup, tmp_path):
    """Steps on an NER batch then an SST batch: the SST step leaves the NER head's weights and
    AdamW moments bit-identical (no moment decay, no weight decay) while it moves the encoder
    and the SST head; the NER step had left the SST head at its initial values and moments 0."""
    options = setup["options"]
    run_config = setup["run_config"].replace(output_dir=str(tmp_path / "run"),
                                             num_train_steps=10)
    config, tokenizer = options.shared.load_bert_config(run_config), _tokenizer(setup)
    tasks = [prepare_task(entry, str(tmp_path / entry.name), config, tokenizer, run_config)
             for entry in read_tasks_file(options.tasks_file, options.shared)]
    multitask = MultitaskTask(config, tasks)
    run = training._Run(multitask, run_config, tf.distribute.get_strategy(), with_optimizer=True)
    step = training_steps.make_train_step(multitask, run.model, run.optimizer,
                                          accumulation_steps=1, loss_scale=False,
                                          jit_compile=False)
    batches = iter(mixed_input_fn(tasks, multitask.names, multitask.label_specs,
                                  np.array([1, 0]))(None, 8))
    sst_initial = _head_state(run, run.model, 0)
    step(next(batches))  # an NER batch
    ner_before, sst_after_ner = _head_state(run, run.model, 1), _head_state(run, run.model, 0)
    encoder_before = [v.numpy() for v in run.model.encoder.trainable_variables]
    assert any(np.any(value != 0) for name, value in ner_before.items() if name.endswith("/m"))
    for name, value in sst_initial.items():
        np.testing.assert_array_equal(sst_after_ner[name], value, err_msg=name)
    step(next(batches))  # an SST batch
    ner_after = _head_state(run, run.model, 1)
    for name, value in ner_before.items():
        np.testing.assert_array_equal(ner_after[name], value, err_msg=name)
    sst_after = _head_state(run, run.model, 0)
    assert all(np.any(sst_after[name] != value) for name, value in sst_after_ner.items())
    assert any(np.any(v.numpy() != before) for v, before in
               zip(run.model.encoder.trainable_variables, encoder_before))


def test_a_tasks_file_of_one_task_trains_as_its_script(setup, tmp_path):
    """One classifier task through run_multitask and the same task through run_classifier: the
    same weights after the same steps (the same batches, schedule and updates). Full-length
    batches in both, as the mix has; the two graphs still round differently in the last bit
    of a few values (about 5% of the word embeddings after 7 steps, 1 ulp), hence 1e-5."""
    (tmp_path / "one.json").write_text(json.dumps({"tasks": [
        {"name": "sst", "type": "classifier", "task_name": "sst-2",
         "data_dir": str(setup["directory"] / "sst")}]}))
    shared = dataclasses.replace(setup["options"].shared, eval_every_n_steps=0,
                                 dynamic_padding=False)
    run_config = setup["run_config"].replace(output_dir=str(tmp_path / "mixed"))
    run_multitask(MultitaskOptions(tasks_file=str(tmp_path / "one.json"), shared=shared),
                  run_config)
    single = run_config.replace(output_dir=str(tmp_path / "single"))
    classifier_task.run_classifier(classifier_task.ClassifierOptions(
        **{field.name: getattr(shared, field.name) for field in dataclasses.fields(shared)},
        task_name="sst-2", data_dir=str(setup["directory"] / "sst")), single)
    task = classifier_task.ClassifierTask(_config(setup), 2, False, False)
    expected = training.load_model(task, single).weights
    got = training.load_model(task, single, checkpoint=str(
        tmp_path / "mixed" / "sst" / "multitask" / "model.ckpt")).weights
    assert len(got) == len(expected) > 20
    for want, have in zip(expected, got):
        assert have.path == want.path
        np.testing.assert_allclose(have.numpy(), want.numpy(), rtol=1e-5, atol=1e-7,
                                   err_msg=want.path)


# ------------------------------------------------------------------ a run
def _head(path: str, count: int) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return f.readlines()[:count]


def _first_sentences(path: str, count: int) -> str:
    """The file's first `count` sentences (blank-line separated), -DOCSTART- lines dropped."""
    blocks = [b for b in open(path, encoding="utf-8").read().split("\n\n")
              if b.strip() and not b.startswith("-DOCSTART-")]
    return "\n\n".join(blocks[:count]) + "\n"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    directory = tmp_path_factory.mktemp("multitask")
    sst, ner = directory / "sst", directory / "ner"
    sst.mkdir()
    ner.mkdir()
    for split, count in (("train", 57), ("dev", 25), ("test", 13)):
        (sst / f"{split}.tsv").write_text("".join(_head(f"{DEMO}/classification/{split}.tsv", count)))
    for split, count in (("train", 40), ("dev", 15), ("test", 10)):
        (ner / f"{split}.txt").write_text(_first_sentences(f"{DEMO}/ner/{split}.txt", count))
    files = [str(p) for p in (*sst.iterdir(), *ner.iterdir())]
    # One Transformer layer: what is checked (one encoder under every head, each task's figures
    # from its head, exports, exact resume, --refine) holds at any depth, and each of the
    # module's multi-task runs costs about a quarter less to trace and optimise.
    vocab_file, config_file = write_tiny_model(directory, words_of_files(files),
                                               num_hidden_layers=1)
    (directory / "tasks.json").write_text(json.dumps({"tasks": [
        {"name": "sst", "type": "classifier", "task_name": "sst-2", "data_dir": "sst"},
        {"name": "ner", "type": "ner", "data_dir": "ner", "weight": 2}]}))
    shared = finetuning.FinetuningOptions(
        bert_config_file=config_file, vocab_file=vocab_file, max_seq_length=SEQ, do_train=True,
        num_train_epochs=1.0, eval_every_n_steps=EVAL_EVERY)
    options = MultitaskOptions(tasks_file=str(directory / "tasks.json"), shared=shared,
                               task_sampling="annealed", do_eval=True,
                               export_dir=str(directory / "exports"))
    run_config = training.RunConfig(
        output_dir=str(directory / "run"), train_batch_size=8, eval_batch_size=8,
        predict_batch_size=8, learning_rate=1e-3, save_checkpoints_steps=STEPS_PER_CHECKPOINT,
        keep_checkpoint_max=10, iterations_per_loop=2, log_every_n_steps=2)
    return {"directory": directory, "options": options, "run_config": run_config}


@pytest.fixture(scope="module")
def run(setup):
    options = setup["options"]
    options = dataclasses.replace(options, shared=dataclasses.replace(options.shared, do_predict=True))
    eval_models = []  # one per model an evaluation step was made for
    make_eval_step = training_steps.make_eval_step

    def recording_make_eval_step(task, model):
        eval_models.append(model)
        return make_eval_step(task, model)

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(training_steps, "make_eval_step", recording_make_eval_step)
        results = run_multitask(options, setup["run_config"])
    return {**setup, "results": results, "eval_models": eval_models}


def _results(path) -> dict[str, float]:
    return {key: float(value) for key, value in
            (line.split(" = ") for line in open(path, encoding="utf-8").read().splitlines())}


def test_outputs_of_each_task(run):
    out = run["run_config"].output_dir
    schedule = json.load(open(os.path.join(out, "task_schedule.json")))
    steps = int(tf.train.latest_checkpoint(out).rsplit("-", 1)[1])
    assert sum(schedule["batches"].values()) == steps == (56 + schedule["examples"]["ner"]) // 8
    assert schedule["examples"]["sst"] == 56 and min(schedule["batches"].values()) > 0
    sst = _results(os.path.join(out, "eval_results_sst.txt"))
    ner = _results(os.path.join(out, "eval_results_ner.txt"))
    assert set(sst) == {"eval_accuracy", "eval_loss", "global_step", "loss"}
    assert {"eval_f1", "eval_precision", "eval_recall", "eval_accuracy"} <= set(ner)
    # The best checkpoint on the mean of the tasks' main metrics (accuracy, entity F1).
    best = json.load(open(os.path.join(out, "best_state.json")))
    assert best["best_step"] in (EVAL_EVERY, steps)
    assert sst["global_step"] == ner["global_step"] == best["best_step"]
    assert best["best_score"] == pytest.approx((sst["eval_accuracy"] + ner["eval_f1"]) / 2, rel=1e-6)
    # Each evaluation restores its checkpoint's step into the task models built and traced at
    # the first one: one model per task for both evaluations during training, one per task for
    # the final --do_eval (its script's own run).
    best_results = _results(os.path.join(out, "best", "eval_results.txt"))
    assert best_results["sst_global_step"] == best_results["ner_global_step"] == best["best_step"]
    assert len(run["eval_models"]) == 4
    assert len(open(os.path.join(out, "sst", "test_results.tsv")).readlines()) == 12
    assert os.path.isfile(os.path.join(out, "ner", "test_predictions.txt"))


def _records(path, schema):
    dataset = tf.data.TFRecordDataset(path).batch(1000).map(schema.parse_fn())
    return {name: value.numpy() for name, value in next(iter(dataset)).items()}


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def test_each_task_evaluates_as_its_head_computes_from_the_shared_weights(run):
    """eval_results_<task>.txt (the task's own script functions) equal the figures computed in
    numpy from the multi-task checkpoint's encoder and that task's head."""
    out, options = run["run_config"].output_dir, run["options"]
    tasks = [prepare_task(entry, os.path.join(out, entry.name), _config(run), _tokenizer(run),
                          run["run_config"])
             for entry in read_tasks_file(options.tasks_file, options.shared)]
    model = training.load_model(MultitaskTask(_config(run), tasks), run["run_config"],
                                checkpoint=best_checkpoint.prediction_checkpoint(out, "best"))
    inputs = MODEL_INPUTS

    sst = _records(os.path.join(out, "sst", "eval.tf_record"), record_schemas.classifier_schema(SEQ))
    logits = model.task_models[0]({k: sst[k] for k in inputs})["logits"].numpy()
    real = sst["is_real_example"].reshape(-1) > 0
    labels = sst["label_ids"].reshape(-1)[real]
    expected = _results(os.path.join(out, "eval_results_sst.txt"))
    assert expected["eval_accuracy"] == pytest.approx((logits[real].argmax(-1) == labels).mean(), abs=1e-7)
    cross_entropy = -np.take_along_axis(_log_softmax(logits[real]), labels[:, None], -1).mean()
    assert expected["eval_loss"] == pytest.approx(cross_entropy, rel=1e-5)

    ner = _records(os.path.join(out, "ner", "eval.tf_record"), record_schemas.tagging_schema(SEQ))
    logits = model.task_models[1]({k: ner[k] for k in inputs})["logits"].numpy()
    picked = np.take_along_axis(_log_softmax(logits), ner["label_ids"][..., None], -1)[..., 0]
    weights = ner["label_weights"].astype(np.float64)
    expected = _results(os.path.join(out, "eval_results_ner.txt"))
    assert expected["eval_loss"] == pytest.approx(-(weights * picked).sum() / weights.sum(), rel=1e-5)


def _config(run):
    return run["options"].shared.load_bert_config(run["run_config"])


def _tokenizer(run):
    return run["options"].shared.create_tokenizer()


def test_exports_per_task_in_a_fresh_process(run, tmp_path):
    """Both exports run in one isolated process on the test files' raw text give the
    predictions the run wrote (test_results.tsv, test_predictions.txt)."""
    out, exports = run["run_config"].output_dir, run["options"].export_dir
    sentences = [line.split("\t")[1].rstrip("\n") for line in
                 _head(os.path.join(run["directory"], "sst", "test.tsv"), 13)[1:]]
    blocks = [b for b in open(os.path.join(out, "ner", "test_predictions.txt")).read().split("\n\n")
              if b.strip() and not b.startswith("-DOCSTART-")]
    words = [[line.split()[0] for line in block.splitlines()] for block in blocks]
    tags = [[line.split()[-1] for line in block.splitlines()] for block in blocks]
    outputs = run_client(tmp_path, [
        {"export_dir": os.path.join(exports, "sst"), "signature": SIGNATURE_KEY,
         "inputs": {"text_a": sentences}},
        {"export_dir": os.path.join(exports, "ner"), "signature": SIGNATURE_KEY,
         "inputs": {"text": [" ".join(w) for w in words]}}])
    expected = np.loadtxt(os.path.join(out, "sst", "test_results.tsv"), delimiter="\t", ndmin=2)
    np.testing.assert_allclose(outputs[0]["probabilities"], expected, atol=1e-5)
    served = [row[:n] for row, n in zip(outputs[1]["tags"], outputs[1]["num_words"])]
    assert served == tags


def test_resume_ends_with_the_weights_of_an_uninterrupted_run(run, tmp_path):
    """A copy of the run cut back to its first checkpoint, re-run, ends with the same weights.
    The re-run evaluates nothing (the run evaluated at step 8 and at the end): evaluations
    must not change the weights either."""
    straight = run["run_config"].output_dir
    last = tf.train.latest_checkpoint(straight)
    resumed = tmp_path / "resumed"
    shutil.copytree(straight, resumed)
    first = str(resumed / f"ckpt-{STEPS_PER_CHECKPOINT}")
    for path in tf.io.gfile.glob(str(resumed / "ckpt-*")):
        if not path.startswith(first + "."):
            os.remove(path)
    name = os.path.basename(first)
    (resumed / "checkpoint").write_text(f'model_checkpoint_path: "{name}"\n'
                                        f'all_model_checkpoint_paths: "{name}"\n')
    shared = dataclasses.replace(run["options"].shared, eval_every_n_steps=0)
    options = dataclasses.replace(run["options"], shared=shared, do_eval=False, export_dir=None)
    run_multitask(options, run["run_config"].replace(output_dir=str(resumed)))
    expected, got = weights(last), weights(str(resumed / os.path.basename(last)))
    assert set(got) == set(expected) and any(name.startswith("optimizer/") for name in got)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


def test_refine_fine_tunes_each_task_from_the_shared_model(run, tmp_path, monkeypatch):
    refined = tmp_path / "refine"
    shutil.copytree(run["run_config"].output_dir, refined)
    # No evaluation during each task's training: its figures are the final --do_eval's.
    shared = dataclasses.replace(run["options"].shared, do_train=False, eval_every_n_steps=0)
    options = dataclasses.replace(run["options"], shared=shared, export_dir=None, refine=True)
    loads = []
    original = checkpoints.init_from_checkpoint

    def recorded(model, path):
        report = original(model, path)
        loads.append((os.fspath(path), checkpoints.heads_summary(model, report)))
        return report

    monkeypatch.setattr(checkpoints, "init_from_checkpoint", recorded)
    results = run_multitask(options, run["run_config"].replace(output_dir=str(refined)))
    assert (f"{refined}/sst/multitask/model.ckpt",
            "heads found: classifier; loaded: classifier; newly initialised: none") in loads
    assert (f"{refined}/ner/multitask/model.ckpt", "heads found: token_classifier; loaded: "
            "token_classifier; newly initialised: none") in loads
    for name in ("sst", "ner"):
        figures = _results(refined / f"eval_results_{name}_refined.txt")
        assert figures["global_step"] == results["refined"][name]["train"]["global_step"] > 0
        assert tf.train.latest_checkpoint(str(refined / name / "refined"))
