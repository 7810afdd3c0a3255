"""English-like sample text written by this project: a seeded generator for demos, tests and benchmarks.

The output has the layout `create_pretraining_data.py` reads (one sentence per line, a blank line
between documents) and statistics close to encyclopedic English text: sentences of about 20-25
WordPiece tokens with a long tail, documents from one-line stubs to long articles, a short title
line per document, punctuation, numbers, years, names and invented technical words that split into
several word pieces. Everything is drawn from a grammar and word lists in this file, so the text is ours
and the same seed always gives the same bytes.

    python -m bert_tf.text.sample_text --bytes 500000 --out demo/data/corpus.txt
"""

from __future__ import annotations

import argparse
import random
from typing import Iterator, Sequence

from bert_tf import filesystem

_NOUNS = """
time year people way day man woman child world life hand part place case week company system program
question work government number night point home water room mother area money story fact month lot
right study book eye job word business issue side kind head house service friend father power hour
game line end member law car city community name president team minute idea kid body information
school face others level office door health person art war history party result change morning
reason research girl guy moment air teacher force education foot boy age policy process music market
sense nation plan college interest death experience effect use class control care field development
role effort rate heart drug show leader light voice wife police mind price report decision son view
relationship town road arm difference value building action model season society tax director
position player record paper space ground form event official matter center couple site project
activity star table need court oil situation cost industry figure street image phone data picture
practice piece land product doctor wall patient worker news test movie north love support technology
step baby computer type attention film tree source organization hair window evidence population
site river island mountain bridge harbor valley village castle church station library museum garden
railway canal coast forest lake province county district region border capital university theory
method engine signal network circuit protocol language dialect manuscript chapter volume edition
treaty alliance election council parliament minister battle army fleet trade merchant farmer crop
harvest festival ceremony temple monastery painting sculpture novel poem author composer orchestra
album single label tour audience critic review award prize medal champion league tournament coach
species genus habitat plant animal bird fish insect mineral rock soil climate temperature storm
flood drought fire disease vaccine hospital clinic treatment symptom cell protein gene molecule
atom particle energy wave frequency orbit planet moon telescope satellite rocket aircraft vessel
ship port route journey expedition colony settlement empire dynasty kingdom republic state army
""".split()

_VERBS = """
build describe develop establish publish design create produce release record discover explore
describe examine measure observe study write compose paint found organize expand reduce increase
replace restore protect defend attack capture destroy rebuild connect divide cross enter leave reach
join support oppose approve reject elect appoint defeat win lose host launch introduce adopt abandon
translate collect preserve display visit serve train teach lead follow control manage operate
""".split()

_PAST = {"build": "built", "write": "wrote", "win": "won", "lose": "lost", "lead": "led",
         "teach": "taught", "found": "founded"}

_IRREGULAR_PLURALS = {"man": "men", "woman": "women", "child": "children", "wife": "wives", "foot": "feet",
                      "life": "lives", "mouse": "mice", "genus": "genera", "thesis": "theses"}

_ADJECTIVES = """
new good high old great big small large national young different long little important political
bad white real best right social only public sure low early able human local late hard major better
economic strong possible whole free military true federal international full special easy clear
recent certain personal open red difficult available likely short single medical current wrong
private past foreign fine common poor natural significant similar hot dead central happy serious
ready simple left physical general environmental financial blue democratic dark various entire
close legal religious cold final main green nice huge popular traditional cultural northern southern
eastern western ancient medieval modern royal coastal rural urban narrow wide heavy rapid gradual
annual regional industrial agricultural commercial musical scientific technical experimental
""".split()

_ADVERBS = """
also often later still never already soon then however eventually initially mainly largely
originally nearly almost slowly quickly widely briefly rarely recently formally officially
""".split()

_PREPOSITIONS = "in on at near from with by during after before under across along between among through".split()
_CONJUNCTIONS = ["and", "but", "while", "although", "because", "as", "since", "whereas"]
_DETERMINERS = ["the", "the", "the", "a", "its", "their", "this", "that", "several", "many", "some"]
_PLURAL_DETERMINERS = {"several", "many", "some"}
_SINGULAR_DETERMINERS = {"a", "this", "that"}
_PRONOUNS = ["he", "she", "it", "they"]
_MONTHS = ("January February March April May June July August September October November "
           "December").split()
