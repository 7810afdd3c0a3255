"""Data augmentation with a masked LM: candidates are whole words the model ranks highest, the
same seed writes the same bytes, Chinese varies per character, and the written files are a
custom classification task that reads back as the originals plus their copies."""

import random

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.errors import UserError
from bert_tf.model import models
from bert_tf.model.config import BertConfig
from bert_tf.tasks.classifier import processors as classification
from bert_tf.tasks.classifier.family import CLASSIFIER
from bert_tf.tasks.classifier.task import ClassifierOptions
from bert_tf.workflows.distillation import augmentation

WORDS = ["the", "film", "was", "good", "bad", "great", "awful", "story", "music", "##s", "##ing",
         "张", "三", "在", "北", "京", "工", "作", "上", "海", "."]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]"] + WORDS


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny random BERT with its masked-LM head, saved as a bert_tf checkpoint."""
    directory = tmp_path_factory.mktemp("mlm")
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=19, max_position_embeddings=32,
                        type_vocab_size=2)
    config.to_json_file(str(directory / "bert_config.json"))
    tf.keras.utils.set_random_seed(4)
    model = models.pretraining_model(config)
    tf.train.Checkpoint(model=model).write(str(directory / "ckpt-1"))
    candidates = augmentation.MaskedLmCandidates(str(directory / "ckpt-1"),
                                                 str(directory / "vocab.txt"), True, top_k=3)
    return directory, model, candidates


def test_candidates_are_the_masked_lms_best_whole_words(checkpoint):
    _, model, candidates = checkpoint
    words = ["the", "film", "was", "good"]
    found = candidates(words)
    # Reference: mask word 1 and rank the logits by hand.
    ids = [VOCAB.index(t) for t in ["[CLS]", "the", "[MASK]", "was", "good", "[SEP]"]]
    logits = model({"input_ids": tf.constant([ids]), "input_mask": tf.ones([1, 6], tf.int32),
                    "segment_ids": tf.zeros([1, 6], tf.int32),
                    "masked_lm_positions": tf.constant([[2]])})["masked_lm_logits"][0, 0].numpy()
    ranked = [VOCAB[i] for i in np.argsort(-logits)
              if not VOCAB[i].startswith(("[", "##")) and VOCAB[i] != "film"]
    assert found[1] == ranked[:3]
    assert all(len(c) == 3 and w not in c for w, c in zip(words, found))


def test_same_seed_same_text_and_probability_bounds(checkpoint):
    _, _, candidates = checkpoint
    text = "The film was good . the music was great"

    def variants(seed, probability):
        return augmentation.augment_text(text, candidates.words, candidates, 4, probability,
                                         random.Random(seed))
    assert variants(1, 0.4) == variants(1, 0.4)
    assert variants(1, 0.4) != variants(2, 0.4)
    assert variants(1, 0.0) == ["the film was good . the music was great"] * 4
    words = candidates.words(text)
    options = candidates(words)
    for variant in variants(3, 1.0):
        replaced = candidates.words(variant)  # CJK replacements are joined without spaces
        assert len(replaced) == len(words)
        assert all(new in option for new, option in zip(replaced, options))


def test_chinese_varies_per_character(checkpoint):
    _, _, candidates = checkpoint
    text = "张三在北京工作"
    variants = augmentation.augment_text(text, candidates.words, candidates, 6, 0.5,
                                         random.Random(0))
    options = candidates(list(text))
    assert any(v != text for v in variants)
    for variant in variants:
        # The same number of units, each the original character or one of its candidates;
        # CJK units are joined without spaces.
        units = candidates.words(variant)
        assert len(units) == len(text)
        assert all(u == c or u in o for u, c, o in zip(units, text, options))
        assert " " not in variant or any(not augmentation._is_cjk(u) for u in units)


def test_augmented_files_read_back_as_a_custom_task(checkpoint, tmp_path):
    directory, _, candidates = checkpoint
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.tsv").write_text("sentence\tlabel\nthe film was good .\t1\nthe music was "
                                    "awful .\t0\n", encoding="utf-8")
    (data / "dev.tsv").write_text("sentence\tlabel\nthe story was great .\t1\n",
                                  encoding="utf-8")
    options = ClassifierOptions(task_name="custom", data_dir=str(data), custom_spec={
        "text_a": "sentence", "label": "label", "labels": ["1", "0"]})
    settings = {"seed": 7}
    augmented_options = augmentation.augmented_options(
        CLASSIFIER, options, str(tmp_path / "aug"), lambda: candidates, 3, 0.5, 7, settings)
    assert augmented_options.data_dir == str(tmp_path / "aug")
    spec = augmented_options.custom_spec
    augmented = classification.custom_task(spec)
    assert augmented.labels == ("1", "0")
    train = classification.read_examples(augmented, str(tmp_path / "aug"), "train")
    assert len(train) == 2 * (1 + 3)
    assert [e.label for e in train] == ["1"] * 4 + ["0"] * 4
    assert train[0].text_a == "the film was good ."
    assert [e.text_a for e in classification.read_examples(augmented, str(tmp_path / "aug"),
                                                           "dev")] == ["the story was great ."]
    first = (tmp_path / "aug" / "train.tsv").read_bytes()
    # The same settings: kept as written (the masked LM is not even built).
    again = augmentation.augmented_options(
        CLASSIFIER, options, str(tmp_path / "aug"), lambda: pytest.fail("rebuilt"), 3, 0.5, 7,
        settings)
    assert again.custom_spec == spec and (tmp_path / "aug" / "train.tsv").read_bytes() == first


def test_a_checkpoint_without_masked_lm_head_is_refused(tmp_path):
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=19, max_position_embeddings=32)
    config.to_json_file(str(tmp_path / "bert_config.json"))
    tf.train.Checkpoint(model=models.classifier_model(config, 2)).write(str(tmp_path / "ckpt-1"))
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    with pytest.raises(UserError, match="no masked-LM head"):
        augmentation.MaskedLmCandidates(str(tmp_path / "ckpt-1"), str(tmp_path / "vocab.txt"),
                                        True)
