"""Every path flag of every script on gs://, as a TPU user gives them, tested through `ram://`.

TensorFlow's in-memory `ram://` file system is handled by tf.io.gfile exactly where `gs://` is, and
is not local: a local file call on one of its paths fails (or writes a local folder `./ram:/...`).
Each script runs in this process (tests/support/in_process.py: ram:// lives inside one process)
twice, on local paths and with ALL its path flags on ram://, and gives the same outputs: records
byte-identical, eval_results.txt identical, predictions and feature vectors within 1e-5. The ram://
runs start in an empty working directory, which stays empty. The runs chain as a user's would: the
data step's records feed run_pretraining, whose output directory is the --init_checkpoint of the
fine-tuning scripts and extract_features; run_classifier's export is bert-predict's --export_dir,
loaded back from ram://. run_pretraining's ram:// run is stopped after its first checkpoint and
resumed, to the results of the same command run uninterrupted on the local root.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.training import py_checkpoint_reader

from bert_tf import filesystem
from bert_tf.text.sample_text import generate_corpus
from support.in_process import REPO, run_script
from support.tiny_models import words_of, write_tiny_model

pytestmark = pytest.mark.heavy  # scheduled first: see conftest.py

RAM = "ram://gcs-bucket"
DEMO = os.path.join(REPO, "demo", "data")
SQUAD = os.path.join(REPO, "tests", "testdata", "squad", "v1_train.json")
# The tiny model's shapes and one short training run, shared by the fine-tuning scripts.
FINETUNING = ["--train_batch_size=8", "--predict_batch_size=8", "--learning_rate=1e-3",
              "--num_train_epochs=1", "--log_every_n_steps=1"]
PRETRAINING = ["--do_train", "--train_batch_size=8", "--eval_batch_size=8", "--max_seq_length=32",
               "--max_predictions_per_seq=5", "--num_warmup_steps=1", "--learning_rate=1e-3",
               "--max_eval_steps=2", "--save_checkpoints_steps=1"]


def _head_lines(path: str, lines: int) -> str:
    with open(path, encoding="utf-8") as f:
        return "".join(f.readlines()[:lines])


def _sentences(path: str, count: int) -> str:
    """The first `count` blank-line separated sentences of a CoNLL file."""
    with open(path, encoding="utf-8") as f:
        return "\n\n".join(f.read().split("\n\n")[:count]) + "\n"


def _write(path: str, data: str | bytes) -> None:
    filesystem.makedirs(filesystem.dirname(path))
    filesystem.write_atomically(path, data)


@pytest.fixture(scope="module")
def buckets(tmp_path_factory):
    """The same inputs under a local root and under ram:// (a tiny model over their words)."""
    squad = json.load(open(SQUAD, encoding="utf-8"))
    files = {
        "corpus.txt": generate_corpus(num_docs=16, seed=3),
        **{f"classifier/{split}.tsv": _head_lines(os.path.join(DEMO, "classification", f"{split}.tsv"), 17)
           for split in ("train", "dev", "test")},
        **{f"ner/{split}.txt": _sentences(os.path.join(DEMO, "ner", f"{split}.txt"), 9)
           for split in ("train", "dev", "test")},
        "squad/train.json": json.dumps(squad),
    }
    files["lines.txt"] = "".join(line.split("\t", 1)[1] for line in files["classifier/test.tsv"].splitlines(True)[1:])
    texts = list(files.values()) + [p["context"] for a in squad["data"] for p in a["paragraphs"]] + [
        q["question"] for a in squad["data"] for p in a["paragraphs"] for q in p["qas"]]
    model = tmp_path_factory.mktemp("model")
    vocab_file, config_file = write_tiny_model(model, words_of(texts))
    files["model/vocab.txt"] = open(vocab_file, "rb").read()
    files["model/bert_config.json"] = open(config_file, "rb").read()
    local = str(tmp_path_factory.mktemp("local"))
    for root in (local, RAM):
        for name, data in files.items():
            _write(f"{root}/{name}", data)
    yield {"local": local, "ram": RAM}
    filesystem.delete_tree(RAM)


@pytest.fixture(scope="module")
def empty_cwd(tmp_path_factory):
    """The working directory of the ram:// runs: nothing may appear in it (no `./ram:` folder)."""
    return tmp_path_factory.mktemp("cwd")


def _run_on_ram(script, flags: list[str], empty_cwd, monkeypatch):
    """`script` with ram:// paths, from an empty working directory that stays empty."""
    monkeypatch.chdir(empty_cwd)
    result = run_script(script, flags)
    assert os.listdir(empty_cwd) == [], f"{script} wrote into the working directory"
    return result


