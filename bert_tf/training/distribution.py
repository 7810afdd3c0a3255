"""Flags → a tf.distribute strategy, and --dtype → a Keras precision policy.

Strategies (all through tf.distribute; the loop is the same code under each):
  tpu                    TPUStrategy on the TPU named by --tpu_name (or --master), --tpu_zone,
                         --gcp_project, as the original's flags.
  mirrored               MirroredStrategy over --num_gpus GPUs of this host (all by default).
  multi_worker_mirrored  MultiWorkerMirroredStrategy; the cluster and this process's role come
                         from the TF_CONFIG environment variable.
  one_device             OneDeviceStrategy on the first GPU, else the CPU.
"""

from __future__ import annotations

import math
import os
import time
from typing import Callable

import tensorflow as tf
from absl import logging

from bert_tf.errors import UserError
from bert_tf.training.cluster import tf_config

STRATEGIES = ("tpu", "mirrored", "multi_worker_mirrored", "one_device")
DEFAULT_WORKER_TIMEOUT_SECONDS = 60
_POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}


def policy_name(dtype: str) -> str:
    """--dtype → Keras policy: compute in `dtype`, keep float32 variables (master weights)."""
    if dtype not in _POLICIES:
        raise UserError(f"--dtype must be one of {', '.join(_POLICIES)}, got {dtype!r}")
    return _POLICIES[dtype]


def default_strategy_name(use_tpu: bool = False, num_gpus: int | None = None) -> str:
    """The strategy used when --distribution_strategy is not given.

    tpu with --use_tpu; multi_worker_mirrored when TF_CONFIG names more than one task; mirrored
    with two or more GPUs (or --num_gpus ≥ 2); one_device otherwise.
    """
    if use_tpu:
        return "tpu"
    cluster = tf_config().get("cluster", {})
    if sum(len(tasks) for tasks in cluster.values()) > 1:
        return "multi_worker_mirrored"
    gpus = len(tf.config.list_physical_devices("GPU")) if num_gpus is None else num_gpus
    return "mirrored" if gpus >= 2 else "one_device"


def get_strategy(name: str | None = None, *, use_tpu: bool = False, num_gpus: int | None = None,
                 tpu_name: str | None = None, tpu_zone: str | None = None,
                 gcp_project: str | None = None, master: str | None = None,
                 worker_timeout_seconds: int = DEFAULT_WORKER_TIMEOUT_SECONDS
                 ) -> tf.distribute.Strategy:
    """Builds the strategy `name` (one of STRATEGIES; None: `default_strategy_name`).

    Args:
        name: the --distribution_strategy flag.
        use_tpu, tpu_name, tpu_zone, gcp_project, master: the original's TPU flags; the TPU is
            `tpu_name`, or `master` (a grpc:// address) when no name is given.
        num_gpus: GPUs for `mirrored` (None: every visible GPU; 0: the CPU).
        worker_timeout_seconds: `multi_worker_mirrored`: a worker silent for this long is lost
            and the others stop (see `_watch_worker_heartbeats`).

    Raises:
        ValueError: an unknown name, or `tpu` without a TPU to connect to.
    """
    name = name or default_strategy_name(use_tpu, num_gpus)
    if name not in STRATEGIES:
        raise UserError(f"--distribution_strategy must be one of {', '.join(STRATEGIES)}, "
                         f"got {name!r}")
    if name == "tpu":
        strategy = _tpu_strategy(tpu_name or master, tpu_zone, gcp_project)
    elif name == "mirrored":
        strategy = tf.distribute.MirroredStrategy(devices=_mirrored_devices(num_gpus))
    elif name == "multi_worker_mirrored":
        if not os.environ.get("TF_CONFIG"):
            raise UserError("multi_worker_mirrored needs the TF_CONFIG environment variable "
                             "(cluster and task of this process); see docs/training.md")
        _watch_worker_heartbeats(worker_timeout_seconds)
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    else:
        gpus = tf.config.list_logical_devices("GPU")
        strategy = tf.distribute.OneDeviceStrategy(gpus[0].name if gpus and num_gpus != 0
                                                   else "/cpu:0")
    logging.info("distribution: %s with %d replica(s)", type(strategy).__name__,
                 strategy.num_replicas_in_sync)
    return strategy


