"""The encoder's LayerNorm and erf GELU, as converted from TensorFlow, rewritten into the
operations OpenVINO's CPU plugin runs as one kernel each.

OpenVINO fuses a LayerNorm into one `MVN` node only when it is written
`(x - mean) / sqrt(variance + eps)` (then the scale and shift), and an erf GELU into `Gelu`
only when it is written `0.5·x·(1 + erf(x/√2))`. The encoder computes LayerNorm as
`(x - mean) · (gamma · rsqrt(variance + eps)) + beta` (the centered rows once, the [T,1]
statistics folded into the [H] scale: its fastest form in TensorFlow) and TensorFlow's erf GELU
is `0.5·x·erfc(-x/√2)`, so neither matched: each stayed 5-6 element-wise passes over the
activations. The rewrite here replaces them, in the converted model and before quantization,
by `MVN(x)·gamma` (`+ beta` follows as before) and `Gelu(x, erf)`: the same functions, rounded
in another order (the outputs agree with TensorFlow's within float32 rounding). The
TensorFlow model, its training and its exports are unchanged. docs/serving.md, "Which forms
OpenVINO fuses", has the before and after.
"""

from __future__ import annotations

import math

import numpy as np

# How far a constant of the matched formulas may sit from its exact value (float32 rounding).
_TOLERANCE = 1e-6


def _constant_value(output) -> np.ndarray | None:
    """The value of a Constant (or a Convert of one: a compressed constant), else None."""
    node = output.get_node()
    if node.get_type_name() == "Convert":
        node = node.input_value(0).get_node()
    if node.get_type_name() != "Constant":
        return None
    return node.get_data().astype(np.float64)


def _is_scalar(output, value: float) -> bool:
    data = _constant_value(output)
    return data is not None and data.size == 1 and abs(float(data.ravel()[0]) - value) <= (
        _TOLERANCE * max(1.0, abs(value)))


def _constant_pattern():
    """A Constant, or a Convert of one."""
    from openvino.passes import Or, WrapType  # noqa: PLC0415

    constant = WrapType("opset13.Constant")
    return Or([constant, WrapType("opset13.Convert", constant)])


def _replace(matcher, node, kind: str, counts: dict[str, int]) -> None:
    """Puts `node` where the matched subgraph's output was (and under its name); counts it."""
    root = matcher.get_match_root()
    node.set_friendly_name(root.get_friendly_name())
    root.output(0).replace(node.output(0))
    counts[kind] = counts.get(kind, 0) + 1


def _matcher_pass(root, name: str, rewrite):
    from openvino.passes import Matcher, MatcherPass  # noqa: PLC0415

    fusion = MatcherPass()
    fusion.register_matcher(Matcher(root, name), rewrite)
    return fusion


def _layer_norm_pass(counts: dict[str, int]):
    """`centered · (gamma · (mean(centered²) + eps)^-0.5)` → `MVN(x) · gamma`, where
    centered = x - mean(x) over the last axis."""
    from openvino import opset13 as ops  # noqa: PLC0415
    from openvino.passes import AnyInput, Or, WrapType  # noqa: PLC0415

    x = AnyInput()
    mean_axes = WrapType("opset13.Constant")
    mean = WrapType("opset13.ReduceMean", [x, mean_axes])
    centered = WrapType("opset13.Subtract", [x, mean])
    square = Or([WrapType("opset13.Multiply", [centered, centered]),
                 WrapType("opset13.Power", [centered, _constant_pattern()])])
    variance_axes = WrapType("opset13.Constant")
    variance = WrapType("opset13.ReduceMean", [square, variance_axes])
    epsilon = _constant_pattern()
    shifted = WrapType("opset13.Add", [variance, epsilon])
    exponent = _constant_pattern()
    rsqrt = WrapType("opset13.Power", [shifted, exponent])
    gamma = AnyInput()
    scale = WrapType("opset13.Multiply", [rsqrt, gamma])
    root = WrapType("opset13.Multiply", [centered, scale])

    def rewrite(matcher) -> bool:
        found = matcher.get_pattern_value_map()
        axes = [_constant_value(found[a]) for a in (mean_axes, variance_axes)]
        eps = _constant_value(found[epsilon])
        power = found[square].get_node()
        squared = power.get_type_name() == "Multiply" or _is_scalar(power.input_value(1), 2.0)
        rank = found[x].get_partial_shape().rank
        last = {-1} | ({rank.get_length() - 1} if rank.is_static else set())
        # The statistics over the last axis only, kept as [..., 1] (what `centered` subtracts).
        last_axis = all(a is not None and a.size == 1 and a.ravel()[0] in last for a in axes)
        kept = all(found[r].get_node().get_attributes()["keep_dims"] for r in (mean, variance))
        if not (squared and last_axis and kept and eps is not None and eps.size == 1
                and _is_scalar(found[exponent], -0.5)):
            return False
        mvn = ops.mvn(found[x], ops.constant(np.array([-1], np.int64)), True,
                      float(eps.ravel()[0]), "inside_sqrt")
        _replace(matcher, ops.multiply(mvn, found[gamma]), "MVN", counts)
        return True

    return _matcher_pass(root, "LayerNormToMvn", rewrite)


def _gelu_pass(counts: dict[str, int]):
    """`(0.5·x) · (1 - erf(x · -1/√2))` (TensorFlow's `0.5·x·erfc(-x/√2)`) → `Gelu(x, erf)`."""
    from openvino import opset13 as ops  # noqa: PLC0415
    from openvino.passes import AnyInput, WrapType  # noqa: PLC0415

    x = AnyInput()
    half = _constant_pattern()
    half_x = WrapType("opset13.Multiply", [half, x])
    coefficient = _constant_pattern()
    erf = WrapType("opset13.Erf", WrapType("opset13.Multiply", [x, coefficient]))
    one = _constant_pattern()
    erfc = WrapType("opset13.Subtract", [one, erf])
    root = WrapType("opset13.Multiply", [half_x, erfc])

    def rewrite(matcher) -> bool:
        found = matcher.get_pattern_value_map()
        if not (_is_scalar(found[half], 0.5) and _is_scalar(found[one], 1.0)
                and _is_scalar(found[coefficient], -1 / math.sqrt(2))):
            return False
        _replace(matcher, ops.gelu(found[x], "erf"), "Gelu", counts)
        return True

    return _matcher_pass(root, "ErfcGeluToGelu", rewrite)


def fuse(ov_model) -> dict[str, int]:
    """Rewrites `ov_model`'s LayerNorms into `MVN` and its erf GELUs into `Gelu`, in place.

    Returns:
      how many of each were rewritten ({"MVN": 13, "Gelu": 6} for MiniLM-L6).
    """
    from openvino.passes import Manager  # noqa: PLC0415

    counts: dict[str, int] = {}
    manager = Manager()
    manager.register_pass(_layer_norm_pass(counts))
    manager.register_pass(_gelu_pass(counts))
    manager.run_passes(ov_model)
    ov_model.validate_nodes_and_infer_types()
    return counts
