"""SQuAD reading, doc-stride windows and features: hand-made contexts, hand-computed answers."""

import json
import logging
import os

import numpy as np
import pytest

from bert_tf.tasks.squad import examples as squad, features as squad_features
from conftest import TESTDATA
from support.squad_windows import squad_windows
from support.vocabularies import wordpiece_tokenizer

SQUAD_DIR = os.path.join(TESTDATA, "squad")
CONTEXT = "The Eiffel tower was built in (1889). It is in Paris, France."
# Its 19 tokens: the e ##iff ##el tower was built in ( 1889 ) . it is in paris , france .


tokenizer = wordpiece_tokenizer(os.path.join(SQUAD_DIR, "vocab.txt"), scope="function",
                                do_lower_case=True)


def _example(question, answer=None, start_word=None, end_word=None, impossible=False):
    words, _ = squad.split_context(CONTEXT)
    return squad.SquadExample("q", question, words, answer, start_word, end_word, impossible)


def _tokens(tokenizer, features, row):
    ids = features.input_ids[row][features.input_mask[row] == 1]
    return " ".join(tokenizer.convert_ids_to_tokens(ids.tolist()))


def test_split_context_uses_the_original_whitespace_set():
    text = "  a\tb\n\nc\u202fd e\u00a0f "
    words, starts = squad.split_context(text)
    assert words == ["a", "b", "c", "d", "e\u00a0f"]  # no-break space U+00A0 does not split
    assert starts == [2, 4, 7, 9, 11]
    char_to_word = [squad.word_at(starts, i) for i in range(len(text))]
    assert char_to_word == [-1, -1, 0, 0, 1, 1, 1, 2, 2, 3, 3, 4, 4, 4, 4]


def test_doc_spans_cover_the_document_every_stride():
    assert squad_features.doc_spans(10, 4, 3) == [(0, 4), (3, 4), (6, 4)]
    assert squad_features.doc_spans(5, 4, 2) == [(0, 4), (2, 3)]
    # A stride longer than the window never skips tokens.
    assert squad_features.doc_spans(10, 4, 6) == [(0, 4), (4, 4), (8, 2)]
    assert squad_features.doc_spans(3, 8, 2) == [(0, 3)]


def test_max_context_prefers_centred_tokens_and_the_first_window_on_ties():
    spans = squad_features.doc_spans(10, 4, 3)  # windows 0-3, 3-6, 6-9
    # Token 3: min(3, 0) in window 0 and min(0, 3) in window 1 tie → window 0; token 4: window 1.
    assert squad_features.max_context_window(spans, 10).tolist() == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    # A longer window wins a tie on the context counts by its 0.01 · length bonus.
    # Token 1: min(1, 1) + 0.03 in window 0-2 < min(1, 3) + 0.05 in 0-4; token 0: 0.03 < 0.05.
    spans = np.array([[0, 3], [0, 5]])
    assert squad_features.max_context_window(spans, 5).tolist() == [1, 1, 1, 1, 1]


def test_windows_tokens_positions_and_max_context(tokenizer):
    example = _example("When was it built?", "1889", 6, 6)
    features, stats = squad_windows([example], tokenizer, max_seq_length=16,
                                                    doc_stride=5, max_query_length=64,
                                                    is_training=True)
    # 16 - 5 query tokens - 3 = 8 document tokens per window, windows at 0, 5, 10, 15.
    assert [_tokens(tokenizer, features, i) for i in range(4)] == [
        "[CLS] when was it built ? [SEP] the e ##iff ##el tower was built in [SEP]",
        "[CLS] when was it built ? [SEP] was built in ( 1889 ) . it [SEP]",
        "[CLS] when was it built ? [SEP] ) . it is in paris , france [SEP]",
        "[CLS] when was it built ? [SEP] paris , france . [SEP]",
    ]
    assert features.input_mask[3].tolist() == [1] * 12 + [0] * 4
    assert features.segment_ids[3].tolist() == [0] * 7 + [1] * 5 + [0] * 4
    # The answer word "(1889)." is snapped to the token "1889" (document token 9), only in window 1.
    assert features.start_positions.tolist() == [0, 11, 0, 0]
    assert features.end_positions.tolist() == [0, 11, 0, 0]
    assert features.is_impossible.tolist() == [0, 0, 0, 0]
    assert features.token_to_orig[1].tolist() == [-1] * 7 + [3, 4, 5, 6, 6, 6, 6, 7] + [-1]
    # Window 1 (tokens 5-12) gives tokens 7-11 the most context; 5, 6 have more (or tie) in
    # window 0.
    assert features.token_is_max_context[1].tolist() == [0] * 7 + [0, 0, 1, 1, 1, 1, 1, 0] + [0]
    # Every document token is the max-context token of exactly one window.
    assert features.token_is_max_context.sum() == 19
    assert features.example_index.tolist() == [0, 0, 0, 0]
    assert (stats.examples, stats.features, stats.long_contexts,
            stats.answers_outside_window) == (1, 4, 1, 3)


