"""The official SQuAD metrics on hand-computed cases."""

import pytest

from bert_tf.tasks.squad import metrics


def _dataset(*qas):
    """A one-paragraph SQuAD `data` list; qas are (id, [gold texts])."""
    questions = [{"id": qid, "question": "?",
                  "answers": [{"text": t, "answer_start": 0} for t in golds]} for qid, golds in qas]
    return [{"title": "t", "paragraphs": [{"context": "c", "qas": questions}]}]


@pytest.mark.parametrize("text, expected", [
    ("The  Quick, brown-fox!", "quick brownfox"),
    ("An apple a day", "apple day"),
    ("theater athens", "theater athens"),  # articles only as whole words
    ("  «Paris»\t", "«paris»"),  # only ASCII punctuation is removed
    ("the", ""),
])
def test_normalize_answer(text, expected):
    assert metrics.normalize_answer(text) == expected


def test_exact_and_f1():
    assert metrics.exact_match("the Eiffel Tower.", "eiffel tower") == 1.0
    assert metrics.exact_match("Eiffel", "eiffel tower") == 0.0
    # [cat, sat] vs [cat, sat, down]: P = 1, R = 2/3.
    assert metrics.f1_score("the cat sat", "a cat sat down") == pytest.approx(0.8)
    # Counts clip: [cat, cat, dog] vs [cat, dog, dog] share one cat and one dog: P = R = 2/3.
    assert metrics.f1_score("cat cat dog", "cat dog dog") == pytest.approx(2 / 3)
    assert metrics.f1_score("dog", "cat") == 0.0
    assert metrics.f1_score("", "cat") == 0.0
    assert metrics.f1_score("the", "") == 1.0  # both empty after normalisation (v2.0 rule)
    assert metrics.f1_score("the", "", both_empty=0.0) == 0.0  # v1.1 rule


def test_evaluate_v1_takes_the_best_gold_and_counts_missing_predictions():
    dataset = _dataset(("q1", ["Paris", "in Paris"]), ("q2", ["the Eiffel tower"]),
                       ("q3", ["1889"]))
    # q1 exact; q2 "tower" vs [eiffel, tower]: F1 2/3; q3 has no prediction: 0.
    result = metrics.evaluate_v1(dataset, {"q1": "paris.", "q2": "tower"})
    assert result == {"exact_match": pytest.approx(100 / 3), "f1": pytest.approx(100 * (5 / 3) / 3)}


def _v2_case():
    dataset = _dataset(("h1", ["Paris"]), ("h2", ["in 1889"]), ("n1", []), ("n2", []))
    predictions = {"h1": "Paris", "h2": "1889", "n1": "", "n2": "London"}
    null_odds = {"h1": -2.0, "h2": 1.0, "n2": 2.0, "n1": 3.0}
    return dataset, predictions, null_odds


def test_evaluate_v2_splits_and_threshold_search():
    dataset, predictions, null_odds = _v2_case()
    exact, f1, has_answer = metrics.raw_scores_v2(dataset, predictions)
    assert exact == {"h1": 1.0, "h2": 0.0, "n1": 1.0, "n2": 0.0}
    assert f1 == pytest.approx({"h1": 1.0, "h2": 2 / 3, "n1": 1.0, "n2": 0.0})
    assert has_answer == {"h1": True, "h2": True, "n1": False, "n2": False}
    result = metrics.evaluate_v2(dataset, predictions, null_odds)
    # Official default --na-prob-thresh 1.0: n2 (odds 2) and n1 (3) count as answered "".
    assert result == pytest.approx({
        "exact": 75.0, "f1": 100 * (1 + 2 / 3 + 1 + 1) / 4, "total": 4,
        "HasAns_exact": 50.0, "HasAns_f1": 100 * (1 + 2 / 3) / 2, "HasAns_total": 2,
        "NoAns_exact": 100.0, "NoAns_f1": 100.0, "NoAns_total": 2,
        # From "answer nothing" (2 right), answering in odds order h1, h2, n2, n1 scores
        # exact 3, 3, 2, 2 and F1 3, 3.67, 2.67, 2.67.
        "best_exact": 75.0, "best_exact_thresh": -2.0,
        "best_f1": 100 * (3 + 2 / 3) / 4, "best_f1_thresh": 1.0,
    })
    # With the threshold the predictions were made with, the scores are the predictions' own.
    result = metrics.evaluate_v2(dataset, predictions, null_odds, null_prob_threshold=5.0)
    assert (result["exact"], result["f1"]) == pytest.approx((50.0, 100 * (2 + 2 / 3) / 4))
    assert "best_f1" not in metrics.evaluate_v2(dataset, predictions)


def test_best_threshold_when_answering_nothing_wins():
    dataset, _, null_odds = _v2_case()
    predictions = {"h1": "Rome", "h2": "no", "n1": "x", "n2": "y"}
    exact, _, has_answer = metrics.raw_scores_v2(dataset, predictions)
    assert metrics.find_best_threshold(predictions, exact, null_odds, has_answer) == (50.0, 0.0)


def test_has_gold_answers():
    assert metrics.has_gold_answers(_dataset(("q", ["a"])))
    assert not metrics.has_gold_answers(_dataset(("q", [])))
