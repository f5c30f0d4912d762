"""Graph layout and render at 50 and 2,000 nodes (``bench.bench_graph``), medians."""

from __future__ import annotations

import statistics

from bench.table import Row
from bench.timing import fmt_s


def rows(repeats: int = 3) -> list[Row]:
    from bench.bench_graph import SIZES, bench_graph

    runs = [bench_graph(SIZES) for _ in range(repeats)]
    out = []
    for i, size in enumerate(SIZES):
        rs = [run[i] for run in runs]
        med = {
            k: statistics.median(r[k] for r in rs)
            for k in ("model_s", "layout_s", "paint_s", "png_s", "total_s")
        }
        r0 = rs[0]
        out.append(
            Row(
                "graph",
                f"~{size} nodes ({r0['nodes']} nodes, {r0['edges']} edges, {r0['mode']}, "
                f"{r0['drawn_nodes']} drawn)",
                fmt_s(med["total_s"]),
                f"model {fmt_s(med['model_s'])}, layout {fmt_s(med['layout_s'])}, "
                f"paint {fmt_s(med['paint_s'])}, png {fmt_s(med['png_s'])}",
            )
        )
    return out