def _run_both(script, flags_of_root, buckets, empty_cwd, monkeypatch) -> dict:
    """`script` on the local root, then on ram:// from an empty working directory."""
    results = {"local": run_script(script, flags_of_root(buckets["local"]))}
    results["ram"] = _run_on_ram(script, flags_of_root(buckets["ram"]), empty_cwd, monkeypatch)
    return results


def _read(path: str) -> bytes:
    return filesystem.read_bytes(path)


def _both(buckets, name: str) -> tuple[bytes, bytes]:
    return _read(f"{buckets['local']}/{name}"), _read(f"{buckets['ram']}/{name}")


def _json_lines(data: bytes) -> list:
    return [json.loads(line) for line in data.decode("utf-8").splitlines()]


def _model_flags(root: str) -> list[str]:
    return [f"--vocab_file={root}/model/vocab.txt", f"--bert_config_file={root}/model/bert_config.json"]


@pytest.fixture(scope="module")
def pretraining_records(buckets, empty_cwd):
    monkeypatch = pytest.MonkeyPatch()
    try:
        _run_both("create_pretraining_data.py", lambda root: [
            f"--input_file={root}/corpus.txt", f"--output_file={root}/out/data/pretrain.tfrecord@2",
            f"--vocab_file={root}/model/vocab.txt", "--max_seq_length=32", "--max_predictions_per_seq=5",
            "--dupe_factor=2", "--progress=false"], buckets, empty_cwd, monkeypatch)
    finally:
        monkeypatch.undo()
    return [f"out/data/pretrain.tfrecord-{k:05d}-of-00002" for k in range(2)]


def test_create_pretraining_data_writes_the_same_records(buckets, pretraining_records):
    for name in pretraining_records:
        local, ram = _both(buckets, name)
        assert local == ram and len(local) > 1000


def _pretraining_flags(root: str, steps: int) -> list[str]:
    """The first run only trains; the resumed run also evaluates and exports Google's layout."""
    last = ["--do_eval", "--export_google_checkpoint"] if steps > 1 else []
    return [f"--input_file={root}/out/data/pretrain.tfrecord-*",
            f"--bert_config_file={root}/model/bert_config.json", f"--output_dir={root}/out/pretrain",
            f"--num_train_steps={steps}", *PRETRAINING, *last]


@pytest.fixture(scope="module")
def pretrained(buckets, pretraining_records, empty_cwd):
    """run_pretraining on ram:// stopped after its first step's checkpoint, then resumed to step
    2; locally the same command for 2 steps, uninterrupted: the results the resumed run must
    reach. (The first run's warm-up step has a rate of 0 whatever --num_train_steps.)"""
    run_script("run_pretraining.py", _pretraining_flags(buckets["local"], 2))
    monkeypatch = pytest.MonkeyPatch()
    try:
        for steps in (1, 2):
            _run_on_ram("run_pretraining.py", _pretraining_flags(RAM, steps), empty_cwd,
                        monkeypatch)
            assert tf.train.latest_checkpoint(f"{RAM}/out/pretrain").endswith(f"ckpt-{steps}")
    finally:
        monkeypatch.undo()
    return "out/pretrain"


def test_run_pretraining_resumes_on_ram_to_the_same_results(buckets, pretrained):
    local, ram = _both(buckets, f"{pretrained}/eval_results.txt")
    assert local == ram and b"global_step = 2" in ram
    # TensorBoard summaries: training's of both runs, evaluation's of the resumed one.
    assert len(tf.io.gfile.glob(f"{RAM}/{pretrained}/train/events.out.tfevents.*")) == 2
    assert len(tf.io.gfile.glob(f"{RAM}/{pretrained}/eval/events.out.tfevents.*")) == 1
    # Google's TF1 layout. The reader is given the prefix itself: ram:// calls any prefix of a
    # file name a directory (gs:// does not), so tf.train.load_checkpoint would look for a
    # `checkpoint` file under it.
    local_google, ram_google = (py_checkpoint_reader.NewCheckpointReader(
        f"{root}/{pretrained}/google_checkpoint/bert_model.ckpt") for root in (buckets["local"], RAM))
    names = local_google.get_variable_to_shape_map()
    assert names.keys() == ram_google.get_variable_to_shape_map().keys() and len(names) > 10
    for name in names:
        np.testing.assert_array_equal(local_google.get_tensor(name), ram_google.get_tensor(name))


