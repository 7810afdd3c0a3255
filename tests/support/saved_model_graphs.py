"""What a SavedModel's graph stores, read from its saved_model.pb."""

import os

from tensorflow.core.protobuf import saved_model_pb2


def functions_with_op(export_dir: str, op: str) -> list[str]:
    """The names of the export's stored functions that hold an `op` node themselves (not
    through a call to another function)."""
    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    library = saved.meta_graphs[0].graph_def.library
    return [function.signature.name for function in library.function
            if any(node.op == op for node in function.node_def)]
