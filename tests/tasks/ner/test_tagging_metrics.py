"""Entity-level tagging metrics: hand-computed BIO and BIOES cases, ill-formed sequences decoded
as conlleval decodes them (checked against a tag-by-tag transcription of its rules), exact-span
scores per type and overall, token accuracy."""

import numpy as np
import pytest

from bert_tf.tasks.ner import metrics as tm


def _spans(tags):
    return [tuple(e) for e in tm.entities(tags)]


@pytest.mark.parametrize("tags, spans", [
    ("B-PER I-PER O B-LOC", [("PER", 0, 2), ("LOC", 3, 4)]),
    ("O I-PER I-PER O", [("PER", 1, 3)]),                       # I- without B- starts one
    ("I-PER I-PER B-PER", [("PER", 0, 2), ("PER", 2, 3)]),      # IOB1
    ("B-PER I-LOC I-LOC", [("PER", 0, 1), ("LOC", 1, 3)]),      # a type change splits
    ("B-PER O I-PER", [("PER", 0, 1), ("PER", 2, 3)]),
    ("B-ORG B-ORG", [("ORG", 0, 1), ("ORG", 1, 2)]),
    ("S-PER B-LOC I-LOC E-LOC S-LOC", [("PER", 0, 1), ("LOC", 1, 4), ("LOC", 4, 5)]),
    ("E-PER E-PER", [("PER", 0, 1), ("PER", 1, 2)]),            # ill-formed BIOES
    ("I-PER E-PER B-PER", [("PER", 0, 2), ("PER", 2, 3)]),
    ("B-PER S-PER I-PER", [("PER", 0, 1), ("PER", 1, 2), ("PER", 2, 3)]),
    ("B-MISC-X I-MISC-X", [("MISC-X", 0, 2)]),                  # hyphens inside the type
    ("O O", []),
    ("", []),
])
def test_entities(tags, spans):
    assert _spans(tags.split()) == spans


def _conlleval_chunks(tags):
    """conlleval's startOfChunk/endOfChunk, tag by tag (B, I and O; its bracket tags left out)."""
    chunks, start = [], None
    prev_prefix, prev_type = "O", ""
    for i, tag in enumerate(tags + ["O"]):
        prefix, entity_type = ("O", "") if tag == "O" else tag.split("-", 1)
        end = ((prev_prefix, prefix) in {("B", "B"), ("B", "O"), ("I", "B"), ("I", "O")}
               or (prev_prefix != "O" and prev_type != entity_type))
        begin = ((prev_prefix, prefix) in {("B", "B"), ("I", "B"), ("O", "B"), ("O", "I")}
                 or (prefix != "O" and prev_type != entity_type))
        if end and start is not None:
            chunks.append((prev_type, start, i))
            start = None
        if begin:
            start = i
        prev_prefix, prev_type = prefix, entity_type
    return chunks


def test_bio_decoding_matches_conlleval_rules_on_random_sequences():
    rng = np.random.default_rng(3)
    vocabulary = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    sentences = [[vocabulary[i] for i in rng.integers(0, 5, rng.integers(0, 12))] for _ in range(500)]
    decoded = tm.sentence_entities(sentences)
    for tags, got in zip(sentences, decoded):
        assert [tuple(e) for e in got] == _conlleval_chunks(tags), tags


def test_entities_stop_at_sentence_boundaries():
    assert tm.sentence_entities([["B-PER"], [], ["I-PER", "I-PER"]]) == [
        [("PER", 0, 1)], [], [("PER", 0, 2)]]
    scores = tm.evaluate([["B-PER"], ["I-PER"]], [["B-PER"], ["I-PER"]])
    assert scores.overall.gold == 2 and scores.overall.correct == 2


def test_bio_scores_by_hand():
    gold = [["B-PER", "I-PER", "O", "B-LOC", "O"], ["B-ORG", "I-ORG", "I-ORG"]]
    predicted = [["B-PER", "I-PER", "O", "B-LOC", "I-LOC"], ["B-ORG", "I-ORG", "O"]]
    scores = tm.evaluate(gold, predicted)
    # gold PER(0,2) LOC(3,4) ORG(0,3); predicted PER(0,2) LOC(3,5) ORG(0,2): only PER matches.
    assert scores.overall == (1 / 3, 1 / 3, pytest.approx(1 / 3), 3, 3, 1)
    assert scores.per_type == {"LOC": (0.0, 0.0, 0.0, 1, 1, 0), "ORG": (0.0, 0.0, 0.0, 1, 1, 0),
                               "PER": (1.0, 1.0, 1.0, 1, 1, 1)}
    assert scores.accuracy == 6 / 8 and scores.num_words == 8


