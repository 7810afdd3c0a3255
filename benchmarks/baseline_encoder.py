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


def ratios(rates: dict, revisions: list[str], dtypes: list[str]) -> dict:
    """Each dtype over float32 per revision, and each revision over the first per dtype."""
    out = {}
    if "float32" in dtypes:
        for revision in revisions:
            for dtype in dtypes:
                if dtype != "float32":
                    out[f"{dtype}/float32 at {revision}"] = round(
                        rates[revision, dtype] / rates[revision, "float32"], 3)
    for revision in revisions[1:]:
        for dtype in dtypes:
            out[f"{dtype}: {revision}/{revisions[0]}"] = round(
                rates[revision, dtype] / rates[revisions[0], dtype], 3)
    return out
