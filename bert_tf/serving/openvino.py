"""OpenVINO exports (--export_runtime=openvino): the model on OpenVINO, in int8, bfloat16 or
float32, the text on TensorFlow.

An export is split where the model is called. The text part (the task's tokenizer, packing and
post-processing, the very ops of its TensorFlow export) stays a SavedModel with, per raw-text
signature, a `prepare_<signature>` function (texts -> the model's inputs and what the
post-processing needs) and one `finish` function (the model's outputs and that state -> the
signature's outputs); the model itself (encoder + head, token ids in) is an OpenVINO model,
quantized to int8 by NNCF's post-training quantization on the task's own training texts. So the
tokens are FullTokenizer's by construction: the same graph as the TensorFlow export's.

    export_dir/
      saved_model.pb, variables/   prepare_serving_default, ..., finish (TensorFlow)
      model.xml, model.bin         the model (OpenVINO IR)
      openvino.json                the precision, the CPU plugin's compile properties, the
                                   signatures and the model's input/output names

A task's serving module gives (`TextModel`): `text_signatures()` ({signature: (input specs,
prepare function)}), `model_outputs(features)` (the model: float32 outputs by name) and
`finish(values)`. `run` calls an export as a TensorFlow signature is called.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
from typing import Callable, Mapping, Protocol, Sequence

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import filesystem
from bert_tf.errors import UserError
from bert_tf.serving import openvino_fusion
from bert_tf.serving import precision as export_dtypes
from bert_tf.serving.saved_model import model_inputs_spec, require_tensorflow_text
from bert_tf.model.inputs import MODEL_INPUTS

MANIFEST = "openvino.json"
PRECISIONS = ("float32", "bfloat16", "int8")
# OpenVINO's CPU inference precision per export precision. int8: the products NNCF quantized
# run in int8, the rest in float32 as calibrated and compared (a CPU with AMX would otherwise
# pick bfloat16 for them).
_INFERENCE_PRECISION = {"float32": "f32", "bfloat16": "bf16", "int8": "f32"}
# The CPU plugin's other properties. Its threads are not pinned to cores: a pinned thread waits
# for its own core even when another is free, and each node's threads wait for the slowest at its
# end, so on a machine that other processes share a call got a third of the CPU time
# TensorFlow's got (docs/serving.md, "Where OpenVINO's float32 time went").
_CPU_PROPERTIES = {"ENABLE_CPU_PINNING": False}
FINISH = "finish"
DEFAULT_CALIBRATION_EXAMPLES = 300
DEFAULT_MAX_RELATIVE_LOSS = 0.01
# The OpenVINO node names (regular expressions) whose products stay float32 in an int8 export.
DEFAULT_FLOAT_NODES: tuple[str, ...] = ()
_BATCH = 32  # texts per call when preparing calibration inputs and comparing on dev


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExportOptions:
    """The raw-text export's precision and runtime, in every task's options (the flags of
    `precision.define_flags` and `define_flags`)."""

    export_dtype: str = "float32"  # the export's weights and compute (serving/precision.py)
    export_runtime: str = "tensorflow"  # or openvino (this module)
    int8_calibration_examples: int = DEFAULT_CALIBRATION_EXAMPLES
    int8_float_nodes: Sequence[str] = DEFAULT_FLOAT_NODES
    export_max_relative_loss: float = DEFAULT_MAX_RELATIVE_LOSS

    def check_export(self, export_dir: str | None) -> None:
        """`check_export` on these options, for a run that exports to `export_dir` (None: no
        export): before any work (a distillation checks before its first stage, whose run
        does not export)."""
        check_export(self.export_dtype, self.export_runtime, bool(export_dir),
                     self.int8_calibration_examples, self.int8_float_nodes)

    def quantization(self) -> "Quantization":
        """The int8 export's NNCF settings from these options (`quantization`)."""
        return quantization(self.int8_float_nodes)