def test_answers_in_several_windows_and_answers_longer_than_a_window(tokenizer):
    crossing = _example("Where is it?", "Paris, France", 10, 11)
    too_long = _example("Where is it?", "built in (1889). It is in Paris,", 4, 10)
    features, stats = squad_windows([crossing, too_long], tokenizer, 15, 5, 64,
                                                    True)
    # "where is it ?" = 4 tokens → 8 per window; answer tokens 15-17 lie in windows 10-17 and
    # 15-18.
    assert features.example_index.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert features.start_positions[:4].tolist() == [0, 0, 11, 6]
    assert features.end_positions[:4].tolist() == [0, 0, 13, 8]
    # Tokens 6-16 (11 tokens) fit no 8-token window: every window points at [CLS].
    assert features.start_positions[4:].tolist() == [0, 0, 0, 0]
    assert stats.answers_outside_window == 2 + 4


def test_impossible_questions_and_prediction_features_point_at_cls(tokenizer):
    impossible = _example("Who named it?", "", -1, -1, impossible=True)
    features, _ = squad_windows([impossible], tokenizer, 64, 128, 64, True)
    assert (features.start_positions.tolist(), features.is_impossible.tolist()) == ([0], [1])
    predict = _example("When was it built?")
    features, _ = squad_windows([predict], tokenizer, 64, 128, 64, False)
    assert (features.start_positions.tolist(), features.is_impossible.tolist()) == ([0], [0])


def test_query_is_truncated_and_too_short_sequences_are_refused(tokenizer):
    example = _example("When was it built?")
    features, stats = squad_windows([example], tokenizer, 32, 128, 3, False)
    assert _tokens(tokenizer, features, 0).startswith("[CLS] when was it [SEP] the e")
    assert stats.queries_truncated == 1
    with pytest.raises(ValueError, match="max_seq_length=8 leaves no room"):
        squad_windows([example], tokenizer, 8, 128, 64, False)


def test_improve_answer_span_finds_the_first_tokenized_answer():
    doc = np.array([7, 8, 9, 8, 9, 5])
    assert squad_features.improve_answer_span(doc, 1, 4, [8, 9]) == (1, 2)
    assert squad_features.improve_answer_span(doc, 2, 4, [8, 9]) == (3, 4)
    assert squad_features.improve_answer_span(doc, 0, 5, [4]) == (0, 5)  # not found: unchanged


def test_read_v1_skips_mismatched_and_unanswered_questions(caplog):
    with caplog.at_level(logging.WARNING):
        examples, stats = squad.read_squad_examples(os.path.join(SQUAD_DIR, "v1_train.json"), True)
    assert [e.qas_id for e in examples] == ["when-built", "where-is", "who-opened"]
    assert (stats.questions, stats.skipped_answer_mismatch, stats.skipped_no_answer) == (5, 1, 1)
    assert stats.extra_answers_ignored == 1
    assert "bad-offset" in caplog.text and "no-answer" in caplog.text
    when, where, who = examples
    assert (when.start_position, when.end_position, when.orig_answer_text) == (6, 6, "1889")
    assert (where.start_position, where.end_position) == (10, 11)
    # Tabs, newlines, U+202F and leading spaces separate words; accents stay in the words.
    assert who.doc_tokens == ["José", "Smith", "opened", "the", "Café", "by", "the", "old",
                              "river", "bank"]
    assert (who.start_position, who.end_position) == (0, 1)
    assert when.doc_tokens is where.doc_tokens  # one paragraph, one word list
    predict, stats = squad.read_squad_examples(os.path.join(SQUAD_DIR, "v1_train.json"), False)
    assert len(predict) == 5 and predict[0].start_position is None


