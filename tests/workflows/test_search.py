"""bert-search: the grid, trials run as subprocesses of a stand-in fine-tuning script
(tests/support/search_stub.py, whose dev score is a known function of its flags), trials.jsonl and
best.json (the best equals the maximum of trials.jsonl), resuming (done trials are not run again,
a killed one resumes in its directory, a killed search resumes at once), the metric of
best_state.json, the grid checked by the script's own flags before any trial, the errors."""

import dataclasses
import json
import os
import shutil
import sys
import time

import numpy as np
import pytest
from absl import flags

from bert_tf.errors import PREEMPTED_STATUS, UserError
from bert_tf.tasks import families
from bert_tf.training.log import read_eval_results, write_eval_results
from bert_tf.workflows.search import grid as search_grid, script_flags, trials as search
from support.tiny_models import REPO, words_of_files, write_tiny_model

STUB = [sys.executable, os.path.join(REPO, "tests", "support", "search_stub.py")]


def _stub_accuracy(learning_rate, epochs=3.0, seed=12345):
    return 0.5 + 100 * learning_rate + epochs / 100 + (seed - 12345) / 1000


def _records(output_dir):
    with open(os.path.join(output_dir, search.TRIALS_FILE), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _starts(trial_dir):
    with open(os.path.join(trial_dir, "attempts.txt"), encoding="utf-8") as f:
        return len(f.readlines())


def test_default_grid_is_the_papers_18_runs():
    trials = search_grid.expand(search_grid.parse_grid(search_grid.PAPER_GRID))
    assert len(trials) == 18
    assert trials[0].flags() == ["--learning_rate=5e-5", "--train_batch_size=16",
                                 "--num_train_epochs=2"]
    assert trials[-1].name == "learning_rate=2e-5__train_batch_size=32__num_train_epochs=4"
    assert {t.values for t in trials} == {
        (("learning_rate", lr), ("train_batch_size", b), ("num_train_epochs", e))
        for lr in ("5e-5", "3e-5", "2e-5") for b in ("16", "32") for e in ("2", "3", "4")}
    seeded = search_grid.expand(search_grid.parse_grid("learning_rate=1e-4"), seeds=3,
                                base_seed=7)
    assert [t.flags() for t in seeded] == [["--learning_rate=1e-4", f"--seed={s}"]
                                           for s in (7, 8, 9)]


@pytest.mark.parametrize("spec, message", [
    ("learning_rate", "write flag=value,value"),
    ("learning_rate=1e-4;learning_rate=2e-4", "learning_rate appears twice"),
    ("seed=1,2", "seed is the search's own"),
    ("output_dir=/tmp/x", "output_dir is the search's own"),
    ("init_checkpoint=/a/b", "values may hold letters, digits"),
    (" ; ", "--grid is empty"),
])
def test_bad_grids_are_named(spec, message):
    with pytest.raises(UserError, match=message):
        search_grid.parse_grid(spec)


def test_search_picks_the_best_trial_and_resumes(tmp_path, capsys):
    output_dir = str(tmp_path / "search")
    options = search.SearchOptions(
        command=[*STUB, "--best_metric=eval_accuracy", "--kill_at_learning_rate=3e-4"],
        output_dir=output_dir, grid="learning_rate=1e-4,3e-4,2e-4;num_train_epochs=2")
    first = search.run_search(options)
    # 3e-4's first attempt was killed: recorded as failed, the best of the others chosen.
    records = {r["trial"]: r for r in _records(output_dir)}
    killed = "learning_rate=3e-4__num_train_epochs=2"
    assert first["failed"] == [killed]
    assert records[killed]["status"] == "failed" and records[killed]["exit_code"] == -9
    assert "stub run, attempt 1" in records[killed]["output"]
    assert first["best"]["trial"] == "learning_rate=2e-4__num_train_epochs=2"
    capsys.readouterr()
    second = search.run_search(options)
    assert second["failed"] == []
    records = _records(output_dir)
    assert [r["trial"] for r in records] == [
        "learning_rate=1e-4__num_train_epochs=2", killed, "learning_rate=2e-4__num_train_epochs=2"]
    # Done trials ran once; the killed one started again in its directory and resumed there.
    assert [_starts(r["output_dir"]) for r in records] == [1, 2, 1]
    with open(os.path.join(output_dir, killed, "progress.json"), encoding="utf-8") as f:
        assert json.load(f)["attempts"] == 2
    # Scores from best_state.json (the stub's best is 0.01 above its last evaluation).
    for record, rate, typed in zip(records, (1e-4, 3e-4, 2e-4), ("1e-4", "3e-4", "2e-4")):
        assert record["status"] == "done" and record["metric"] == "eval_accuracy"
        assert record["score"] == pytest.approx(_stub_accuracy(rate, 2.0) + 0.01)
        assert record["best_step"] == 10 and record["values"]["learning_rate"] == typed
        assert record["checkpoint_dir"] == os.path.join(record["output_dir"], "best")
        assert record["dev"]["global_step"] == 10 and record["wall_seconds"] > 0
    with open(os.path.join(output_dir, search.BEST_FILE), encoding="utf-8") as f:
        best = json.load(f)
    scores = [r["score"] for r in records]
    assert best["score"] == max(scores) and best == records[int(np.argmax(scores))]
    assert best["trial"] == killed
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["learning_rate", "num_train_epochs", "eval_accuracy",
                                "best_step", "seconds", "status"]
    assert table[2].startswith("*") and "3e-4" in table[2]
    assert table[-1] == f"best: {killed} (eval_accuracy = {max(scores):.4f}): --output_dir={best['output_dir']}"


def test_eval_results_score_without_best_state_and_seeds(tmp_path, capsys):
    # Without --best_metric the stub keeps no best_state.json: eval_results.txt and the
    # script's default metric score the trials.
    output_dir = str(tmp_path / "plain")
    scripts = [family.script for family in families.FAMILIES]  # each family's script
    known = f"not {', '.join(scripts[:-1])} or {scripts[-1]};"
    with pytest.raises(UserError, match=known):
        search.run_search(search.SearchOptions(command=STUB, output_dir=output_dir,
                                               grid="num_train_epochs=1"))
    records = search.run_search(search.SearchOptions(
        command=[*STUB, "--seed=100", "run_classifier.py"], output_dir=output_dir,
        grid="num_train_epochs=1,4", seeds=2))["trials"]
    assert [r["values"] for r in records] == [
        {"num_train_epochs": e, "seed": s} for e in ("1", "4") for s in ("100", "101")]
    for record, (epochs, seed) in zip(records, [(1, 100), (1, 101), (4, 100), (4, 101)]):
        assert record["score"] == pytest.approx(_stub_accuracy(5e-5, epochs, seed))
        assert record["best_step"] == 10 * epochs and record["checkpoint_dir"] == record["output_dir"]
    assert search.best_record(records)["values"] == {"num_train_epochs": "4", "seed": "101"}
    capsys.readouterr()


def test_command_errors(tmp_path):
    with pytest.raises(UserError, match="sets --output_dir: leave it out"):
        search.check_command([*STUB, "--output_dir=/tmp/x"])
    with pytest.raises(UserError, match="no fine-tuning command"):
        search.check_command([])
    assert search.command_metric(["bert-run-ner", "--do_train"]).key == "eval_f1"
    assert search.command_metric(["python", "x/run_squad.py"]).key == "f1"
    assert search.command_metric(["bert-run-classifier", "--best_metric", "eval_mcc"]).key == "eval_mcc"
    trial_dir = tmp_path / "trial"
    trial_dir.mkdir()
    with pytest.raises(UserError, match="wrote no dev figures; add --do_eval"):
        search.trial_result(str(trial_dir), search.command_metric(["run_classifier.py"]))
    write_eval_results(str(trial_dir / "eval_results.txt"),
                       {"eval_accuracy": np.float32(0.54545456), "global_step": 7})
    assert read_eval_results(str(trial_dir / "eval_results.txt")) == {
        "eval_accuracy": pytest.approx(0.54545456), "global_step": 7.0}
    with pytest.raises(UserError, match="has no eval_f1 .it has eval_accuracy, global_step"):
        search.trial_result(str(trial_dir), search.command_metric(["run_ner.py"]))


def test_script_runs_the_search_and_names_failures(tmp_path, script_runner):
    # search.py in a process of its own (forked by `script_runner`): its exit status and lines.
    output_dir = tmp_path / "search"
    command = [os.path.join(REPO, "search.py"), f"--output_dir={output_dir}",
               "--grid=learning_rate=1e-4,2e-4", "--", *STUB, "run_classifier.py",
               "--kill_at_learning_rate=2e-4"]
    [done] = script_runner.start([(command, str(tmp_path))]).wait(timeout=300)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "error: 1 trial(s) failed: learning_rate=2e-4 (trials.jsonl holds their last output "
        "lines); run the same command again to resume them")
    assert done.stdout.splitlines()[-1] == (
        f"best: learning_rate=1e-4 (eval_accuracy = 0.5400): --output_dir={output_dir}/"
        "learning_rate=1e-4")
    assert "stub run, attempt 1" in done.stderr  # the trials' output is shown


