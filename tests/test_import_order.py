"""Every module of bert_tf can be a program's first bert_tf import.

An import circle shows only when a module on it is imported first ("cannot import name ... from
partially initialized module"), so each module is imported alone in a process of its own. The
processes are forked from one parent that imported only third-party packages (TensorFlow takes
seconds to import; bert_tf is never imported in the parent), so ~100 imports cost seconds.
"""

import os
import subprocess
import sys

from conftest import REPO

_CHILD_IMPORTS = r"""
import importlib, os, sys, traceback
import absl, keras, numpy, sentencepiece, tensorflow  # third-party only
assert not any(name == "bert_tf" or name.startswith("bert_tf.") for name in sys.modules)
failed = []
for name in sys.argv[1:]:
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(name)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    if os.waitpid(pid, 0)[1] != 0:
        failed.append(name)
print("failed:", " ".join(failed))
"""


def package_modules() -> list[str]:
    """Every module and package under bert_tf/, found on disk (importing would spoil the test)."""
    names = []
    for folder, _, files in os.walk(os.path.join(REPO, "bert_tf")):
        package = os.path.relpath(folder, REPO).replace(os.sep, ".")
        names += [package if f == "__init__.py" else f"{package}.{f[:-3]}"
                  for f in files if f.endswith(".py")]
    return sorted(names)


def test_package_modules_are_found():
    modules = package_modules()
    assert {"bert_tf", "bert_tf.modeling", "bert_tf.model.encoder", "bert_tf.model.compat",
            "bert_tf.training.optimizers", "bert_tf.training.optimizer_compat",
            "bert_tf.text.tokenizers", "bert_tf.tasks.squad.export"} <= set(modules)


def test_every_module_imports_first():
    modules = package_modules()
    path = os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, "-c", _CHILD_IMPORTS, *modules], cwd=REPO,
                            env={**os.environ, "PYTHONPATH": path}, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "failed:", result.stderr[-5000:]
