"""Tokenizers: hand-written expected tokens, fast path == reference path, SentencePiece, helpers."""

import logging
import random
import string
import subprocess
import sys
import unicodedata

import pytest
import sentencepiece

from bert_tf.text import tokenizers
from bert_tf.text import fast_basic, testing_text
from support.vocabularies import real_vocab
from bert_tf.text.tokenizers import (FullTokenizer, SentencePieceTokenizer, create_tokenizer,
                                  validate_case_matches_checkpoint)

# Enough pieces to show greedy longest-match-first, `##` continuations and [UNK].
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##want", "##wa", "##ed", "want",
         "runn", "##ing", "run", ",", ".", "!", "?", "[", "]", "cls", "hello", "how", "are", "you",
         "creme", "brulee", "Crème", "a", "##a", "b", "##b", "c", "##c", "中", "文", "straße", "…",
         "οδος", "σας", "istanbul", "`", "x", "xy", "##yz"]


@pytest.fixture(scope="module")
def real_references() -> dict[bool, FullTokenizer]:
    """do_lower_case → the reference path (fast=False) on the released vocab, shared by the
    tests: it keeps no state between calls (the fast path's memos are built fresh per test)."""
    return {case: FullTokenizer(real_vocab(), case, fast=False) for case in (True, False)}


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("".join(token + "\n" for token in VOCAB), encoding="utf-8")
    return str(path)


# (text, do_lower_case, expected basic tokens), written by hand from the original's rules.
BASIC_CASES = [
    (" \tHeLLo!how  \n Are yoU?  ", True, ["hello", "!", "how", "are", "you", "?"]),
    (" \tHeLLo!how  \n Are yoU?  ", False, ["HeLLo", "!", "how", "Are", "yoU", "?"]),
    ("Crème Brûlée", True, ["creme", "brulee"]),
    ("Crème Brûlée", False, ["Crème", "Brûlée"]),
    ("e\u0301 \u0301", True, ["e"]),              # a word of combining marks only disappears
    ("e\u0301 \u0301", False, ["e\u0301", "\u0301"]),
    ("ah博推zz", True, ["ah", "博", "推", "zz"]),
    # A compatibility ideograph is spaced, then (uncased) NFD turns it into the unified one.
    ("x\U00020000\U0002b740y\uf900", True, ["x", "\U00020000", "\U0002b740", "y", "\u8c48"]),
    ("x\U00020000\U0002b740y\uf900", False, ["x", "\U00020000", "\U0002b740", "y", "\uf900"]),
    ("a\U00030000b ひらがな 한국어", False, ["a\U00030000b", "ひらがな", "한국어"]),  # not "CJK"
    ("ひらがな", True, ["ひらかな"]),              # NFD splits off the voicing mark, then drops it
    ("a\x00b\ufffdc\x07d\u200be\u00adf\x85g", True, ["abcdefg"]),
    # U+2028/9 are kept by cleaning but split on by str.split; \x0b is a control: dropped.
    ("a\u3000b\xa0c\u2028d\u2029e\x0bf", True, ["a", "b", "c", "d", "ef"]),
    # ASCII controls that str.split would split on (\x1c-\x1f, \x0b, \x0c) are dropped, joining.
    ("a\x1cb\x1dc\x1ed\x1fe\x0bf\x0cg\x7fh i\tj\rk\nl_M\x00N", True,
     ["abcdefgh", "i", "j", "k", "l", "_", "mn"]),
    ("$5^`~ a…b", True, ["$", "5", "^", "`", "~", "a", "…", "b"]),
    ("注，ＡＢＣ！", False, ["注", "，", "ＡＢＣ", "！"]),
    ("ΟΔΟΣ ΣΑΣ.", True, ["οδος", "σας", "."]),    # final sigma, as str.lower() on the word
    ("İstanbul ı", True, ["istanbul", "ı"]),
    ("İstanbul", False, ["İstanbul"]),
    ("Straße ẞ", True, ["straße", "ß"]),
    ("x\ue000y \U000f0000", True, ["x\ue000y", "\U000f0000"]),  # private use is kept
    ("[CLS] a[SEP]", True, ["[", "cls", "]", "a", "[", "sep", "]"]),
    ("[MASK]", False, ["[", "MASK", "]"]),
    ("a\u1fefb", True, ["a", "`", "b"]),          # GREEK VARIA decomposes to "`" (punctuation)
    ("a\u1fefb", False, ["a\u1fefb"]),
    ("👨\u200d👩 a😀b", True, ["👨👩", "a😀b"]),     # the joiner is a format character
    (b"caf\xc3\xa9 \xff\xfebad", True, ["cafe", "bad"]),  # invalid UTF-8 bytes are dropped
    ("", True, []),
    ("\x00 \t\u200b", True, []),
]


