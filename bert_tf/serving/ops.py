"""The ops a SavedModel may use to load in TensorFlow Serving's stock model server.

The model server registers core TensorFlow's ops plus the tensorflow-text ops it links:
`SUPPORTED_TENSORFLOW_OPS` in tensorflow/serving's `tensorflow_serving/model_servers/BUILD`
depends on `@org_tensorflow_text//tensorflow_text:ops_lib`, whose `cc_library` in
tensorflow/text's `tensorflow_text/BUILD` lists the `*_cc` op libraries below; their op names
come from the `REGISTER_OP` / `kOpName` lines of `tensorflow_text/core/ops/*.cc` and
`core/kernels/*.h`. Pinned from TensorFlow Serving 2.20.0 (tag `2.20.0`, which builds
tensorflow/text v2.20.0; the same on tensorflow/serving's master of 2026-07-30).
The exports use only `NormalizeUTF8`, `WordpieceTokenizeWithOffsets` and, for SentencePiece
models, `SentencepieceOp` / `SentencepieceTokenizeOp` from this list.
"""

from __future__ import annotations

import functools

import tensorflow as tf

from bert_tf import filesystem

# Op names registered by tensorflow-text's ops_lib, as TensorFlow Serving 2.20.0 links it.
SERVING_TEXT_OPS = frozenset({
    "TFText>OffsetsToBoiseTags", "TFText>BoiseTagsToOffsets",          # boise_offset_converter
    "TFText>ByteSplitWithOffsets", "TFText>ByteSplitByOffsets",        # byte_splitter
    "ConstrainedSequence",                                             # constrained_sequence_op
    "FastBertNormalize",                                               # fast_bert_normalizer
    "FastWordpieceTokenizeWithOffsets", "TFText>FastWordpieceDetokenize",
    "PhraseTokenize", "TFText>PhraseDetokenize",
    "MaxSpanningTree",                                                 # mst_ops
    "TFText>NgramsStringJoin",
    "CaseFoldUTF8", "NormalizeUTF8", "NormalizeUTF8WithOffsetsMap", "FindSourceOffsets",
    "RegexSplitWithOffsets",
    "SentenceFragments", "SentenceFragmentsV2",
    "SentencepieceOp", "SentencepieceTokenizeOp", "SentencepieceTokenizeWithOffsetsOp",
    "SentencepieceDetokenizeOp", "SentencepieceVocabSizeOp", "SentencepieceIdToStringOp",
    "SentencepieceStringToIdOp",
    "TokenizerFromLogits", "SplitMergeTokenizeWithOffsets",
    "RougeL",                                                          # text_similarity_metric
    "TFText>RoundRobinTrim", "TFText>RoundRobinGenerateMasks",         # trimmer_ops
    "UnicodeScriptTokenizeWithOffsets",
    "TFText>Utf8Binarize",
    "WhitespaceTokenizeWithOffsets", "TFText>WhitespaceTokenizeWithOffsetsV2",
    "WordpieceTokenizeWithOffsets",
})


def core_ops() -> frozenset[str]:
    """Core TensorFlow's op names (`tf.raw_ops` holds those of TensorFlow's own op libraries)."""
    return frozenset(name for name in dir(tf.raw_ops) if not name.startswith("_"))


def _nodes_and_functions(export_dir: str) -> tuple[list, set[str]]:
    """Every node of a SavedModel (its graphs' and their libraries' functions') and the names
    of those functions."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString(filesystem.read_bytes(filesystem.join(export_dir, "saved_model.pb")))
    nodes, functions = [], set()
    for meta_graph in saved.meta_graphs:
        nodes.extend(meta_graph.graph_def.node)
        for function in meta_graph.graph_def.library.function:
            functions.add(function.signature.name)
            nodes.extend(function.node_def)
    return nodes, functions


def saved_model_ops(export_dir: str) -> set[str]:
    """Every op type in a SavedModel: its graphs' nodes and every function of their libraries."""
    nodes, functions = _nodes_and_functions(export_dir)
    return {node.op for node in nodes} - functions  # a node may call a library function by its name


def unservable_ops(export_dir: str) -> list[str]:
    """The ops of `export_dir` that TensorFlow Serving's model server does not register."""
    allowed = core_ops() | SERVING_TEXT_OPS
    return sorted(op for op in saved_model_ops(export_dir) if op not in allowed)


@functools.cache
def _cpu_kernels(op_type: str) -> tuple:
    """The kernels registered for `op_type` that run on a CPU, looked up once per op type (a
    graph repeats its ops thousands of times)."""
    from tensorflow.python.framework import kernels  # noqa: PLC0415

    return tuple(k for k in kernels.get_registered_kernels_for_op(op_type).kernel
                 if k.device_type in ("CPU", "DEFAULT"))


def bfloat16_ops_without_cpu_kernel(export_dir: str) -> list[str]:
    """The ops of `export_dir` that take or give bfloat16 and have no CPU kernel for their
    types: a bfloat16 export (--export_dtype) must run on a CPU model server, whose kernels
    are core TensorFlow's (the same registrations as this TensorFlow's). A kernel registered
    for DEFAULT runs on every device, the CPU too (IdentityN's, which tf.custom_gradient adds)."""
    nodes, functions = _nodes_and_functions(export_dir)
    bfloat16 = tf.bfloat16.as_datatype_enum
    missing = set()
    for node in nodes:
        if node.op in functions or not any(
                value.type == bfloat16 or bfloat16 in value.list.type
                for value in node.attr.values()):
            continue
        if not any(all(_allows(node.attr.get(c.name), c.allowed_values.list.type)
                       for c in kernel.constraint) for kernel in _cpu_kernels(node.op)):
            missing.add(node.op)
    return sorted(missing)


def _allows(value, allowed) -> bool:
    """Whether a node's type attribute `value` (one type or a list) is among `allowed`."""
    if value is None:
        return True
    types = list(value.list.type) or [value.type]
    return all(t in allowed for t in types)
