"""What the docs show a user: the fenced commands and Python snippets of README.md and docs/*.md.

Conventions the docs follow (and tests/test_docs.py checks):

- A fence tagged `bash`, `shell`, `sh` or `console`, or untagged, may hold commands; a command is
  a line (backslash continuations joined) that runs `python <script>.py` or a `bert-*` console
  command. Its `--flags` must exist in that script.
- A fence tagged `python`, or an untagged one whose text parses as Python and imports
  something, is a Python snippet; its `from bert_tf... import` lines must resolve.
- `<!-- runnable -->` on the line before a fence: the test runs the fence (placeholders
  substituted from tests/test_docs.py's one table): shell commands from the repository's root,
  Python in a scratch directory. In a runnable Python fence, a line `expression  # literal`
  (`tokenizer.tokenize("...")  # ['cr', '##eme', ...]`) must give that value.
- The scripts' module docstrings are read as untagged fences too (their example commands).
- A documented default: a row of a table whose header starts `| flag | default |`, first cell
  `` `--flag` ``, second cell the default (`` `value` ``, a number, True/False, None, `""` or
  "required"); or the phrases "`--flag` (default X)" and "`--flag=X` (default)". The script is
  the nearest command in the same section (between headings), else the nearest above.
"""

from __future__ import annotations

import ast
import dataclasses
import glob
import os
import re
import shlex
import warnings

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))  # tests/support/..
RUNNABLE_MARKER = "<!-- runnable -->"
SHELL_TAGS = ("bash", "shell", "sh", "console", "")
_FENCE = re.compile(r"^(\s*)(```+)\s*([\w+-]*)\s*$")
_SCRIPT = re.compile(r"^(?:[\w./-]*/)?[\w-]+\.py$")


@dataclasses.dataclass(frozen=True)
class Fence:
    """One fenced block: its file, the line of its opening fence (1-based), tag, text."""

    path: str
    line: int
    tag: str
    text: str
    runnable: bool

    @property
    def where(self) -> str:
        return f"{os.path.relpath(self.path, REPO)}:{self.line}"


@dataclasses.dataclass(frozen=True)
class Command:
    """One documented command line: the script (repo-relative .py) and its --flags."""

    fence: Fence
    line: int
    script: str
    args: tuple[str, ...]
    text: str

    @property
    def where(self) -> str:
        return f"{os.path.relpath(self.fence.path, REPO)}:{self.line}"


def doc_files() -> list[str]:
    """README.md and every docs/*.md, whatever pages exist."""
    return [os.path.join(REPO, "README.md")] + sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))