def _watch_worker_heartbeats(timeout_seconds: int) -> None:
    """Sets how long the coordination service waits for a silent worker before every other
    worker's collectives fail (and the loop stops naming it, `preemption.lost_worker_error`).

    MultiWorkerMirroredStrategy starts the service with TensorFlow's defaults when none is
    configured; this configures it the same way (every chief and worker task, led by the first)
    with the heartbeat timeout. There is no public API for it, hence the eager context's own
    (checked on TensorFlow 2.21.0; tests/training/test_distribution.py's
    `test_the_private_coordination_api_is_still_there` fails when these names change).
    """
    from tensorflow.python.distribute import multi_worker_util  # noqa: PLC0415
    from tensorflow.python.eager import context  # noqa: PLC0415
    from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2  # noqa: PLC0415

    if timeout_seconds < 1:
        raise UserError(f"--worker_timeout_seconds must be at least 1, got {timeout_seconds}")
    cluster = tf.distribute.cluster_resolver.TFConfigClusterResolver().cluster_spec()
    jobs = [coordination_config_pb2.CoordinatedJob(name=job, num_tasks=cluster.num_tasks(job))
            for job in ("chief", "worker") if job in cluster.jobs]
    context.context().configure_coordination_service(
        service_type="standalone", service_leader=multi_worker_util.coordination_leader(cluster),
        coordinated_jobs=jobs, heartbeat_timeout_in_ms=timeout_seconds * 1000)


def _tpu_strategy(tpu: str | None, zone: str | None, project: str | None):
    if not tpu:
        # On a TPU VM the local TPU needs no name; elsewhere the resolver's error says what to do.
        tpu = "local" if os.path.exists("/dev/accel0") or os.path.exists("/dev/vfio") else None
    if tpu is None:
        raise UserError("--distribution_strategy=tpu (or --use_tpu) needs --tpu_name or --master "
                         "unless it runs on a TPU VM")
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu, zone=zone,
                                                                 project=project)
    if tpu != "local":
        tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def _mirrored_devices(num_gpus: int | None) -> list[str]:
    gpus = [device.name for device in tf.config.list_logical_devices("GPU")]
    if num_gpus is None:
        num_gpus = len(gpus)
    if num_gpus > len(gpus):
        raise UserError(f"--num_gpus={num_gpus} but only {len(gpus)} GPUs are visible")
    if num_gpus == 0:
        # Every logical CPU device (tests split the CPU into several; a plain host has one).
        return [device.name for device in tf.config.list_logical_devices("CPU")]
    return gpus[:num_gpus]


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The CPU's feature flags from /proc/cpuinfo's `flags` line (or `cpuinfo`, its text);
    empty where there is no such file (not Linux)."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as f:
                cpuinfo = f.read()
        except OSError:
            return frozenset()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def cpu_has_bfloat16_matrix_units(flags: frozenset[str] | None = None) -> bool:
    """Whether this CPU (or one with `flags`) has AMX-BF16 tile units: the CPUs for which
    `--dtype=auto` picks bfloat16."""
    return "amx_bf16" in (cpu_flags() if flags is None else flags)


def cpu_has_bfloat16_instructions(flags: frozenset[str] | None = None) -> bool:
    """Whether this CPU (or one with `flags`) computes bfloat16 products in hardware
    (AVX512-BF16 or AMX-BF16); without either oneDNN emulates them."""
    flags = cpu_flags() if flags is None else flags
    return "avx512_bf16" in flags or "amx_bf16" in flags


# (rows, in, out) of the product `bfloat16_matmul_speedup` times: BERT-base's feed-forward on
# 512 tokens, large enough for the encoder's own oneDNN kernel, a few milliseconds to run.
PROBE_PRODUCT = (512, 768, 3072)


def matmul_probe(dtype: tf.DType) -> Callable[[], tf.Tensor]:
    """A traced `x @ kernel + bias` of `PROBE_PRODUCT`'s shape in `dtype` on the CPU (the fused
    matmul the encoder's dense layers run), already run once; each call returns the float32 sum
    of its output, which waits for the product."""
    rows, width, units = PROBE_PRODUCT
    with tf.device("/CPU:0"):
        x, kernel, bias = (tf.cast(tf.random.stateless_normal(shape, seed=[0, seed]), dtype)
                           for seed, shape in enumerate(([rows, width], [width, units], [units])))

    @tf.function
    def product() -> tf.Tensor:
        with tf.device("/CPU:0"):
            return tf.reduce_sum(tf.cast(tf.nn.bias_add(tf.matmul(x, kernel), bias), tf.float32))

    product()  # traces, and creates oneDNN's kernel outside the timing
    return product


