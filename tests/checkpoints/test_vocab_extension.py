"""Vocabulary extension: [unusedN] slots and appended rows, on tiny exported checkpoints (BERT with\nWordPiece, ALBERT with SentencePiece)."""

import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import name_map as checkpoints
from bert_tf.checkpoints.model_config import load_model_config
from bert_tf.checkpoints.vocab_extension import extend_vocabulary
from bert_tf.model import models
from bert_tf.model.albert.config import AlbertConfig
from bert_tf.model.config import BertConfig
from bert_tf.text.tokenizers import FullTokenizer, SentencePieceTokenizer
from conftest import REPO

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]", "[unused1]", "[unused2]",
         "the", "cat", "sat", "on", "mat", "##s", ".", ","]


@pytest.fixture
def source(tmp_path):
    """A pretraining checkpoint in the original layout with a 16-token vocabulary."""
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=4, intermediate_size=37, max_position_embeddings=16,
                        type_vocab_size=2)
    model = models.pretraining_model(config)
    model.masked_lm.output_bias.assign(np.arange(len(VOCAB), dtype=np.float32))
    (tmp_path / "vocab.txt").write_text("".join(t + "\n" for t in VOCAB))
    checkpoints.export_google_checkpoint(model, str(tmp_path / "src" / "bert_model.ckpt"),
                                         vocab_file=tmp_path / "vocab.txt")
    return tmp_path / "src", config


def _arrays(directory, prefix="bert_model.ckpt"):
    reader = tf.train.load_checkpoint(str(directory / prefix))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def test_unused_slots_take_the_new_tokens_and_keep_the_checkpoint(source, tmp_path):
    src, config = source
    result = extend_vocabulary(str(src), str(src / "vocab.txt"), config, ["covid", "cat", "mrna"],
                               str(tmp_path / "out"))
    assert (result.added, result.already_present, result.vocab_size) == (
        {"covid": 5, "mrna": 6}, ["cat"], 16)
    out = tmp_path / "out"
    assert (out / "vocab.txt").read_text().split("\n")[4:9] == [
        "[MASK]", "covid", "mrna", "[unused2]", "the"]
    assert BertConfig.from_json_file(out / "bert_config.json") == config
    before, after = _arrays(src), _arrays(out)
    assert before.keys() == after.keys()
    for name in before:
        np.testing.assert_array_equal(before[name], after[name], err_msg=name)
    tokenizer = FullTokenizer(out / "vocab.txt", do_lower_case=True)
    assert tokenizer.convert_tokens_to_ids(tokenizer.tokenize("The COVID cats")) == [8, 5, 9, 13]


def test_append_grows_embeddings_and_mlm_bias(source, tmp_path):
    src, config = source
    new = [f"word{i}" for i in range(200)]
    result = extend_vocabulary(str(src), str(src / "vocab.txt"), config, new, str(tmp_path / "out"),
                               mode="append")
    assert result.vocab_size == 216 and result.added["word0"] == 16 and result.added["word199"] == 215
    out = tmp_path / "out"
    assert (out / "vocab.txt").read_text().split("\n")[:-1] == VOCAB + new
    new_config = BertConfig.from_json_file(out / "bert_config.json")
    assert new_config == config.replace(vocab_size=216)
    before, after = _arrays(src), _arrays(out)
    table = after["bert/embeddings/word_embeddings"]
    assert table.shape == (216, 32)
    np.testing.assert_array_equal(table[:16], before["bert/embeddings/word_embeddings"])
    rows = table[16:]
    assert np.abs(rows).max() <= 2 * 0.02 and 0.013 < rows.std() < 0.02  # truncated at 2 stddev
    np.testing.assert_array_equal(after["cls/predictions/output_bias"],
                                  np.r_[np.arange(16), np.zeros(200)])
    for name in before.keys() - {"bert/embeddings/word_embeddings", "cls/predictions/output_bias"}:
        np.testing.assert_array_equal(before[name], after[name], err_msg=name)
    model = models.pretraining_model(new_config)
    report = checkpoints.init_from_checkpoint(model, out)
    assert report.missing == [] and report.unused == []


def test_refusals(source, tmp_path):
    src, config = source
    with pytest.raises(ValueError, match="3 \\[unusedN\\] slots for 4 new tokens; use mode 'append'"):
        extend_vocabulary(str(src), str(src / "vocab.txt"), config, ["a1", "b2", "c3", "d4"],
                          str(tmp_path / "out"))
    with pytest.raises(ValueError, match="'Covid' can never be produced.*\\['covid'\\]"):
        extend_vocabulary(str(src), str(src / "vocab.txt"), config, ["Covid"], str(tmp_path / "out"))
    with pytest.raises(ValueError, match="checkpoint's own directory"):
        extend_vocabulary(str(src), str(src / "vocab.txt"), config, ["x"], str(src))
    with pytest.raises(ValueError, match="has 16 tokens but vocab_size is 17"):
        extend_vocabulary(str(src), str(src / "vocab.txt"), config.replace(vocab_size=17), ["x"],
                          str(tmp_path / "out"), mode="append")
    assert not (tmp_path / "out").exists()