@pytest.mark.parametrize("text,do_lower_case,expected", BASIC_CASES)
def test_basic_tokenizer_cases(text, do_lower_case, expected):
    assert tokenizers.BasicTokenizer(do_lower_case).tokenize(text) == expected
    words = fast_basic.split_words(text)
    split_word = tokenizers.BasicTokenizer(do_lower_case).split_word
    assert [t for w in words for t in split_word(w)] == expected


WORDPIECE_CASES = [
    ("unwanted running", ["un", "##want", "##ed", "runn", "##ing"]),
    ("UNwantéd,running!", ["un", "##want", "##ed", ",", "runn", "##ing", "!"]),
    ("unwantedx run", ["[UNK]", "run"]),             # no piece for "##x": the whole word is [UNK]
    ("wanted", ["want", "##ed"]),
    ("xyyz", ["xy", "##yz"]),
    ("xyz", ["[UNK]"]),             # greedy takes "xy", then finds no "##z": no backtracking
    ("Crème brûlée …", ["creme", "brulee", "…"]),
    ("中文 中国", ["中", "文", "中", "[UNK]"]),
    ("ΟΔΟΣ ΣΑΣ", ["οδος", "σας"]),
    ("[CLS] hello", ["[", "cls", "]", "hello"]),
    ("a" * 200, ["a"] + ["##a"] * 199),
    ("a" * 201, ["[UNK]"]),                         # longer than 200 characters
    ("abcab", ["a", "##b", "##c", "##a", "##b"]),
]


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("text,expected", WORDPIECE_CASES)
def test_full_tokenizer_cases(vocab_file, text, expected, fast):
    tokenizer = FullTokenizer(vocab_file, do_lower_case=True, fast=fast)
    assert tokenizer.tokenize(text) == expected


def test_cased_wordpiece_and_ids(vocab_file):
    tokenizer = FullTokenizer(vocab_file, do_lower_case=False)
    tokens = tokenizer.tokenize("Crème wanting")
    assert tokens == ["Crème", "want", "##ing"]
    ids = tokenizer.convert_tokens_to_ids(tokens)
    assert ids == [VOCAB.index(t) for t in tokens]
    assert tokenizer.convert_ids_to_tokens(ids) == tokens
    assert list(tokenizer.vocab) == VOCAB and tokenizer.inv_vocab[5] == "un"
    assert tokenizer.missing_special_tokens() == []


def test_memo_that_fills_up_gives_the_same_tokens(vocab_file):
    lines = testing_text.varied_lines(300, seed=5)
    small = FullTokenizer(vocab_file, cache_size=3)
    reference = FullTokenizer(vocab_file, fast=False)
    assert [small.tokenize(x) for x in lines] == [reference.tokenize(x) for x in lines]
    assert len(small._memo) <= 3 and len(small._word_memo) <= 3


@pytest.fixture(scope="module")
def varied_lines() -> list[str]:
    return testing_text.varied_lines(20_000, seed=2024, max_items=8)


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_fast_path_equals_reference_on_varied_text(varied_lines, real_references, do_lower_case):
    """20,000 seeded lines of awkward multilingual text, against the released 30k vocab."""
    assert len(set(varied_lines)) > 18_000
    fast = FullTokenizer(real_vocab(), do_lower_case)
    reference = real_references[do_lower_case]
    fast_tokens = [fast.tokenize(line) for line in varied_lines]
    reference_tokens = [reference.tokenize(line) for line in varied_lines]
    mismatches = [line for line, a, b in zip(varied_lines, fast_tokens, reference_tokens)
                  if a != b]
    assert not mismatches, mismatches[:3]
    # The text reaches the branches it is meant to: [UNK], long words, CJK, accents, sigma.
    flat = {token for tokens in fast_tokens for token in tokens}
    assert {"[UNK]", "中", "[", "]", "…"} <= flat


