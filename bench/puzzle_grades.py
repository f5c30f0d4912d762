"""The collectives puzzle track (issue 30): how long a grade takes. Every puzzle's starting
point and key graded (the static check over every schedule, then the simulator's values
against numpy's), warm, best of a few; and the first grade of a fresh process, imports
included, which is what a learner's first Check costs."""

from __future__ import annotations

import subprocess
import sys
import time

from bench.table import Row, timed

#: each grade must come back in under this (the issue's < 2 s)
TARGET_S = 2.0

_FIRST = """
import time
t0 = time.perf_counter()
from mpmd_lab import puzzles
puzzles.grade("collective-puzzle", puzzles.start("collective-puzzle"))
print(time.perf_counter() - t0)
"""


def rows(quick: bool = False) -> list[Row]:
    from mpmd_lab import puzzles

    repeats = 1 if quick else 5
    slowest, slowest_name, total = 0.0, "", 0.0
    names = puzzles.names()
    for name in names:
        for make in (puzzles.start, puzzles.key):
            scenario = make(name)
            puzzles.grade(name, scenario)  # first-call set-up is the next row's
            best = min(_time(name, scenario) for _ in range(repeats))
            total += best
            if best > slowest:
                slowest, slowest_name = best, f"{name} ({make.__name__})"
    out = [
        timed(
            "puzzles",
            f"slowest grade of {2 * len(names)} (each puzzle's start and key), warm",
            slowest,
            target_s=TARGET_S,
            ratio=f"{slowest_name}; mean {1000 * total / (2 * len(names)):.1f} ms",
        )
    ]
    heaviest = "matmul-rows"  # the collective matmul: the most statements and accesses
    done = subprocess.run(
        [sys.executable, "-c", _FIRST.replace("collective-puzzle", heaviest)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        out.append(Row("puzzles", "first grade in a fresh process", f"n/a ({done.stderr[-120:]})"))
    else:
        out.append(
            timed(
                "puzzles",
                f"first grade in a fresh process ({heaviest}, imports included)",
                float(done.stdout.split()[-1]),
                target_s=TARGET_S,
            )
        )
    return out


def _time(name: str, scenario: object) -> float:
    from mpmd_lab import puzzles

    t0 = time.perf_counter()
    puzzles.grade(name, scenario)
    return time.perf_counter() - t0