def test_script_end_to_end(source, tmp_path, script_runner):
    src, _ = source
    (tmp_path / "tokens.txt").write_text("##ing\nzebra\n")
    [done] = script_runner.run_all([(
        [os.path.join(REPO, "extend_vocab.py"), f"--init_checkpoint={src}",
         f"--vocab_file={src / 'vocab.txt'}", f"--bert_config_file={src / 'bert_config.json'}",
         "--new_tokens=covid", f"--new_tokens_file={tmp_path / 'tokens.txt'}", "--mode=append",
         f"--output_dir={tmp_path / 'out'}"], str(tmp_path))])
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["16\tcovid", "17\t##ing", "18\tzebra",
                                        "vocab_size=19; skipped (already present): 0"]
    assert sorted(os.listdir(tmp_path / "out")) == [
        "bert_config.json", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index", "vocab.txt"]


@pytest.fixture
def albert_source(tmp_path):
    """A tiny ALBERT checkpoint in google-research/albert's layout over a 120-piece
    SentencePiece model of the bundled corpus (embedding width E=8, hidden 32)."""
    import sentencepiece

    sentencepiece.SentencePieceTrainer.Train(
        input=os.path.join(REPO, "demo", "data", "corpus.txt"), model_prefix=str(tmp_path / "spm"),
        vocab_size=120, pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, pad_piece="[PAD]",
        unk_piece="[UNK]", control_symbols=["[CLS]", "[SEP]", "[MASK]"], minloglevel=2)
    config = AlbertConfig(vocab_size=120, embedding_size=8, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=4, intermediate_size=37, max_position_embeddings=16)
    model = models.pretraining_model(config)
    model.masked_lm.output_bias.assign(np.arange(120, dtype=np.float32))
    checkpoints.export_google_checkpoint(model, str(tmp_path / "src" / "model.ckpt-best"))
    return tmp_path / "src", str(tmp_path / "spm.model"), config


def test_a_sentencepiece_albert_vocabulary_grows_by_user_defined_pieces(albert_source, tmp_path,
                                                                     script_runner):
    """extend_vocab.py --spm_model_file --albert_config_file: new pieces come out of text whole
    with the new ids, every other text encodes as before, and the [V,E] factorised table and
    the output bias grow by one row per piece."""
    src, spm_model, config = albert_source
    [done] = script_runner.run_all([(
        [os.path.join(REPO, "extend_vocab.py"), f"--init_checkpoint={src}",
         f"--spm_model_file={spm_model}", f"--albert_config_file={src / 'albert_config.json'}",
         "--new_tokens=covid,mrna", "--mode=append", f"--output_dir={tmp_path / 'out'}"],
        str(tmp_path))])
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["120\tcovid", "121\tmrna",
                                        "vocab_size=122; skipped (already present): 0"]
    out = tmp_path / "out"
    assert sorted(os.listdir(out)) == ["albert_config.json", "bert_model.ckpt.data-00000-of-00001",
                                       "bert_model.ckpt.index", "spm.model"]
    new_config = load_model_config(out / "albert_config.json")
    assert new_config == config.replace(vocab_size=122) and isinstance(new_config, AlbertConfig)
    before, after = SentencePieceTokenizer(spm_model), SentencePieceTokenizer(out / "spm.model")
    pieces = after.tokenize("the covid and mrna house")
    assert "covid" in pieces and "mrna" in pieces
    assert after.convert_tokens_to_ids(["covid", "mrna"]) == [120, 121]
    text = "The old house of the city was built by many people."
    assert after.tokenize(text) == before.tokenize(text)
    old, new = _arrays(src, "model.ckpt-best"), _arrays(out)
    table = new["bert/embeddings/word_embeddings"]
    assert table.shape == (122, 8)
    np.testing.assert_array_equal(table[:120], old["bert/embeddings/word_embeddings"])
    np.testing.assert_array_equal(new["cls/predictions/output_bias"],
                                  np.r_[np.arange(120), np.zeros(2)])
    report = checkpoints.init_from_checkpoint(models.pretraining_model(new_config), out)
    assert report.missing == [] and report.unused == []


def test_sentencepiece_refusals(albert_source, tmp_path):
    src, spm_model, config = albert_source
    with pytest.raises(ValueError, match="no \\[unusedN\\] pieces; use --mode=append"):
        extend_vocabulary(str(src), None, config, ["covid"], str(tmp_path / "out"),
                          spm_model_file=spm_model)
    for token in ("Covid", "two words"):
        with pytest.raises(ValueError, match="can never be produced by the SentencePiece"):
            extend_vocabulary(str(src), None, config, [token], str(tmp_path / "out"),
                              mode="append", spm_model_file=spm_model)
    assert not (tmp_path / "out").exists()