def test_ill_formed_and_iob1_count_as_conlleval_counts():
    gold = [["O", "I-PER", "I-PER", "O", "I-LOC"]]         # PER(1,3), LOC(4,5)
    predicted = [["O", "B-PER", "I-PER", "O", "B-PER"]]    # PER(1,3), PER(4,5)
    scores = tm.evaluate(gold, predicted)
    assert scores.overall == (0.5, 0.5, 0.5, 2, 2, 1)
    assert scores.per_type["PER"] == (0.5, 1.0, pytest.approx(2 / 3), 1, 2, 1)
    assert scores.per_type["LOC"] == (0.0, 0.0, 0.0, 1, 0, 0)
    assert scores.accuracy == 3 / 5  # tags compared as written: I-PER ≠ B-PER


def test_bioes_scores_by_hand():
    gold = [["S-PER", "B-LOC", "I-LOC", "E-LOC", "O", "S-ORG"]]    # PER, LOC(1,4), ORG
    predicted = [["S-PER", "B-LOC", "E-LOC", "S-LOC", "O", "B-ORG"]]  # PER, LOC(1,3), LOC(3,4), ORG
    scores = tm.evaluate(gold, predicted)
    assert scores.overall[:3] == pytest.approx((2 / 4, 2 / 3, 4 / 7))
    assert scores.per_type["LOC"] == (0.0, 0.0, 0.0, 1, 2, 0)
    assert scores.per_type["ORG"] == (1.0, 1.0, 1.0, 1, 1, 1)


def test_no_entities_and_empty_input():
    scores = tm.evaluate([["O", "O"]], [["O", "B-PER"]])
    assert scores.overall == (0.0, 0.0, 0.0, 0, 1, 0) and scores.accuracy == 0.5
    empty = tm.evaluate([], [])
    assert empty.overall == (0.0, 0.0, 0.0, 0, 0, 0) and empty.accuracy == 0.0 and not empty.per_type


def test_evaluate_rejects_mismatched_input():
    with pytest.raises(ValueError, match="2 gold sentences but 1 predicted"):
        tm.evaluate([["O"], ["O"]], [["O"]])
    with pytest.raises(ValueError, match="sentence 1: 2 gold tags but 1 predicted"):
        tm.evaluate([["O"], ["O", "O"]], [["O"], ["O"]])
    with pytest.raises(ValueError, match="'PER' is not O or"):
        tm.evaluate([["PER"]], [["O"]])


@pytest.mark.parametrize("tag", ["PER", "B-", "b-PER", "-PER", "B_PER", "X-PER"])
def test_split_tag_rejects(tag):
    with pytest.raises(ValueError, match="is not O or B-/I-/E-/S-<TYPE>"):
        tm.split_tag(tag)


def test_split_tag():
    assert tm.split_tag("O") == ("O", "")
    assert tm.split_tag("S-MISC-X") == ("S", "MISC-X")


@pytest.mark.parametrize("scheme", ["bio", "bioes"])
def test_tags_from_entities_round_trip(scheme):
    rng = np.random.default_rng(5)
    for _ in range(200):
        length = int(rng.integers(0, 15))
        cuts = np.sort(rng.choice(length + 1, size=min(length + 1, 6), replace=False))
        spans = [tm.Entity(str(rng.choice(["PER", "LOC"])), int(a), int(b))
                 for a, b in zip(cuts[::2], cuts[1::2]) if b > a]
        tags = tm.tags_from_entities(spans, length, scheme)
        assert tm.entities(tags) == spans
        assert {t[0] for t in tags} <= set("OBIES" if scheme == "bioes" else "OBI")
    assert tm.tags_from_entities([tm.Entity("X", 1, 2)], 3, "bioes") == ["O", "S-X", "O"]
    with pytest.raises(ValueError, match="bio or bioes"):
        tm.tags_from_entities([], 1, "iob1")


def test_results_entries():
    scores = tm.evaluate([["B-PER", "O"]], [["B-PER", "B-LOC"]])
    assert tm.results_entries(scores) == {
        "eval_precision": 0.5, "eval_recall": 1.0, "eval_f1": pytest.approx(2 / 3),
        "eval_accuracy": 0.5, "eval_LOC_precision": 0.0, "eval_LOC_recall": 0.0,
        "eval_LOC_f1": 0.0, "eval_PER_precision": 1.0, "eval_PER_recall": 1.0, "eval_PER_f1": 1.0}
    assert set(tm.results_entries(scores, prefix="test_")) == {
        "test_precision", "test_recall", "test_f1", "test_accuracy", "test_LOC_precision",
        "test_LOC_recall", "test_LOC_f1", "test_PER_precision", "test_PER_recall", "test_PER_f1"}
