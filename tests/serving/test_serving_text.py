"""In-graph tokenization and packing (bert_tf.tasks.classifier.export) against FullTokenizer and the
classifier's Python packing: the same tokens on real and awkward text, every code point class."""

import glob
import os
import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.text import tokenizers
from bert_tf.serving import packing, text
from bert_tf.tasks.classifier import processors as classification, features as classifier_features
from bert_tf.text import pairs, testing_text
from conftest import TESTDATA
from support.tiny_models import REPO
from support import vocabularies


def _corpus_lines() -> list[str]:
    """Every line of the bundled text files: demo data and test data (corpora, GLUE, NER, SQuAD)."""
    lines = []
    for pattern in ("demo/data/**/*.txt", "demo/data/**/*.tsv", "demo/data/**/*.json",
                    "tests/testdata/**/*.txt", "tests/testdata/**/*.tsv", "tests/testdata/**/*.json"):
        for path in sorted(glob.glob(os.path.join(REPO, pattern), recursive=True)):
            with open(path, encoding="utf-8", errors="replace") as f:
                lines.extend(line for line in f.read().split("\n") if line.strip())
    return lines


@pytest.fixture(scope="module")
def real_vocab():
    return tokenizers.load_vocab(vocabularies.real_vocab())


def _graph_tokens(tokenizer: text.InGraphWordpiece, lines: list[str]) -> list[list[str]]:
    ids = tokenizer.tokenize(tf.constant(lines))
    return [[t.decode("utf-8") for t in row] for row in tokenizer.tokens(ids).to_list()]


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_tokens_equal_full_tokenizer_on_corpora_and_stress_text(real_vocab, do_lower_case):
    full = tokenizers.FullTokenizer(vocabularies.real_vocab(), do_lower_case=do_lower_case)
    in_graph = text.InGraphWordpiece(real_vocab, do_lower_case)
    corpus = _corpus_lines()
    stress = testing_text.varied_lines(1500, seed=7)
    assert len(corpus) > 2000
    for lines in (corpus, stress):
        got = _graph_tokens(in_graph, lines)
        mismatches = [line for line, tokens in zip(lines, got) if tokens != full.tokenize(line)]
        assert mismatches == []
    # The stress text holds every awkward piece, words over 200 characters among them.
    assert any(len(word) > tokenizers.MAX_CHARS_PER_WORD for line in stress for word in line.split())


def test_word_length_limit_and_greedy_pieces():
    vocab = {token: i for i, token in enumerate(
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "##a", "un", "##want", "##wa", "##ed", "é"])}
    in_graph = text.InGraphWordpiece(vocab, do_lower_case=False)
    lines = ["a" * 200, "a" * 201, "unwanted", "unwantedx", "é" * 200 + " é", "é" * 201]
    assert _graph_tokens(in_graph, lines) == [
        ["a"] + ["##a"] * 199, ["[UNK]"], ["un", "##want", "##ed"], ["[UNK]"],
        ["[UNK]", "é"], ["[UNK]"]]  # no "##é": 200 é is one unmatched word


