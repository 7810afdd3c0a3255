"""SQuAD post-processing: span validity, n-best ranking, text mapping, v2.0 null odds, files."""

import json
import math
import os

import numpy as np
import pytest
import sentencepiece

from bert_tf.tasks.squad import examples as squad
from bert_tf.tasks.squad.postprocess import (compute_predictions, detokenize, final_text,
                                             write_predictions)
from bert_tf.text.tokenizers import SentencePieceTokenizer
from conftest import TESTDATA
from support.squad_windows import squad_windows
from support.vocabularies import wordpiece_tokenizer

CONTEXT = "The Eiffel tower was built in (1889). It is in Paris, France."
# Its 19 tokens: the e ##iff ##el tower was built in ( 1889 ) . it is in paris , france .


tokenizer = wordpiece_tokenizer(os.path.join(TESTDATA, "squad", "vocab.txt"), scope="function",
                                do_lower_case=True)


def _features(tokenizer, question, max_seq_length, doc_stride):
    words, _ = squad.split_context(CONTEXT)
    example = squad.SquadExample("q1", question, words)
    features, _ = squad_windows([example], tokenizer, max_seq_length, doc_stride,
                                                64, False)
    return [example], features


def _softmax(*scores):
    exps = [math.exp(s - max(scores)) for s in scores]
    return [e / sum(exps) for e in exps]


@pytest.mark.parametrize("pred, orig, lower, expected", [
    ("steve smith", "Steve Smith's", True, "Steve Smith"),
    ("1889", "(1889).", True, "1889"),
    ("paris , france", "Paris, France.", True, "Paris, France"),
    ("jose smith", "José Smith", True, "José Smith"),  # the stripped accent comes back
    ("cafe", "Café,", True, "Café"),
    ("Steve", "Steve Smith's", False, "Steve"),
    ("london", "Paris,", True, "Paris,"),  # not found: the whole original words
    ("jose", "Jose\u0301", True, "Jose\u0301"),  # decomposed accent changes the length: whole words
    ("e f", "e\u00a0f", True, "e\u00a0f"),  # no-break space becomes a space: lengths differ
])
def test_final_text_realigns_with_the_original(pred, orig, lower, expected):
    assert final_text(pred, orig, lower) == expected


def test_detokenize_wordpiece_and_sentencepiece():
    assert detokenize(["the", "e", "##iff", "##el", "tower"]) == "the eiffel tower"
    assert detokenize(["steve", "smith", "'", "s"]) == "steve smith ' s"
    assert detokenize(["\u2581Eiff", "el", "\u2581tower"], sentencepiece=True) == "Eiffel tower"
    assert detokenize(["18", "89"], sentencepiece=True) == "1889"


def _one_window(tokenizer):
    examples, features = _features(tokenizer, "Where is it?", 32, 128)
    # 4 query tokens: document token t at position 6 + t: paris 21, france 23, 1889 15; pads
    # from 26.
    start, end = np.zeros((1, 32)), np.zeros((1, 32))
    start[0, [28, 2, 21, 15]] = [7, 6, 5, 4]  # a pad and a query token outrank the answers
    end[0, [23, 21, 15]] = [5, 3, 1]
    return examples, features, start, end


def test_nbest_keeps_valid_spans_best_first(tokenizer):
    examples, features, start, end = _one_window(tokenizer)
    # Top 3 starts: 28 (pad), 2 (query), 21: only 21 is valid; 21 → 15 ends before it starts.
    out = compute_predictions(examples, features, start, end, tokenizer, n_best_size=3)
    nbest = out.nbest["q1"]
    assert [e["text"] for e in nbest] == ["Paris, France", "Paris"]
    assert [(e["start_logit"], e["end_logit"]) for e in nbest] == [(5, 5), (5, 3)]
    assert [e["probability"] for e in nbest] == pytest.approx(_softmax(10, 8))
    assert out.answers() == {"q1": "Paris, France"} and out.null_odds == {}
    # With 4, start 15 joins: its spans to 23 (9 tokens) and 21 rank between; (15, 15) is 5th.
    out = compute_predictions(examples, features, start, end, tokenizer, n_best_size=4)
    assert [e["text"] for e in out.nbest["q1"]] == [
        "Paris, France", "1889). It is in Paris, France", "Paris", "1889). It is in Paris"]
    # max_answer_length=3 drops the 9- and 7-token spans.
    out = compute_predictions(examples, features, start, end, tokenizer, n_best_size=4,
                              max_answer_length=3)
    assert [e["text"] for e in out.nbest["q1"]] == ["Paris, France", "Paris", "1889"]


def _two_windows(tokenizer, cls_logits):
    # "when was it built ?" = 5 tokens, 8 per window, windows at tokens 0, 5, 10, 15; offset 7.
    examples, features = _features(tokenizer, "When was it built?", 16, 5)
    start, end = np.full((4, 16), -10.0), np.full((4, 16), -10.0)
    # "built in" = tokens 6-7: window 1 scores it highest, but token 6 has more context in window 0.
    start[1, 7 + 1], end[1, 7 + 2] = 10, 10
    start[0, 7 + 6], end[0, 7 + 7] = 1, 1
    for row, (s, e) in enumerate(cls_logits):
        start[row, 0], end[row, 0] = s, e
    return examples, features, start, end