def test_one_real_run_classifier_trial(tmp_path, capsys):
    demo = os.path.join(REPO, "demo", "data", "classification")
    # One Transformer layer: the search reads the trial's figures, whatever the model's depth.
    vocab_file, config_file = write_tiny_model(tmp_path, words_of_files(
        os.path.join(demo, name) for name in ("train.tsv", "dev.tsv")), num_hidden_layers=1)
    options = search.SearchOptions(
        command=[sys.executable, os.path.join(REPO, "run_classifier.py"), "--task_name=SST-2",
                 f"--data_dir={demo}", f"--vocab_file={vocab_file}",
                 f"--bert_config_file={config_file}", "--do_train", "--max_seq_length=16",
                 "--eval_batch_size=16", "--best_metric=eval_accuracy"],
        output_dir=str(tmp_path / "search"), grid="learning_rate=5e-4;num_train_epochs=0.1;"
                                                  "train_batch_size=16")
    record = search.run_search(options)["best"]
    assert record["status"] == "done", record
    trial_dir = record["output_dir"]
    with open(os.path.join(trial_dir, "best_state.json"), encoding="utf-8") as f:
        state = json.load(f)
    dev = read_eval_results(os.path.join(trial_dir, "best", "eval_results.txt"))
    assert record["score"] == state["best_score"] == dev["eval_accuracy"]
    assert record["best_step"] == 5 == dev["global_step"]  # 800 examples / 16 × 0.1
    assert os.path.basename(trial_dir) == "learning_rate=5e-4__num_train_epochs=0.1__train_batch_size=16"
    assert os.path.exists(os.path.join(record["checkpoint_dir"], "checkpoint"))
    capsys.readouterr()


