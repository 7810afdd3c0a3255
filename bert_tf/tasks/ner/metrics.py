"""Entity-level tagging metrics (NER): exact-span precision, recall and F1 per type and overall,
plus token accuracy. Pure NumPy; no TensorFlow.

Tags are `O` or `<prefix>-<TYPE>` with prefix B, I, E or S (`B-PER`, `I-LOC`, `S-ORG`). Entities
are decoded with conlleval's chunk rules, so ill-formed sequences count as conlleval counts them:
an `I-` after `O` (or after another type) starts an entity, a change of type ends one, and IOB1
files (`I-` everywhere, `B-` only between two adjacent entities of one type) decode correctly.
conlleval only knows B and I; the E/S rules extend it the way BIOES means them: an entity ends
after `E-`/`S-`, and `S-`/`B-` always start a new one. For BIO input the rules are conlleval's,
exactly:

  a tag starts an entity  ⇔  tag ≠ O  and  (prefix ∈ {B, S}
                                            or previous prefix ∈ {E, S, O} and prefix ∈ {I, E}
                                            or type ≠ previous type)
  an entity ends before a tag  ⇔  previous tag ≠ O  and  (the tag starts one or is O)

A predicted entity is correct when one gold entity has the same type, start and end.
"""

from __future__ import annotations

import collections
from typing import Mapping, NamedTuple, Sequence

import numpy as np

OUTSIDE = "O"
PREFIXES = ("B", "I", "E", "S")


class Entity(NamedTuple):
    """A decoded entity: its type and the words [start, end) it covers."""

    type: str
    start: int
    end: int


def split_tag(tag: str) -> tuple[str, str]:
    """`B-PER` -> ("B", "PER"); `O` -> ("O", "").

    Raises:
      ValueError: the tag is neither `O` nor `<B|I|E|S>-<TYPE>` (the type may hold hyphens).
    """
    if tag == OUTSIDE:
        return OUTSIDE, ""
    prefix, sep, entity_type = tag.partition("-")
    if not sep or prefix not in PREFIXES or not entity_type:
        raise ValueError(f"tag {tag!r} is not O or B-/I-/E-/S-<TYPE> (e.g. B-PER)")
    return prefix, entity_type