@pytest.mark.parametrize("do_lower_case,step", [(True, 1), (False, 5)])
def test_fast_path_equals_reference_on_every_code_point(vocab_file, do_lower_case, step):
    """Runs of 50 consecutive code points (every one up to U+10FFFF) inside words."""
    lines = []
    for start in range(0, 0x110000, 50 * step):
        run = "".join(map(chr, range(start, min(start + 50, 0x110000))))
        lines.append(f"{run[:25]} x{run[25:]}y")
    fast = FullTokenizer(vocab_file, do_lower_case)
    reference = FullTokenizer(vocab_file, do_lower_case, fast=False)
    assert [fast.tokenize(x) for x in lines] == [reference.tokenize(x) for x in lines]


def _random_ascii_lines(num_lines: int, seed: int) -> list[str]:
    """Lines of ASCII words, punctuation, every control character and 190-210-character runs."""
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits
    lines = []
    for _ in range(num_lines):
        items = []
        for _ in range(rng.randint(0, 12)):
            kind = rng.random()
            if kind < 0.6:
                items.append("".join(rng.choices(alphabet, k=rng.randint(1, 12))))
            elif kind < 0.8:
                items.append(rng.choice(string.punctuation))
            elif kind < 0.99:
                items.append(chr(rng.choice(list(range(32)) + [127])))
            else:
                items.append(rng.choice("aB") * rng.randint(190, 210))
            items.append(rng.choice(["", " ", " ", "\t", "  "]))
        lines.append("".join(items))
    return lines


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_ascii_line_lane_equals_reference(vocab_file, real_references, do_lower_case):
    """Pure-ASCII lines take `ascii_basic_tokens`: every pair of ASCII characters around a word,
    and seeded random lines (controls, punctuation, words of about 200 characters)."""
    pairs = [f"{chr(a)}x{chr(b)}" for a in range(128) for b in range(128)]
    lines = _random_ascii_lines(1000, seed=11)
    basic = tokenizers.BasicTokenizer(do_lower_case)
    expected = [basic.tokenize(x) for x in pairs + lines]
    assert [fast_basic.ascii_basic_tokens(x, do_lower_case) for x in pairs + lines] == expected
    # The words FullTokenizer memoises: their basic tokens, concatenated, are the line's.
    assert [[t for word in fast_basic.ascii_unit_text(x, do_lower_case).split() for t in basic.tokenize(word)]
            for x in pairs + lines] == expected
    for vocab, reference in ((vocab_file, FullTokenizer(vocab_file, do_lower_case, fast=False)),
                             (real_vocab(), real_references[do_lower_case])):
        fast = FullTokenizer(vocab, do_lower_case)
        assert [fast.tokenize(x) for x in lines] == [reference.tokenize(x) for x in lines]
        assert [fast.tokenize(x.encode()) for x in lines[:200]] == [reference.tokenize(x) for x in lines[:200]]


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_word_memo_is_shared_by_ascii_and_other_lines(real_references, do_lower_case):
    """Words of pure-ASCII lines are lower-cased before the memo sees them (uncased), words of other
    lines are not: one memo serves both, whichever kind of line meets a word first."""
    lines = ["The end. The", "Thé end. The", "THE (end); the", "ΣΑΣ The, end:", "The"]
    reference = real_references[do_lower_case]
    for order in (lines, lines[::-1]):
        fast = FullTokenizer(real_vocab(), do_lower_case)
        assert [fast.tokenize(x) for x in order] == [reference.tokenize(x) for x in order]


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_split_units_concatenate_to_the_tokens(real_references, do_lower_case):
    """`split_units` (the memo keys of the pretraining pipeline): the units' tokens, each unit
    tokenized on its own, concatenated, are the line's tokens."""
    lines = testing_text.varied_lines(500, seed=9) + _random_ascii_lines(300, seed=12)
    tokenizer = FullTokenizer(real_vocab(), do_lower_case)
    reference = real_references[do_lower_case]
    for line in lines:
        units = tokenizer.split_units(line)
        assert [t for unit in units for t in reference.tokenize(unit)] == reference.tokenize(line), line
    # unit_text: many lines at once, line breaks kept (how create_pretraining_data reads).
    lines = [line for line in lines if "\n" not in line]
    many = tokenizer.unit_text("\n".join(lines)).split("\n")
    assert len(many) == len(lines)
    for line, units in zip(lines, many):
        assert [t for unit in units.split() for t in tokenizer.word_pieces(unit)] == reference.tokenize(line), line