def fences(path: str) -> list[Fence]:
    """The fenced blocks of one Markdown file, in order."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    found, i = [], 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, ticks, tag = match.groups()
        start, body = i, []
        i += 1
        while i < len(lines) and not (lines[i].strip() == ticks and lines[i].startswith(indent)):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        runnable = start > 0 and lines[start - 1].strip() == RUNNABLE_MARKER
        found.append(Fence(path, start + 1, tag.lower(), "\n".join(body) + "\n", runnable))
        i += 1
    return found


def all_fences() -> list[Fence]:
    return [fence for path in doc_files() for fence in fences(path)]


def docstring_fences() -> list[Fence]:
    """The module docstrings of the scripts (the repository root's and benchmarks/), whose
    example command lines a user copies as they copy the docs'."""
    paths = sorted(glob.glob(os.path.join(REPO, "*.py")) +
                   glob.glob(os.path.join(REPO, "benchmarks", "*.py")))
    found = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        text = ast.get_docstring(tree, clean=False)
        if text and os.path.basename(path) != "setup.py":
            found.append(Fence(path, 0, "", text, False))
    return found


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(offset of the first physical line, line) with backslash continuations joined."""
    out, current, first = [], "", None
    for offset, line in enumerate(text.split("\n")):
        if first is None:
            first = offset
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        out.append((first, current + line))
        current, first = "", None
    return out


def console_scripts() -> dict[str, str]:
    """`bert-*` console command → script file, from setup.py's SCRIPTS table."""
    with open(os.path.join(REPO, "setup.py"), encoding="utf-8") as f:
        table = re.search(r"SCRIPTS = \{(.*?)\}", f.read(), re.S).group(1)
    return {cmd: f"{mod}.py" for cmd, mod in re.findall(r'"([\w-]+)":\s*"(\w+)"', table)}


def _split(line: str) -> list[str] | None:
    code = line.split(" #", 1)[0] if " #" in line else line
    try:
        return shlex.split(code, comments=False)
    except ValueError:
        return None


def commands(fence: Fence) -> list[Command]:
    """The script invocations of a shell (or untagged) fence."""
    if fence.tag not in SHELL_TAGS:
        return []
    scripts = console_scripts()
    found = []
    for offset, line in _logical_lines(fence.text):
        words = _split(line.lstrip("$ ").strip())
        if not words:
            continue
        # `cd x && python y.py ...`, `FOO=1 python ...`, `time python ...`: the part that runs.
        while "&&" in words:
            words = words[words.index("&&") + 1:]
        while words and (re.match(r"^\w+=", words[0]) or words[0] in ("time", "nohup", "env")):
            words = words[1:]
        # bert-search runs the command after `--`: both are checked, each with its own flags.
        while words:
            nested = []
            if "--" in words:
                nested = words[words.index("--") + 1:]
                words = words[:words.index("--")]
            if words[0] in scripts:
                script, args = scripts[words[0]], words[1:]
            elif (re.match(r"^python[\d.]*$", words[0]) and len(words) > 1
                  and _SCRIPT.match(words[1])):
                script, args = words[1], words[2:]
            else:
                break
            args = [a for a in args if not a.startswith(("|", ">", "2>", "&"))]
            found.append(Command(fence, fence.line + 1 + offset, script, tuple(args), line.strip()))
            words = nested
    return found


def is_python(fence: Fence) -> bool:
    """A `python` fence, or an untagged one that parses as Python and imports something."""
    if fence.tag in ("python", "py"):
        return True
    if fence.tag:
        return False
    try:
        with warnings.catch_warnings():  # prose or output that is not Python may warn
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(fence.text)
    except SyntaxError:
        return False
    return any(isinstance(node, (ast.Import, ast.ImportFrom)) for node in ast.walk(tree))


def bert_tf_imports(fence: Fence) -> list[tuple[int, str, str | None]]:
    """(line, module, name or None) of each `from bert_tf... import name` / `import bert_tf...`
    statement in a Python fence (read line by line: a snippet may elide code with `...`)."""
    found = []
    for offset, line in enumerate(fence.text.split("\n")):
        stripped = line.strip()
        from_match = re.match(r"^from\s+(bert_tf[\w.]*)\s+import\s+(.+)$", stripped)
        import_match = re.match(r"^import\s+(bert_tf[\w.]*)(\s+as\s+\w+)?$", stripped)
        if from_match:
            module, names = from_match.groups()
            names = names.split("#")[0].strip().strip("()")
            for name in names.split(","):
                name = name.split(" as ")[0].strip()
                if name:
                    found.append((fence.line + 1 + offset, module, name))
        elif import_match:
            found.append((fence.line + 1 + offset, import_match.group(1), None))
    return found


def flag_name(arg: str) -> str | None:
    """`--name=value` / `--name` / `--noname` → the name as written (None: not a flag)."""
    match = re.match(r"^--([A-Za-z_][\w]*)(=|$)", arg)
    return match.group(1) if match else None


DEFAULT_ROW = re.compile(r"^\|\s*`--(\w+)`\s*\|\s*([^|]*?)\s*\|")


def _absl_flags(module_path: str, baseline: set[str]) -> dict[str, dict]:
    """Imports one script (its flags are defined at import) and describes every flag it accepts."""
    import importlib.util  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from absl import flags  # noqa: PLC0415

    name = "_docs_script_" + re.sub(r"\W", "_", module_path)
    spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, module_path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, os.path.dirname(os.path.join(REPO, module_path)))  # as `python script.py`
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    described = {}
    for flag_name_ in list(flags.FLAGS):
        flag = flags.FLAGS[flag_name_]
        default = flag.default
        if isinstance(default, (list, tuple)):
            default = ",".join(str(v) for v in default)
        described[flag_name_] = {"default": default, "boolean": bool(flag.boolean),
                                 "enum": sorted(getattr(flag.parser, "enum_values", None) or []),
                                 "type": flag.parser.flag_type()}
    for flag_name_ in list(flags.FLAGS):  # the next script defines its own
        if flag_name_ not in baseline:
            delattr(flags.FLAGS, flag_name_)
    return described


def _dump_absl_flags(scripts: list[str]) -> None:
    """Prints {script: {flag: description}} as JSON (run in its own process: see test_docs)."""
    import json  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from absl import app, flags, logging  # noqa: F401,PLC0415 (their flags are every script's)

    sys.path.insert(0, REPO)
    baseline = set(flags.FLAGS)
    out = {}
    for script in scripts:
        try:
            out[script] = _absl_flags(script, baseline)
        except Exception as e:  # noqa: BLE001 (reported by the test, per script)
            out[script] = {"__error__": f"{type(e).__name__}: {e}"}
    print(json.dumps(out, default=str))


def argparse_flags(script: str) -> dict[str, dict] | None:
    """A script's `add_argument("--name", ..., default=...)` options, read from its source
    (None: the script does not use argparse)."""
    with open(os.path.join(REPO, script), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            names = [a.value for a in node.args if isinstance(a, ast.Constant)
                     and isinstance(a.value, str) and a.value.startswith("--")]
            keywords = {k.arg: k.value for k in node.keywords}
            default = keywords.get("default")
            for option in names:
                found[option[2:]] = {
                    "default": default.value if isinstance(default, ast.Constant) else None,
                    "boolean": isinstance(keywords.get("action"), ast.Constant)
                    and keywords["action"].value in ("store_true", "store_false"),
                    "enum": [], "type": "argparse"}
    return found or None


if __name__ == "__main__":
    import sys

    _dump_absl_flags(sys.argv[1:])