def bfloat16_matmul_speedup(repeats: int = 3,
                            clock: Callable[[], float] = time.perf_counter) -> float:
    """How many times faster this host's CPU runs `matmul_probe` in bfloat16 than in float32,
    measured now: each dtype's best of `repeats` runs, the two taking turns (< 1: slower).

    Flags cannot tell: with AVX512-BF16 and no AMX, bfloat16 products ran at 1.8× float32 on
    an AMD EPYC Zen 4 and at 0.5× on an Intel Xeon (docs/training.md, "Speed").
    """
    probes = {dtype: matmul_probe(dtype) for dtype in (tf.float32, tf.bfloat16)}
    best = dict.fromkeys(probes, math.inf)
    for _ in range(repeats):
        for dtype, probe in probes.items():
            started = clock()
            probe().numpy()
            best[dtype] = min(best[dtype], clock() - started)
    return best[tf.float32] / best[tf.bfloat16]


def preferred_dtype(tpu: bool, gpu_compute_capabilities: list[tuple[int, int]],
                    flags: frozenset[str]) -> tuple[str, str]:
    """What `--dtype=auto` picks for these devices, and why in a few words.

    TPUs: bfloat16 (their matrix units' type). GPUs: bfloat16 from compute capability 8.0
    (Ampere) on, float16 (with loss scaling) below. CPUs: bfloat16 with AMX-BF16 tiles, float32
    otherwise (`cpu_has_bfloat16_matrix_units`).
    """
    if tpu:
        return "bfloat16", "a TPU"
    if gpu_compute_capabilities:
        if min(gpu_compute_capabilities) >= (8, 0):
            return "bfloat16", "GPUs of compute capability 8.0 or more"
        return "float16", "GPUs of compute capability below 8.0 (no fast bfloat16)"
    if cpu_has_bfloat16_matrix_units(flags):
        return "bfloat16", "a CPU with AMX-BF16 matrix units"
    return "float32", ("a CPU without AMX-BF16 matrix units (bfloat16 gains less there, "
                       "nothing, or loses)")


def resolve_dtype(dtype: str, use_tpu: bool = False) -> str:
    """--dtype → a dtype of `policy_name`: "auto" becomes `preferred_dtype` of the devices
    of this host, logged once; any other value is returned as is."""
    if dtype != "auto":
        return dtype
    capabilities = [tuple(tf.config.experimental.get_device_details(gpu).get(
        "compute_capability", (0, 0))) for gpu in tf.config.list_physical_devices("GPU")]
    chosen, reason = preferred_dtype(use_tpu, capabilities, cpu_flags())
    logging.info("--dtype=auto: %s for %s", chosen, reason)
    return chosen


def speed_warnings(strategy: tf.distribute.Strategy, dtype: str, use_xla: bool) -> list[str]:
    """Settings that cannot make this run faster on the devices at hand, each said in one line.

    On CPUs: bfloat16 where this CPU's bfloat16 products are slower than its float32 ones
    (measured by `bfloat16_matmul_speedup` on a CPU without AMX tiles), float32 on AMX tiles
    (slower than bfloat16), and XLA, which needs static shapes, so the encoder then computes the
    padding positions it otherwise skips.
    """
    accelerators = tf.config.list_logical_devices("GPU") + tf.config.list_logical_devices("TPU")
    if accelerators or isinstance(strategy, tf.distribute.TPUStrategy):
        return []
    warnings = []
    if dtype == "bfloat16" and not cpu_has_bfloat16_matrix_units():
        speedup = bfloat16_matmul_speedup()
        if speedup < 1:
            how = ("with AVX512-BF16 instructions" if cpu_has_bfloat16_instructions()
                   else "emulated: no AVX512-BF16 or AMX-BF16 instructions")
            rows, width, units = PROBE_PRODUCT
            warnings.append(
                f"--dtype=bfloat16: this CPU multiplies in bfloat16 ({how}) at {speedup:.2f}x "
                f"its float32 speed, measured now on a [{rows},{width}]x[{width},{units}] "
                "product; use --dtype=float32")
    if dtype == "float32" and cpu_has_bfloat16_matrix_units():
        warnings.append("--dtype=float32 on a CPU with AMX-BF16 matrix units: --dtype=bfloat16 "
                        "(or --dtype=auto) runs the matrix products on them, several times "
                        "faster (docs/training.md)")
    if use_xla:
        warnings.append("--use_xla on a CPU: XLA needs static shapes, so the encoder computes the "
                        "padding positions it otherwise skips; usually slower here than without")
    return warnings
