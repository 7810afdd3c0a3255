"""Task readers on files in their real GLUE/XNLI layouts, custom tasks, errors, feature packing."""

import dataclasses
import json
import os

import numpy as np
import pytest

from bert_tf.tasks.classifier import features as feats
from bert_tf.tasks.classifier import processors as cls
from conftest import TESTDATA
from support.vocabularies import wordpiece_tokenizer

GLUE = os.path.join(TESTDATA, "glue")
VOCAB = os.path.join(GLUE, "vocab.txt")

# (task, directory, split, number of examples, first example (text_a, text_b, label)).
CASES = [
    ("cola", "CoLA", "train", 3, ("The cat sat on the mat.", None, "1")),
    ("cola", "CoLA", "dev", 2, ("Ran dog a.", None, "0")),
    ("cola", "CoLA", "test", 2, ("The cat ran.", None, None)),
    ("sst-2", "SST-2", "train", 2, ("a good film ", None, "1")),
    ("sst-2", "SST-2", "test", 1, ("not a good film .", None, None)),
    ("mrpc", "MRPC", "train", 2, ("The cat sat.", "A cat was sitting.", "1")),
    ("mrpc", "MRPC", "dev", 1, ("He left early.", "He went home early.", "1")),
    ("mrpc", "MRPC", "test", 1, ("She sang.", "She was singing.", None)),
    ("qqp", "QQP", "train", 2, ("How do I cook rice?", "What is the way to cook rice?", "1")),
    ("qqp", "QQP", "dev", 1, ("What is rain?", "What causes rain?", "0")),
    ("qqp", "QQP", "test", 1, ("How old is the sun?", "What is the age of the sun?", None)),
    ("qnli", "QNLI", "train", 2, ("Where is the cat?", "The cat is on the mat.", "entailment")),
    ("qnli", "QNLI", "test", 1, ("Who sang?", "She sang.", None)),
    ("rte", "RTE", "train", 2, ("The dog ran home.", "The dog ran.", "entailment")),
    ("rte", "RTE", "test", 1, ("He sings.", "He is quiet.", None)),
    ("wnli", "WNLI", "dev", 1, ("The box did not fit in the bag because it was big.",
                                "The box was big.", "1")),
    ("wnli", "WNLI", "test", 1, ("The man lifted the boy because he was strong.",
                                 "The man was strong.", None)),
    ("mnli", "MNLI", "train", 2, ("The cat sat.", "A cat sat.", "entailment")),
    ("mnli", "MNLI", "dev", 1, ("The dog slept.", "The dog was tired.", "neutral")),
    ("mnli", "MNLI", "test", 1, ("The sun rose.", "It was morning.", None)),
    ("mnli-mm", "MNLI", "dev", 1, ("She sang loudly.", "She sang.", "entailment")),
    ("mnli-mm", "MNLI", "test", 1, ("The plane landed.", "The plane flew.", None)),
    ("sts-b", "STS-B", "train", 6, ("A man is playing a flute.", "A man plays the flute.", 4.8)),
    ("sts-b", "STS-B", "dev", 4, ("A girl sings.", "A girl is singing.", 5.0)),
    ("sts-b", "STS-B", "test", 1, ("A boy runs.", "A child is running.", None)),
    ("xnli", "XNLI", "train", 2, ("猫坐着。", "一只猫坐着。", "entailment")),
    ("xnli", "XNLI", "dev", 2, ("她唱歌。", "她在唱歌。", "entailment")),
    ("xnli", "XNLI", "test", 1, ("狗睡了。", "狗累了。", None)),
]


@pytest.mark.parametrize("task_name,directory,split,count,first", CASES)
def test_glue_layouts(task_name, directory, split, count, first):
    examples = cls.read_examples(cls.get_task(task_name), os.path.join(GLUE, directory), split)
    assert len(examples) == count
    assert (examples[0].text_a, examples[0].text_b, examples[0].label) == first


def test_tsv_is_read_without_quote_handling():
    examples = cls.read_examples(cls.get_task("mrpc"), os.path.join(GLUE, "MRPC"), "train")
    assert examples[1].text_b == 'It rained "all" day.'


