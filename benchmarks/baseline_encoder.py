"""The encoder as a git revision wrote it, to measure before and after a change in one run.

`encoder_at("main")` imports `bert_tf/model/encoder.py` of that revision as a module of its own;
`using_encoder(module)` makes `build_encoder` (every model of bert_tf.model.models) build that
module's `BertEncoder` while the context lasts. Benchmarks only.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENCODER_PATH = "bert_tf/model/encoder.py"


def encoder_at(revision: str) -> types.ModuleType:
    """`bert_tf.model.encoder` as `revision` (a git commit, branch or tag) has it."""
    source = subprocess.run(["git", "-C", ROOT, "show", f"{revision}:{ENCODER_PATH}"],
                            check=True, capture_output=True, text=True).stdout
    name = f"encoder_at_{revision.replace('/', '_').replace('-', '_')}"
    path = os.path.join(tempfile.mkdtemp(prefix="baseline_encoder_"), f"{name}.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def using_encoder(module: types.ModuleType | None):
    """Models built inside use `module.BertEncoder` (None: the working tree's)."""
    from bert_tf.model.albert import modeling as albert_modeling  # noqa: PLC0415

    previous = albert_modeling.BertEncoder
    if module is not None:
        albert_modeling.BertEncoder = module.BertEncoder
    try:
        yield
    finally:
        albert_modeling.BertEncoder = previous