def test_fast_path_character_tables_match_the_reference_predicates():
    everything = "".join(map(chr, range(0x110000)))
    kept = "".join(c for c in everything if not tokenizers._is_dropped(c))
    assert fast_basic._dropped_chars_re().sub("", everything) == kept
    assert everything.translate(fast_basic._deleted_combining_marks()) == "".join(
        c for c in everything if unicodedata.category(c) != "Mn")
    punctuation = [c for c in everything if tokenizers._is_punctuation(c)]
    assert "".join(punctuation).translate(fast_basic._spaced_punctuation()).split() == punctuation
    assert len(fast_basic._spaced_punctuation()) == len(punctuation)
    assert fast_basic._CJK_SPLIT_RE.split(everything)[1::2] == [
        c for c in everything if tokenizers._is_cjk_ideograph(ord(c))]
    # unit_text lower-cases whole texts, basic_tokens its units again: no character changes twice.
    assert everything.lower().lower() == everything.lower()
    for char in everything:
        # split_words skips turning whitespace into spaces and skips printable lines when dropping.
        assert not tokenizers._is_whitespace(char) or char.isspace(), hex(ord(char))
        assert not tokenizers._is_dropped(char) or not char.isprintable() or char == "\ufffd"


def test_testing_text_is_deterministic():
    assert testing_text.varied_lines(50, seed=3) == testing_text.varied_lines(50, seed=3)
    assert testing_text.varied_lines(50, seed=3) != testing_text.varied_lines(50, seed=4)


@pytest.mark.parametrize("raw", [
    b"[PAD]\n[UNK]\r\n  padded  \nrepeat\n\xff\xfeinvalid\nsplit\xe4\nagain\n\n\xe4\xb8\xad\nlast",
    b"a\nb\n", b"\n", b"one"])
def test_load_vocab_reads_the_file_as_line_by_line_decoding_does(tmp_path, raw):
    path = tmp_path / "vocab.txt"
    path.write_bytes(raw)
    expected = {}
    with open(path, "rb") as f:
        for index, line in enumerate(f):
            expected[line.decode("utf-8", "ignore").strip()] = index
    loaded = tokenizers.load_vocab(path)
    assert list(loaded.items()) == list(expected.items())
    loaded["added"] = 99  # callers own their copy: the cached entries stay as read
    assert list(tokenizers.load_vocab(path).items()) == list(expected.items())
    path.write_bytes(raw + b"\nmore")  # an edited file is read again
    assert "more" in tokenizers.load_vocab(path)


def test_load_vocab_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="--vocab_file"):
        tokenizers.load_vocab(tmp_path / "missing.txt")
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(ValueError, match="empty"):
        tokenizers.load_vocab(tmp_path / "empty.txt")


# ------------------------------------------------------------------------------- SentencePiece
def test_sentencepiece_tokenizer(spm_model):
    tokenizer = SentencePieceTokenizer(spm_model, do_lower_case=True)
    assert [tokenizer.vocab[t] for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [0, 1, 2, 3, 4]
    assert tokenizer.missing_special_tokens() == []
    tokens = tokenizer.tokenize("Kalomira TENsul 中")
    processor = sentencepiece.SentencePieceProcessor(model_file=spm_model)
    assert tokens == [processor.id_to_piece(i) for i in processor.encode("kalomira tensul 中")]
    assert tokens[-1] == "[UNK]"                      # "中" never occurs in the training text
    ids = tokenizer.convert_tokens_to_ids(tokens)
    assert tokenizer.convert_ids_to_tokens(ids) == tokens
    assert "".join(tokens[:-1]).replace("\u2581", " ").split() == ["kalomira", "tensul"]
    assert "[CLS]" not in tokenizer.tokenize("[CLS] x")  # control symbols never come from text
    assert tokenizer.tokenize(b"ka\xffmi") == tokenizer.tokenize("kami")
    cased = SentencePieceTokenizer(spm_model)
    assert cased.tokenize("tensul") == tokenizer.tokenize("TENSUL") != cased.tokenize("TENSUL")


def test_sentencepiece_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="--spm_model_file"):
        SentencePieceTokenizer(tmp_path / "missing.model")
    bad = tmp_path / "bad.model"
    bad.write_text("not a model")
    with pytest.raises(ValueError, match="not a SentencePiece model"):
        SentencePieceTokenizer(bad)