def _class_sample() -> list[int]:
    """Every code point of the classes the tokenizer treats specially (control, format,
    combining, whitespace, punctuation, letters with case, CJK blocks' edges), and every 61st
    other code point."""
    special = {"Cc", "Cf", "Mn", "Zs", "Zl", "Zp", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Lu", "Lt"}
    edges = {cp for lo, hi in text.CJK_RANGES for cp in (lo - 1, lo, lo + 1, hi - 1, hi, hi + 1)}
    return [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF and (
        unicodedata.category(chr(cp)) in special or cp in edges or cp % 61 == 0)]


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_basic_tokens_on_code_point_classes(do_lower_case):
    code_points = _class_sample()
    lines = [f"x{chr(cp)}Y {chr(cp)}{chr(cp)}" for cp in code_points]
    got = text.basic_words(tf.constant(lines), do_lower_case).to_list()
    basic = tokenizers.BasicTokenizer(do_lower_case)
    mismatches = [cp for cp, line, words in zip(code_points, lines, got)
                  if [w.decode("utf-8") for w in words] != basic.tokenize(line)]
    # What remains (docs/serving.md): code points Python's Unicode does not assign yet, which
    # the newer ICU inside TensorFlow decomposes (NFD) or lower-cases.
    assert all(unicodedata.category(chr(cp)) == "Cn" for cp in mismatches), [hex(c) for c in mismatches]
    # Letters ICU lacks are mapped as str.lower maps them (Unicode 14 added these, for one).
    if unicodedata.unidata_version >= "14":
        assert {"\u2c2f", "\U00010570"} <= set(text.lower_case_fixes())


def test_invalid_utf8_is_dropped_as_the_original_decodes_it():
    vocab = {token: i for i, token in enumerate(["[UNK]", "ab", "c", "d"])}
    in_graph = text.InGraphWordpiece(vocab, do_lower_case=True)
    raw = [b"a\xffb c", b"\xc3d", b"c\xe2\x82"]
    ids = in_graph.tokenize(tf.constant(raw)).to_list()
    full_ids = [[vocab[t] for t in tokenizers.BasicTokenizer(True).tokenize(r)] for r in raw]
    assert ids == full_ids == [[1, 2], [3], [2]]


def test_truncation_equals_the_python_rule():
    la, lb = np.meshgrid(np.arange(14), np.arange(14), indexing="ij")
    la, lb = la.ravel().astype(np.int32), lb.ravel().astype(np.int32)
    for max_total in range(0, 12):
        keep_a, keep_b = packing.truncate_pair_lengths(tf.constant(la), tf.constant(lb), max_total)
        expected = [pairs.truncate_pair_lengths(int(a), int(b), max_total)
                    for a, b in zip(la, lb)]
        assert list(zip(keep_a.numpy().tolist(), keep_b.numpy().tolist())) == expected


@pytest.mark.parametrize("pair", [False, True])
def test_packing_equals_the_classifier_features(pair):
    vocab_file = os.path.join(TESTDATA, "glue", "vocab.txt")
    full = tokenizers.FullTokenizer(vocab_file, do_lower_case=True)
    in_graph = text.InGraphWordpiece(full.vocab, do_lower_case=True)
    sentences = ["She sang.", "", "she was singing . she sang . she was singing . x y z q",
                 "Was she? She was.", "sang"]
    examples = [classification.InputExample(str(i), a, sentences[-1 - i] if pair else None, None)
                for i, a in enumerate(sentences)]
    task = classification.get_task("mrpc" if pair else "cola")
    for max_seq_length in (5, 9, 30):
        expected = classifier_features.convert_examples(examples, task, max_seq_length, full)
        text_b = tf.constant([e.text_b for e in examples]) if pair else None
        got = packing.pack(in_graph.tokenize(tf.constant(sentences)),
                           None if text_b is None else in_graph.tokenize(text_b),
                           full.vocab["[CLS]"], full.vocab["[SEP]"], max_seq_length)
        width = got["input_ids"].shape[1]
        assert width == expected["input_mask"].sum(axis=1).max()  # the batch's longest row
        for name in ("input_ids", "input_mask", "segment_ids"):
            np.testing.assert_array_equal(got[name].numpy(), expected[name][:, :width], err_msg=name)


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_sentencepiece_ids_equal_the_python_tokenizer(spm_model, do_lower_case):
    from bert_tf.serving.saved_model import in_graph_tokenizer

    python = tokenizers.SentencePieceTokenizer(spm_model, do_lower_case=do_lower_case)
    in_graph = in_graph_tokenizer(None, spm_model, do_lower_case)
    lines = [*testing_text.varied_lines(200, seed=11), "Kalomira TENsul 中", "[CLS] x", "",
             "\u2c2f\U00010570 ΟΔΟΣ", "a\x00b", "a \x00b", "\x00", "x\x00\x00y", "中\x00文 \x00"]
    got = in_graph.tokenize(tf.constant(lines)).to_list()
    assert got == [python.convert_tokens_to_ids(python.tokenize(line)) for line in lines]
    assert in_graph.special_ids == {"[CLS]": 2, "[SEP]": 3, "[UNK]": 1}


def test_ner_word_pieces_with_sentencepiece_equal_run_ners(spm_model):
    # run_ner.py's export tokenizes each word on its own: with SentencePiece every word gets its
    # own "▁" piece, a word the model gives no pieces becomes the unknown piece, and a word keeps
    # at most `capacity` pieces, as ner/data.py packs the training windows.
    from bert_tf.serving.saved_model import in_graph_tokenizer
    from bert_tf.tasks.ner import data as tagging
    from bert_tf.tasks.ner.export import split_words, word_pieces

    lines = [*testing_text.varied_lines(60, seed=13), "\u200b Kalomira\u200b TENsul 中 ΟΔΟΣ"]
    python = tokenizers.SentencePieceTokenizer(spm_model, do_lower_case=True)
    words = split_words(tf.constant(lines), char_format=False)
    sentences = [tagging.Sentence(tuple(w.decode("utf-8") for w in row), None, ())
                 for row in words.to_list()]
    assert [list(s.words) for s in sentences] == [line.split() for line in lines]
    capacity = 4
    ids, counts = tagging._word_pieces(sentences, python, capacity)
    got = word_pieces(in_graph_tokenizer(None, spm_model, True), words, capacity)
    assert got.flat_values.numpy().tolist() == ids.tolist()
    assert got.values.row_lengths().numpy().tolist() == counts.tolist()
    # Both cases occur: a word of no pieces (U+200B alone) and words cut to `capacity`.
    assert python.tokenize("\u200b") == [] and "\u200b" in sentences[-1].words
    assert capacity in counts and python.vocab[python.unk_token] in ids
