"""Strategies: choice from flags; mirrored and gradient accumulation == one device on the same
global batch. (Two-process multi-worker on loopback: test_cluster.py, whose uninterrupted pair
the one-checkpoint test reads.)"""

import json
import logging

from support.distribute_utils import configure_two_cpus, two_cpu_strategy

configure_two_cpus()  # before TensorFlow starts (pytest imports every test module first)

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_tf.model.config import BertConfig  # noqa: E402
from bert_tf.records import datasets, features  # noqa: E402
from bert_tf.tasks.pretraining import task as pretraining_task  # noqa: E402
from bert_tf.training import distribution, loop as training  # noqa: E402
from support.pretraining_records import PRED, SEQ, TINY_CONFIG, pretraining_arrays, \
    write_records  # noqa: E402



def test_default_strategy_follows_flags_and_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert distribution.default_strategy_name(use_tpu=True) == "tpu"
    assert distribution.default_strategy_name(num_gpus=2) == "mirrored"
    assert distribution.default_strategy_name() == "one_device"  # this machine has no GPU
    monkeypatch.setenv("TF_CONFIG", json.dumps(
        {"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 0}}))
    assert distribution.default_strategy_name() == "multi_worker_mirrored"


def test_strategy_errors_say_what_to_do(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="--distribution_strategy must be one of"):
        distribution.get_strategy("horovod")
    with pytest.raises(ValueError, match="TF_CONFIG"):
        distribution.get_strategy("multi_worker_mirrored")
    with pytest.raises(ValueError, match="--num_gpus=2 but only 0 GPUs"):
        distribution.get_strategy("mirrored", num_gpus=2)
    assert isinstance(distribution.get_strategy("one_device"), tf.distribute.OneDeviceStrategy)
    assert distribution.policy_name("bfloat16") == "mixed_bfloat16"


@pytest.fixture(scope="module")
def train_file(tmp_path_factory):
    return write_records(tmp_path_factory.mktemp("dist") / "train.tfrecord",
                         pretraining_arrays(64, 0))


def _train(train_file, output_dir, strategy=None, **changes):
    # No dropout, so that the updates do not depend on how the batch is split. One Transformer
    # layer: how replicas and micro-batches add up their gradients does not depend on the depth.
    task = pretraining_task.PretrainingTask(BertConfig(**{
        **TINY_CONFIG, "num_hidden_layers": 1, "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0}))
    config = training.RunConfig(output_dir=output_dir, train_batch_size=8, num_train_steps=3,
                                learning_rate=1e-2, save_checkpoints_steps=3, **changes)
    schema = features.pretraining_schema(SEQ, PRED)

    def input_fn(context, batch_size):
        return datasets.record_dataset(train_file, schema, batch_size, is_training=True,
                                       input_context=context)
    figures = training.train(task, config, input_fn, strategy)
    return figures, training.load_model(task, config).get_weights()


@pytest.fixture(scope="module")
def one_device(train_file, tmp_path_factory):
    """The reference: the whole global batch on one device."""
    return _train(train_file, str(tmp_path_factory.mktemp("one_device")))


def _assert_same_run(got, expected):
    (figures, weights), (expected_figures, expected_weights) = got, expected
    for name in ("loss", "masked_lm_loss", "next_sentence_loss", "masked_lm_accuracy",
                 "gradient_norm"):
        assert figures[name] == pytest.approx(expected_figures[name], rel=1e-5), name
    for a, b in zip(weights, expected_weights):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_mirrored_over_two_devices_matches_one_device(train_file, one_device, tmp_path):
    strategy = two_cpu_strategy()
    assert strategy.num_replicas_in_sync == 2
    _assert_same_run(_train(train_file, str(tmp_path), strategy), one_device)


def test_gradient_accumulation_gives_the_full_batch_update(train_file, one_device, tmp_path):
    # The micro-batches hold different numbers of real masked positions: averaging per-micro-batch
    # losses would weight them wrongly; the loop divides by the whole batch's count.
    weights = pretraining_arrays(64, 0)["masked_lm_weights"]
    assert len({weights[i:i + 2].sum() for i in range(0, 8, 2)}) > 1
    _assert_same_run(_train(train_file, str(tmp_path), gradient_accumulation_steps=4),
                     one_device)


@pytest.mark.parametrize("flags, speedup, warned", [
    ({"avx2", "fma"}, 0.4, "emulated"),  # no bfloat16 instructions
    ({"avx512f", "avx512_bf16"}, 0.5, "with AVX512-BF16"),  # Intel Xeon without AMX
    ({"avx512f", "avx512_bf16"}, 1.8, None),  # AMD EPYC Zen 4
    ({"avx512_bf16", "amx_bf16", "amx_tile"}, None, None),  # AMX: nothing to measure
])
def test_speed_warnings_name_the_settings_that_cannot_help_on_this_cpu(monkeypatch, flags,
                                                                       speedup, warned):
    """bfloat16 is warned about where this CPU's measured bfloat16 products are slower than
    float32's, whatever its flags; AMX tiles are not measured."""
    strategy = tf.distribute.get_strategy()
    monkeypatch.setattr(distribution, "cpu_flags", lambda: frozenset(flags))
    measured = []

    def measure():
        assert speedup is not None, "measured bfloat16 on a CPU with AMX tiles"
        measured.append(speedup)
        return speedup

    monkeypatch.setattr(distribution, "bfloat16_matmul_speedup", measure)
    warnings = distribution.speed_warnings(strategy, "bfloat16", use_xla=True)
    assert [w.split()[0] for w in warnings] == (
        ["--dtype=bfloat16:", "--use_xla"] if warned else ["--use_xla"])
    if warned:
        assert f"({warned}" in warnings[0] and f"at {speedup:.2f}x its float32" in warnings[0]
    assert distribution.speed_warnings(strategy, "bfloat16", use_xla=False) == warnings[:-1]
    float32 = distribution.speed_warnings(strategy, "float32", use_xla=False)
    assert [w.split()[0] for w in float32] == (["--dtype=float32"] if "amx_bf16" in flags else [])
    assert measured == ([] if speedup is None else [speedup, speedup])  # bfloat16 runs only


def test_bfloat16_matmul_speedup_is_float32s_best_time_over_bfloat16s(monkeypatch):
    """Each dtype's fastest run counts (a first slow run, a busy moment, is not the CPU)."""
    now = [0.0]
    costs = {tf.float32: [0.030, 0.008, 0.009], tf.bfloat16: [0.016, 0.020, 0.017]}

    class FakeProbe:
        def __init__(self, dtype):
            self.costs = iter(costs[dtype])

        def __call__(self):
            now[0] += next(self.costs)
            return tf.constant(0.0)

    monkeypatch.setattr(distribution, "matmul_probe", FakeProbe)
    assert distribution.bfloat16_matmul_speedup(repeats=3, clock=lambda: now[0]) == \
        pytest.approx(0.008 / 0.016)


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_matmul_probe_runs_the_encoders_product_in_its_dtype(dtype):
    """The probe is one dense layer's x @ kernel + bias in `dtype`, and sums its output."""
    probe = distribution.matmul_probe(dtype)
    graph = probe.get_concrete_function().graph
    [matmul] = [op for op in graph.get_operations() if op.type == "MatMul"]
    assert matmul.get_attr("T") == dtype
    assert [op.type for op in graph.get_operations() if op.type == "BiasAdd"] == ["BiasAdd"]
    rows, width, units = distribution.PROBE_PRODUCT
    assert matmul.outputs[0].shape == (rows, units) and matmul.inputs[1].shape == (width, units)
    x, kernel, bias = (tf.cast(tf.random.stateless_normal(shape, seed=[0, seed]), dtype).numpy()
                       .astype(np.float64)
                       for seed, shape in enumerate(([rows, width], [width, units], [units])))
    products = x @ kernel + bias
    # Each output rounded to the dtype's unit roundoff before the sum: within a few of those.
    tolerance = 4 * np.finfo(np.float32).eps if dtype == tf.float32 else 2.0 ** -8
    assert abs(probe().numpy() - products.sum()) <= tolerance * np.abs(products).sum()


def test_the_private_coordination_api_is_still_there():
    """`distribution._watch_worker_heartbeats` uses TensorFlow's eager context directly (no
    public API sets the heartbeat timeout): fail here, not in a cluster, when it changes."""
    import inspect

    from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
    from tensorflow.python.distribute import multi_worker_util
    from tensorflow.python.eager import context

    parameters = inspect.signature(context.Context.configure_coordination_service).parameters
    assert {"service_type", "service_leader", "coordinated_jobs",
            "heartbeat_timeout_in_ms"} <= set(parameters)
    cluster = tf.train.ClusterSpec({"chief": ["a:1"], "worker": ["b:2", "c:3"]})
    assert multi_worker_util.coordination_leader(cluster) == "/job:chief/replica:0/task:0"
    job = coordination_config_pb2.CoordinatedJob(name="worker", num_tasks=2)
    assert (job.name, job.num_tasks) == ("worker", 2)


def test_speed_warnings_suggest_bfloat16_on_a_cpu_with_matrix_units(monkeypatch):
    strategy = tf.distribute.get_strategy()
    monkeypatch.setattr(distribution, "cpu_has_bfloat16_matrix_units", lambda: True)
    [warning] = distribution.speed_warnings(strategy, "float32", use_xla=False)
    assert warning.startswith("--dtype=float32 on a CPU with AMX-BF16") and "--dtype=bfloat16" in warning


CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8
"""


def test_cpu_flags_come_from_cpuinfos_flags_line():
    assert distribution.cpu_flags(CPUINFO) == {"fpu", "avx2", "avx512f", "avx512_bf16", "amx_bf16",
                                               "amx_tile", "amx_int8"}
    assert distribution.cpu_flags("processor\t: 0\n") == frozenset()
    assert distribution.cpu_has_bfloat16_matrix_units(distribution.cpu_flags(CPUINFO))
    assert not distribution.cpu_has_bfloat16_matrix_units(frozenset({"avx512_bf16", "avx512f"}))
    assert distribution.cpu_has_bfloat16_instructions(frozenset({"avx512_bf16", "avx512f"}))
    assert not distribution.cpu_has_bfloat16_instructions(frozenset({"avx512f", "avx2"}))


@pytest.mark.parametrize("tpu, gpus, flags, want", [
    (False, [], {"avx512_bf16", "amx_bf16", "amx_tile"}, "bfloat16"),  # Sapphire Rapids
    (False, [], {"avx512_bf16", "avx512f"}, "float32"),  # AVX512-BF16 without tiles (Zen 4)
    (False, [], set(), "float32"),
    (True, [], set(), "bfloat16"),
    (False, [(8, 0), (9, 0)], set(), "bfloat16"),  # A100, H100
    (False, [(7, 5)], {"amx_bf16"}, "float16"),  # T4: the GPU decides, not the host CPU
    (False, [(8, 6), (7, 0)], set(), "float16"),  # the slowest GPU decides
])
def test_dtype_auto_picks_what_the_devices_run_fastest(tpu, gpus, flags, want):
    dtype, reason = distribution.preferred_dtype(tpu, gpus, frozenset(flags))
    assert dtype == want and reason


def test_dtype_auto_resolves_once_with_a_log_line(monkeypatch, caplog):
    sapphire_rapids = distribution.cpu_flags(CPUINFO)
    monkeypatch.setattr(distribution, "cpu_flags", lambda: sapphire_rapids)
    with caplog.at_level(logging.INFO, logger="absl"):
        assert distribution.resolve_dtype("auto") == "bfloat16"
        assert distribution.resolve_dtype("float32") == "float32"
    assert [r.getMessage() for r in caplog.records if "--dtype=auto" in r.getMessage()] == [
        "--dtype=auto: bfloat16 for a CPU with AMX-BF16 matrix units"]
    monkeypatch.setattr(distribution, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    assert distribution.resolve_dtype("auto") == "float32"


@pytest.mark.parametrize("argv, cpu, want", [
    (["--dtype=auto"], {"avx512_bf16", "amx_bf16"}, "bfloat16"),
    (["--dtype=auto"], {"avx512_bf16"}, "float32"),
    (["--dtype=auto", "--use_tpu"], set(), "bfloat16"),
    (["--dtype=float16"], {"amx_bf16"}, "float16"),  # a dtype given is kept
])
def test_run_config_from_flags_resolves_dtype_auto(monkeypatch, argv, cpu, want):
    from absl import flags  # noqa: PLC0415

    from bert_tf.cli import flags as training_flags  # noqa: PLC0415

    monkeypatch.setattr(distribution, "cpu_flags", lambda: frozenset(cpu))
    flag_values = flags.FlagValues()
    flags.DEFINE_string("output_dir", None, "", flag_values=flag_values)
    flags.DEFINE_bool("use_tpu", False, "", flag_values=flag_values)
    flags.DEFINE_string("dtype", "float32", "", flag_values=flag_values)
    flag_values(["prog", "--output_dir=out", *argv])
    assert training_flags.run_config_from_flags(flag_values).dtype == want
