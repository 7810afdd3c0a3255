"""The SQuAD raw-text export's graph (windows, maximum context, span search, null answer, mapping
back onto the context) against run_squad's own pipeline (`features.iter_features` +
`postprocess.compute_predictions`), both fed the same logits by a stand-in model."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.text import tokenizers
from bert_tf.serving.saved_model import in_graph_tokenizer
from bert_tf.tasks.squad import examples as squad, export
from bert_tf.tasks.squad import postprocess
from bert_tf.text import testing_text
from support.squad_windows import squad_windows
from support.tiny_models import REPO
from support.vocabularies import real_vocab

MAX_SEQ_LENGTH, DOC_STRIDE, MAX_QUERY_LENGTH = 40, 7, 12
N_BEST, MAX_ANSWER_LENGTH = 5, 6
# Contexts with what the mapping back must survive: runs of whitespace, accents and case,
# punctuation inside words, CJK, U+202F, other Unicode spaces, control characters, very long
# words, a context without pieces, an empty question.
AWKWARD = [
    ("Where?", "He  was born\n\nin (1895).  Café  Zürich, \u201cQuoted\u201d!"),
    ("Who?", "ÉCOLE\u202fNormale supérieure\tde\u00a0Paris — founded 1794 by İstanbul's ﬁrst"),
    ("何处？", "北京大学位于北京。It is in Haidian\u3000district.  "),
    ("x", "a\x00b\u200bc " + "long" * 60 + " word end."),
    ("", "The question is empty here."),
    ("Nothing?", "   \t\u202f"),
    ("Empty", ""),
]


class HashedLogits(tf.Module):
    """A stand-in span model: logits that are an exact integer hash of each window's inputs, so
    both pipelines see the same numbers (and ties, which exercise the ranking's order)."""

    def __call__(self, features, training=False):
        del training
        ids = tf.cast(features["input_ids"], tf.int64)
        position = tf.range(tf.shape(ids, out_type=tf.int64)[1])[None, :]
        segment = tf.cast(features["segment_ids"], tf.int64)
        start = (ids * 7919 + position * 104729 + segment * 31) % 1000
        end = (ids * 6007 + position * 3571 + segment * 97 + ids // 7) % 1000
        # Exact in float32 however a graph rewrites the arithmetic (a power-of-two scale); ties
        # in start + end logit are common.
        return {"start_logits": tf.cast(start, tf.float32) / 64.0 - 8.0,
                "end_logits": tf.cast(end, tf.float32) / 64.0 - 8.0}


def _examples() -> tuple[list[squad.SquadExample], list[str]]:
    """The demo dev set's questions, the awkward ones and stress text; and their contexts."""
    with open(os.path.join(REPO, "demo/data/squad/dev-v2.0.json"), encoding="utf-8") as f:
        data = json.load(f)
    stress = testing_text.varied_lines(12, seed=3)
    cases = [(qa["id"], qa["question"], p["context"])
             for article in data["data"] for p in article["paragraphs"] for qa in p["qas"]]
    cases += [(f"awkward{i}", question, context) for i, (question, context) in enumerate(
        AWKWARD + list(zip(stress[::2], stress[1::2])))]
    examples = [squad.SquadExample(qid, question, squad.split_context(context)[0])
                for qid, question, context in cases]
    return examples, [context for _, _, context in cases]


def _expected(examples, tokenizer, do_lower_case):
    features, _ = squad_windows(examples, tokenizer, MAX_SEQ_LENGTH, DOC_STRIDE,
                                                MAX_QUERY_LENGTH, False)
    logits = HashedLogits()({"input_ids": features.input_ids,
                             "segment_ids": features.segment_ids})
    predictions = postprocess.compute_predictions(
        examples, features, logits["start_logits"].numpy(), logits["end_logits"].numpy(),
        tokenizer, N_BEST, MAX_ANSWER_LENGTH, do_lower_case, version_2_with_negative=True)
    return predictions, len(features)


def _served(module, examples, contexts):
    out = module.serve_text(tf.constant([e.question_text for e in examples]),
                            tf.constant(contexts))
    return {k: v.numpy().tolist() for k, v in out.items()}


@pytest.fixture(scope="module")
def v2_modules():
    """SQuAD 2.0 serving modules over HashedLogits, each built (and its serving function traced)
    once for the module's tests: {(do_lower_case, SentencePiece model or None): SquadServing}.
    Their null threshold is a variable, as in an export: each test assigns the one it needs."""
    return {}


def _v2_module(modules: dict, do_lower_case: bool, spm: str | None = None) -> export.SquadServing:
    if (do_lower_case, spm) not in modules:
        graph_tokenizer = in_graph_tokenizer(None if spm else real_vocab(), spm, do_lower_case)
        modules[do_lower_case, spm] = export.SquadServing(
            HashedLogits(), graph_tokenizer, MAX_SEQ_LENGTH, DOC_STRIDE, MAX_QUERY_LENGTH, N_BEST,
            MAX_ANSWER_LENGTH, do_lower_case, 0.0)
    return modules[do_lower_case, spm]


def _check(examples, contexts, predictions, got, threshold):
    answers = predictions.answers(threshold)
    for i, example in enumerate(examples):
        qid, context = example.qas_id, contexts[i]
        best = predictions.best_non_null[qid]
        no_span = best == postprocess.NO_VALID_SPAN_TEXT and all(
            e["text"] in ("", best) for e in predictions.nbest[qid])
        answer = got["answer"][i].decode("utf-8")
        assert got["null_odds"][i] == pytest.approx(predictions.null_odds[qid], abs=1e-5), qid
        if no_span or answers[qid] == "":
            assert (answer, got["has_answer"][i], got["answer_start"][i]) == ("", False, -1), qid
            continue
        assert got["has_answer"][i], qid
        start = got["answer_start"][i]
        # Cut from the context as given; predictions.json joins the words with single spaces.
        assert context[start:start + len(answer)] == answer, qid
        assert " ".join(answer.split(" ")) == answers[qid] or " ".join(
            answer.split()) == " ".join(answers[qid].split()), qid
        entry = predictions.nbest[qid][0] if predictions.nbest[qid][0]["text"] else next(
            e for e in predictions.nbest[qid] if e["text"])
        assert got["score"][i] == pytest.approx(entry["start_logit"] + entry["end_logit"],
                                                abs=1e-5), qid


@pytest.mark.parametrize("do_lower_case,sentencepiece",
                         [(True, False), (False, False), (True, True)])
def test_graph_answers_equal_run_squads_postprocessing(do_lower_case, sentencepiece, request,
                                                       v2_modules):
    examples, contexts = _examples()
    spm = request.getfixturevalue("spm_model") if sentencepiece else None
    if sentencepiece:
        tokenizer = tokenizers.SentencePieceTokenizer(spm, do_lower_case=do_lower_case)
    else:
        tokenizer = tokenizers.FullTokenizer(real_vocab(), do_lower_case=do_lower_case)
    predictions, num_windows = _expected(examples, tokenizer, do_lower_case)
    # A median null_odds of the set: about half the questions answer "" (strictly greater).
    threshold = float(np.sort(list(predictions.null_odds.values()))[len(examples) // 2])
    module = _v2_module(v2_modules, do_lower_case, spm)
    module.null_threshold.assign(threshold)
    got = _served(module, examples, contexts)
    _check(examples, contexts, predictions, got, threshold)
    # The set exercises what it should: several windows per context, every outcome.
    assert num_windows > 2 * len(examples)
    answers = predictions.answers(threshold)
    assert 50 < sum(a == "" for a in answers.values()) < len(answers) - 50
    multi_word = [a for a in answers.values() if " " in a]
    assert len(multi_word) > 20


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_alignment_equals_final_text(do_lower_case):
    """Every short token span of stress text, detokenized, mapped back as final_text maps it
    (including where tokenizing changes the length and the whole words come back)."""
    tokenizer = tokenizers.FullTokenizer(real_vocab(), do_lower_case=do_lower_case)
    pairs = []
    for line in testing_text.varied_lines(150, seed=13) + [t for pair in AWKWARD for t in pair]:
        words = squad.split_context(line)[0]
        for first in range(0, len(words), 3):
            orig_text = " ".join(words[first:first + 3])
            tokens = tokenizer.tokenize(orig_text)
            for a in range(0, len(tokens), 2):
                pairs.append((postprocess.detokenize(tokens[a:a + 3]), orig_text))
    pred_texts, orig_texts = zip(*pairs)
    align = tf.function(export.aligned_range, autograph=False)  # as in the served graph
    first, last = align(tf.constant(pred_texts), tf.constant(orig_texts), do_lower_case)
    whole = 0
    for (pred_text, orig_text), i, j in zip(pairs, first.numpy(), last.numpy()):
        nonspace = [k for k, c in enumerate(orig_text) if c != " "]
        got = orig_text[nonspace[i]:nonspace[j] + 1]
        assert got == postprocess.final_text(pred_text, orig_text, do_lower_case), pred_text
        whole += got == orig_text and pred_text != " ".join(orig_text.split())
    assert len(pairs) > 1000 and whole > 20  # the fallback to the whole words is exercised


def test_question_and_context_must_pair_up():
    module = export.SquadServing(HashedLogits(), in_graph_tokenizer(real_vocab(), None, True),
                                 MAX_SEQ_LENGTH, DOC_STRIDE, MAX_QUERY_LENGTH, N_BEST,
                                 MAX_ANSWER_LENGTH, True, None)
    with pytest.raises(tf.errors.InvalidArgumentError, match="question and context must hold"):
        module.serve_text(tf.constant(["Who?", "Where?"]), tf.constant(["Anna was here."]))
    out = module.serve_text(tf.constant(["Who?"]), tf.constant(["Anna was here."]))
    assert "null_odds" not in out  # a v1.1 model


def test_a_batch_without_windows_answers_nothing(v2_modules):
    """Contexts without pieces (or no texts at all) leave the model no window to read."""
    module = _v2_module(v2_modules, True)
    module.null_threshold.assign(0.0)
    for questions, contexts in ((["Who?", ""], ["", " \t\u202f"]), ([], [])):
        out = module.serve_text(tf.constant(questions, tf.string), tf.constant(contexts, tf.string))
        assert [a.decode() for a in out["answer"].numpy()] == [""] * len(questions)
        assert out["answer_start"].numpy().tolist() == [-1] * len(questions)
        assert out["has_answer"].numpy().tolist() == [False] * len(questions)
        assert out["score"].numpy().tolist() == [0.0] * len(questions)