_ONSETS = ("b br c ch cl d dr f fl g gr h j k kr l m n p pl pr qu r s sh sk st t th tr v w z "
           "").split(" ")
_VOWELS = "a e i o u ai ea ou io ae y".split()
_CODAS = ("n r l s th nd rk st x m ng").split() + ["", "", ""]


def _zipf_weights(n: int, exponent: float = 1.0) -> list[float]:
    return [1.0 / (rank + 1) ** exponent for rank in range(n)]


class _Lexicon:
    """Word lists with Zipf-like frequencies; invented names and terms come from a fixed seed."""

    def __init__(self, num_invented: int = 2500):
        lex_rng = random.Random(20240601)  # fixed: the lexicon is the same for every corpus seed
        self.nouns = _NOUNS
        self.adjectives = _ADJECTIVES
        invented = sorted({self._invent(lex_rng) for _ in range(num_invented)})
        lex_rng.shuffle(invented)
        split = len(invented) // 3
        self.people = [w.capitalize() for w in invented[:split]]
        self.places = [w.capitalize() for w in invented[split:2 * split]]
        self.terms = invented[2 * split:]
        self.noun_weights = _zipf_weights(len(self.nouns), 0.9)
        self.adjective_weights = _zipf_weights(len(self.adjectives), 0.8)
        self.name_weights = _zipf_weights(split, 0.7)
        self.term_weights = _zipf_weights(len(self.terms), 0.8)

    @staticmethod
    def _invent(rng: random.Random) -> str:
        syllables = rng.choice((1, 2, 2, 2, 3, 3))
        return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
                       for _ in range(syllables))


class _SentenceGrammar:
    """A small phrase grammar; each method returns a list of words and punctuation marks."""

    def __init__(self, lexicon: _Lexicon, rng: random.Random):
        self.lex = lexicon
        self.rng = rng

    def _pick(self, words: Sequence[str], weights: Sequence[float]) -> str:
        return self.rng.choices(words, weights)[0]

    def noun(self, plural: bool) -> str:
        if self.rng.random() < 0.12:
            word = self._pick(self.lex.terms, self.lex.term_weights)
        else:
            word = self._pick(self.lex.nouns, self.lex.noun_weights)
        if not plural or word in ("people", "data", "others"):
            return word
        if word in _IRREGULAR_PLURALS:
            return _IRREGULAR_PLURALS[word]
        if word.endswith(("s", "x", "ch", "sh")):
            return word + "es"
        return word[:-1] + "ies" if word.endswith("y") and word[-2] not in "aeiou" else word + "s"

    def name(self) -> list[str]:
        r = self.rng.random()
        if r < 0.5:
            first = self._pick(self.lex.people, self.lex.name_weights)
            return [first, self._pick(self.lex.people, self.lex.name_weights)]
        if r < 0.8:
            return [self._pick(self.lex.places, self.lex.name_weights)]
        return ["the", self._pick(self.lex.places, self.lex.name_weights), self.rng.choice(
            ("River", "Valley", "Institute", "Company", "Council", "Museum", "Railway"))]

    def number(self) -> list[str]:
        r = self.rng.random()
        if r < 0.35:
            return [str(self.rng.randint(1500, 2023))]
        if r < 0.55:
            return [self.rng.choice(_MONTHS), str(self.rng.randint(1, 28)) + ",", str(self.rng.randint(1700, 2023))]
        if r < 0.75:
            return [f"{self.rng.randint(1, 99)}.{self.rng.randint(0, 9)}", "percent"]
        return [f"{self.rng.randint(2, 950):,}" if self.rng.random() < 0.5 else f"{self.rng.randint(1000, 99000):,}"]

    def noun_phrase(self, depth: int = 0) -> list[str]:
        r = self.rng.random()
        if r < 0.2:
            return self.name()
        if r < 0.27 and depth == 0:
            return [self.rng.choice(_PRONOUNS)]
        determiner = self.rng.choice(_DETERMINERS)
        words = [determiner]
        while self.rng.random() < 0.45 and len(words) < 3:
            words.append(self._pick(self.lex.adjectives, self.lex.adjective_weights))
        plural = determiner in _PLURAL_DETERMINERS or (
            determiner not in _SINGULAR_DETERMINERS and self.rng.random() < 0.25)
        words.append(self.noun(plural))
        if depth < 2 and self.rng.random() < 0.3:
            words += ["of"] + self.noun_phrase(depth + 1)
        return words

    def verb(self) -> str:
        verb = self.rng.choice(_VERBS)
        if verb in _PAST:
            return _PAST[verb]
        if verb.endswith("e"):
            return verb + "d"
        return verb[:-1] + "ied" if verb.endswith("y") and verb[-2] not in "aeiou" else verb + "ed"

    def prepositional_phrase(self, depth: int) -> list[str]:
        if self.rng.random() < 0.3:
            return [self.rng.choice(("in", "by", "until", "after")), *self.number()]
        return [self.rng.choice(_PREPOSITIONS)] + self.noun_phrase(depth + 1)

    def clause(self, depth: int = 0) -> list[str]:
        words = self.noun_phrase(depth)
        if self.rng.random() < 0.2:
            words.append(self.rng.choice(_ADVERBS))
        if self.rng.random() < 0.15:
            auxiliary = "were" if words[-1].endswith("s") or words[-1] == "they" else "was"
            words += [auxiliary, self.verb(), "by"] + self.noun_phrase(depth + 1)
        else:
            words += [self.verb()] + self.noun_phrase(depth + 1)
        while self.rng.random() < 0.45 and len(words) < 30:
            words += self.prepositional_phrase(depth)
        if self.rng.random() < 0.08:
            words += ["(", *self.number(), ")"]
        return words

    def sentence(self) -> str:
        words = self.clause()
        if self.rng.random() < 0.3:
            words = [self.rng.choice(_ADVERBS).capitalize(), ","] + words
        if self.rng.random() < 0.35:
            words += [",", self.rng.choice(_CONJUNCTIONS)] + self.clause(1)
        elif self.rng.random() < 0.12:
            words += [";"] + self.clause(1)
        end = self.rng.choices((".", "?", "!"), (0.96, 0.02, 0.02))[0]
        return _join(words, end)

    def title(self) -> str:
        words = self.noun_phrase(1)[1:] if self.rng.random() < 0.5 else []
        words = words or self.name()
        return _join([w.capitalize() for w in words], "")