def test_start_token_must_have_max_context(tokenizer):
    examples, features, start, end = _two_windows(tokenizer, [(0, 0)] * 4)
    out = compute_predictions(examples, features, start, end, tokenizer, n_best_size=2)
    assert out.nbest["q1"][0]["text"] == "built in"
    assert (out.nbest["q1"][0]["start_logit"], out.nbest["q1"][0]["end_logit"]) == (1, 1)


def test_v2_null_odds_use_the_lowest_cls_score_over_windows(tokenizer):
    cls_logits = [(0.9, 0.9), (0.5, 0.25), (3, 3), (2, 2)]  # null score = 0.75, from window 1
    examples, features, start, end = _two_windows(tokenizer, cls_logits)
    out = compute_predictions(examples, features, start, end, tokenizer, n_best_size=2,
                              version_2_with_negative=True)
    nbest = out.nbest["q1"]
    assert [(e["text"], e["start_logit"], e["end_logit"]) for e in nbest] == [
        ("built in", 1, 1), ("", 0.5, 0.25)]
    assert [e["probability"] for e in nbest] == pytest.approx(_softmax(2, 0.75))
    assert out.null_odds == {"q1": pytest.approx(0.75 - 2)}
    assert out.answers(0.0) == {"q1": "built in"}
    assert out.answers(-1.5) == {"q1": ""}  # -1.25 > -1.5: answer nothing
    # The null answer is appended when it does not make the n best.
    out = compute_predictions(examples, features, start, end, tokenizer, n_best_size=1,
                              version_2_with_negative=True)
    assert [e["text"] for e in out.nbest["q1"]] == ["built in", ""]


def test_v2_null_ranked_first_when_it_scores_best(tokenizer):
    examples, features, start, end = _two_windows(tokenizer, [(5, 5)] * 4)
    out = compute_predictions(examples, features, start, end, tokenizer, n_best_size=2,
                              version_2_with_negative=True)
    assert [e["text"] for e in out.nbest["q1"]] == ["", "built in"]
    assert out.best_non_null == {"q1": "built in"}
    assert out.null_odds == {"q1": pytest.approx(8.0)} and out.answers() == {"q1": ""}


def test_no_valid_span_gives_the_placeholder(tokenizer):
    examples, features, start, end = _one_window(tokenizer)
    out = compute_predictions(examples, features, start, end, tokenizer, n_best_size=1)
    assert out.nbest["q1"] == [{"text": "empty", "probability": 1.0, "start_logit": 0.0,
                                "end_logit": 0.0}]


def test_write_predictions_files(tokenizer, tmp_path):
    cls_logits = [(0.9, 0.9), (0.5, 0.25), (3, 3), (2, 2)]
    examples, features, start, end = _two_windows(tokenizer, cls_logits)
    out = compute_predictions(examples, features, start, end, tokenizer, n_best_size=2,
                              version_2_with_negative=True)
    paths = write_predictions(tmp_path, out, null_score_diff_threshold=-1.5)
    assert sorted(os.listdir(tmp_path)) == ["nbest_predictions.json", "null_odds.json",
                                            "predictions.json"]
    assert json.loads((tmp_path / "predictions.json").read_text()) == {"q1": ""}
    assert json.loads((tmp_path / "null_odds.json").read_text()) == {"q1": pytest.approx(-1.25)}
    nbest = json.loads((tmp_path / "nbest_predictions.json").read_text())["q1"]
    assert [sorted(e) for e in nbest] == [["end_logit", "probability", "start_logit", "text"]] * 2
    assert paths["predictions"] == os.path.join(tmp_path, "predictions.json")


def test_sentencepiece_spans_map_back_to_the_text(tmp_path):
    prefix = tmp_path / "spm"
    lines = [CONTEXT, "When was it built?", "Paris and France, the tower, built 1889."] * 50
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_prefix=str(prefix), vocab_size=40,
        model_type="unigram", pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, pad_piece="[PAD]",
        unk_piece="[UNK]", control_symbols="[CLS],[SEP],[MASK]", minloglevel=2)
    tokenizer = SentencePieceTokenizer(str(prefix) + ".model", do_lower_case=True)
    examples, features = _features(tokenizer, "When was it built?", 64, 128)
    # The tiny model spells "(1889)." out: ▁ ( 1 8 8 9 ) . — aim at the four digits.
    row = features.input_ids[0].tolist()
    digits = [i for i in range(len(row)) if features.token_to_orig[0, i] == 6
              and tokenizer.inv_vocab[row[i]] in "0123456789"]
    assert len(digits) == 4
    start, end = np.zeros((1, 64)), np.zeros((1, 64))
    start[0, digits[0]] = end[0, digits[-1]] = 10
    out = compute_predictions(examples, features, start, end, tokenizer, n_best_size=1)
    # The pieces read "1889", found inside the basic-tokenized "( 1889 ) .": just the year.
    assert out.answers() == {"q1": "1889"}
