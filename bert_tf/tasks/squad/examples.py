"""SQuAD v1.1 / v2.0 files → examples (one code path for both versions).

An *example* is one question on one context: the context split into whitespace words (as the
original splits it) and, in training, the answer as a span of those words. `squad_features` turns
examples into model windows; `squad_postprocess` turns the model's logits back into answer text.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import os
import re
from typing import Any, Callable, Sequence

from absl import logging

from bert_tf import filesystem
from bert_tf.errors import EmptyInputError, MissingFileError, UserError

# A context word: the original splits contexts on these characters only (U+202F is the narrow
# no-break space), not on every Unicode space.
_CONTEXT_WORD = re.compile("[^ \t\r\n\u202f]+")


class SquadFormatError(UserError):
    """A SQuAD JSON file that cannot be read: bad JSON, missing keys, offsets out of range."""


@dataclasses.dataclass
class SquadExample:
    """One question on one context.

    Attributes:
      qas_id: the question id (`qas[].id`).
      question_text: the question.
      doc_tokens: the context split on whitespace; examples of one paragraph share this list.
      orig_answer_text: training only: the answer text as written in the file ("" if impossible).
      start_position, end_position: training only: the answer's first/last word in `doc_tokens`
        (-1 for impossible questions, None at prediction time).
      is_impossible: v2.0 questions without an answer.
    """

    qas_id: str
    question_text: str
    doc_tokens: list[str]
    orig_answer_text: str | None = None
    start_position: int | None = None
    end_position: int | None = None
    is_impossible: bool = False


@dataclasses.dataclass
class ReadStats:
    """Counts of what reading a SQuAD file kept and skipped (for the run summary)."""

    questions: int = 0
    impossible: int = 0
    skipped_answer_mismatch: int = 0
    skipped_no_answer: int = 0
    extra_answers_ignored: int = 0


def split_context(text: str) -> tuple[list[str], list[int]]:
    """Splits a context into whitespace words.

    Returns:
      (words, word_starts): the words and the character offset where each begins.
    """
    matches = list(_CONTEXT_WORD.finditer(text))
    return [m.group() for m in matches], [m.start() for m in matches]


def word_at(word_starts: Sequence[int], offset: int) -> int:
    """The word holding character `offset`; whitespace belongs to the word before it (-1: none)."""
    return bisect.bisect_right(word_starts, offset) - 1


def load_squad_json(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Reads a SQuAD file and returns its `data` list (articles), with clear errors."""
    try:
        dataset = json.loads(filesystem.read_text(os.fspath(path)))
    except FileNotFoundError:
        raise MissingFileError(f"{path}: SQuAD file not found") from None
    except UnicodeDecodeError as e:
        raise SquadFormatError(f"{path}: not UTF-8 ({e.reason} at byte {e.start}); JSON files "
                               "are UTF-8") from None
    except json.JSONDecodeError as e:
        raise SquadFormatError(
            f"{path}: not valid JSON (line {e.lineno}, column {e.colno}): {e.msg}") from None
    if not isinstance(dataset, dict) or not isinstance(dataset.get("data"), list):
        raise SquadFormatError(f'{path}: expected a JSON object with a "data" list of articles '
                               "(SQuAD v1.1/v2.0 format)")
    return dataset["data"]


def _get(obj: Any, key: str, where: str, path: str | os.PathLike) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise SquadFormatError(f'{path}: {where} has no "{key}" key')
    return obj[key]


def read_squad_examples(path: str | os.PathLike, is_training: bool,
                        version_2_with_negative: bool = False
                        ) -> tuple[list[SquadExample], ReadStats]:
    """Reads a SQuAD v1.1 or v2.0 file into examples.

    In training, the first answer of each question is used. An answer whose text is not found at its
    `answer_start` is skipped with a warning naming the question id; so is a v1.1 question without
    answers. Both are counted in the returned stats.

    Raises:
      SquadFormatError: malformed JSON, a missing key (naming the question id or paragraph), an
        `answer_start` outside its context, or a v2.0 file read without `version_2_with_negative`.
      EmptyInputError: the file holds no question (in training: none with a usable answer).
    """
    stats = ReadStats()
    examples: list[SquadExample] = []
    for a, article in enumerate(load_squad_json(path)):
        for p, paragraph in enumerate(_get(article, "paragraphs", f"article {a}", path)):
            where = f"article {a} paragraph {p}"
            context = _get(paragraph, "context", where, path)
            words, word_starts = split_context(context)
            if not words:
                raise SquadFormatError(f"{path}: {where} has an empty context")
            for qa in _get(paragraph, "qas", where, path):
                qas_id = str(_get(qa, "id", f"a question in {where}", path))
                question = _get(qa, "question", f"question {qas_id}", path)
                stats.questions += 1
                example = SquadExample(qas_id, question, words)
                if is_training and not _add_answer(example, qa, context, word_starts,
                                                   version_2_with_negative, stats, path):
                    continue
                examples.append(example)
    if not examples:
        raise EmptyInputError(_no_questions_message(path, stats))
    return examples, stats


