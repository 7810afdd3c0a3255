"""Vocabulary building: hand-worked merges, the original's layout, [UNK] rate, determinism, script."""

import collections
import os

import pytest

from bert_tf.text import testing_text, vocab_builder
from bert_tf.text.sample_text import generate_corpus
from bert_tf.text.vocab_builder import VocabBuildConfig, build_vocab, learn_vocab
from bert_tf.text.tokenizers import FullTokenizer, SentencePieceTokenizer
from conftest import REPO

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# The textbook byte-pair example; merges below were worked out by hand (most frequent pair first,
# ties to the alphabetically first pair, where "#" sorts before letters).
COUNTS = collections.Counter({"low": 5, "lower": 2, "newest": 6, "widest": 3})
ALPHABET = ["l", "n", "w", "##e", "##w", "##s", "##t", "##o", "##d", "##i", "##r"]
MERGES = ["##es", "##est", "##ow", "low", "##ew", "##ewest", "newest", "##dest", "##idest", "widest",
          "##er", "lower"]


def test_learned_merges_match_hand_computation():
    assert learn_vocab(COUNTS, vocab_size=40, num_unused=0, min_frequency=1) == SPECIALS + ALPHABET + MERGES
    # Pairs seen twice are not merged with min_frequency=3; the size limit stops merging early.
    assert learn_vocab(COUNTS, 40, 0, min_frequency=3) == SPECIALS + ALPHABET + MERGES[:-2]
    assert learn_vocab(COUNTS, 27, 0, min_frequency=1) == SPECIALS + ALPHABET + MERGES[:11]


def _naive_merges(counts: collections.Counter, num_merges: int, min_frequency: int) -> list[str]:
    """Recounts every pair from scratch before each merge: slow, obviously right."""
    words = {t: [t[0]] + ["##" + c for c in t[1:]] for t in counts}
    merges = []
    while len(merges) < num_merges:
        pairs = collections.Counter()
        for token, symbols in words.items():
            for pair in zip(symbols, symbols[1:]):
                pairs[pair] += counts[token]
        if not pairs:
            break
        (first, second), count = min(pairs.items(), key=lambda item: (-item[1], item[0]))
        if count < min_frequency:
            break
        piece = first + second[2:]
        for token, symbols in words.items():
            merged, i = [], 0
            while i < len(symbols):
                if symbols[i:i + 2] == [first, second]:
                    merged.append(piece)
                    i += 2
                else:
                    merged.append(symbols[i])
                    i += 1
            words[token] = merged
        merges.append(piece)
    return merges


def test_incremental_pair_counts_match_recounting():
    lines = testing_text.varied_lines(60, seed=9, exotic_rate=0.0, lexicon_size=300)
    counts = collections.Counter(word.lower() for line in lines for word in line.split() if word.isalpha())
    vocab = learn_vocab(counts, vocab_size=10_000, num_unused=0, min_frequency=2)
    alphabet = vocab_builder._alphabet(counts, 10_000)
    learned = vocab[len(SPECIALS) + len(alphabet):]
    expected = list(dict.fromkeys(m for m in _naive_merges(counts, 10_000, 2) if m not in alphabet))
    assert len(learned) > 100 and learned == expected


def test_learned_vocab_round_trips_through_full_tokenizer(tmp_path):
    path = tmp_path / "vocab.txt"
    vocab_builder.write_vocab(learn_vocab(COUNTS, 40, num_unused=2, min_frequency=1), str(path))
    tokenizer = FullTokenizer(path, do_lower_case=True)
    assert list(tokenizer.vocab)[:7] == ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert tokenizer.tokenize("Lowest newer, widest!") == [
        "low", "##est", "n", "##ew", "##er", "[UNK]", "widest", "[UNK]"]  # no "," or "!" was seen


def test_alphabet_is_capped_and_rare_characters_become_unk():
    counts = collections.Counter({chr(0x4E00 + i): 100 - i for i in range(40)})  # 40 one-char words
    vocab = learn_vocab(counts, vocab_size=25, num_unused=0)
    assert vocab == SPECIALS + [chr(0x4E00 + i) for i in range(10)]  # (25 - 5) * 0.5 characters


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Generated multilingual text: 4,000 lines, ~5% awkward pieces, ~330 KB."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    lines = testing_text.varied_lines(4000, seed=11, exotic_rate=0.05, lexicon_size=20_000)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def built(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("built")
    config = VocabBuildConfig(input_file=corpus, output_file=str(out / "vocab.txt"), vocab_size=3000,
                              num_unused=20)
    return config, build_vocab(config)


def test_layout_and_exact_size(built):
    config, stats = built
    with open(config.output_file, encoding="utf-8") as f:
        tokens = f.read().split("\n")
    assert tokens.pop() == ""                             # one token per line, final newline
    assert len(tokens) == 3000 == stats["vocab_size"] and len(set(tokens)) == 3000
    assert tokens[:22] == ["[PAD]"] + [f"[unused{i}]" for i in range(20)] + ["[UNK]"]
    assert tokens[22:25] == ["[CLS]", "[SEP]", "[MASK]"]
    single = [t for t in tokens[25:] if len(t.removeprefix("##")) == 1]
    assert tokens[25:25 + len(single)] == single          # characters come before learned pieces
    first_hash = next(i for i, t in enumerate(single) if t.startswith("##"))
    assert all(t.startswith("##") for t in single[first_hash:])  # word starts, then ## forms


