"""Widget edit-to-feedback latency: an edit in the Lab until problems (and graph) show."""

from __future__ import annotations

import statistics
import time

from bench.table import Row, verdict
from bench.timing import fmt_s

TARGET_S = 0.1  # feels instant


def rows(edits: int = 15) -> list[Row]:
    from mpmd_lab.widgets import Lab

    out = []
    for graph in (False, True):
        lab = Lab("ring-shift", background=False, graph=graph)
        walls, feedback, checks = [], [], []
        for i in range(edits):
            shape = [256] if i % 2 else [128]  # valid, then a size mismatch, and back
            t0 = time.perf_counter()
            res = lab.state.edit(("replace", "buffers.x.shape", shape))
            walls.append(time.perf_counter() - t0)
            assert res.ok, res
            feedback.append(lab.state.feedback_ms / 1000)
            checks.append(lab.state.check_ms / 1000)
        wall = statistics.median(walls)
        out.append(
            Row(
                "widgets",
                f"Lab edit -> problems{' + graph (fast view, Python side)' if graph else ''} "
                f"shown (median of {edits})",
                fmt_s(wall),
                f"check alone {fmt_s(statistics.median(checks))}",
                f"{wall / statistics.median(checks):.1f}",
                f"< {fmt_s(TARGET_S)}",
                verdict(wall < TARGET_S),
                value=wall,
                unit="s",
                base=statistics.median(checks),
            )
        )
    return out
