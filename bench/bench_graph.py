"""Benchmark: aliasing-graph model, layout and render time at 50 and 2,000 nodes.

Run ``python bench/bench_graph.py`` (or ``python -m bench.bench_graph``); it prints one
line per size. ``synthetic(n)`` makes a scenario whose graph has about ``n`` nodes.
"""

from __future__ import annotations

import io
import time
from typing import Any

SIZES = (50, 2000)


def synthetic(n_nodes: int, devices: int = 4, programs: int = 2) -> dict[str, Any]:
    """A scenario dict whose aliasing graph has about ``n_nodes`` nodes.

    Each unit is a buffer passed as an argument (3 nodes), a two-step peer view of it
    (2), a copy (1) into a one-step view of an output (1 + 1 output): 8 nodes. The
    first buffer is passed twice, so there is always one problem to draw.
    """
    units = max(1, (n_nodes - devices - programs) // 8)
    buffers, args, outputs = {}, [], {}
    bodies: list[list[dict[str, Any]]] = [[] for _ in range(programs)]
    for u in range(units):
        buffers[f"b{u}"] = {"shape": [8, 128], "dtype": "float32", "init": "iota"}
        args.append({"buffer": f"b{u}", "param": f"x{u}"})
        outputs[f"o{u}"] = {"shape": [8, 128], "dtype": "float32"}
        body = bodies[u % programs]
        body.append(
            {
                "let": f"v{u}",
                "ref": f"x{u}",
                "transforms": [
                    {"op": "at", "index": [[0, 8]]},
                    {"op": "remote_ref", "device": {"dev": {"offset": 1 + u % 3}}},
                ],
            }
        )
        body.append({"let": f"w{u}", "ref": f"o{u}", "transforms": [{"op": "at", "index": [None]}]})
        body.append({"op": "copy", "src": f"v{u}", "dst": f"w{u}"})
    buffers["b0"]["as_ref"] = True
    args.append({"buffer": "b0", "param": "again"})
    return {
        "schema": "mpmd-lab/scenario@1",
        "name": f"synthetic-{n_nodes}",
        "description": f"{units} copies through peer views on {devices} devices",
        "device_mesh": {"dev": devices},
        "buffers": buffers,
        "call": {
            "entry": "pl.kernel",
            "args": args,
            "outputs": outputs,
            "programs": [{"mesh": {"grid": {"b": 1}}, "body": body} for body in bodies if body],
        },
    }


def bench_graph(sizes: tuple[int, ...] = SIZES) -> list[dict[str, Any]]:
    """Per size: nodes, edges, seconds to build the model, lay out, paint and save PNG."""
    from mpmd_lab import draw as plot
    from mpmd_lab import graph
    from mpmd_lab.scenario import load_scenario

    rows = []
    for n in sizes:
        scenario = load_scenario(synthetic(n))
        c0 = time.process_time()
        t0 = time.perf_counter()
        g = graph.build_graph(scenario, diagnostics=[])
        t1 = time.perf_counter()
        big = sum(1 for _, k in g.nodes(data="kind") if k not in ("device", "program"))
        d = plot._summarise(g) if big > plot.SUMMARY_NODES else plot._full(g)
        plot.layout(d)
        t2 = time.perf_counter()
        fig = plot.draw(g)
        t3 = time.perf_counter()
        fig.savefig(io.BytesIO(), format="png", dpi=130, pil_kwargs={"compress_level": 1})
        t4 = time.perf_counter()
        cpu = time.process_time() - c0
        rows.append(
            {
                "nodes": g.number_of_nodes(),
                "edges": g.number_of_edges(),
                "drawn_nodes": len(d.nodes),
                "mode": fig.mpmd_lab_mode,
                "model_s": round(t1 - t0, 4),
                "layout_s": round(t2 - t1, 4),
                "paint_s": round(t3 - t2, 4),
                "png_s": round(t4 - t3, 4),
                "total_s": round(t4 - t0, 4),
                "cpu_s": round(cpu, 4),
            }
        )
    return rows


def main() -> None:
    for row in bench_graph():
        print(
            f"graph {row['nodes']:>5} nodes {row['edges']:>5} edges ({row['mode']}, "
            f"{row['drawn_nodes']} drawn): model {row['model_s']:.3f}s  "
            f"layout {row['layout_s']:.3f}s  paint {row['paint_s']:.3f}s  "
            f"png {row['png_s']:.3f}s  total {row['total_s']:.3f}s (cpu {row['cpu_s']:.3f}s)"
        )


if __name__ == "__main__":
    main()
