"""Real English text for the benchmarks: Debian's Python documentation as pretraining input,
and as a sentence-classification set.

    apt-get install python3.11-doc
    python benchmarks/real_text.py --output_file=/tmp/real/pydocs.txt
    python benchmarks/real_text.py --classification_dir=/tmp/real/sections

Writes one sentence per line and a blank line between documents (one document per reST source
file), the layout create_pretraining_data.py reads: the prose paragraphs only (code blocks,
directives and heading underlines are dropped, inline roles reduced to their text). About 3 MB of
running English written by people outside this project; never commit it.

`--classification_dir` writes `train.tsv`, `dev.tsv` and `custom_spec.json` (the
`run_classifier.py --task_name=custom` layout): each sentence labelled with the part of the
documentation it comes from (library, c-api, whatsnew, howto, ...: the `--num_classes` largest
parts, at most `--per_class` training sentences each and every tenth sentence to dev, or with
`--dev_per_class` that many dev sentences spread evenly over the part). Real sentence lengths, so
real padding: `benchmarks/finetune_vs_transformers.py --classifier_dir` fine-tunes on it. A dev
set of thousands (`--num_classes=5 --per_class=480 --dev_per_class=550`: 2750 dev sentences, one is
0.04 point) resolves a half-point accuracy difference, which 100 dev sentences cannot.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import re

DEFAULT_SOURCES = "/usr/share/doc/python3.11/html/_sources/**/*.rst.txt"
_UNDERLINE = re.compile(r"[=\-~^*#\"'+`:.]+")
_ROLE = re.compile(r":\w+:`~?([^`<]*?)(?: <[^>]*>)?`")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(])")


def paragraphs(lines) -> list[str]:
    """The prose paragraphs of a reST file, each joined into one line."""
    found, current = [], []
    for line in lines:
        prose = line.strip() and not line.startswith((" ", "\t", ".."))
        if not prose or _UNDERLINE.fullmatch(line.rstrip("\n")):
            if current:
                found.append(" ".join(current))
                current = []
            continue
        current.append(line.strip())
    if current:
        found.append(" ".join(current))
    return found


def sentences(paragraph: str) -> list[str]:
    text = _ROLE.sub(r"\1", paragraph).replace("``", "")
    if len(text) < 40:
        return []
    return [s for s in _SENTENCE_END.split(text) if len(s) > 10]


def document_sentences(path: str) -> list[str]:
    with open(path, encoding="utf-8", errors="ignore") as f:
        return [s.replace("\t", " ") for p in paragraphs(f) for s in sentences(p)]


def is_dev(index: int, taken: int, dev_count: int) -> bool:
    """Whether sentence `index` of the `taken` ones of a part goes to dev: `dev_count` of them,
    evenly spaced."""
    return (index + 1) * dev_count // taken > index * dev_count // taken


def write_classification(paths: list[str], out_dir: str, num_classes: int, per_class: int,
                         dev_per_class: int | None = None) -> None:
    """Sentences labelled by the documentation part they come from, as train/dev TSV files:
    per part `per_class` training sentences and every tenth to dev, or with `dev_per_class`
    that many dev sentences spread evenly (fewer in proportion where a part is short)."""
    by_part: dict[str, list[str]] = collections.defaultdict(list)
    for path in paths:
        part = os.path.relpath(path, os.path.commonpath(paths)).split(os.sep)[0]
        if not part.endswith(".rst.txt"):  # top-level pages belong to no part
            by_part[part].extend(document_sentences(path))
    parts = sorted(sorted(by_part, key=lambda p: -len(by_part[p]))[:num_classes])
    os.makedirs(out_dir, exist_ok=True)
    rows = {"train": [], "dev": []}
    for part in parts:
        if dev_per_class is None:
            taken = by_part[part][:per_class * 10 // 9]
            dev = [index % 10 == 9 for index in range(len(taken))]
        else:
            taken = by_part[part][:per_class + dev_per_class]
            dev_count = len(taken) * dev_per_class // (per_class + dev_per_class)
            dev = [is_dev(index, len(taken), dev_count) for index in range(len(taken))]
        for sentence, to_dev in zip(taken, dev):
            rows["dev" if to_dev else "train"].append((sentence, part))
    for split, split_rows in rows.items():
        with open(os.path.join(out_dir, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("sentence\tlabel\n" + "".join(f"{s}\t{label}\n" for s, label in split_rows))
    spec = {"format": "tsv", "header": True, "text_a": "sentence", "label": "label", "labels": parts,
            "metrics": ["accuracy"]}
    with open(os.path.join(out_dir, "custom_spec.json"), "w", encoding="utf-8") as f:
        json.dump(spec, f, indent=2)
    print(f"{out_dir}: {len(rows['train'])} train / {len(rows['dev'])} dev sentences, classes {parts}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output_file", help="pretraining text (one sentence per line)")
    parser.add_argument("--classification_dir", help="a sentence-classification set (see above)")
    parser.add_argument("--num_classes", type=int, default=8)
    parser.add_argument("--per_class", type=int, default=1500)
    parser.add_argument("--dev_per_class", type=int, help="dev sentences per class, spread "
                        "evenly (default: every tenth sentence, about --per_class / 9)")
    parser.add_argument("--sources", default=DEFAULT_SOURCES, help="a recursive glob")
    args = parser.parse_args()
    paths = sorted(glob.glob(args.sources, recursive=True))
    if not paths:
        parser.error(f"nothing matches {args.sources}: apt-get install python3.11-doc")
    if not args.output_file and not args.classification_dir:
        parser.error("give --output_file, --classification_dir or both")
    if args.classification_dir:
        write_classification(paths, args.classification_dir, args.num_classes, args.per_class,
                             args.dev_per_class)
    if not args.output_file:
        return
    total = 0
    with open(args.output_file, "w", encoding="utf-8") as out:
        for path in paths:
            document = document_sentences(path)
            if len(document) >= 3:
                text = "\n".join(document) + "\n\n"
                out.write(text)
                total += len(text.encode("utf-8"))
    print(f"{args.output_file}: {total / 1e6:.1f} MB from {len(paths)} files")


if __name__ == "__main__":
    main()
