"""Host-side timing shared by the benchmarks: paths timed in interleaved rounds.

Each round times every path once (N calls back to back, then one synchronize), and
each path keeps its best round. Noise on a shared host then lands on all paths of
a table alike, instead of on whichever path happened to run during a busy second,
which is what makes the ratios of one run comparable.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable


class Rounds:
    def __init__(self, calls: int, reps: int, sync: Callable[[], None]) -> None:
        self.calls, self.reps, self.sync = calls, reps, sync
        self.paths: dict[str, Callable[[int], float]] = {}
        #: us per call of every round of the last run(), per path (for medians)
        self.samples: dict[str, list[float]] = {}

    def add(self, name: str, fn: Callable[[], Any]) -> None:
        """A Python call, timed with perf_counter around the loop and the synchronize."""

        def timed(n: int) -> float:
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            self.sync()
            return (time.perf_counter() - t0) / n * 1e6

        self.paths[name] = timed

    def add_timed(self, name: str, timed: Callable[[int], float]) -> None:
        """A path that times itself (a C loop): calls -> us per call."""
        self.paths[name] = timed

    def run(self, warmup: int = 200) -> dict[str, float]:
        """us per call of every path: the best of ``reps`` interleaved rounds."""
        for timed in self.paths.values():
            timed(warmup)  # caches, allocator, driver
        self.samples = {name: [] for name in self.paths}
        for _ in range(self.reps):
            for name, timed in self.paths.items():
                self.samples[name].append(timed(self.calls))
        return {name: min(s) for name, s in self.samples.items()}


def device_ms(fn: Callable[[], Any], reps: int, dev: str, warmup: int = 1) -> float:
    """Median device milliseconds of one call of ``fn``, after ``warmup`` calls: CUDA events
    around each of ``reps`` calls; on CPU (smoke mode) the wall time of one call."""
    for _ in range(warmup):
        fn()
    if dev == "cpu":
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    import torch

    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)