def test_run_classifier_trains_evaluates_predicts_and_exports(buckets, pretrained, empty_cwd, monkeypatch):
    # The export (on ram:// only: it is checked against the local run's test_results.tsv).
    _run_both("run_classifier.py", lambda root: [
        "--task_name=SST-2", f"--data_dir={root}/classifier", *_model_flags(root),
        f"--init_checkpoint={root}/{pretrained}", f"--output_dir={root}/out/classifier",
        "--do_train", "--do_eval", "--do_predict", "--max_seq_length=16", "--eval_batch_size=8",
        *FINETUNING, *([f"--export_dir={root}/out/classifier_export"] if root == RAM else [])],
        buckets, empty_cwd, monkeypatch)
    for name in ("train.tf_record", "eval.tf_record", "predict.tf_record", "eval_results.txt",
                 "label_list.txt"):
        local, ram = _both(buckets, f"out/classifier/{name}")
        assert local == ram, name
    local, ram = _both(buckets, "out/classifier/test_results.tsv")
    local_rows = np.loadtxt(local.decode().splitlines(), delimiter="\t", ndmin=2)
    ram_rows = np.loadtxt(ram.decode().splitlines(), delimiter="\t", ndmin=2)
    assert local_rows.shape == ram_rows.shape == (16, 2)
    np.testing.assert_allclose(ram_rows, local_rows, atol=1e-5)

    # bert-predict on the export, loaded back from ram://: the local run's test_results.tsv.
    _run_on_ram("predict.py", [f"--export_dir={RAM}/out/classifier_export",
                               f"--input_file={RAM}/lines.txt",
                               f"--output_file={RAM}/out/predictions.jsonl"], empty_cwd, monkeypatch)
    predicted = _json_lines(_read(f"{RAM}/out/predictions.jsonl"))
    np.testing.assert_allclose([p["probabilities"] for p in predicted], local_rows, atol=1e-5)


def test_run_ner_trains_evaluates_and_tags(buckets, pretrained, empty_cwd, monkeypatch):
    _run_both("run_ner.py", lambda root: [
        f"--data_dir={root}/ner", *_model_flags(root), f"--init_checkpoint={root}/{pretrained}",
        f"--output_dir={root}/out/ner", "--do_train", "--do_eval", "--do_predict",
        "--max_seq_length=24", "--window_overlap=8", "--eval_batch_size=8", *FINETUNING], buckets,
        empty_cwd, monkeypatch)
    for name in ("train.tf_record", "eval.tf_record", "predict.tf_record", "eval_results.txt",
                 "label_list.txt", "eval_predictions.txt", "test_predictions.txt", "test_results.txt"):
        local, ram = _both(buckets, f"out/ner/{name}")
        assert local == ram, name


def test_run_squad_trains_and_predicts(buckets, pretrained, empty_cwd, monkeypatch):
    _run_both("run_squad.py", lambda root: [
        f"--train_file={root}/squad/train.json", f"--predict_file={root}/squad/train.json",
        *_model_flags(root), f"--init_checkpoint={root}/{pretrained}", f"--output_dir={root}/out/squad",
        "--do_train", "--do_predict", "--max_seq_length=48", "--doc_stride=16",
        "--max_query_length=12", "--n_best_size=3", *FINETUNING, "--train_batch_size=2"], buckets,
        empty_cwd, monkeypatch)
    local, ram = _both(buckets, "out/squad/predictions.json")
    assert local == ram and len(json.loads(ram)) == 5  # every question of the file
    local, ram = (json.loads(data) for data in _both(buckets, "out/squad/nbest_predictions.json"))
    assert local.keys() == ram.keys()
    for key in local:
        np.testing.assert_allclose([e["probability"] for e in ram[key]],
                                   [e["probability"] for e in local[key]], atol=1e-5)


def test_extract_features_writes_the_same_vectors(buckets, pretrained, empty_cwd, monkeypatch):
    _run_both("extract_features.py", lambda root: [
        f"--input_file={root}/lines.txt", f"--output_file={root}/out/features.jsonl", *_model_flags(root),
        f"--init_checkpoint={root}/{pretrained}", "--layers=-1,-2", "--max_seq_length=16",
        "--batch_size=4"], buckets, empty_cwd, monkeypatch)
    local, ram = (_json_lines(data) for data in _both(buckets, "out/features.jsonl"))
    assert len(local) == len(ram) == 16
    for expected, got in zip(local, ram):
        assert [t["token"] for t in got["features"]] == [t["token"] for t in expected["features"]]
        np.testing.assert_allclose([[layer["values"] for layer in t["layers"]] for t in got["features"]],
                                   [[layer["values"] for layer in t["layers"]] for t in expected["features"]],
                                   atol=1e-5)


def test_build_vocab_writes_the_same_vocabulary_and_sentencepiece_model(buckets, empty_cwd, monkeypatch):
    _run_both("build_vocab.py", lambda root: [
        f"--input_file={root}/corpus.txt", f"--output_file={root}/out/vocab/vocab.txt",
        f"--spm_model_prefix={root}/out/vocab/spm", "--vocab_size=120", "--num_unused=2"],
        buckets, empty_cwd, monkeypatch)
    for name in ("vocab.txt", "spm.model", "spm.vocab"):
        local, ram = _both(buckets, f"out/vocab/{name}")
        assert local == ram and local, name
