"""--export_dtype: the dtype of an export's weights and computation (its outputs stay float32).

A bfloat16 export is the same model built under Keras' "bfloat16" policy (variables and compute
in bfloat16; LayerNorm's statistics and softmax's sum still in float32, `bert_tf.model.encoder`)
with the trained float32 weights rounded into it: half the size, and on CPUs with AMX-BF16 the
matrix products run on the tile units.
"""

from __future__ import annotations

import contextlib
from typing import Callable

import keras
import tensorflow as tf

from bert_tf import filesystem
from bert_tf.errors import UserError

EXPORT_DTYPES = ("float32", "bfloat16")
_POLICIES = {"float32": "float32", "bfloat16": "bfloat16"}


def check_export_dtype(dtype: str) -> str:
    """Returns `dtype` if an export can be written in it, else raises a UserError."""
    if dtype not in EXPORT_DTYPES:
        raise UserError(f"--export_dtype must be one of {', '.join(EXPORT_DTYPES)}, got {dtype!r}")
    return dtype


@contextlib.contextmanager
def global_policy(name: str):
    """Models built inside use the Keras dtype policy `name` (e.g. "bfloat16")."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def model_in_dtype(model: keras.Model, build: Callable[[], keras.Model], dtype: str
                   ) -> keras.Model:
    """`model` for an export in `dtype`: itself for float32; for bfloat16 a new model from
    `build()` (which builds `model`'s architecture under the global policy) holding `model`'s
    weights rounded to bfloat16.

    Raises:
      ValueError: `build()` made a model with other variables than `model`'s.
    """
    if check_export_dtype(dtype) == "float32":
        return model
    return copy_in_policy(model, build, _POLICIES[dtype])


def copy_in_policy(model: keras.Model, build: Callable[[], keras.Model], policy: str
                   ) -> keras.Model:
    """A new model from `build()` under the Keras dtype policy `policy` (e.g. "bfloat16",
    "mixed_bfloat16") holding `model`'s weights cast to its variables' dtype.

    Raises:
      ValueError: `build()` made a model with other variables than `model`'s.
    """
    with global_policy(policy):
        copy = build()
    source, target = model.weights, copy.weights
    if [(w.path, tuple(w.shape)) for w in source] != [(w.path, tuple(w.shape)) for w in target]:
        raise ValueError("the model built for the export has other variables than the trained one")
    for value, variable in zip(source, target):
        variable.assign(tf.cast(value, variable.dtype))
    return copy


def define_flag(flag_values=None, int8: bool = False) -> None:
    """Defines --export_dtype (the scripts that write a raw-text export); `int8`: also int8,
    which the OpenVINO export runs (`bert_tf.serving.openvino`)."""
    from absl import flags  # noqa: PLC0415

    flags.DEFINE_enum("export_dtype", "float32", [*EXPORT_DTYPES, *(["int8"] if int8 else [])],
                      "Weights and computation of the --export_dir SavedModel; bfloat16 halves its "
                      "size and runs on AMX-BF16 matrix units; int8 (--export_runtime=openvino) "
                      "runs the products in int8; outputs stay float32 "
                      "(docs/serving.md).", flag_values=flag_values or flags.FLAGS)


def saved_dtype(export_dir: str) -> str:
    """The --export_dtype a SavedModel was written with: bfloat16 if any variable is bfloat16."""
    from tensorflow.core.protobuf import saved_model_pb2  # noqa: PLC0415

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString(filesystem.read_bytes(filesystem.join(export_dir, "saved_model.pb")))
    bfloat16 = any(node.variable.dtype == tf.bfloat16.as_datatype_enum
                   for meta_graph in saved.meta_graphs
                   for node in meta_graph.object_graph_def.nodes
                   if node.WhichOneof("kind") == "variable")
    return "bfloat16" if bfloat16 else "float32"