def test_unk_rate_on_its_own_text_is_low(built, corpus):
    config, stats = built
    tokenizer = FullTokenizer(config.output_file, do_lower_case=True)
    with open(corpus, encoding="utf-8") as f:
        tokens = [t for line in f for t in tokenizer.tokenize(line)]
    unknown = tokens.count("[UNK]")
    assert unknown / len(tokens) < 0.005
    assert (stats["tokens"], stats["unk_tokens"]) == (len(tokens), unknown)  # the printed figures
    assert stats["tokens_per_word"] < 1.6


def test_same_text_same_vocab(built, corpus, tmp_path):
    config, _ = built
    again = VocabBuildConfig(input_file=corpus, output_file=str(tmp_path / "vocab.txt"),
                             vocab_size=3000, num_unused=20)
    build_vocab(again)
    with open(config.output_file, "rb") as a, open(again.output_file, "rb") as b:
        assert a.read() == b.read()


def test_small_text_gives_a_smaller_vocab(tmp_path):
    text = tmp_path / "tiny.txt"
    text.write_text("the cat sat on the mat\nthe cat ate\n")
    stats = build_vocab(VocabBuildConfig(input_file=str(text), output_file=str(tmp_path / "v.txt"),
                                         vocab_size=1000, num_unused=0))
    assert stats["vocab_size"] < 1000 and stats["unk_tokens"] == 0


def test_config_and_input_errors(tmp_path):
    with pytest.raises(ValueError, match="--vocab_size=104 leaves no room"):
        VocabBuildConfig(input_file="x", output_file="y", vocab_size=104)
    with pytest.raises(ValueError, match="--num_unused"):
        VocabBuildConfig(input_file="x", output_file="y", num_unused=-1)
    with pytest.raises(FileNotFoundError, match="--input_file"):
        build_vocab(VocabBuildConfig(input_file=str(tmp_path / "none*.txt"), output_file="y"))
    (tmp_path / "blank.txt").write_text("\n \n")
    with pytest.raises(ValueError, match="no words"):
        build_vocab(VocabBuildConfig(input_file=str(tmp_path / "blank.txt"), output_file="y"))


def test_script_writes_vocab_and_sentencepiece_model(corpus, tmp_path, script_runner):
    out = tmp_path / "out"
    [result] = script_runner.run_all([(
        [os.path.join(REPO, "build_vocab.py"), f"--input_file={corpus}",
         f"--output_file={out}/vocab.txt", "--vocab_size=2500", "--do_lower_case=False",
         f"--spm_model_prefix={out}/spm"], str(tmp_path))])
    assert result.returncode == 0, result.stderr
    printed = dict(line.split(": ", 1) for line in result.stdout.splitlines())
    assert printed["vocab_size"] == "2500" and float(printed["unk_rate"].rstrip("%")) < 0.5
    assert sorted(os.listdir(out)) == ["spm.model", "spm.vocab", "vocab.txt"]  # no temporaries left
    assert FullTokenizer(out / "vocab.txt", do_lower_case=False).tokenize("Ka") != ["[UNK]"]
    spm = SentencePieceTokenizer(out / "spm.model")
    assert [spm.vocab[t] for t in SPECIALS] == [0, 1, 2, 3, 4]
    assert int(printed["spm_vocab_size"]) == len(spm.vocab)


def test_alphabet_cut_keeps_a_character_in_both_forms_or_not_at_all():
    """`printf 'aaaa bbbb'` with room for 3 characters: never `##b` without `b`."""
    vocab = learn_vocab(collections.Counter({"aaaa": 1, "bbbb": 1}), vocab_size=110, min_frequency=1)
    for char in "ab":
        assert (char in vocab) == (f"##{char}" in vocab), vocab[104:]
    assert {"a", "##a"} <= set(vocab)
    tokenizer_vocab = learn_vocab(collections.Counter({"aaaa": 3, "bbbb": 2, "ba": 1}), 120, min_frequency=1)
    assert {"a", "##a", "b", "##b"} <= set(tokenizer_vocab)  # no cut: every form kept, as before


def _sentencepiece_lines(rare: str = "~", share: float = 1e-4) -> list[str]:
    lines = [line for line in generate_corpus(num_docs=40, seed=5).splitlines() if line.strip()]
    chars = sum(len(line) for line in lines)
    count = max(1, int(chars * share))
    return lines + [f"price {rare} {i}" for i in range(count)]


def test_sentencepiece_keeps_characters_as_albert_does_and_builds_identical_bytes(tmp_path):
    lines = _sentencepiece_lines()
    first = vocab_builder.train_sentencepiece(lines, str(tmp_path / "a" / "spm"), 300, True)
    again = vocab_builder.train_sentencepiece(lines, str(tmp_path / "b" / "spm"), 300, True)
    for suffix in (".model", ".vocab"):
        a, b = (path.removesuffix(".model") + suffix for path in (first, again))
        assert open(a, "rb").read() == open(b, "rb").read(), a
    assert sorted(os.listdir(tmp_path / "a")) == ["spm.model", "spm.vocab"]
    kept = SentencePieceTokenizer(first)
    assert "[UNK]" not in kept.tokenize("price ~ 3")
    dropped = vocab_builder.train_sentencepiece(lines, str(tmp_path / "c" / "spm"), 300, True,
                                                character_coverage=0.9995)  # SentencePiece's default
    assert "[UNK]" in SentencePieceTokenizer(dropped).tokenize("price ~ 3")
