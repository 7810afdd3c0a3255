"""Every script as a user runs it, over bad inputs: one `error:` line naming the file or flag.

Each case runs its script in a process of its own and asserts: the exit status (1 for a user
error, 2 for a flag that does not parse), exactly one `error:` line holding the expected name, no
traceback, and no output left under a final name. A few cases are inputs that look odd but must
work (CRLF line ends, raw text with invalid UTF-8, which the original drops). The processes are
forked, two at a time, from the session's server that imported TensorFlow once
(`script_runs`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

import pytest

from bert_tf.checkpoints import name_map as checkpoints
from bert_tf.model.albert.config import AlbertConfig
from bert_tf.model.config import BertConfig
from bert_tf.model.encoder import BertEncoder
from bert_tf.tasks.pretraining.instances import InstanceOptions
from bert_tf.tasks.pretraining.pipeline import PretrainingDataConfig, create_pretraining_data
from support.pretraining_records import TINY_CONFIG
from support.script_runs import Run
from support.tiny_models import REPO, SPECIAL_TOKENS

WORDS = ("the", "cat", "sat", "on", "mat", "a", "dog", "ran", "it", "was", "sitting", ".")
TEXT = "the cat sat on the mat.\na dog ran.\n\nit was sitting.\nthe dog sat.\n"
MRPC_HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
MRPC_ROW = "1\t101\t102\tthe cat sat.\ta cat was sitting.\n"


@dataclasses.dataclass(frozen=True)
class Case:
    """One run: `args` may hold `{d}`, the directory of the fixture's files."""

    name: str
    script: str
    args: tuple[str, ...]
    expected: str  # in the error line (or, for a run that must work, in its output)
    status: int = 1
    absent: tuple[str, ...] = ()  # final output names that must not exist afterwards

    def argv(self, directory: str) -> list[str]:
        return [os.path.join(REPO, self.script), *(arg.format(d=directory) for arg in self.args)]


_MODEL = ("--vocab_file={d}/vocab.txt", "--bert_config_file={d}/bert_config.json")
_CPD = ("--vocab_file={d}/vocab.txt", "--max_seq_length=16", "--max_predictions_per_seq=3",
        "--dupe_factor=1", "--noprogress")
_CLS = ("--task_name=MRPC", "--do_train", "--max_seq_length=16", *_MODEL)
_SQUAD = ("--max_seq_length=32", "--max_query_length=8", *_MODEL)
_NER = ("--do_train", "--max_seq_length=16", *_MODEL)
# search.py's fine-tuning command (after --): a classifier on good files.
_SEARCHED = ("--", sys.executable, os.path.join(REPO, "run_classifier.py"), "--task_name=MRPC",
             "--do_train", "--do_eval", "--data_dir={d}/glue_good", "--max_seq_length=16", *_MODEL)
_DISTILL = ("--task_name=MRPC", "--data_dir={d}/glue_good", "--do_train", "--max_seq_length=16",
            "--student_layers=1")
# What a distillation must not leave when it stops on an error: its student config, the
# data's label list and records, the first stage's run.
_DISTILLED = ("student_config.json", "label_list.txt", "train.tf_record", "intermediate")
_MT = ("--do_train", "--max_seq_length=16", *_MODEL)
_EXTRACT = ("--input_file={d}/lines.txt", "--output_file={d}/features.jsonl",
            "--max_seq_length=16", "--layers=-1")

