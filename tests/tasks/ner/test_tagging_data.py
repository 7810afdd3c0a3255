"""Tagging data: readers of both formats, tag schemes and label lists, first-WordPiece label
alignment, long-sentence windows and their stitching, predictions written back, records."""

import os
import re

import numpy as np
import pytest
import sentencepiece

from bert_tf.records import features as record_schemas
from bert_tf.tasks.ner import data as tagging
from bert_tf.text.tokenizers import SentencePieceTokenizer
from conftest import TESTDATA
from support.vocabularies import wordpiece_tokenizer

NER = os.path.join(TESTDATA, "ner")
CONLL = os.path.join(NER, "conll_multicolumn.txt")
DEMO = os.path.join(os.path.dirname(os.path.dirname(TESTDATA)), "demo", "data", "ner")
LABELS = ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]


tokenizer = wordpiece_tokenizer(os.path.join(NER, "vocab.txt"), do_lower_case=True)


def _write(tmp_path, text, name="data.txt"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return str(path)


def test_conll_reader_multicolumn_docstart_trailing_blank_lines():
    sentences = tagging.read_sentences(CONLL, "conll")
    assert [s.words for s in sentences] == [
        ("Mirela", "Quellin", "visited", "Port", "Alder", "."), ("Velt", "Industries", "fell"),
        ("Dunmere",)]
    assert sentences[0].tags == ("B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O")  # last column
    assert sentences[1].tags == ("B-ORG", "I-ORG", "O")
    assert sentences[0].line_numbers == (3, 4, 5, 6, 7, 8)
    assert sentences[2].line_numbers == (16,)


def test_conll_reader_crlf_no_final_newline_and_docstart_without_blank(tmp_path):
    path = _write(tmp_path, "a O\r\nb B-X\r\n-DOCSTART- O\r\nc I-X\r\n\r\n\r\nd O")
    sentences = tagging.read_sentences(path)
    assert [(s.words, s.tags) for s in sentences] == [
        (("a", "b"), ("O", "B-X")), (("c",), ("I-X",)), (("d",), ("O",))]


def test_char_reader_spaces_tabs_and_untagged_file():
    sentences = tagging.read_sentences(os.path.join(NER, "char_train.txt"), "char")
    assert ["".join(s.words) for s in sentences] == ["张三在北京工作", "李四去上海", "王五在上海开会"]
    assert sentences[1].tags == ("B-PER", "I-PER", "O", "B-LOC", "I-LOC")  # tab-separated
    test = tagging.read_sentences(os.path.join(NER, "char_test.txt"), "char")
    assert ["".join(s.words) for s in test] == ["王五去北京", "张三在上海工作"]
    assert all(s.tags is None for s in test)


def test_char_reader_keeps_a_space_character(tmp_path):
    # The character itself may be whitespace: "<space> O" is a word, not a blank line.
    path = _write(tmp_path, "中 B-LOC\n  O\n国 I-LOC\n")
    [sentence] = tagging.read_sentences(path, "char")
    assert sentence.words == ("中", " ", "国") and sentence.tags == ("B-LOC", "O", "I-LOC")


@pytest.mark.parametrize("text, data_format, message", [
    ("a NN O\nb\n", "conll", ":2: no tag column, unlike line 1"),
    ("a NN O\nb NN\n", "conll", ":2: tag 'NN' is not O"),
    ("a\nb O\n", "conll", ":2: a tag column, unlike line 1"),
    ("a NN B_PER\n", "conll", ":1: tag 'B_PER' is not O or B-/I-/E-/S-<TYPE>"),
    ("a X-PER\n", "conll", ":1: tag 'X-PER'"),
    ("北京 B-LOC\n", "char", ":1: expected one character, whitespace and a tag"),
    ("北 B-LOC extra\n", "char", ":1: expected one character"),
])
def test_malformed_lines_name_file_and_line(tmp_path, text, data_format, message):
    path = _write(tmp_path, text)
    with pytest.raises(ValueError, match=re.escape(f"data.txt{message}")):
        tagging.read_sentences(path, data_format)


def test_reader_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        tagging.read_sentences(str(tmp_path / "missing.txt"))
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes(b"caf\xe9 O\n")
    with pytest.raises(ValueError, match="latin1.txt: not UTF-8"):
        tagging.read_sentences(str(latin1))
    with pytest.raises(ValueError, match="data format"):
        tagging.read_sentences(CONLL, "tsv")


def test_convert_tags_between_schemes():
    iob1 = ["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG"]
    assert tagging.convert_tags([iob1], "bio") == [["B-PER", "I-PER", "B-PER", "O", "B-LOC", "B-ORG"]]
    bio = ["B-PER", "I-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC"]
    bioes = ["B-PER", "I-PER", "E-PER", "O", "S-LOC", "B-LOC", "E-LOC"]
    assert tagging.convert_tags([bio, []], "bioes") == [bioes, []]
    assert tagging.convert_tags([bioes], "bio") == [bio]
    assert tagging.convert_tags([bioes], "bioes") == [bioes]


def test_label_lists():
    assert tagging.label_list(["PER", "LOC"], "bio") == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    assert tagging.label_list(["X"], "bioes") == ["O", "B-X", "I-X", "E-X", "S-X"]
    # Dunmere is a one-word LOC only, yet I-LOC is in the list: dev entities may be longer.
    sentences = tagging.read_sentences(CONLL)
    assert tagging.labels_from_sentences(sentences, "bio") == LABELS
    with pytest.raises(ValueError, match="tag scheme"):
        tagging.label_list(["X"], "iob1")


def test_label_ids_and_unknown_label_error():
    sentences = tagging.read_sentences(CONLL)
    tags = tagging.convert_tags([s.tags for s in sentences], "bio")
    ids = tagging.label_ids(sentences, tags, LABELS, CONLL)
    assert [i.tolist() for i in ids] == [[5, 6, 0, 1, 2, 0], [3, 4, 0], [1]]
    with pytest.raises(ValueError, match=r"conll_multicolumn.txt:10: tag 'B-ORG' is not in the label"):
        tagging.label_ids(sentences, tags, ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"], CONLL)


def test_first_wordpiece_alignment(tokenizer):
    sentences = tagging.read_sentences(CONLL)
    ids = tagging.label_ids(sentences, tagging.convert_tags([s.tags for s in sentences], "bio"),
                            LABELS, CONLL)
    features = tagging.convert_sentences(sentences, ids, tokenizer, 12, 32)
    arrays = features.arrays
    # mirela quell ##in visited port alder . | velt indus ##tries fell | dun ##mere
    np.testing.assert_array_equal(arrays["input_ids"], [
        [2, 5, 6, 7, 8, 9, 10, 11, 3, 0, 0, 0],
        [2, 12, 13, 14, 15, 3, 0, 0, 0, 0, 0, 0],
        [2, 16, 17, 3, 0, 0, 0, 0, 0, 0, 0, 0]])
    np.testing.assert_array_equal(arrays["label_ids"], [
        [0, 5, 6, 0, 0, 1, 2, 0, 0, 0, 0, 0],  # "##in" and the special tokens carry nothing
        [0, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        [0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]])
    np.testing.assert_array_equal(arrays["label_weights"], [
        [0, 1, 1, 0, 1, 1, 1, 1, 0, 0, 0, 0],
        [0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0],
        [0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]])
    np.testing.assert_array_equal(arrays["input_mask"].sum(1), [9, 6, 4])
    np.testing.assert_array_equal(arrays["segment_ids"], 0)
    np.testing.assert_array_equal(features.word_index[0, :9], [-1, 0, 1, -1, 2, 3, 4, 5, -1])
    assert features.num_windows == 3 and features.sentence_index.tolist() == [0, 1, 2]


def test_word_without_pieces_becomes_unk_and_padding_rows(tokenizer):
    sentence = tagging.Sentence(("mirela", "\u200b", "fell"), None, (1, 2, 3))
    features = tagging.convert_sentences([sentence], None, tokenizer, 8, 32, pad_to_multiple=4)
    np.testing.assert_array_equal(features.arrays["input_ids"][0, :5], [2, 5, 1, 15, 3])
    assert features.arrays["input_ids"].shape == (4, 8) and features.num_windows == 1
    np.testing.assert_array_equal(features.arrays["label_weights"][1:], 0)
    np.testing.assert_array_equal(features.sentence_index, [0, -1, -1, -1])


def test_sentencepiece_alignment_marks_word_starts(tmp_path):
    lines = [" ".join(s.words) for s in tagging.read_sentences(os.path.join(DEMO, "train.txt"))]
    prefix = str(tmp_path / "spm")
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_prefix=prefix, vocab_size=150, model_type="unigram",
        pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, pad_piece="[PAD]", unk_piece="<unk>",
        control_symbols="[CLS],[SEP],[MASK]", minloglevel=2)
    spm = SentencePieceTokenizer(prefix + ".model", do_lower_case=True)
    sentences = tagging.read_sentences(CONLL) + [tagging.Sentence(("mirela", "\u200b"), None, (1, 2))]
    labels = [np.arange(len(s.words), dtype=np.int32) for s in sentences]
    features = tagging.convert_sentences(sentences, labels, spm, 8, 2)
    for row in range(features.num_windows):
        pieces = spm.convert_ids_to_tokens(features.arrays["input_ids"][row, :8].tolist())
        weighted = features.arrays["label_weights"][row] == 1
        # Each word is encoded on its own, so its first piece is a word start ("▁...") or
        # the model's unknown piece, and only first pieces carry a label.
        assert all(p.startswith("\u2581") or p == "<unk>" for p, w in zip(pieces, weighted) if w)
    stitched = tagging.stitch_predictions(features, features.arrays["label_ids"],
                                          [len(s.words) for s in sentences])
    assert [s.tolist() for s in stitched] == [l.tolist() for l in labels]
    assert max(features.arrays["input_mask"].sum(1)) == 8  # some sentences needed windows


def test_long_sentence_windows(tokenizer):
    sentences = tagging.read_sentences(CONLL)[:1]
    ids = [np.array([5, 6, 0, 1, 2, 0], np.int32)]
    features = tagging.convert_sentences(sentences, ids, tokenizer, 6, 2)
    # 7 pieces, 4 per window, 2 shared: [mirela quell ##in visited] [visited port alder .];
    # the shared word "visited" is predicted by the second window only.
    np.testing.assert_array_equal(features.arrays["input_ids"], [[2, 5, 6, 7, 8, 3],
                                                                 [2, 8, 9, 10, 11, 3]])
    np.testing.assert_array_equal(features.arrays["label_weights"], [[0, 1, 1, 0, 0, 0],
                                                                     [0, 1, 1, 1, 1, 0]])
    np.testing.assert_array_equal(features.arrays["label_ids"], [[0, 5, 6, 0, 0, 0],
                                                                 [0, 0, 1, 2, 0, 0]])
    stitched = tagging.stitch_predictions(features, features.arrays["label_ids"], [6])
    np.testing.assert_array_equal(stitched[0], ids[0])


def test_windowing_round_trip_on_random_sentences():
    rng = np.random.default_rng(7)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "w"] + [f"##{i}" for i in range(9)]

    class PieceTokenizer:  # "w3" -> w ##0 ##1 ##2: a word of known piece count
        def tokenize(self, word):
            return ["w"] + [f"##{i}" for i in range(int(word[1:]) - 1)]

        def convert_tokens_to_ids(self, tokens):
            return [vocab.index(t) for t in tokens]

    for _ in range(200):
        max_seq_length, overlap = int(rng.integers(3, 14)), int(rng.integers(0, 8))
        sentences, labels = [], []
        for _ in range(int(rng.integers(1, 4))):
            counts = rng.integers(1, 8, int(rng.integers(1, 25)))
            sentences.append(tagging.Sentence(tuple(f"w{c}" for c in counts), None,
                                              tuple(range(len(counts)))))
            labels.append(rng.integers(0, 5, len(counts)).astype(np.int32))
        features = tagging.convert_sentences(sentences, labels, PieceTokenizer(), max_seq_length,
                                             overlap, pad_to_multiple=3)
        arrays = features.arrays
        assert arrays["input_ids"].shape[0] % 3 == 0
        stitched = tagging.stitch_predictions(features, arrays["label_ids"],
                                              [len(s.words) for s in sentences])
        for got, want in zip(stitched, labels):
            np.testing.assert_array_equal(got, want)
        # Every real window is [CLS] pieces [SEP]; only first pieces ("w") carry weight.
        for row in range(features.num_windows):
            length = int(arrays["input_mask"][row].sum())
            tokens = arrays["input_ids"][row, :length]
            assert tokens[0] == 2 and tokens[-1] == 3 and 2 not in tokens[1:-1]
            assert np.all(tokens[arrays["label_weights"][row, :length] == 1] == vocab.index("w"))


def test_stitch_rejects_predictions_of_other_windows(tokenizer):
    features = tagging.convert_sentences(tagging.read_sentences(CONLL), None, tokenizer, 12, 32)
    with pytest.raises(RuntimeError, match="no window or by several"):
        tagging.stitch_predictions(features, features.arrays["label_ids"], [6, 3, 2])


def test_write_predictions_back_in_the_input_format(tmp_path):
    predicted = [["B-PER", "I-PER", "O", "B-LOC", "O", "O"], ["B-ORG", "I-ORG", "O"], ["B-PER"]]
    out = str(tmp_path / "predictions.txt")
    assert tagging.write_predictions(CONLL, out, "conll", predicted) == 10
    source = open(CONLL, encoding="utf-8").read().splitlines()
    written = open(out, encoding="utf-8").read().splitlines()
    assert len(written) == len(source)
    words = [line for line in source if line and not line.startswith("-DOCSTART-")]
    assert [w for w in written if w and not w.startswith("-DOCSTART-")] == [
        f"{line} {tag}" for line, tag in zip(words, sum(predicted, []))]
    # -DOCSTART- lines get an O column too: conlleval wants the same column count on every line
    assert [w for w in written if not w or w.startswith("-DOCSTART-")] == \
        [s + " O" if s else s for s in source if not s or s.startswith("-DOCSTART-")]
    assert tagging.read_sentences(out)[0].tags == tuple(predicted[0])  # readable again
    assert os.listdir(tmp_path) == ["predictions.txt"]  # no temporary file left

    char = os.path.join(NER, "char_train.txt")
    tags = [s.tags for s in tagging.read_sentences(char, "char")]
    tagging.write_predictions(char, out, "char", tags)
    lines = open(out, encoding="utf-8").read().splitlines()
    assert lines[0] == "张 B-PER B-PER" and lines[8] == "李\tB-PER\tB-PER"
    with pytest.raises(ValueError, match="more words than predictions"):
        tagging.write_predictions(CONLL, out, "conll", predicted[:2])
    with pytest.raises(ValueError, match="fewer words than predictions"):
        tagging.write_predictions(CONLL, out, "conll", predicted + [["O"]])


def test_tagging_records_round_trip(tokenizer):
    features = tagging.convert_sentences(tagging.read_sentences(CONLL), None, tokenizer, 12, 32)
    schema = record_schemas.tagging_schema(12)
    data, offsets = schema.encode_batch(features.arrays)
    for row in range(3):
        record = schema.decode(data[offsets[row]:offsets[row + 1]].tobytes())
        for name, array in features.arrays.items():
            np.testing.assert_array_equal(record[name], array[row])
        assert schema.to_tf_example({k: v[row] for k, v in features.arrays.items()}) \
            .SerializeToString(deterministic=True) == data[offsets[row]:offsets[row + 1]].tobytes()
