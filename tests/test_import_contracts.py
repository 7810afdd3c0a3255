"""The layout's import contracts (.importlinter): dependencies point one way, no task imports
another, no circles. `lint-imports` is import-linter's command (the `test` extra). Beside them,
no module outside the I/O layer calls tf.io.gfile (import-linter sees modules, not attributes).
"""

import ast
import os
import re
import subprocess
import sys

from conftest import REPO


def test_import_contracts_hold():
    command = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    # This checkout's bert_tf, whatever is installed.
    path = os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))
    result = subprocess.run([command, "--no-cache", os.path.join(REPO, ".importlinter")],
                            cwd=REPO, env={**os.environ, "PYTHONPATH": path},
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 5 kept, 0 broken." in result.stdout


def test_no_model_family_is_told_apart_outside_the_registry():
    """`isinstance` on a family's config or encoder, or a test of `model_type`, only in
    bert_tf/model/families.py and the family folders (bert_tf/model/*/ holding a family.py):
    everything else asks the family (docs/architecture.md, "Adding a model family")."""
    from bert_tf.model import families  # noqa: PLC0415 (TensorFlow, for this test only)

    classes = sorted({cls.__name__ for family in families.FAMILIES[1:]
                      for cls in (family.config_class, family.encoder_class)})
    dispatch = re.compile(rf"isinstance\([^)]*\b({'|'.join(classes)})\b|model_type *(==|!=)")
    package, model = os.path.join(REPO, "bert_tf"), os.path.join(REPO, "bert_tf", "model")
    allowed = {os.path.join(model, "families.py")}
    found = []
    for directory, _, files in os.walk(package):
        if (os.path.dirname(directory) == model
                and os.path.isfile(os.path.join(directory, "family.py"))):
            continue
        for name in files:
            path = os.path.join(directory, name)
            if not name.endswith(".py") or path in allowed:
                continue
            with open(path, encoding="utf-8") as f:
                found += [f"{os.path.relpath(path, REPO)}:{number}: {line.strip()}"
                          for number, line in enumerate(f, 1) if dispatch.search(line)]
    assert found == []


# The one module that may reach tf.io.gfile (bert_tf/filesystem/__init__.py says why).
GFILE_MODULE = os.path.join("bert_tf", "filesystem", "backends.py")


def gfile_uses(source: str) -> list[int]:
    """The lines of `source` that name `gfile` in code (an attribute, a name or an import):
    `tf.io.gfile.exists`, `tf.compat.v1.gfile.GFile`, `from tensorflow.io import gfile`, ...
    Docstrings and comments may speak of it."""
    lines = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "gfile" or \
                isinstance(node, ast.Name) and node.id == "gfile":
            lines.add(node.lineno)
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                "gfile" in name for name in [getattr(node, "module", None) or "",
                                             *(alias.name for alias in node.names)]):
            lines.add(node.lineno)
    return sorted(lines)


def test_gfile_is_called_by_the_io_layer_only():
    found = []
    for folder, _, files in os.walk(os.path.join(REPO, "bert_tf")):
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.relpath(os.path.join(folder, name), REPO)
            if path != GFILE_MODULE:
                with open(os.path.join(REPO, path), encoding="utf-8") as f:
                    found += [f"{path}:{line}" for line in gfile_uses(f.read())]
    assert not found, ("tf.io.gfile outside bert_tf/filesystem/ (call bert_tf.filesystem "
                       "instead): " + ", ".join(found))


def test_gfile_uses_are_found_in_code_not_in_words():
    source = ('"""Reads any tf.io.gfile path."""\nimport tensorflow as tf\n'
              'from tensorflow.io import gfile\n# tf.io.gfile.exists is fine here\n'
              'x = tf.io.gfile.exists("a")\ny = tf.compat.v1.gfile.GFile\nz = gfile.glob("*")\n')
    assert gfile_uses(source) == [3, 5, 6, 7]
