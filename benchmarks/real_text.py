"""Real English text for the benchmarks: Debian's Python documentation as pretraining input.

    apt-get install python3.11-doc
    python benchmarks/real_text.py --output_file=/tmp/real/pydocs.txt

Writes one sentence per line and a blank line between documents (one document per reST source
file), the layout create_pretraining_data.py reads: the prose paragraphs only (code blocks,
directives and heading underlines are dropped, inline roles reduced to their text). About 3 MB of
running English written by people outside this project; never commit it.
"""

from __future__ import annotations

import argparse
import glob
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output_file", required=True)
    parser.add_argument("--sources", default=DEFAULT_SOURCES, help="a recursive glob")
    args = parser.parse_args()
    paths = sorted(glob.glob(args.sources, recursive=True))
    if not paths:
        parser.error(f"nothing matches {args.sources}: apt-get install python3.11-doc")
    total = 0
    with open(args.output_file, "w", encoding="utf-8") as out:
        for path in paths:
            with open(path, encoding="utf-8", errors="ignore") as f:
                document = [s for p in paragraphs(f) for s in sentences(p)]
            if len(document) >= 3:
                text = "\n".join(document) + "\n\n"
                out.write(text)
                total += len(text.encode("utf-8"))
    print(f"{args.output_file}: {total / 1e6:.1f} MB from {len(paths)} files")


if __name__ == "__main__":
    main()