def test_read_v2_impossible_questions():
    path = os.path.join(SQUAD_DIR, "v2_train.json")
    examples, stats = squad.read_squad_examples(path, True, version_2_with_negative=True)
    assert [(e.is_impossible, e.start_position, e.orig_answer_text) for e in examples] == [
        (False, 6, "1889"), (True, -1, "")]
    assert stats.impossible == 1
    with pytest.raises(squad.SquadFormatError, match="who-named.*version_2_with_negative"):
        squad.read_squad_examples(path, True, version_2_with_negative=False)


def _write(tmp_path, qa, context="It is in Paris."):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"data": [{"paragraphs": [{"context": context, "qas": [qa]}]}]}))
    return path


@pytest.mark.parametrize("qa, message", [
    ({"id": "q7", "answers": []}, 'question q7 has no "question" key'),
    ({"id": "q8", "question": "Where?"}, 'question q8 has no "answers" key'),
    ({"id": "q9", "question": "Where?", "answers": [{"text": "Paris"}]},
     'answer of question q9 has no "answer_start" key'),
    ({"id": "q10", "question": "Where?", "answers": [{"text": "Paris", "answer_start": 14}]},
     "question q10: answer_start=14 .* does not fit"),
    ({"question": "Where?", "answers": []}, 'a question in article 0 paragraph 0 has no "id" key'),
])
def test_malformed_questions_name_the_question(tmp_path, qa, message):
    with pytest.raises(squad.SquadFormatError, match=message):
        squad.read_squad_examples(_write(tmp_path, qa), is_training=True)


def test_malformed_json_and_wrong_layout(tmp_path):
    with pytest.raises(squad.SquadFormatError, match=r"malformed.json: not valid JSON \(line 3"):
        squad.read_squad_examples(os.path.join(SQUAD_DIR, "malformed.json"), False)
    path = tmp_path / "list.json"
    path.write_text("[]")
    with pytest.raises(squad.SquadFormatError, match='"data" list'):
        squad.read_squad_examples(path, False)
    with pytest.raises(FileNotFoundError, match="nope.json"):
        squad.read_squad_examples(tmp_path / "nope.json", False)


def test_chunked_build_equals_one_pass_across_paragraphs(tokenizer):
    examples, _ = squad.read_squad_examples(os.path.join(SQUAD_DIR, "v1_train.json"), True)
    whole, stats = squad_windows(examples, tokenizer, 20, 4, 6, True)
    parts = list(squad_features.iter_features(examples, tokenizer, 20, 4, 6, True, chunk_size=1))
    chunked = squad_features.SquadFeatures.concatenate(parts, 20)
    for name, column in whole.columns().items():
        np.testing.assert_array_equal(column, getattr(chunked, name), err_msg=name)
    # The accented, tab-separated answer "José\tSmith" is the tokens "jose smith" of its windows.
    rows = np.flatnonzero((whole.example_index == 2) & (whole.start_positions > 0))
    assert len(rows) > 0
    for row in rows:
        span = whole.input_ids[row, whole.start_positions[row]:whole.end_positions[row] + 1]
        assert tokenizer.convert_ids_to_tokens(span.tolist()) == ["jose", "smith"]
    assert stats.examples == 3 and stats.features == len(whole)


def test_empty_context_is_an_error(tmp_path):
    path = _write(tmp_path, {"id": "q1", "question": "Where?", "answers": []}, context=" \n ")
    with pytest.raises(squad.SquadFormatError, match="paragraph 0 has an empty context"):
        squad.read_squad_examples(path, is_training=False)


