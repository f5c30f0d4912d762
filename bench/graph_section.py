"""The aliasing graph: the matplotlib picture at 50 and 2,000 nodes (``bench.bench_graph``),
and the Lab's fast view, graph model -> pixels in Chromium, against the PNG path."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

from bench.table import Row, timed
from bench.timing import fmt_s

FAST_TARGET_S = 0.1  # follows typing
CHROMIUM = "/usr/bin/chromium"


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
                f"~{size} nodes, matplotlib PNG ({r0['nodes']} nodes, {r0['edges']} edges, "
                f"{r0['mode']}, {r0['drawn_nodes']} drawn)",
                fmt_s(med["total_s"]),
                f"model {fmt_s(med['model_s'])}, layout {fmt_s(med['layout_s'])}, "
                f"paint {fmt_s(med['paint_s'])}, png {fmt_s(med['png_s'])}",
                value=med["total_s"],
                unit="s",
            )
        )
    out += fast_rows(repeats=max(repeats, 5))
    return out


def _png_path(g: Any) -> float:
    """The Lab's old graph: matplotlib figure -> PNG (``services.aliasing_png``'s dpi)."""
    import io

    import matplotlib

    matplotlib.use("Agg", force=False)
    from mpmd_lab import plot

    t0 = time.perf_counter()
    fig = plot.draw(g)
    fig.savefig(io.BytesIO(), format="png", dpi=80, bbox_inches="tight")
    return time.perf_counter() - t0


def fast_rows(repeats: int = 5, sizes: tuple[int, ...] = (50, 2000)) -> list[Row]:
    """Graph model -> shown in the fast view (SVG strings, the comm's JSON, Chromium's
    paint to the next frame), for a new structure (a fresh layout) and for an edit that
    keeps the structure (cached layout), against the matplotlib PNG of the same model."""
    from mpmd_lab import graph, layout, scene
    from mpmd_lab.scenario import load_scenario
    from mpmd_lab.widgets.graph_view import GraphSVG

    from bench.bench_graph import synthetic

    browser = _Browser()
    out: list[Row] = []
    try:
        for size in sizes:
            spec = synthetic(size)
            g = graph.build_graph(load_scenario(spec), diagnostics=None)
            n = g.number_of_nodes()
            view = GraphSVG()
            browser.reset()
            miss, hit, paint_ms, py_hit = [], [], [], []
            for k in range(repeats):
                cache = layout.LayoutCache()
                t0 = time.perf_counter()
                view.show(scene.scene(g, cache))
                payload = json.dumps(view.get_state(["svg", "devices", "legend", "info"]))
                browser.push(view)
                miss.append(time.perf_counter() - t0)
                # an edit that keeps the structure: a buffer renamed (same length)
                g2 = graph.build_graph(
                    load_scenario(json.loads(json.dumps(spec).replace('"b1"', f'"c{k % 10}"'))),
                    diagnostics=None,
                )
                t2 = time.perf_counter()
                view.show(scene.scene(g2, cache))
                json.dumps(view.get_state(["svg", "devices", "legend", "info"]))
                t3 = time.perf_counter()
                ms = browser.push(view)
                hit.append(time.perf_counter() - t2)
                py_hit.append(t3 - t2)
                if ms is not None:
                    paint_ms.append(ms / 1000)
            png = statistics.median(_png_path(g) for _ in range(max(1, repeats // 2)))
            where = browser.what()
            target = FAST_TARGET_S if size <= 50 else None
            out.append(
                timed(
                    "graph",
                    f"~{size} nodes ({n}): graph model -> shown, fast view, new layout "
                    f"({where}) vs matplotlib PNG",
                    statistics.median(miss),
                    png,
                    target_s=target,
                )
            )
            paint = f", browser paint {fmt_s(statistics.median(paint_ms))}" if paint_ms else ""
            out.append(
                timed(
                    "graph",
                    f"~{size} nodes: graph model -> shown, fast view, same structure "
                    f"(cached layout; Python {fmt_s(statistics.median(py_hit))}{paint})",
                    statistics.median(hit),
                    png,
                    target_s=target,
                )
            )
            out[-1].measure += f"; payload {len(payload) // 1024} KiB"
    finally:
        browser.close()
    return out


class _Browser:
    """Chromium with GraphSVG's browser side, when there is one; else a no-op."""

    def __init__(self) -> None:
        self.pw = self.b = self.page = None
        self.why = ""
        if not Path(CHROMIUM).exists():
            self.why = "no Chromium: Python side only"
            return
        try:
            from playwright.sync_api import sync_playwright

            self.pw = sync_playwright().start()
            self.b = self.pw.chromium.launch(
                executable_path=CHROMIUM,
                headless=True,
                args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
            )
        except Exception as e:  # noqa: BLE001 - measure what can be measured
            self.why = f"no browser ({type(e).__name__}): Python side only"
            self.close()

    def reset(self) -> None:
        from mpmd_lab.widgets import graph_page

        if self.b is None:
            return
        if self.page is not None:
            self.page.close()
        self.page = self.b.new_page()
        graph_page.open_page(self.page)

    def push(self, view: Any) -> float | None:
        from mpmd_lab.widgets import graph_page

        return None if self.page is None else graph_page.push(self.page, view)

    def what(self) -> str:
        return "Python + Chromium paint" if self.page is not None else self.why

    def close(self) -> None:
        for x in (self.b,):
            if x is not None:
                x.close()
        if self.pw is not None:
            self.pw.stop()
        self.pw = self.b = self.page = None