def test_xnli_language_filter_and_label_alias():
    task = cls.get_task("xnli")
    train = cls.read_examples(task, os.path.join(GLUE, "XNLI"), "train")
    assert [ex.label for ex in train] == ["entailment", "contradiction"]
    dev = cls.read_examples(task, os.path.join(GLUE, "XNLI"), "dev")
    assert [ex.label for ex in dev] == ["entailment", "contradiction"]  # the "en" row is dropped
    french = cls.get_task("xnli", xnli_language="fr")
    assert cls.read_examples(french, os.path.join(GLUE, "XNLI"), "test")[0].text_a == "Le chien dort."
    assert [ex.label for ex in cls.read_examples(french, os.path.join(GLUE, "XNLI"), "train")] == ["neutral"]


def test_task_properties():
    assert cls.get_task("STS-B").num_labels == 1 and cls.get_task("sts-b").regression
    assert cls.get_task("mnli").labels == ("contradiction", "entailment", "neutral")
    assert cls.get_task("cola").metrics == ("accuracy", "mcc")
    assert cls.get_task("mrpc").metrics == cls.get_task("qqp").metrics == ("accuracy", "f1")
    assert cls.get_task("sts-b").metrics == ("pearson", "spearman")
    assert cls.get_task("sst2").name == "sst-2"
    with pytest.raises(ValueError, match="unknown --task_name 'glue'.*cola"):
        cls.get_task("glue")


def _write(tmp_path, name, text):
    (tmp_path / name).write_text(text, encoding="utf-8")


def test_custom_csv_named_columns_and_inferred_labels(tmp_path):
    _write(tmp_path, "train.csv", 'id,review,stars\n1,"great, really",10\n2,poor,2\n3,fine,10\n')
    _write(tmp_path, "dev.csv", 'id,review,stars\n4,"said ""wow""",2\n')
    _write(tmp_path, "test.csv", 'review\nok\n')
    task = cls.custom_task({"format": "csv", "text_a": "review", "label": "stars"})
    task = cls.infer_labels(task, str(tmp_path))
    assert task.labels == ("2", "10")  # numeric order, not string order
    train = cls.read_examples(task, str(tmp_path), "train")
    assert (train[0].text_a, train[0].label) == ("great, really", "10")
    assert cls.read_examples(task, str(tmp_path), "dev")[0].text_a == 'said "wow"'
    test = cls.read_examples(task, str(tmp_path), "test")
    assert (test[0].text_a, test[0].label) == ("ok", None)


def test_custom_tsv_indices_no_header_regression_and_spec_file(tmp_path):
    _write(tmp_path, "a.tsv", "x\ty\t0.5\nu\tv\t1.5\n")
    _write(tmp_path, "test.tsv", "9\tx\ty\n")
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps({
        "header": False, "text_a": 0, "text_b": 1, "label": 2, "regression": True,
        "train_file": "a.tsv", "test": {"text_a": 1, "text_b": 2}}))
    task = cls.get_task("custom", custom_spec=cls.load_task_spec(str(spec_path)))
    assert task.num_labels == 1 and task.metrics == ("pearson", "spearman")
    assert cls.infer_labels(task, str(tmp_path)) is task
    assert [ex.label for ex in cls.read_examples(task, str(tmp_path), "train")] == [0.5, 1.5]
    test = cls.read_examples(task, str(tmp_path), "test")[0]
    assert (test.text_a, test.text_b, test.label) == ("x", "y", None)


@pytest.mark.parametrize("spec,message", [
    ({"text_a": 0, "label": 1, "colour": "red"}, "unknown key.*colour"),
    ({"label": 1}, "'text_a'.*required"),
    ({"text_a": 0}, "'label'.*required"),
    ({"text_a": 0, "label": 1, "format": "xlsx"}, "format must be"),
    ({"text_a": 0, "label": 1, "test": {"labels": []}}, "'test' may only override"),
    ({"text_a": 0, "label": 1, "regression": True, "metrics": ["accuracy"]},
     r"must be among \['pearson', 'spearman'\] for a regression"),
    ({"text_a": 0, "label": 1, "metrics": ["auc"]}, "must be among"),
])
def test_custom_spec_errors(spec, message):
    with pytest.raises(ValueError, match=message):
        cls.custom_task(spec)