def _tag_codes(tags: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """int32 [T] codes of `tags` and the distinct tags in code order (one dict lookup a tag,
    much faster than sorting strings)."""
    codes: dict[str, int] = {}
    ids = np.fromiter((codes.setdefault(tag, len(codes)) for tag in tags), np.int32, len(tags))
    return ids, list(codes)


_O, _B, _I, _E, _S = range(5)  # prefix codes


def _flat_entities(tags: Sequence[str], sentence_starts: np.ndarray) -> list[tuple[str, int, int]]:
    """Entities of all sentences at once, as (type, start, end) over the concatenated tags.

    Args:
      tags: every sentence's tags, concatenated (T tags).
      sentence_starts: bool [T], True at the first tag of each sentence (where "previous" is O).
    """
    if not len(tags):
        return []
    ids, distinct = _tag_codes(tags)
    parts = [split_tag(tag) for tag in distinct]
    type_names = list(dict.fromkeys(t for _, t in parts))
    prefix = np.array([(OUTSIDE, *PREFIXES).index(p) for p, _ in parts])[ids]  # [T]
    type_codes = np.array([type_names.index(t) for _, t in parts])[ids]  # [T]
    prev_prefix = np.concatenate([[_O], prefix[:-1]])
    prev_type = np.concatenate([[-1], type_codes[:-1]])
    prev_prefix[sentence_starts] = _O
    prev_type[sentence_starts] = -1
    inside = prefix != _O
    starts = inside & (np.isin(prefix, (_B, _S))
                       | (np.isin(prev_prefix, (_E, _S, _O)) & np.isin(prefix, (_I, _E)))
                       | (type_codes != prev_type))
    # An entity runs until the next tag that starts one or is O (a tag after E-/S- or at a
    # sentence start is one of those).
    breaks = np.flatnonzero(starts | ~inside)
    begin = np.flatnonzero(starts)
    stop = np.append(breaks, len(tags))[np.searchsorted(breaks, begin, side="right")]
    names = [type_names[code] for code in type_codes[begin].tolist()]
    return list(zip(names, begin.tolist(), stop.tolist()))


def _flatten(sentences: Sequence[Sequence[str]]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(concatenated tags, bool [T] sentence starts, int64 [len + 1] sentence offsets)."""
    lengths = np.array([len(s) for s in sentences], np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    starts = np.zeros(int(offsets[-1]), bool)
    starts[offsets[:-1][lengths > 0]] = True
    return [tag for sentence in sentences for tag in sentence], starts, offsets


def sentence_entities(sentences: Sequence[Sequence[str]]) -> list[list[Entity]]:
    """The entities of each sentence, in order, with word positions within the sentence.

    All sentences are decoded in one vectorised pass (see the module docstring for the rules).
    """
    flat, starts, offsets = _flatten(sentences)
    out: list[list[Entity]] = [[] for _ in sentences]
    found = _flat_entities(flat, starts)
    owners = np.searchsorted(offsets, [start for _, start, _ in found], side="right") - 1
    for (entity_type, start, end), owner in zip(found, owners.tolist()):
        base = int(offsets[owner])
        out[owner].append(Entity(entity_type, start - base, end - base))
    return out


def entities(tags: Sequence[str]) -> list[Entity]:
    """The entities of one sentence, in order (see the module docstring for the rules)."""
    return sentence_entities([tags])[0]


def tags_from_entities(spans: Sequence[Entity], length: int, scheme: str) -> list[str]:
    """Tags of a sentence of `length` words holding `spans` (non-overlapping), in `scheme`.

    Args:
      spans: entities (type, start, end).
      length: number of words.
      scheme: "bio" (B- then I-) or "bioes" (S- for one word; B-, I-..., E- otherwise).
    """
    if scheme not in ("bio", "bioes"):
        raise ValueError(f"tag scheme must be bio or bioes, got {scheme!r}")
    tags = [OUTSIDE] * length
    for entity_type, start, end in spans:
        tags[start:end] = [f"I-{entity_type}"] * (end - start)
        tags[start] = f"B-{entity_type}"
        if scheme == "bioes":
            if end - start == 1:
                tags[start] = f"S-{entity_type}"
            else:
                tags[end - 1] = f"E-{entity_type}"
    return tags


class TypeScores(NamedTuple):
    """Scores of one entity type (or of all types: "overall")."""

    precision: float
    recall: float
    f1: float
    gold: int
    predicted: int
    correct: int


def _scores(gold: int, predicted: int, correct: int) -> TypeScores:
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return TypeScores(precision, recall, f1, gold, predicted, correct)


class TaggingScores(NamedTuple):
    """What `evaluate` returns.

    Attributes:
      overall: micro-averaged over all entities of all types.
      per_type: {type: TypeScores}, for every type found in the gold or predicted tags.
      accuracy: fraction of words whose predicted tag equals the gold tag.
      num_words: words scored.
    """

    overall: TypeScores
    per_type: Mapping[str, TypeScores]
    accuracy: float
    num_words: int


def evaluate(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> TaggingScores:
    """Entity-level P/R/F1 (exact spans) per type and overall, and token accuracy.

    Args:
      gold: each sentence's gold tags.
      predicted: each sentence's predicted tags, sentence for sentence as long as `gold`'s.

    Raises:
      ValueError: the sentence counts or lengths differ, or a tag is malformed.
    """
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted ones")
    for i, (g, p) in enumerate(zip(gold, predicted)):
        if len(g) != len(p):
            raise ValueError(f"sentence {i}: {len(g)} gold tags but {len(p)} predicted ones")
    gold_flat, starts, _ = _flatten(gold)
    predicted_flat, _, _ = _flatten(predicted)
    gold_set = set(_flat_entities(gold_flat, starts))
    predicted_set = set(_flat_entities(predicted_flat, starts))
    correct_set = gold_set & predicted_set
    types = sorted({e[0] for e in gold_set | predicted_set})
    counts = [collections.Counter(e[0] for e in s) for s in (gold_set, predicted_set, correct_set)]
    per_type = {t: _scores(*(count[t] for count in counts)) for t in types}
    num_words = len(gold_flat)
    codes, _ = _tag_codes(gold_flat + predicted_flat)
    accuracy = float(np.mean(codes[:num_words] == codes[num_words:])) if num_words else 0.0
    return TaggingScores(_scores(len(gold_set), len(predicted_set), len(correct_set)), per_type,
                         accuracy, num_words)


def results_entries(scores: TaggingScores, prefix: str = "eval_") -> dict[str, float]:
    """Flat `key: value` pairs for eval_results.txt.

    Keys: `<prefix>precision`, `recall`, `f1`, `accuracy` (token accuracy), and per entity type
    `<prefix><TYPE>_precision`, `_recall`, `_f1`.
    """
    out = {f"{prefix}precision": scores.overall.precision, f"{prefix}recall": scores.overall.recall,
           f"{prefix}f1": scores.overall.f1, f"{prefix}accuracy": scores.accuracy}
    for entity_type, type_scores in scores.per_type.items():
        for name in ("precision", "recall", "f1"):
            out[f"{prefix}{entity_type}_{name}"] = getattr(type_scores, name)
    return out