CASES = [
    # create_pretraining_data.py
    Case("cpd_no_match", "create_pretraining_data.py",
         ("--input_file={d}/nope*.txt", "--output_file={d}/out/a.tfrecord", *_CPD),
         "--input_file: no file matches", absent=("out/a.tfrecord",)),
    Case("cpd_empty_input", "create_pretraining_data.py",
         ("--input_file={d}/empty.txt", "--output_file={d}/out/b.tfrecord", *_CPD),
         "empty.txt: no documents", absent=("out/b.tfrecord",)),
    Case("cpd_vocab_without_mask", "create_pretraining_data.py",
         ("--input_file={d}/text.txt", "--output_file={d}/out/c.tfrecord", *_CPD,
          "--vocab_file={d}/vocab_nomask.txt"), "vocab_nomask.txt", absent=("out/c.tfrecord",)),
    Case("cpd_missing_vocab", "create_pretraining_data.py",
         ("--input_file={d}/text.txt", "--output_file={d}/out/d.tfrecord", *_CPD,
          "--vocab_file={d}/missing_vocab.txt"), "missing_vocab.txt",
         absent=("out/d.tfrecord",)),
    Case("cpd_too_many_predictions", "create_pretraining_data.py",
         ("--input_file={d}/text.txt", "--output_file={d}/out/e.tfrecord", *_CPD,
          "--max_predictions_per_seq=40"), "--max_predictions_per_seq=40",
         absent=("out/e.tfrecord",)),
    Case("cpd_unwritable_output", "create_pretraining_data.py",
         ("--input_file={d}/text.txt", "--output_file={d}/a_file/f.tfrecord", *_CPD),
         "a_file"),
    Case("cpd_bad_flag_value", "create_pretraining_data.py",
         ("--input_file={d}/text.txt", "--output_file={d}/out/g.tfrecord", *_CPD,
          "--dupe_factor=many"), "--dupe_factor", status=2, absent=("out/g.tfrecord",)),
    Case("cpd_unknown_scheme_input", "create_pretraining_data.py",
         ("--input_file=foo://bucket/text.txt", "--output_file={d}/out/h.tfrecord", *_CPD),
         "--input_file: foo://bucket/text.txt: no installed file system handles foo://",
         absent=("out/h.tfrecord",)),
    Case("cpd_unknown_scheme_output", "create_pretraining_data.py",
         ("--input_file={d}/text.txt", "--output_file=foo://bucket/out.tfrecord", *_CPD),
         "--output_file: foo://bucket/out.tfrecord: no installed file system handles foo://"),
    Case("cpd_crlf_works", "create_pretraining_data.py",
         ("--input_file={d}/text_crlf.txt", "--output_file={d}/out/crlf.tfrecord", *_CPD),
         "instances", status=0),
    Case("cpd_invalid_utf8_works", "create_pretraining_data.py",
         ("--input_file={d}/latin1.txt", "--output_file={d}/out/latin1.tfrecord", *_CPD),
         "instances", status=0),
    # run_pretraining.py
    Case("pretrain_no_input", "run_pretraining.py",
         ("--input_file={d}/nope.tfrecord", "--output_dir={d}/pt1", "--do_train",
          "--bert_config_file={d}/bert_config.json", "--max_seq_length=13"), "--input_file",
         absent=("pt1/checkpoint",)),
    Case("pretrain_records_of_wrong_length", "run_pretraining.py",
         ("--input_file={d}/records.tfrecord", "--output_dir={d}/pt2", "--do_train",
          "--bert_config_file={d}/bert_config.json", "--max_seq_length=13",
          "--max_predictions_per_seq=3"), "records.tfrecord", absent=("pt2/checkpoint",)),
    Case("pretrain_lr_end_of_linear_schedule", "run_pretraining.py",
         ("--input_file={d}/records.tfrecord", "--output_dir={d}/pt5", "--do_train",
          "--bert_config_file={d}/bert_config.json", "--max_seq_length=16",
          "--max_predictions_per_seq=3", "--lr_end=1e-6"),
         "--lr_end is for --lr_schedule=cosine or polynomial, not linear",
         absent=("pt5/checkpoint",)),
    Case("pretrain_no_config", "run_pretraining.py",
         ("--input_file={d}/records.tfrecord", "--output_dir={d}/pt3", "--do_train"),
         "--bert_config_file is required", absent=("pt3/checkpoint",)),
    Case("pretrain_output_dir_is_a_file", "run_pretraining.py",
         ("--input_file={d}/records.tfrecord", "--output_dir={d}/a_file", "--do_train",
          "--bert_config_file={d}/bert_config.json", "--max_seq_length=16",
          "--max_predictions_per_seq=3"), "--output_dir="),
    # run_classifier.py
    Case("classifier_missing_train_file", "run_classifier.py",
         ("--data_dir={d}/nowhere", "--output_dir={d}/cls1", *_CLS), "nowhere/train.tsv",
         absent=("cls1/checkpoint",)),
    Case("classifier_no_examples", "run_classifier.py",
         ("--data_dir={d}/glue_empty", "--output_dir={d}/cls2", *_CLS),
         "glue_empty/train.tsv: no examples", absent=("cls2/checkpoint",)),
    Case("classifier_unknown_label", "run_classifier.py",
         ("--data_dir={d}/glue_label", "--output_dir={d}/cls3", *_CLS),
         "glue_label/train.tsv:3: unknown label '7'", absent=("cls3/checkpoint",)),
    Case("classifier_not_utf8", "run_classifier.py",
         ("--data_dir={d}/glue_latin1", "--output_dir={d}/cls5", *_CLS),
         "glue_latin1/train.tsv", absent=("cls5/checkpoint",)),
    Case("classifier_unwritable_output_dir", "run_classifier.py",
         ("--data_dir={d}/glue_label", "--output_dir={d}/a_file/cls", *_CLS), "a_file"),
    Case("classifier_layerwise_decay_of_shared_layers", "run_classifier.py",
         ("--data_dir={d}/glue_good", "--output_dir={d}/cls6", "--task_name=MRPC", "--do_train",
          "--max_seq_length=16", "--vocab_file={d}/vocab.txt",
          "--albert_config_file={d}/albert_config.json", "--layerwise_lr_decay=0.9",
          "--train_batch_size=2"),
         "--layerwise_lr_decay cannot be used with this model: its 2 layers share 1 set(s) of "
         "weights (ALBERT)", absent=("cls6/checkpoint",)),
    # run_squad.py
    Case("squad_missing_file", "run_squad.py",
         ("--do_predict", "--predict_file={d}/missing.json", "--output_dir={d}/sq1", *_SQUAD),
         "missing.json: SQuAD file not found (check --predict_file)", absent=("sq1/predictions.json",)),
    Case("squad_malformed_json", "run_squad.py",
         ("--do_predict", "--predict_file={d}/squad_bad.json", "--output_dir={d}/sq2", *_SQUAD),
         "squad_bad.json: not valid JSON", absent=("sq2/predictions.json",)),
    Case("squad_no_questions", "run_squad.py",
         ("--do_predict", "--predict_file={d}/squad_empty.json", "--output_dir={d}/sq3",
          *_SQUAD), "squad_empty.json: no questions", absent=("sq3/predictions.json",)),
    Case("squad_answer_offset_mismatch", "run_squad.py",
         ("--do_train", "--train_file={d}/squad_offset.json", "--output_dir={d}/sq4", *_SQUAD),
         "squad_offset.json: none of its 1 questions has a usable answer",
         absent=("sq4/checkpoint",)),
    Case("squad_output_dir_is_a_file", "run_squad.py",
         ("--do_predict", "--predict_file={d}/squad_empty.json", "--output_dir={d}/a_file",
          *_SQUAD), "is an existing file, not a directory"),
    # run_ner.py
    Case("ner_conll_line_without_tag", "run_ner.py",
         ("--data_dir={d}/ner_columns", "--output_dir={d}/ner1", *_NER),
         "ner_columns/train.txt:3", absent=("ner1/checkpoint",)),
    Case("ner_tag_not_in_labels", "run_ner.py",
         ("--data_dir={d}/ner_label", "--output_dir={d}/ner2", *_NER, "--labels=O,B-PER,I-PER"),
         "ner_label/train.txt:2", absent=("ner2/checkpoint",)),
    Case("ner_crf_without_o", "run_ner.py",
         ("--data_dir={d}/ner_label", "--output_dir={d}/ner4", *_NER, "--crf",
          "--labels=B-PER,I-PER"), "--crf: the label list ['B-PER', 'I-PER'] has no 'O'",
         absent=("ner4/checkpoint",)),
    Case("ner_unknown_best_metric", "run_ner.py",
         ("--data_dir={d}/ner_label", "--output_dir={d}/ner5", *_NER, "--train_batch_size=1",
          "--best_metric=eval_mcc"), "--best_metric=eval_mcc: this task reports",
         absent=("ner5/checkpoint",)),
    Case("ner_empty_file", "run_ner.py",
         ("--data_dir={d}/ner_empty", "--output_dir={d}/ner3", *_NER),
         "ner_empty/train.txt: no sentences", absent=("ner3/checkpoint",)),
    # search.py: every trial's flags are parsed by the script's own definitions first
    Case("search_bad_grid_value", "search.py",
         ("--output_dir={d}/search1", "--grid=learning_rate=5e-5,abc", *_SEARCHED),
         "--grid: learning_rate=abc: flag --learning_rate=abc: could not convert string to float",
         status=2, absent=("search1",)),
    Case("search_unknown_grid_flag", "search.py",
         ("--output_dir={d}/search2", "--grid=learnin_rate=5e-5", *_SEARCHED),
         "--grid: learnin_rate=5e-5: Unknown command line flag 'learnin_rate'", status=2,
         absent=("search2",)),
    Case("search_bad_command_flag", "search.py",
         ("--output_dir={d}/search3", "--grid=learning_rate=5e-5", *_SEARCHED,
          "--dtype=float8"), "the fine-tuning command: flag --dtype=float8", status=2,
         absent=("search3",)),
    # run_distillation.py: labels, vocabularies and configs checked before any conversion
    Case("distill_label_order", "run_distillation.py",
         (*_DISTILL, "--teacher_dir={d}/teacher_reordered", "--output_dir={d}/dist1"),
         "labels ['0', '1'] differ from the teacher's ['1', '0']",
         absent=tuple(f"dist1/{name}" for name in _DISTILLED)),
    Case("distill_no_vocab", "run_distillation.py",
         (*_DISTILL, "--teacher_dir={d}/teacher_without_vocab", "--output_dir={d}/dist2"),
         "--vocab_file is required: the teacher",
         absent=tuple(f"dist2/{name}" for name in _DISTILLED)),
    Case("distill_other_vocab", "run_distillation.py",
         (*_DISTILL, "--teacher_dir={d}/teacher_reordered", "--vocab_file={d}/vocab_nomask.txt",
          "--output_dir={d}/dist3"), "vocab.txt (teacher) differs from --vocab_file",
         absent=tuple(f"dist3/{name}" for name in _DISTILLED)),
    Case("distill_vocab_larger_than_config", "run_distillation.py",
         (*_DISTILL, "--teacher_dir={d}/teacher_small_config", "--vocab_file={d}/vocab.txt",
          "--output_dir={d}/dist4"),
         "vocab.txt: 17 tokens, but the model's config has vocab_size 9",
         absent=tuple(f"dist4/{name}" for name in _DISTILLED)),
    # run_multitask.py: every task's files are read before the first task's are converted
    Case("multitask_second_task_data_missing", "run_multitask.py",
         ("--tasks={d}/tasks_missing.json", "--output_dir={d}/mt1", *_MT),
         "ner_missing/train.txt: tagging file not found",
         absent=("mt1/good", "mt1/task_schedule.json", "mt1/checkpoint")),
    Case("multitask_second_task_bad_label", "run_multitask.py",
         ("--tasks={d}/tasks_label.json", "--output_dir={d}/mt2", *_MT),
         "glue_label/train.tsv:3", absent=("mt2/good", "mt2/task_schedule.json")),
    # extract_features.py
    Case("extract_missing_input", "extract_features.py",
         ("--input_file={d}/missing_lines.txt", "--output_file={d}/features1.jsonl",
          "--init_checkpoint={d}/google", "--vocab_file={d}/vocab.txt", "--max_seq_length=16",
          "--layers=-1"),
         "missing_lines.txt: input file not found", absent=("features1.jsonl",)),
    Case("extract_checkpoint_of_wrong_size", "extract_features.py",
         (*_EXTRACT, *_MODEL, "--init_checkpoint={d}/wrong/bert_model.ckpt"),
         "has shape", absent=("features.jsonl",)),
    Case("extract_bad_layers", "extract_features.py",
         (*_EXTRACT, *_MODEL, "--init_checkpoint={d}/google", "--layers=last"), "--layers=last",
         absent=("features.jsonl",)),
]


