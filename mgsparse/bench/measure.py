"""Timing and memory helpers every benchmark shares: wall time, tracemalloc, resident set."""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from pathlib import Path

from mgsparse.errors import ConfigError

Progress = Callable[[str], None]


def rss_bytes() -> int:
    """The process's resident set now (VmRSS); its lifetime peak where /proc is missing."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def time_ms(call: Callable[[], object], repeat: int, warmup: int) -> list[float]:
    """Wall time of `repeat` calls in milliseconds, after `warmup` untimed ones: the first
    calls fill caches, build lazy views and wake BLAS threads, which no later call repeats."""
    for _ in range(warmup):
        call()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        call()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def check_settings(repeat: int, warmup: int, tolerance: float, budget_mb: float) -> None:
    """Refuse impossible settings before any graph is built."""
    if repeat < 1 or warmup < 0:
        raise ConfigError(f"need repeat >= 1 and warmup >= 0, got repeat={repeat}, "
                          f"warmup={warmup}")
    if not tolerance > 0:
        raise ConfigError(f"tolerance must be > 0, got {tolerance}")
    if not budget_mb > 0:
        raise ConfigError(f"memory budget must be > 0 MB, got {budget_mb}")
