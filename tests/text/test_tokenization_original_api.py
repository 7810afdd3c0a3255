"""The original tokenization.py's public names, with every case of its tokenization_test.py
(the same inputs and expectations), plus the names that test did not reach."""

import pytest

from bert_tf import tokenization

VOCAB = ["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing"]

ORIGINAL_PUBLIC_NAMES = (
    "validate_case_matches_checkpoint", "convert_to_unicode", "printable_text", "load_vocab",
    "convert_by_vocab", "convert_tokens_to_ids", "convert_ids_to_tokens", "whitespace_tokenize",
    "FullTokenizer", "BasicTokenizer", "WordpieceTokenizer")


def test_every_public_name_of_the_original_module():
    missing = [name for name in ORIGINAL_PUBLIC_NAMES if not hasattr(tokenization, name)]
    assert missing == []


@pytest.mark.parametrize("fast", [True, False])
def test_full_tokenizer(tmp_path, fast):
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_bytes("".join(token + "\n" for token in VOCAB + [","]).encode("utf-8"))
    tokenizer = tokenization.FullTokenizer(str(vocab_file), fast=fast)
    tokens = tokenizer.tokenize("UNwant\u00E9d,running")
    assert tokens == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert tokenizer.convert_tokens_to_ids(tokens) == [7, 4, 5, 10, 8, 9]
    assert tokenizer.convert_ids_to_tokens([7, 4, 5, 10, 8, 9]) == tokens


def test_chinese():
    assert tokenization.BasicTokenizer().tokenize("ah\u535A\u63A8zz") == ["ah", "\u535A", "\u63A8", "zz"]


def test_basic_tokenizer_lower():
    tokenizer = tokenization.BasicTokenizer(do_lower_case=True)
    assert tokenizer.tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["hello", "!", "how", "are", "you", "?"]
    assert tokenizer.tokenize("H\u00E9llo") == ["hello"]


def test_basic_tokenizer_no_lower():
    tokenizer = tokenization.BasicTokenizer(do_lower_case=False)
    assert tokenizer.tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["HeLLo", "!", "how", "Are", "yoU", "?"]


def test_wordpiece_tokenizer():
    tokenizer = tokenization.WordpieceTokenizer(vocab={t: i for i, t in enumerate(VOCAB)})
    assert tokenizer.tokenize("") == []
    assert tokenizer.tokenize("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
    assert tokenizer.tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]


def test_convert_tokens_to_ids_and_back():
    vocab = {t: i for i, t in enumerate(VOCAB)}
    tokens = ["un", "##want", "##ed", "runn", "##ing"]
    assert tokenization.convert_tokens_to_ids(vocab, tokens) == [7, 4, 5, 8, 9]
    inv_vocab = {i: t for t, i in vocab.items()}
    assert tokenization.convert_ids_to_tokens(inv_vocab, [7, 4, 5, 8, 9]) == tokens
    assert tokenization.convert_by_vocab(vocab, ["wa"]) == [6]
    with pytest.raises(KeyError):
        tokenization.convert_by_vocab(vocab, ["nope"])


def test_is_whitespace():
    for char in (" ", "\t", "\r", "\n", "\u00A0"):
        assert tokenization._is_whitespace(char)
    assert not tokenization._is_whitespace("A") and not tokenization._is_whitespace("-")


def test_is_control():
    assert tokenization._is_control("\u0005")
    for char in ("A", " ", "\t", "\r", "\U0001F4A9"):
        assert not tokenization._is_control(char)


def test_is_punctuation():
    for char in ("-", "$", "`", "."):
        assert tokenization._is_punctuation(char)
    assert not tokenization._is_punctuation("A") and not tokenization._is_punctuation(" ")


def test_unicode_and_printable_text():
    assert tokenization.convert_to_unicode(b"caf\xc3\xa9\xff") == "café"  # bad bytes dropped
    assert tokenization.printable_text(b"caf\xc3\xa9") == "café"
    assert tokenization.printable_text("déjà") == "déjà"
    assert tokenization.whitespace_tokenize("  a b\tc\n") == ["a", "b", "c"]