def _write(path: str, content: str | bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(content.encode("utf-8") if isinstance(content, str) else content)


def _squad(context: str, answer: str, answer_start: int) -> str:
    qa = {"id": "q1", "question": "where sat the cat?",
          "answers": [{"text": answer, "answer_start": answer_start}]}
    return json.dumps({"version": "1.1", "data": [
        {"title": "t", "paragraphs": [{"context": context, "qas": [qa]}]}]})


def write_inputs(d: str) -> None:
    """The files the cases read (good ones and bad ones) under directory `d`."""
    vocab = list(SPECIAL_TOKENS) + list(WORDS)
    _write(f"{d}/vocab.txt", "\n".join(vocab) + "\n")
    _write(f"{d}/vocab_nomask.txt", "\n".join(t for t in vocab if t != "[MASK]") + "\n")
    config = BertConfig(**{**TINY_CONFIG, "vocab_size": len(vocab)})
    config.to_json_file(f"{d}/bert_config.json")
    AlbertConfig(**{**TINY_CONFIG, "vocab_size": len(vocab), "embedding_size": 16}).to_json_file(
        f"{d}/albert_config.json")
    _write(f"{d}/text.txt", TEXT)
    _write(f"{d}/text_crlf.txt", TEXT.replace("\n", "\r\n"))
    _write(f"{d}/latin1.txt", TEXT.encode("utf-8") + b"caf\xe9 sat.\n")
    _write(f"{d}/empty.txt", "")
    _write(f"{d}/a_file", "a file where a directory is expected\n")
    _write(f"{d}/lines.txt", "the cat sat.\na dog ran. ||| it was sitting.\n")
    create_pretraining_data(PretrainingDataConfig(
        input_file=f"{d}/text.txt", output_file=f"{d}/records.tfrecord",
        vocab_file=f"{d}/vocab.txt", instance=InstanceOptions(
            max_seq_length=16, max_predictions_per_seq=3), dupe_factor=2, progress=False))
    checkpoints.export_google_checkpoint(BertEncoder(config), f"{d}/google/bert_model.ckpt")
    checkpoints.export_google_checkpoint(BertEncoder(config.replace(hidden_size=48)),
                                         f"{d}/wrong/bert_model.ckpt")
    _write(f"{d}/glue_empty/train.tsv", MRPC_HEADER)
    _write(f"{d}/glue_good/train.tsv", MRPC_HEADER + MRPC_ROW * 4)
    _write(f"{d}/glue_label/train.tsv", MRPC_HEADER + MRPC_ROW + MRPC_ROW.replace("1", "7", 1))
    _write(f"{d}/glue_latin1/train.tsv", MRPC_HEADER.encode() + b"1\t1\t2\tcaf\xe9.\tthe cat.\n")
    _write(f"{d}/squad_bad.json", '{"version": "1.1", "data": [\n')
    _write(f"{d}/squad_empty.json", '{"version": "1.1", "data": []}')
    _write(f"{d}/squad_offset.json", _squad("the cat sat on the mat.", "mat", 3))
    _write(f"{d}/ner_columns/train.txt", "the O\ncat B-PER\nsat\n")
    _write(f"{d}/ner_label/train.txt", "the O\ncat B-LOC\n")
    _write(f"{d}/ner_empty/train.txt", "\n\n")
    for name, labels, vocabulary, size in (("teacher_reordered", "1\n0\n", True, len(vocab)),
                                           ("teacher_without_vocab", "0\n1\n", False, len(vocab)),
                                           ("teacher_small_config", "0\n1\n", False, 9)):
        _write(f"{d}/{name}/label_list.txt", labels)
        config.replace(vocab_size=size).to_json_file(f"{d}/{name}/bert_config.json")
        if vocabulary:
            _write(f"{d}/{name}/vocab.txt", "\n".join(vocab) + "\n")
    good = {"name": "good", "type": "classifier", "task_name": "MRPC", "data_dir": "glue_good"}
    for name, second in (("missing", {"name": "tags", "type": "ner", "data_dir": "ner_missing"}),
                         ("label", {**good, "name": "labels", "data_dir": "glue_label"})):
        _write(f"{d}/tasks_{name}.json", json.dumps({"tasks": [good, second]}))


@pytest.fixture(scope="module")
def results(request, tmp_path_factory, script_runner) -> tuple[str, dict[str, Run]]:
    """Runs the cases that this session selected (all, or those of `-k`)."""
    selected = [case for case in CASES if case.name in {
        item.callspec.params["case"].name for item in request.session.items
        if "case" in getattr(getattr(item, "callspec", None), "params", {})}]
    directory = str(tmp_path_factory.mktemp("bad_inputs"))
    write_inputs(directory)
    runs = script_runner.run_all([(case.argv(directory), directory) for case in selected])
    return directory, {case.name: run for case, run in zip(selected, runs)}


def test_the_sweep_covers_every_script_with_27_cases():
    scripts = {case.script for case in CASES}
    assert len(CASES) >= 27 and len({case.name for case in CASES}) == len(CASES)
    assert scripts == {"create_pretraining_data.py", "run_pretraining.py", "run_classifier.py",
                       "run_squad.py", "run_ner.py", "extract_features.py", "search.py",
                       "run_distillation.py", "run_multitask.py"}


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_bad_input(case: Case, results):
    directory, runs = results
    run = runs[case.name]
    report = f"exit {run.returncode}\nstderr:\n{run.stderr[-3000:]}"
    assert run.returncode == case.status, report
    assert "Traceback" not in run.stderr, report
    errors = [line for line in run.stderr.splitlines() if line.startswith("error: ")]
    if case.status == 0:
        assert not errors and case.expected in run.stdout + run.stderr, report
    else:
        assert len(errors) == 1 and case.expected in errors[0], report
    for name in case.absent:
        assert not os.path.exists(os.path.join(directory, name)), f"{name} was written"