def _reference_windows(example, tokenizer, max_seq_length, doc_stride, max_query_length):
    """The windows of one example, token by token as the original builds them (plain Python)."""
    query = tokenizer.tokenize(example.question_text)[:max_query_length]
    tokens, token_to_word, word_to_token = [], [], []
    for w, word in enumerate(example.doc_tokens):
        word_to_token.append(len(tokens))
        for piece in tokenizer.tokenize(word):
            token_to_word.append(w)
            tokens.append(piece)
    answer = None
    if not example.is_impossible:
        start = word_to_token[example.start_position]
        end = (word_to_token[example.end_position + 1] - 1
               if example.end_position + 1 < len(word_to_token) else len(tokens) - 1)
        wanted = " ".join(tokenizer.tokenize(example.orig_answer_text))
        answer = next(((s, e) for s in range(start, end + 1) for e in range(end, s - 1, -1)
                       if " ".join(tokens[s:e + 1]) == wanted), (start, end))
    spans, first = [], 0
    while first < len(tokens):
        length = min(len(tokens) - first, max_seq_length - len(query) - 3)
        spans.append((first, length))
        if first + length == len(tokens):
            break
        first += min(length, doc_stride)

    def is_max_context(k, position):
        best, best_k = None, None
        for j, (s, n) in enumerate(spans):
            if s <= position <= s + n - 1:
                score = min(position - s, s + n - 1 - position) + 0.01 * n
                if best is None or score > best:
                    best, best_k = score, j
        return best_k == k

    rows = []
    for k, (first, length) in enumerate(spans):
        window = ["[CLS]", *query, "[SEP]"]
        to_orig, max_context = [-1] * len(window), [0] * len(window)
        for i in range(first, first + length):
            to_orig.append(token_to_word[i])
            max_context.append(int(is_max_context(k, i)))
            window.append(tokens[i])
        window.append("[SEP]")
        pad = max_seq_length - len(window)
        start = end = 0
        if answer and first <= answer[0] and answer[1] <= first + length - 1:
            start, end = answer[0] - first + len(query) + 2, answer[1] - first + len(query) + 2
        rows.append({"input_ids": tokenizer.convert_tokens_to_ids(window) + [0] * pad,
                     "input_mask": [1] * len(window) + [0] * pad,
                     "segment_ids": [0] * (len(query) + 2) + [1] * (length + 1) + [0] * pad,
                     "token_to_orig": to_orig + [-1] * (pad + 1),
                     "token_is_max_context": max_context + [0] * (pad + 1),
                     "start_positions": start, "end_positions": end})
    return rows


@pytest.mark.parametrize("seed", range(4))
def test_vectorised_windows_match_a_token_by_token_construction(tokenizer, seed):
    rng = np.random.default_rng(seed)
    words = [w for w in tokenizer.vocab if not w.startswith(("[", "##"))]
    words += ["Eiffel", "(1889).", "qqq"]
    examples = []
    for p in range(6):  # paragraphs of 1-60 words, 1-3 questions each
        doc = [str(w) for w in rng.choice(words, rng.integers(1, 60))]
        for q in range(rng.integers(1, 4)):
            first = int(rng.integers(0, len(doc)))
            last = min(len(doc) - 1, first + int(rng.integers(0, 4)))
            question = " ".join(rng.choice(words, rng.integers(1, 9)))
            examples.append(squad.SquadExample(f"{p}-{q}", question, doc,
                                               " ".join(doc[first:last + 1]), first, last,
                                               impossible := bool(rng.random() < 0.2)))
            if impossible:
                examples[-1].start_position = examples[-1].end_position = -1
    max_seq_length, doc_stride = int(rng.integers(14, 30)), int(rng.integers(1, 12))
    features, _ = squad_windows(examples, tokenizer, max_seq_length, doc_stride,
                                                6, True)
    expected = [(i, row) for i, e in enumerate(examples)
                for row in _reference_windows(e, tokenizer, max_seq_length, doc_stride, 6)]
    assert features.example_index.tolist() == [i for i, _ in expected]
    for name in expected[0][1]:
        np.testing.assert_array_equal(getattr(features, name),
                                      np.array([row[name] for _, row in expected]), err_msg=name)
    assert features.is_impossible.tolist() == [int(examples[i].is_impossible) for i, _ in expected]
