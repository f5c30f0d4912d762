"""Medians of repeated timings (these machines are noisy) and a least-squares slope."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any


def median_seconds(
    fn: Callable[[], object],
    repeats: int = 7,
    warmup: int = 1,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """Median seconds of ``fn()`` over ``repeats`` runs after ``warmup`` runs, by ``clock``
    (wall time; ``time.process_time``: this process's CPU time, which a loaded machine's
    waits for a core do not add to)."""
    return median_fresh(lambda: None, lambda _: fn(), repeats, warmup, clock)


def median_fresh(
    make: Callable[[], Any],
    fn: Callable[[Any], object],
    repeats: int = 7,
    warmup: int = 1,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """Median seconds of ``fn(make())`` over ``repeats`` runs after ``warmup`` runs, by
    ``clock``, ``make()`` untimed: each run gets a fresh object (a scenario loaded again),
    so what one run leaves on it (an op's resolved entries) does not speed up the next."""
    for _ in range(warmup):
        fn(make())
    times = []
    for _ in range(repeats):
        x = make()
        t0 = clock()
        fn(x)
        times.append(clock() - t0)
    return statistics.median(times)


def per_call(fn: Callable[[], object], min_seconds: float = 0.05, repeats: int = 5) -> float:
    """Median seconds per call of a fast ``fn``, batching calls to reach ``min_seconds``."""
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - t0 >= min_seconds or n >= 1 << 20:
            break
        n *= 2
    return median_seconds(lambda: [fn() for _ in range(n)], repeats=repeats, warmup=0) / n


def slope(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares ``(slope, intercept)`` of ys against xs."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return b, my - b * mx


def fmt_s(seconds: float | None) -> str:
    """Seconds in the unit that reads best (µs, ms, s)."""
    if seconds is None:
        return "n/a"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"
