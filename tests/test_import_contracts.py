"""The layout's import contracts (.importlinter): dependencies point one way, no task imports
another, no circles. `lint-imports` is import-linter's command (the `test` extra)."""

import os
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
