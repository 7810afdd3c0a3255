"""Multiple-choice files read (SWAG's CSV, JSON lines, their one-line errors) and packed as the
original run_swag packs a choice (its `_truncate_seq_pair` loop as the reference)."""

import json

import numpy as np
import pytest

from bert_tf.errors import UserError
from bert_tf.tasks.multiple_choice import data

SWAG_HEADER = ("video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,"
               "ending3,label")
SWAG_ROW = ('lsmdc1,17,"Someone opens it. He","Someone opens it.",He,gold,'
            'looks inside.,"runs away, fast.",sits.,sleeps.,1')


def _write(path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_swag_csv_reads_sentences_endings_and_label_ignoring_the_other_columns(tmp_path):
    [example] = data.read_examples(_write(tmp_path / "val.csv", f"{SWAG_HEADER}\n{SWAG_ROW}\n"))
    assert example == data.Example("0", "Someone opens it.", "He",
                                   ("looks inside.", "runs away, fast.", "sits.", "sleeps."), 1)


def test_unlabelled_swag_test_file_has_no_labels(tmp_path):
    header = SWAG_HEADER.rsplit(",", 1)[0]
    row = SWAG_ROW.rsplit(",", 1)[0]
    [example] = data.read_examples(_write(tmp_path / "test.csv", f"{header}\n{row}\n"))
    assert example.label is None and example.endings[3] == "sleeps."


def test_json_lines_with_and_without_stem(tmp_path):
    lines = [{"context": "a b", "stem": "c", "choices": ["x", "y", "z"], "label": 2},
             {"context": "d", "choices": ["u", "v", "w"]}]
    examples = data.read_examples(_write(tmp_path / "q.jsonl",
                                         "\n".join(json.dumps(x) for x in lines) + "\n\n"))
    assert [(e.context, e.stem, e.endings, e.label) for e in examples] == [
        ("a b", "c", ("x", "y", "z"), 2), ("d", "", ("u", "v", "w"), None)]


@pytest.mark.parametrize("name,text,message", [
    ("q.jsonl", '{"context": "a", "choices": ["x", "y"]}\n\n{"context": "b", "choices": ["x"]}',
     "q.jsonl:3: expected"),
    ("q.jsonl", '{"context": "a", "choices": ["x", "y"]}\n{"context": "b", '
     '"choices": ["x", "y", "z"]}', "q.jsonl:2: 3 choices where the file's first question has 2"),
    ("q.jsonl", '{"context": "a", "choices": ["x", "y"], "label": 2}', "q.jsonl:1: label 2 is "
     "outside 0..1"),
    ("q.jsonl", "{not json", "q.jsonl:1: not JSON"),
    ("q.csv", "sent1,sent2,ending0,ending1\n", "q.csv:1: SWAG CSV without column(s) ending2, "
     "ending3"),
    ("q.csv", f"{SWAG_HEADER}\n{SWAG_ROW[:-1]}x\n", "q.csv:2: label 'x' is not a choice index"),
    ("q.csv", f"{SWAG_HEADER}\nv,1,s,a,b\n", "q.csv:2: fewer fields than the header's"),
    ("q.csv", f"{SWAG_HEADER}\n", "q.csv: no questions"),
])
def test_bad_input_is_one_error_naming_file_and_line(tmp_path, name, text, message):
    with pytest.raises(UserError) as error:
        data.read_examples(_write(tmp_path / name, text))
    assert message in str(error.value) and "\n" not in str(error.value)


def _truncate_seq_pair(tokens_a: list, tokens_b: list, max_length: int) -> None:
    """The original's (run_classifier.py / run_swag.py) pair truncation, verbatim."""
    while True:
        total_length = len(tokens_a) + len(tokens_b)
        if total_length <= max_length:
            break
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


class _Words:
    """A tokenizer whose tokens are the words and whose ids are their numbers + 10."""

    def tokenize(self, text: str) -> list[str]:
        return text.split()

    def convert_tokens_to_ids(self, tokens) -> list[int]:
        return [{"[CLS]": 2, "[SEP]": 3}.get(t, None) or int(t) + 10 for t in tokens]


def test_packing_is_the_original_run_swags_choice_by_choice():
    rng = np.random.default_rng(3)
    seq = 12  # an odd number of pieces for the pair: a tie decides which side loses one
    examples = []
    for q in range(30):
        words = lambda n: " ".join(str(w) for w in rng.integers(0, 50, n))  # noqa: E731
        examples.append(data.Example(str(q), words(rng.integers(0, 12)), words(rng.integers(0, 4)),
                                     tuple(words(rng.integers(1, 9)) for _ in range(3)), q % 3))
    packed = data.convert_examples(examples, seq, _Words(), pad_to_multiple=8)
    assert packed["input_ids"].shape == (32, 3, seq)
    assert packed["is_real_example"].tolist() == [1] * 30 + [0, 0]
    assert packed["label_ids"][:30].tolist() == [q % 3 for q in range(30)]
    for q, example in enumerate(examples):
        for c, ending in enumerate(example.endings):
            tokens_a = example.context.split()
            tokens_b = example.stem.split() + ending.split()
            _truncate_seq_pair(tokens_a, tokens_b, seq - 3)
            tokens = ["[CLS]", *tokens_a, "[SEP]", *tokens_b, "[SEP]"]
            segments = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
            ids = _Words().convert_tokens_to_ids(tokens)
            pad = [0] * (seq - len(ids))
            assert packed["input_ids"][q, c].tolist() == ids + pad
            assert packed["segment_ids"][q, c].tolist() == segments + pad
            assert packed["input_mask"][q, c].tolist() == [1] * len(ids) + pad
    assert not packed["input_ids"][30:].any()
