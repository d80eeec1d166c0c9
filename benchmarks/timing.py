"""The timing loop the micro-benchmarks share: one call to warm up, then `repeats` timed calls."""

from __future__ import annotations

import time
from collections.abc import Callable


def call_seconds(function: Callable[[], object], repeats: int) -> list[float]:
    """Seconds of each of `repeats` calls of `function`, after one untimed call (first-call
    allocations and kernel choices stay out); the caller takes the statistic it reports."""
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return times