def test_create_tokenizer(vocab_file, spm_model):
    assert isinstance(create_tokenizer(vocab_file=vocab_file), FullTokenizer)
    spm = create_tokenizer(spm_model_file=spm_model, do_lower_case=False)
    assert isinstance(spm, SentencePieceTokenizer) and not spm.do_lower_case
    with pytest.raises(ValueError, match="--vocab_file.*--spm_model_file.*neither"):
        create_tokenizer()
    with pytest.raises(ValueError, match="--vocab_file.*--spm_model_file.*both"):
        create_tokenizer(vocab_file=vocab_file, spm_model_file=spm_model)


# ----------------------------------------------------------------------- case vs checkpoint name
@pytest.mark.parametrize("do_lower_case,checkpoint,warns", [
    (False, "/models/uncased_L-12_H-768_A-12/bert_model.ckpt", True),
    (True, "/models/uncased_L-12_H-768_A-12/bert_model.ckpt", False),
    (True, "gs://bucket/cased_L-24_H-1024_A-16/bert_model.ckpt", True),
    (False, "gs://bucket/cased_L-24_H-1024_A-16/bert_model.ckpt", False),
    (True, "wwm_cased_L-24_H-1024_A-16/bert_model.ckpt", True),
    (True, "multi_cased_L-12_H-768_A-12/bert_model.ckpt", True),
    (False, "chinese_L-12_H-768_A-12/bert_model.ckpt", True),
    (False, "multilingual_L-12_H-768_A-12/bert_model.ckpt", True),
    (True, "runs/my_model/ckpt-1000", False),            # the name says nothing
    (False, "runs/encased_things/ckpt-1000", False),     # "cased" inside another word
    (True, None, False),
])
def test_validate_case_matches_checkpoint(do_lower_case, checkpoint, warns, caplog):
    with caplog.at_level(logging.WARNING):
        message = validate_case_matches_checkpoint(do_lower_case, checkpoint)
    assert (message is not None) == warns
    if warns:
        assert f"--do_lower_case={not do_lower_case}" in message and message in caplog.text


def test_validate_case_reads_a_model_directory_name(tmp_path):
    model_dir = tmp_path / "bert-base-uncased"
    model_dir.mkdir()
    assert validate_case_matches_checkpoint(False, str(model_dir) + "/") is not None
    assert validate_case_matches_checkpoint(True, model_dir) is None


def test_tokenization_does_not_import_tensorflow():
    # Pretraining-data workers import the tokenizer; TensorFlow would cost each of them seconds.
    code = "import sys, bert_tf.tokenization; print('tensorflow' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_line_level_basic_tokens_match_the_reference_on_every_changed_code_point(do_lower_case):
    """`basic_tokens` lower-cases, decomposes and splits the whole line at once: the same tokens as
    the reference's per-word steps for every BMP code point that lower-casing or NFD changes, that
    is a combining mark, punctuation, whitespace or control, next to final sigmas, marks and CJK.
    (Every code point in more contexts was checked once, outside the suite: 5 minutes.)"""
    interesting = [chr(cp) for cp in range(0x80, 0x10000)
                   if chr(cp).lower() != chr(cp) or unicodedata.decomposition(chr(cp))
                   or unicodedata.category(chr(cp))[0] in "MPZC"]
    assert len(interesting) > 5000
    reference = tokenizers.BasicTokenizer(do_lower_case)
    for context in ("A{c}b", "ΑΣ{c} x", "中{c}\u0301", "a\u0301{c}Σ."):
        for start in range(0, len(interesting), 200):
            line = " ".join(context.format(c=c) for c in interesting[start:start + 200])
            assert fast_basic.basic_tokens(line, do_lower_case) == reference.tokenize(line), line
