"""Shared timing helper for the benchmarks: medians after warm-up, alternating the contenders."""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_times(contenders: dict[str, Callable[[], object]], repeats: int, warmup: int = 1) -> dict[str, float]:
    """Median wall time (s) of each callable; runs alternate so that machine noise hits all alike."""
    for fn in contenders.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            start = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in samples.items()}