def _no_questions_message(path: str | os.PathLike, stats: ReadStats) -> str:
    """Why a SQuAD file gave no examples: no questions at all, or none with a usable answer."""
    if not stats.questions:
        return (f'{path}: no questions; expected articles with "paragraphs" whose "qas" hold '
                "questions (SQuAD v1.1/v2.0 format)")
    return (f"{path}: none of its {stats.questions} questions has a usable answer "
            f"({stats.skipped_answer_mismatch} answers do not match the context at their "
            f"answer_start, {stats.skipped_no_answer} questions have no answers)")


def _add_answer(example: SquadExample, qa: dict, context: str, word_starts: list[int],
                version_2_with_negative: bool, stats: ReadStats, path: str | os.PathLike) -> bool:
    """Sets the training answer of `example`; returns False when the question must be skipped."""
    qas_id = example.qas_id
    if qa.get("is_impossible", False):
        if not version_2_with_negative:
            raise SquadFormatError(
                f"{path}: question {qas_id} has is_impossible=true: this is a SQuAD 2.0 file; "
                "pass --version_2_with_negative=true")
        example.is_impossible, example.orig_answer_text = True, ""
        example.start_position = example.end_position = -1
        stats.impossible += 1
        return True
    answers = _get(qa, "answers", f"question {qas_id}", path)
    if not answers:
        logging.warning("Skipping question %s: it has no answers (training on SQuAD v1.1 needs "
                        "one; SQuAD 2.0 files mark unanswerable questions with is_impossible)",
                        qas_id)
        stats.skipped_no_answer += 1
        return False
    stats.extra_answers_ignored += len(answers) - 1
    text = _get(answers[0], "text", f"the answer of question {qas_id}", path)
    offset = _get(answers[0], "answer_start", f"the answer of question {qas_id}", path)
    if isinstance(text, str) and not text.strip():
        raise SquadFormatError(f"{path}: question {qas_id}: the answer's text is empty "
                               f"(answer_start={offset!r}); give the answer's words, or mark an "
                               "unanswerable question with is_impossible (SQuAD 2.0)")
    if not (text and isinstance(offset, int) and 0 <= offset <= len(context) - len(text)):
        raise SquadFormatError(f"{path}: question {qas_id}: answer_start={offset!r} with answer "
                               f"length {len(text)} does not fit its context of {len(context)} "
                               "characters")
    start, end = word_at(word_starts, offset), word_at(word_starts, offset + len(text) - 1)
    # The answer must read the same in the context, up to whitespace (the original's check).
    actual = " ".join(example.doc_tokens[max(start, 0):end + 1])
    if start < 0 or " ".join(text.split()) not in actual:
        logging.warning("Skipping question %s: answer %r not found at answer_start=%d "
                        "(context has %r)", qas_id, text, offset, actual)
        stats.skipped_answer_mismatch += 1
        return False
    example.orig_answer_text, example.start_position, example.end_position = text, start, end
    return True


def check_conversion_keeps_offsets(path: str | os.PathLike, convert: Callable[[str, str], str]) -> None:
    """Runs `convert(text, where)` (`chinese.conversion.make_length_preserving_converter`) over
    every context and question of a SQuAD file, so that a conversion that would shift the
    answer offsets stops the run with the file and question named."""
    for a, article in enumerate(load_squad_json(path)):
        for p, paragraph in enumerate(article.get("paragraphs", [])):
            qas = paragraph.get("qas", [])
            first = f", question {qas[0].get('id')}" if qas else ""
            convert(paragraph.get("context", ""), f"{path}: article {a} paragraph {p}{first} (context)")
            for qa in qas:
                convert(qa.get("question", ""), f"{path}: question {qa.get('id')}")
