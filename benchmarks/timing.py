"""Timing shared by the benchmarks that compare exports called in turn."""

from __future__ import annotations

import time


def examples_per_second(calls: dict, examples: int, repeats: int, seconds: float
                        ) -> dict[str, list[float]]:
    """Examples/s of each call (`examples` per call) in each of `repeats` rounds of at least
    `seconds` and 2 calls each, the calls alternating (one warm-up call each first)."""
    for call in calls.values():
        call()
    rates = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            count, start = 0, time.perf_counter()
            while count < 2 or time.perf_counter() - start < seconds:
                call()
                count += 1
            rates[name].append(count * examples / (time.perf_counter() - start))
    return rates
