"""The generic timer: wall clock around a synchronize, for backends without a benchmarker.

Kept apart from the autotuner so that plugins (``pluginkit``) can time with it
without importing the tuning machinery.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def no_sync() -> None:
    """The synchronize of a backend that has none: its launches are already done."""


def wall_clock_bench(call: Callable[[], object], sync: Callable[[], None] = no_sync, warmup_ms: float = 25.0,
                     rep_ms: float = 100.0) -> float:
    """Median milliseconds of ``call`` (do_bench's shape, timed on the host)."""
    call()
    sync()
    t0 = time.perf_counter()
    for _ in range(3):
        call()
    sync()
    est = max((time.perf_counter() - t0) / 3 * 1e3, 1e-3)
    for _ in range(max(1, int(warmup_ms / est))):
        call()
    sync()
    times = []
    for _ in range(max(3, min(1000, int(rep_ms / est)))):
        t = time.perf_counter()
        call()
        sync()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)
