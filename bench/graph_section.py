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
    from mpmd_lab import draw as plot

    t0 = time.perf_counter()
    fig = plot.draw(g)
    fig.savefig(io.BytesIO(), format="png", dpi=80, bbox_inches="tight")
    return time.perf_counter() - t0


def fast_rows(repeats: int = 5, sizes: tuple[int, ...] = (50, 2000)) -> list[Row]:
    """Graph model -> shown in the fast view (SVG strings, the comm's JSON, Chromium's
    paint to the next frame), for a new structure (a fresh layout) and for an edit that
    keeps the structure (cached layout), against the matplotlib PNG of the same model."""
    from mpmd_lab import graph, layout
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
            miss, hit = [], []  # (Python side, browser paint, Playwright round trip) s
            for k in range(repeats):
                cache = layout.LayoutCache()
                miss.append(_shown(view, g, cache, browser))
                # an edit that keeps the structure: a buffer renamed (same length)
                g2 = graph.build_graph(
                    load_scenario(json.loads(json.dumps(spec).replace('"b1"', f'"c{k % 10}"'))),
                    diagnostics=None,
                )
                hit.append(_shown(view, g2, cache, browser))
            payload = len(json.dumps(view.get_state(["svg", "devices", "legend", "info"])))
            png = statistics.median(_png_path(g) for _ in range(max(1, repeats // 2)))
            target = FAST_TARGET_S if size <= 50 else None
            for label, runs in (("new structure: fresh layout", miss),
                                ("same structure: cached layout", hit)):  # fmt: skip
                py = statistics.median(r[0] for r in runs)
                if browser.page is None:
                    where, total = browser.why, py
                else:
                    paint = statistics.median(r[1] for r in runs)
                    trip = statistics.median(r[2] for r in runs)
                    total = py + paint
                    where = (
                        f"Python {fmt_s(py)} + Chromium paint {fmt_s(paint)}; Playwright's "
                        f"round trip {fmt_s(trip)} for {payload // 1024} KiB not counted"
                    )
                out.append(
                    timed(
                        "graph",
                        f"~{size} nodes ({n}): graph model -> shown, fast view, {label} "
                        f"({where}) vs matplotlib PNG",
                        total,
                        png,
                        target_s=target,
                    )
                )
    finally:
        browser.close()
    return out


def _shown(view: Any, g: Any, cache: Any, browser: _Browser) -> tuple[float, float, float]:
    """Show ``g``: seconds on the Python side (layout, scene, SVG strings, the comm's
    JSON), the browser's own paint time (state in -> frame drawn), the round trip."""
    from mpmd_lab import scene

    t0 = time.perf_counter()
    view.show(scene.scene(g, cache))
    json.dumps(view.get_state(["svg", "devices", "legend", "problems", "info"]))
    t1 = time.perf_counter()
    ms = browser.push(view)
    t2 = time.perf_counter()
    return t1 - t0, (ms or 0.0) / 1000, t2 - t1


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
