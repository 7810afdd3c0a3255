"""The layout's import contracts (.importlinter): dependencies point one way, no task imports
another, no circles. `lint-imports` is import-linter's command (the `test` extra)."""

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
    assert "Contracts: 4 kept, 0 broken." in result.stdout


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