def _join(words: list[str], end: str) -> str:
    text = " ".join(words) + end
    text = text.replace(" ,", ",").replace(" ;", ";").replace("( ", "(").replace(" )", ")")
    return text[0].upper() + text[1:]


def _document_length(rng: random.Random) -> int:
    """Sentences per document: a third are stubs of 1-5, most 6-40, some long articles up to 150.

    Tuned so that `create_pretraining_data` gives the original's instance statistics on English
    (about 106 tokens per instance, 16% short instances, 57% "random next").
    """
    r = rng.random()
    if r < 0.35:
        return rng.randint(1, 5)
    if r < 0.92:
        return rng.randint(6, 40)
    return rng.randint(41, 150)


def generate_documents(seed: int = 0) -> Iterator[list[str]]:
    """Yields documents forever, each a list of lines: a title line then sentences."""
    rng = random.Random(seed)
    grammar = _SentenceGrammar(_Lexicon(), rng)
    while True:
        yield [grammar.title()] + [grammar.sentence() for _ in range(_document_length(rng))]


def generate_corpus(num_bytes: int | None = None, num_docs: int | None = None, seed: int = 0) -> str:
    """Generates a corpus of whole documents, one sentence per line, blank line between documents.

    Args:
      num_bytes: stop after the first document that brings the UTF-8 size to at least this.
      num_docs: or stop after this many documents (exactly one of the two must be given).
      seed: the same seed always gives the same text.

    Returns:
      The text, ending with a newline.
    """
    if (num_bytes is None) == (num_docs is None):
        raise ValueError("give exactly one of num_bytes or num_docs")
    parts: list[str] = []
    size = 0
    for count, document in enumerate(generate_documents(seed)):
        if (num_docs is not None and count >= num_docs) or (num_bytes is not None and size >= num_bytes):
            break
        text = "\n".join(document) + "\n"
        parts.append(text)
        size += len(text.encode("utf-8")) + 1
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bytes", type=int, help="approximate size of the output in bytes")
    parser.add_argument("--docs", type=int, help="number of documents instead of --bytes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="output text file")
    args = parser.parse_args(argv)
    text = generate_corpus(num_bytes=args.bytes, num_docs=args.docs, seed=args.seed)
    filesystem.write_atomically(args.out, text)


if __name__ == "__main__":
    main()
