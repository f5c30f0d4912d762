"""The race and deadlock verdict over every schedule (issue 28): the check of each
4-device collective of the gallery, timed whole (the lockstep run and the exploration
of the schedules that matter), with how many schedules it explored."""

from __future__ import annotations

import time

from bench.table import Row, timed

#: the gallery's 4-device collectives (each must get its all-schedule verdict in < 1 s)
KERNELS = ("ring-all-gather", "ring-reduce-scatter", "collective-matmul", "exchange-shards")


def rows(quick: bool = False) -> list[Row]:
    from mpmd_lab import gallery
    from mpmd_lab.engine import Engine, Limits
    from mpmd_lab.engine.explore import explore
    from mpmd_lab.validate.sync import (
        EXPLORE_SECONDS,
        MAX_EXPLORE_STEPS,
        MAX_SCHEDULES,
        MAX_STEPS,
    )

    out = []
    for name in KERNELS:
        s = gallery.load(name)
        best = None
        runs = 0
        for _ in range(1 if quick else 5):
            t0 = time.perf_counter()
            ex = explore(
                lambda ch, s=s: Engine(
                    s,
                    data=False,
                    limits=Limits(max_steps=MAX_STEPS),
                    log_limit=0,
                    log_tally=False,
                    chooser=ch,
                ),
                max_runs=MAX_SCHEDULES,
                max_steps=MAX_EXPLORE_STEPS,
                max_seconds=EXPLORE_SECONDS,
            )
            dt = time.perf_counter() - t0
            best = dt if best is None else min(best, dt)
            runs = ex.runs
            if not ex.complete:
                out.append(Row("sync", f"{name}: every schedule", f"n/a ({ex.why})"))
                break
        else:
            out.append(
                timed(
                    "sync",
                    f"{name} (4 devices): race/deadlock verdict over every schedule",
                    best,
                    target_s=1.0,
                    ratio=f"{runs} schedule(s) explored (best of {1 if quick else 5})",
                )
            )
    return out