def test_reader_errors_name_file_and_line(tmp_path):
    mrpc = cls.get_task("mrpc")
    with pytest.raises(FileNotFoundError, match=r"train\.tsv: file not found.*'mrpc'"):
        cls.read_examples(mrpc, str(tmp_path), "train")
    _write(tmp_path, "train.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\ta\tb\n"
                                  "0\t3\t4\tonly four columns\n")
    with pytest.raises(ValueError, match=r"train\.tsv:3: expected at least 5 columns, found 4"):
        cls.read_examples(mrpc, str(tmp_path), "train")
    _write(tmp_path, "dev.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n\n2\t1\t2\ta\tb\n")
    with pytest.raises(ValueError, match=r"dev\.tsv:3: unknown label '2'.*\['0', '1'\]"):
        cls.read_examples(mrpc, str(tmp_path), "dev")
    _write(tmp_path, "test.tsv", "index\tgenre\tf\ty\to\ts1\ts2\ta\tb\tscore\n0\tg\tf\ty\to\ts\ts\ta\tb\tn/a\n")
    stsb = cls.get_task("sts-b")
    labeled_test = dataclasses.replace(stsb.splits["train"], filename="test.tsv")
    stsb = dataclasses.replace(stsb, splits={**stsb.splits, "test": labeled_test})
    with pytest.raises(ValueError, match=r"test\.tsv:2: the score 'n/a' is not a number"):
        cls.read_examples(stsb, str(tmp_path), "test")


def test_column_name_errors(tmp_path):
    _write(tmp_path, "train.tsv", "text\tlabel\nhi\t1\n")
    with pytest.raises(ValueError, match=r"train\.tsv:1: no column named 'sentence'.*\['text', 'label'\]"):
        cls.read_examples(cls.custom_task({"text_a": "sentence", "label": "label"}), str(tmp_path), "train")
    with pytest.raises(ValueError, match="has no header row; give a 0-based index"):
        cls.read_examples(cls.custom_task({"text_a": "text", "label": 1, "header": False}),
                          str(tmp_path), "train")
    _write(tmp_path, "one.tsv", "text\tlabel\nhi\t1\nho\t1\n")
    with pytest.raises(ValueError, match="found 1 distinct label"):
        cls.infer_labels(cls.custom_task({"text_a": 0, "label": 1, "train_file": "one.tsv"}), str(tmp_path))
    with pytest.raises(ValueError, match="label list is not known"):
        cls.custom_task({"text_a": 0, "label": 1}).num_labels


# --- feature packing -------------------------------------------------------------------------

tokenizer = wordpiece_tokenizer(VOCAB, do_lower_case=True)


def _task(labels=("a", "b"), regression=False):
    return cls.TaskSpec("t", labels, {}, regression=regression)


def test_single_sentence_packing(tokenizer):
    examples = [cls.InputExample("0", "The cats sat on the mat.", None, "b"),
                cls.InputExample("1", "It rained, the dog ran.", None, None)]
    f = feats.convert_examples(examples, _task(), 8, tokenizer)
    # [CLS] the cat ##s sat on the (trimmed to S-2 = 6) [SEP]
    np.testing.assert_array_equal(f["input_ids"][0], [2, 5, 6, 14, 7, 8, 5, 3])
    # [CLS] it rain ##ed [UNK](,) the dog [SEP]
    np.testing.assert_array_equal(f["input_ids"][1], [2, 16, 17, 18, 1, 5, 12, 3])
    np.testing.assert_array_equal(f["segment_ids"], np.zeros((2, 8)))
    np.testing.assert_array_equal(f["input_mask"], np.ones((2, 8)))
    np.testing.assert_array_equal(f["label_ids"], [1, 0])
    assert f["label_ids"].dtype == np.int32 and f["input_ids"].dtype == np.int32
    np.testing.assert_array_equal(f["is_real_example"], [1, 1])


