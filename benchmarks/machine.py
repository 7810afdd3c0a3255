"""What decides a benchmark's CPU figures, printed first by the benchmarks: the CPU model, its ISA
flags (AVX-512, AVX512-BF16, AMX), oneDNN, threads and the load (benchmarks only)."""

from __future__ import annotations

import os
import platform


def _cpuinfo_field(name: str) -> str:
    """The first `name` line's value in /proc/cpuinfo ("" where there is none)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith(name):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def _cpu_flags() -> set[str]:
    return set(_cpuinfo_field("flags").split())


def machine_info(tf) -> dict:
    """What decides CPU speed: the CPU model, oneDNN, bf16/AMX instructions, threads, load."""
    try:
        from tensorflow.python.util import _pywrap_util_port
        onednn = bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):
        onednn = None
    cpu_flags = _cpu_flags()
    return {
        "machine": platform.processor() or platform.machine(),
        "cpu_model": _cpuinfo_field("model name"),
        "isa": sorted(f for f in cpu_flags if f.startswith(("avx512", "amx", "avx2", "fma"))),
        "cpu_count": os.cpu_count(),
        "tensorflow": tf.__version__,
        "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "(unset)"),
        "onednn_enabled": onednn,
        # Caps the instructions oneDNN uses, e.g. AVX512_CORE_VNNI: bfloat16 then emulated.
        "ONEDNN_MAX_CPU_ISA": os.environ.get("ONEDNN_MAX_CPU_ISA", "(unset)"),
        "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
        "cpu_bf16_flags": sorted(cpu_flags & {"avx512_bf16", "amx_bf16", "amx_tile"}),
        "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        "load_average_1min": os.getloadavg()[0],
    }