class TextModel(Protocol):
    """What a task's serving module gives for an OpenVINO export."""

    def text_signatures(self) -> dict[str, tuple[list[tf.TensorSpec], Callable]]:
        """{signature key: (its string inputs, prepare(*texts) -> model inputs + state)}."""

    def model_outputs(self, features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """The model on `MODEL_INPUTS` int32 [B,S]: float32 outputs by name."""

    def finish(self, values: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """The signature's outputs from the model's outputs and `prepare`'s state."""


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """How a task scores an export on its dev set, to compare float32 and the export's precision.

    Attributes:
      texts: the dev examples' inputs of `serving_default`, by input name.
      metric: the metric's name, as reported ("accuracy").
      score: the outputs of all `texts` (arrays by output name, rows in order) -> the metric;
        with `against_float32`, (those outputs, float32's) -> the metric.
      answer: the output whose rows must stay the same ("label").
      against_float32: the metric scores outputs against float32's (a task without a dev
        metric: how close the vectors stay), float32's own score being its score against
        itself.
    """

    texts: Sequence[Mapping[str, str]]
    metric: str
    score: Callable[..., float]
    answer: str
    against_float32: bool = False

    def scores(self, float32: dict[str, np.ndarray], candidate: dict[str, np.ndarray]
               ) -> tuple[float, float]:
        """The metric of the float32 outputs and of the candidate's."""
        if self.against_float32:
            return self.score(float32, float32), self.score(candidate, float32)
        return self.score(float32), self.score(candidate)


def require_openvino():
    """The `openvino` module, or a UserError naming the extra that installs it."""
    try:
        import openvino  # noqa: PLC0415
        import nncf  # noqa: F401, PLC0415
    except ImportError:
        raise UserError("the OpenVINO export needs the openvino extra: pip install "
                        "'bert_tf[openvino]' (or pip install -e '.[openvino]'; docs/serving.md, "
                        "OpenVINO exports)") from None
    return openvino


def check_precision(precision: str, runtime: str) -> None:
    """Raises a UserError unless `runtime` runs exports in `precision`."""
    if runtime == "openvino" and precision not in PRECISIONS:
        raise UserError(f"--export_dtype must be one of {', '.join(PRECISIONS)} with "
                        f"--export_runtime=openvino, got {precision!r}")
    if runtime == "tensorflow" and precision == "int8":
        raise UserError("--export_dtype=int8 runs on OpenVINO: add --export_runtime=openvino "
                        "(pip install 'bert_tf[openvino]'; docs/serving.md, OpenVINO exports)")
    if runtime not in ("tensorflow", "openvino"):
        raise UserError(f"--export_runtime must be tensorflow or openvino, got {runtime!r}")


def check_export(precision: str, runtime: str, exporting: bool,
                 calibration_examples: int = DEFAULT_CALIBRATION_EXAMPLES,
                 float_nodes: Sequence[str] = DEFAULT_FLOAT_NODES) -> None:
    """Stops before any work when a script's export flags cannot be honoured: the precision
    and runtime (`check_precision`) and, for an OpenVINO export, the extra, the count of
    calibration examples and the float nodes' patterns."""
    check_precision(precision, runtime)
    if runtime == "tensorflow":
        export_dtypes.check_export_dtype(precision)
    elif exporting:
        require_openvino()
        if calibration_examples < 1:
            raise UserError(f"--int8_calibration_examples={calibration_examples}: give a "
                            "positive number")
        for pattern in float_nodes:
            try:
                re.compile(pattern)
            except re.error as e:
                raise UserError(f"--int8_float_nodes: {pattern!r} is not a regular expression "
                                f"({e})") from None


def quantization(float_nodes: Sequence[str] = DEFAULT_FLOAT_NODES) -> "Quantization":
    """The int8 export's settings from the scripts' flags (--int8_float_nodes)."""
    return Quantization(ignored_patterns=tuple(float_nodes))


def relative_loss(reference: float, candidate: float) -> float:
    """How much of `reference` the candidate's metric lost (negative: it gained)."""
    return (reference - candidate) / abs(reference) if reference else float(candidate < reference)


def check_loss(metric: str, precision: str, reference: float, candidate: float, agreement: float,
               max_relative_loss: float) -> str:
    """The report of the comparison on dev; a UserError (one line, the figures in it) when the
    loss passes `max_relative_loss`."""
    loss = relative_loss(reference, candidate)
    change = 0.0 - 100 * loss  # 0.0 -: no "-0.00"
    figures = (f"dev {metric} float32 {reference:.4f}, {precision} {candidate:.4f} "
               f"({change:+.2f}% relative), {100 * agreement:.1f}% of answers unchanged")
    if loss > max_relative_loss:
        raise UserError(f"the {precision} export loses more than --export_max_relative_loss="
                        f"{max_relative_loss:g}: {figures}; not written (raise the flag, or give "
                        "more --int8_calibration_examples)")
    return figures


def _text_module(module: tf.Module) -> tf.Module:
    """What the text part's functions capture (tokenizer, labels, ...): every module or variable
    the serving module holds except the model (a Keras model), whose weights go to OpenVINO."""
    holder = tf.Module(name="text")
    for name, value in vars(module).items():
        if not name.startswith("_") and isinstance(value, (tf.Module, tf.Variable)) \
                and not isinstance(value, keras.Model):
            setattr(holder, name, value)
    return holder


@dataclasses.dataclass
class _Split:
    """A serving module's functions, traced: prepare per signature, the model and finish."""

    prepare: dict[str, tf.types.experimental.ConcreteFunction]
    model: tf.types.experimental.ConcreteFunction
    finish: tf.types.experimental.ConcreteFunction
    model_outputs: list[str]


def _split(module: TextModel) -> _Split:
    prepare = {key: tf.function(fn, autograph=False, input_signature=specs).get_concrete_function()
               for key, (specs, fn) in module.text_signatures().items()}
    model = tf.function(module.model_outputs, autograph=False,
                        input_signature=[model_inputs_spec()]).get_concrete_function()
    outputs = {name: tf.TensorSpec(spec.shape, spec.dtype, name=name)
               for name, spec in model.structured_outputs.items()}
    state = {}
    for function in prepare.values():
        for name, spec in function.structured_outputs.items():
            if name not in MODEL_INPUTS:
                state[name] = tf.TensorSpec(spec.shape, spec.dtype, name=name)
    finish = tf.function(module.finish, autograph=False,
                         input_signature=[{**outputs, **state}]).get_concrete_function()
    return _Split(prepare, model, finish, sorted(outputs))


def convert(model: tf.types.experimental.ConcreteFunction, output_names: Sequence[str],
            fuse: bool = True):
    """The OpenVINO model of `model` (MODEL_INPUTS in, `output_names` out, named so).

    `fuse`: its LayerNorms and erf GELUs rewritten into the nodes OpenVINO runs as one kernel
    each (`openvino_fusion`: the same functions); False keeps the converter's graph (to measure
    the difference).
    """
    ov = require_openvino()
    converted = ov.convert_model(model)
    if fuse:
        openvino_fusion.fuse(converted)
    for port in converted.inputs:
        port.get_tensor().set_names({port.get_any_name().split(":")[0]})
    if len(converted.outputs) != len(output_names):
        raise ValueError(f"the converted model has {len(converted.outputs)} outputs, "
                         f"not {len(output_names)}")
    # The converter keeps the structured outputs' order: sorted by name (tf.nest).
    for port, name in zip(converted.outputs, output_names):
        port.get_tensor().set_names({name})
    return converted


@dataclasses.dataclass(frozen=True)
class Quantization:
    """The settings of NNCF's post-training quantization (the int8 export).

    Attributes:
      smooth_quant_alpha: SmoothQuant's migration strength on the products (NNCF's transformer
        default 0.95); negative: no SmoothQuant.
      fast_bias_correction: NNCF's fast bias correction (else its slower, layer-wise one).
      preset: "mixed" (asymmetric activations, NNCF's transformer default) or "performance".
      ignored_patterns: regular expressions of OpenVINO node names kept in float32.
      max_relative_drop: with a dev evaluation, NNCF's accuracy control: products are returned
        to float32, the most harmful first, until the dev metric loses at most this fraction
        of float32's; None: plain post-training quantization.
    """

    smooth_quant_alpha: float = 0.95
    fast_bias_correction: bool = True
    preset: str = "mixed"
    ignored_patterns: tuple[str, ...] = ()
    max_relative_drop: float | None = None


def quantize(ov_model, calibration: Sequence[dict[str, np.ndarray]],
             settings: Quantization = Quantization(), validation: Sequence | None = None,
             validate: Callable | None = None):
    """`ov_model` with its products in int8: NNCF's post-training quantization (transformer
    model type: activations per tensor, weights per channel, `settings`; the ones statistics
    from `calibration`, one item of model inputs each).

    With `settings.max_relative_drop`, `validate(compiled model, items of validation)` ->
    (metric, [[outputs] per item]) scores a candidate on `validation` (items of model inputs
    and state) for NNCF's accuracy control."""
    require_openvino()
    _check_float_nodes(ov_model, settings.ignored_patterns)
    import nncf  # noqa: PLC0415
    from nncf.quantization.advanced_parameters import (  # noqa: PLC0415
        AdvancedQuantizationParameters, AdvancedSmoothQuantParameters)

    common = dict(
        model_type=nncf.ModelType.TRANSFORMER, subset_size=len(calibration),
        preset=nncf.QuantizationPreset(settings.preset),
        fast_bias_correction=settings.fast_bias_correction,
        ignored_scope=nncf.IgnoredScope(patterns=list(settings.ignored_patterns),
                                        validate=False),
        advanced_parameters=AdvancedQuantizationParameters(
            smooth_quant_alphas=AdvancedSmoothQuantParameters(
                matmul=settings.smooth_quant_alpha)))
    dataset = nncf.Dataset(list(calibration))
    if settings.max_relative_drop is None:
        return nncf.quantize(ov_model, dataset, **common)
    common["advanced_quantization_parameters"] = common.pop("advanced_parameters")
    return nncf.quantize_with_accuracy_control(
        ov_model, dataset, nncf.Dataset(list(validation), _model_inputs), validate,
        max_drop=settings.max_relative_drop, drop_type=nncf.DropType.RELATIVE, **common)


def _check_float_nodes(ov_model, patterns: Sequence[str]) -> None:
    """A UserError for a pattern that names no node of `ov_model` (it would keep nothing float)."""
    names = [op.get_friendly_name() for op in ov_model.get_ordered_ops()]
    for pattern in patterns:
        if not any(re.match(pattern, name) for name in names):
            products = [name for name, op in zip(names, ov_model.get_ordered_ops())
                        if op.get_type_name() == "MatMul"]
            raise UserError(f"--int8_float_nodes: {pattern!r} matches no node of the model "
                            f"(its products are named as {products[0]!r})")


def _model_inputs(item: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {name: item[name] for name in MODEL_INPUTS}


def compile_properties(precision: str) -> dict[str, str | bool]:
    """The CPU plugin's properties an export at `precision` is compiled with (openvino.json's
    `compile_properties`)."""
    return {"INFERENCE_PRECISION_HINT": _INFERENCE_PRECISION[precision], **_CPU_PROPERTIES}


def compile_model(ov_model, precision: str, properties: Mapping[str, str | bool] | None = None):
    """The model compiled for this machine's CPU at the export's precision (with `properties`,
    those: an export's manifest's)."""
    ov = require_openvino()
    return ov.Core().compile_model(ov_model, "CPU", dict(properties or
                                                        compile_properties(precision)))


def _numpy(values: Mapping[str, tf.Tensor]) -> dict[str, np.ndarray]:
    return {name: np.asarray(value) for name, value in values.items()}


def _prepared_batches(prepare, texts: Sequence[Mapping[str, str]], size: int
                      ) -> list[dict[str, np.ndarray]]:
    names = sorted(texts[0]) if texts else []
    return [_numpy(prepare(**{name: tf.constant([t[name] for t in texts[i:i + size]])
                              for name in names}))
            for i in range(0, len(texts), size)]


def _run_prepared(batches, model: Callable, finish) -> dict[str, np.ndarray]:
    """`finish(model(inputs) + state)` over prepared batches, the rows concatenated."""
    rows: dict[str, list[np.ndarray]] = {}
    for prepared in batches:
        outputs = model({name: prepared[name] for name in MODEL_INPUTS})
        state = {k: v for k, v in prepared.items() if k not in MODEL_INPUTS}
        for name, value in _numpy(finish(**{**outputs, **state})).items():
            rows.setdefault(name, []).append(value)
    return {name: _concat_rows(values) for name, values in rows.items()}


def _concat_rows(batches: list[np.ndarray]) -> np.ndarray:
    """The batches' rows in one array, each padded ("" or 0) to the widest batch's shape (a
    tagger's `tags` [B,W] are as wide as each batch's longest sentence)."""
    if not batches[0].ndim:
        return np.stack(batches)
    shape = np.max([b.shape[1:] for b in batches], axis=0)
    padded = [np.pad(b, [(0, 0)] + [(0, int(n) - m) for n, m in zip(shape, b.shape[1:])],
                     constant_values=b"" if b.dtype == object else 0) for b in batches]
    return np.concatenate(padded)


def _compiled_call(compiled, output_names: Sequence[str]) -> Callable:
    def call(features: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        result = compiled(dict(features))
        return {name: result[name] for name in output_names}
    return call


def _same_rows(a: np.ndarray, b: np.ndarray) -> float:
    """The fraction of rows (first axis) of `a` and `b` that are equal."""
    if not len(a):
        return 1.0
    return float(np.mean([np.array_equal(x, y) for x, y in zip(a, b)]))


def export(module: TextModel, export_dir: str, precision: str,
           calibration: Sequence[Mapping[str, str]], evaluation: Evaluation,
           max_relative_loss: float = DEFAULT_MAX_RELATIVE_LOSS,
           quantization: Quantization = Quantization()) -> str:
    """Writes the OpenVINO export of `module` (its model in float32) at `export_dir`, atomically.

    Args:
      module: the task's serving module (`TextModel`), its model in float32.
      precision: int8, bfloat16 or float32.
      calibration: int8: training examples' inputs of `serving_default`, by input name.
      evaluation: the dev set and metric; the float32 model (TensorFlow) and the export's
        precision (OpenVINO) are compared on it: logged, and kept in openvino.json's `dev`.
      max_relative_loss: the largest relative loss of the metric that is written.
      quantization: int8: NNCF's settings (`Quantization`); its accuracy control scores on
        `evaluation`.

    Returns:
      the absolute export_dir.

    Raises:
      UserError: the loss passed `max_relative_loss` (nothing is written).
    """
    ov = require_openvino()
    check_precision(precision, "openvino")
    split = _split(module)
    ov_model = convert(split.model, split.model_outputs)
    prepare = split.prepare[next(iter(split.prepare))]
    dev = _prepared_batches(prepare, evaluation.texts, _BATCH)
    finish = lambda **values: split.finish(values)  # noqa: E731  (as the saved signature)
    reference = _run_prepared(dev, lambda f: _numpy(split.model(f)), finish)
    if precision == "int8":
        if not calibration:
            raise UserError("the int8 export calibrates on the training examples: none were read")
        items = [_numpy({k: v[i:i + 1] for k, v in batch.items() if k in MODEL_INPUTS})
                 for batch in _prepared_batches(prepare, calibration, _BATCH)
                 for i in range(len(batch["input_ids"]))]
        ov_model = quantize(ov_model, items, quantization, dev,
                            _validation(evaluation, reference, split, finish))
    compiled = compile_model(ov_model, precision)
    candidate = _run_prepared(dev, _compiled_call(compiled, split.model_outputs), finish)
    scores = evaluation.scores(reference, candidate)
    dev = {"metric": evaluation.metric, "float32": scores[0], precision: scores[1],
           "examples": len(evaluation.texts),
           "answers_unchanged": _same_rows(reference[evaluation.answer],
                                           candidate[evaluation.answer])}
    logging.info("%s: %s", export_dir, check_loss(
        evaluation.metric, precision, dev["float32"], dev[precision], dev["answers_unchanged"],
        max_relative_loss))
    return _write(export_dir, _text_module(module), split, ov_model, precision, dev, ov)


def _validation(evaluation: Evaluation, reference: dict[str, np.ndarray], split: _Split,
                finish: Callable) -> Callable:
    """NNCF's accuracy control's validation function: (a compiled candidate, the prepared dev
    batches) -> (its dev metric, each batch's model outputs, which NNCF ranks the products by)."""
    def validate(compiled, batches) -> tuple[float, list[list[np.ndarray]]]:
        call, outputs = _compiled_call(compiled, split.model_outputs), []

        def recorded(features: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
            result = call(features)
            outputs.append(list(result.values()))
            return result
        candidate = _run_prepared(list(batches), recorded, finish)
        return evaluation.scores(reference, candidate)[1], outputs
    return validate


def _write(export_dir: str, holder: tf.Module, split: _Split, ov_model, precision: str,
           dev: dict, ov) -> str:
    signatures = {f"prepare_{key}": function for key, function in split.prepare.items()}
    signatures[FINISH] = split.finish
    manifest = {"runtime": "openvino", "precision": precision,
                "inference_precision": _INFERENCE_PRECISION[precision],
                "compile_properties": compile_properties(precision),
                "openvino_version": ov.get_version(), "dev": dev,
                "model_inputs": list(MODEL_INPUTS), "model_outputs": split.model_outputs,
                "signatures": {key: {"prepare": f"prepare_{key}", "finish": FINISH}
                               for key in split.prepare}}
    export_dir = filesystem.absolute(export_dir)
    filesystem.makedirs(filesystem.dirname(export_dir))
    with filesystem.atomic_directory(export_dir) as tmp:
        tf.saved_model.save(holder, tmp, signatures=signatures)
        with tempfile.TemporaryDirectory() as local:  # OpenVINO writes local files only
            ov.save_model(ov_model, os.path.join(local, "model.xml"), compress_to_fp16=False)
            for name in ("model.xml", "model.bin"):
                with open(os.path.join(local, name), "rb") as f:
                    filesystem.write_atomically(filesystem.join(tmp, name), f.read())
        filesystem.write_atomically(filesystem.join(tmp, MANIFEST),
                                    json.dumps(manifest, indent=1) + "\n")
    return export_dir


def is_openvino_export(export_dir: str) -> bool:
    """Whether `export_dir` is an OpenVINO export (it has openvino.json)."""
    return filesystem.isfile(filesystem.join(export_dir, MANIFEST))


class OpenVinoExport:
    """An OpenVINO export, loaded: `signature(key)` calls it as a TensorFlow signature is called
    (string tensors or arrays by input name -> arrays by output name)."""

    def __init__(self, export_dir: str):
        ov = require_openvino()
        require_tensorflow_text()  # registers the tokenizer ops of the text part
        self.manifest = json.loads(filesystem.read_text(filesystem.join(export_dir, MANIFEST)))
        self.precision = self.manifest["precision"]
        self._text = tf.saved_model.load(export_dir)
        weights = np.frombuffer(filesystem.read_bytes(filesystem.join(export_dir, "model.bin")),
                                np.uint8)
        ov_model = ov.Core().read_model(filesystem.read_text(filesystem.join(
            export_dir, "model.xml")), ov.Tensor(weights))
        # An export written before openvino.json named them: today's for its precision.
        self._compiled = compile_model(ov_model, self.precision,
                                       self.manifest.get("compile_properties"))
        self.openvino_version = ov.get_version()

    def inference_precision(self) -> str:
        """The precision OpenVINO runs the products outside int8 in, on this CPU (f32, bf16)."""
        hint = self._compiled.get_property("INFERENCE_PRECISION_HINT")
        return hint.to_string() if hasattr(hint, "to_string") else str(hint)

    @property
    def signatures(self) -> list[str]:
        return sorted(self.manifest["signatures"])

    def input_names(self, key: str) -> list[str]:
        prepare = self._text.signatures[self.manifest["signatures"][key]["prepare"]]
        return sorted(prepare.structured_input_signature[1])

    def parts(self, key: str) -> tuple[Callable, Callable, Callable]:
        """The signature's three steps, each timeable on its own: prepare (texts -> arrays by
        name: the model's inputs and the state), the model (its inputs -> its outputs) and
        finish (the model's outputs and the state -> the signature's outputs)."""
        names = self.manifest["signatures"][key]
        prepare, finish = (self._text.signatures[names[k]] for k in ("prepare", "finish"))
        return ((lambda **texts: _numpy(prepare(**{k: tf.constant(v) for k, v in texts.items()}))),
                _compiled_call(self._compiled, self.manifest["model_outputs"]),
                lambda **values: _numpy(finish(**values)))

    def signature(self, key: str) -> Callable[..., dict[str, np.ndarray]]:
        prepare, model, finish = self.parts(key)

        def call(**texts) -> dict[str, np.ndarray]:
            prepared = prepare(**texts)
            outputs = model({name: prepared[name] for name in MODEL_INPUTS})
            state = {k: v for k, v in prepared.items() if k not in MODEL_INPUTS}
            return finish(**{**outputs, **state})
        return call


def define_flags(flag_values=None) -> None:
    """Defines --export_runtime, --int8_calibration_examples, --int8_float_nodes and
    --export_max_relative_loss."""
    from absl import flags  # noqa: PLC0415

    flag_values = flag_values or flags.FLAGS
    flags.DEFINE_enum("export_runtime", "tensorflow", ["tensorflow", "openvino"],
                      "What runs the --export_dir model: tensorflow (a SavedModel, TensorFlow "
                      "Serving) or openvino (the model on OpenVINO in --export_dtype float32, "
                      "bfloat16 or int8, the text on TensorFlow; docs/serving.md).",
                      flag_values=flag_values)
    flags.DEFINE_integer("int8_calibration_examples", DEFAULT_CALIBRATION_EXAMPLES,
                         "Training examples the int8 export's quantization is calibrated on.",
                         flag_values=flag_values)
    flags.DEFINE_list("int8_float_nodes", list(DEFAULT_FLOAT_NODES),
                      "Regular expressions of the OpenVINO model's node names whose products "
                      "the int8 export keeps in float32 (comma-separated; empty: every product "
                      "in int8; docs/serving.md).", flag_values=flag_values)
    flags.DEFINE_float("export_max_relative_loss", DEFAULT_MAX_RELATIVE_LOSS,
                       "An OpenVINO export whose dev metric is lower than float32's by more than "
                       "this fraction of it is not written (0.01: 1%).", flag_values=flag_values)