def test_pair_packing_and_padding(tokenizer):
    examples = [cls.InputExample("0", "A dog ran.", "It rained.", "a")]
    f = feats.convert_examples(examples, _task(), 14, tokenizer)
    np.testing.assert_array_equal(f["input_ids"][0], [2, 11, 12, 13, 10, 3, 16, 17, 18, 10, 3, 0, 0, 0])
    np.testing.assert_array_equal(f["segment_ids"][0], [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0])
    np.testing.assert_array_equal(f["input_mask"][0], [1] * 11 + [0] * 3)


def test_pair_trimming_takes_from_the_longer_end(tokenizer):
    # a = the cat ##s sat on the mat . (8), b = it rain ##ed (3); S=10 leaves 7: a keeps 4, b 3.
    f = feats.convert_examples([cls.InputExample("0", "The cats sat on the mat.", "It rained", "a")],
                               _task(), 10, tokenizer)
    np.testing.assert_array_equal(f["input_ids"][0], [2, 5, 6, 14, 7, 3, 16, 17, 18, 3])
    np.testing.assert_array_equal(f["segment_ids"][0], [0] * 6 + [1] * 4)
    # Equal lengths trim b first: a = b = "the cat ##s sat" (4 each), S=8 leaves 5: a 3, b 2.
    f = feats.convert_examples([cls.InputExample("0", "the cats sat", "the cats sat", "a")],
                               _task(), 8, tokenizer)
    np.testing.assert_array_equal(f["input_ids"][0], [2, 5, 6, 14, 3, 5, 6, 3])


def test_regression_labels_and_errors(tokenizer):
    f = feats.convert_examples([cls.InputExample("0", "a", "b", 3.25), cls.InputExample("1", "a", None, None)],
                               _task(None, regression=True), 6, tokenizer)
    assert f["label_ids"].dtype == np.float32
    np.testing.assert_array_equal(f["label_ids"], [3.25, 0.0])
    with pytest.raises(ValueError, match="at least 3"):
        feats.convert_examples([], _task(), 2, tokenizer)
    with pytest.raises(ValueError, match="label list is not known"):
        feats.convert_examples([], _task(None), 8, tokenizer)


def test_fingerprint_tracks_every_input(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.tsv").write_text("sentence\tlabel\na good film\t1\n")
    vocab2 = tmp_path / "vocab2.txt"
    vocab2.write_text(open(VOCAB).read() + "extra\n")
    task = cls.get_task("sst-2")

    def fp(**kw):
        args = dict(task=task, split="train", data_dir=str(data), max_seq_length=128,
                    tokenizer_files=[VOCAB], do_lower_case=True)
        args.update(kw)
        return feats.fingerprint(**args)

    base = fp()
    assert fp() == base
    others = {fp(max_seq_length=64), fp(do_lower_case=False), fp(tokenizer_files=[str(vocab2)]),
              fp(task=cls.get_task("cola"))}
    assert base not in others and len(others) == 4
    (data / "train.tsv").write_text("sentence\tlabel\na good film\t0\n")
    assert fp() != base


def test_padding_count():
    assert [feats.padding_count(n, 8) for n in (0, 1, 8, 9, 15, 16)] == [0, 7, 0, 7, 1, 0]


def test_spec_from_flags():
    spec = cls.spec_from_flags("1", "label", text_b_column="question", has_header=True,
                               file_format="csv", label_list=["no", "yes"])
    assert spec == {"format": "csv", "header": True, "text_a": 1, "label": "label",
                    "regression": False, "text_b": "question", "labels": ["no", "yes"]}
    task = cls.custom_task(spec)
    assert task.labels == ("no", "yes") and task.splits["train"].filename == "train.csv"
    with pytest.raises(ValueError, match="needs --text_a_column and --label_column"):
        cls.spec_from_flags(None, "label")


def test_bundled_custom_spec_reads_the_demo_set_like_sst2():
    demo = os.path.join(os.path.dirname(TESTDATA), "..", "demo", "data", "classification")
    custom = cls.get_task("custom", custom_spec=cls.load_task_spec(os.path.join(demo, "custom_spec.json")))
    assert custom.metrics == ("accuracy", "f1")
    for split in cls.SPLITS:
        assert cls.read_examples(custom, demo, split) == cls.read_examples(cls.get_task("sst-2"), demo, split)
    assert len(cls.read_examples(custom, demo, "train")) == 800