def _comparable(path):
    """best.json without what differs between two searches' directories and attempts."""
    with open(path, encoding="utf-8") as f:
        record = json.load(f)
    return {key: value for key, value in record.items()
            if key not in ("output_dir", "checkpoint_dir", "wall_seconds")}


def _wait_for(path, timeout=120.0):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.05)


def _wait_until_dead(pid, timeout=120.0):
    """Until process `pid` has exited (a zombie has closed its files, its locks are free)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return
        except FileNotFoundError:
            return
        assert time.monotonic() < deadline, f"pid {pid} still runs"
        time.sleep(0.02)


def test_search_killed_mid_trial_resumes_at_once(tmp_path, script_runner):
    """search.py killed with SIGKILL while its second trial runs, then the same command at
    once: the trial got SIGTERM with its search (it saved its step), the re-run waits for it to
    let go of its directory and resumes it; the first trial is not touched, and best.json is
    the uninterrupted search's."""
    grid = "--grid=learning_rate=1e-4,3e-4,2e-4"
    reference = search.run_search(search.SearchOptions(
        command=[*STUB, "run_classifier.py"], output_dir=str(tmp_path / "reference"),
        grid=grid.split("=", 1)[1]))
    assert reference["failed"] == []
    output_dir = tmp_path / "search"
    command = [os.path.join(REPO, "search.py"), f"--output_dir={output_dir}", grid, "--", *STUB,
               "run_classifier.py", "--wait_at_learning_rate=3e-4"]
    killed = script_runner.start([(command, str(tmp_path))])
    first, second = output_dir / "learning_rate=1e-4", output_dir / "learning_rate=3e-4"
    _wait_for(second / "waiting.txt")
    finished = {name: os.stat(first / name).st_mtime_ns for name in os.listdir(first)}
    with open(output_dir / ".bert_tf.lock.owner.json", encoding="utf-8") as f:
        search_pid = json.load(f)["pid"]
    killed.kill()  # SIGKILL: the search runs no code of its own
    _wait_until_dead(search_pid)  # as `kill -9 PID; wait PID`: its own lock is free
    [done] = script_runner.start([(command, str(tmp_path))]).wait(timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(second / "checkpoint.json", encoding="utf-8") as f:
        assert json.load(f) == {"attempt": 1}  # saved on SIGTERM by the killed search's trial
    assert [_starts(output_dir / name) for name in
            ("learning_rate=1e-4", "learning_rate=3e-4", "learning_rate=2e-4")] == [1, 2, 1]
    assert {name: os.stat(first / name).st_mtime_ns for name in os.listdir(first)} == finished
    assert (_comparable(output_dir / search.BEST_FILE)
            == _comparable(tmp_path / "reference" / search.BEST_FILE))
    assert [r["status"] for r in _records(output_dir)] == ["done"] * 3


CLASSIFIER = [sys.executable, os.path.join(REPO, "run_classifier.py"), "--task_name=SST-2",
              "--data_dir=/data", "--do_train"]


@pytest.mark.parametrize("command, grid, message", [
    (CLASSIFIER, "learning_rate=5e-5,1e-4,abc;num_train_epochs=1",
     "--grid: learning_rate=abc: flag --learning_rate=abc: could not convert string to float"),
    (CLASSIFIER, "learnin_rate=5e-5", "--grid: learnin_rate=5e-5: Unknown command line flag "
                                      "'learnin_rate'"),
    (CLASSIFIER, "dtype=float32,float8", "--grid: dtype=float8: flag --dtype=float8: value "
                                         "should be one of <float32|bfloat16|float16|auto>"),
    (["bert-run-ner", "--data_dir=/data", "--tag_scheme=xyz"], "learning_rate=5e-5",
     "the fine-tuning command: flag --tag_scheme=xyz: value should be one of"),
    (CLASSIFIER, "bert_config_file=a;albert_config_file=b",
     "--grid: trial bert_config_file=a__albert_config_file=b: --albert_config_file=b and "
     "--bert_config_file=a differ"),
])
def test_grid_values_are_parsed_by_the_scripts_flags_before_any_trial(
        tmp_path, command, grid, message):
    options = search.SearchOptions(command=command, output_dir=str(tmp_path / "search"),
                                   grid=grid)
    if command[0] == "bert-run-ner" and shutil.which("bert-run-ner") is None:
        options = dataclasses.replace(options, command=[
            sys.executable, os.path.join(REPO, "run_ner.py"), *command[1:]])
    before = {name: flags.FLAGS[name].value for name in flags.FLAGS}
    with pytest.raises(script_flags.TrialFlagError) as raised:
        search.run_search(options)
    assert message in str(raised.value)
    assert not os.path.exists(options.output_dir)  # nothing ran, nothing was written
    assert {name: flags.FLAGS[name].value for name in flags.FLAGS} == before
    good = dataclasses.replace(options, grid="learning_rate=5e-5,1e-4", command=[
        arg for arg in options.command if not arg.startswith("--tag_scheme")])
    assert [trial.name for trial in search.plan_search(good)] == [
        "learning_rate=5e-5", "learning_rate=1e-4"]


def test_a_failure_a_rerun_cannot_fix_is_named():
    killed = {"trial": "learning_rate=1e-4", "status": "failed", "exit_code": -9, "output": []}
    preempted = {**killed, "trial": "learning_rate=3e-4", "exit_code": PREEMPTED_STATUS}
    broken = {**killed, "trial": "learning_rate=2e-4", "exit_code": 1, "output": [
        "I1 training", "error: /data/train.tsv: not found", "E0 shutting down"]}
    assert search.failure_message([killed, preempted]) == (
        "2 trial(s) failed: learning_rate=1e-4, learning_rate=3e-4 (trials.jsonl holds their "
        "last output lines); run the same command again to resume them")
    assert search.failure_message([killed, broken]) == (
        "2 trial(s) failed: learning_rate=1e-4, learning_rate=2e-4 (trials.jsonl holds their "
        "last output lines); learning_rate=2e-4 stopped on an error that running it again "
        "does not fix (/data/train.tsv: not found): fix the command or --grid, then run the "
        "same command again")
