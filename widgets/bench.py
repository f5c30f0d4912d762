"""Edit-to-feedback time of the Lab: from an edit to re-validated problems, badges and
editors on screen (the graph is drawn just after, and timed on its own)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from functools import partial
from typing import Any

from mpmd_lab.widgets.lab import Lab


def feedback_ms(
    source: Any = "ring-shift", repeats: int = 5, with_graph: bool = False
) -> dict[str, float]:
    """Median and worst edit-to-feedback time (ms) over typical edits of ``source``.

    Each round: resize the first buffer, pass it again as an argument, rename that
    parameter, then undo all three; every step re-validates (static, no tracing) and
    re-renders what changed. ``with_graph``: also the aliasing graph's redraw time (in a
    kernel the graph is redrawn on a timer thread just after the feedback).
    """
    lab = Lab(source, background=False, graph=False)
    st = lab.state
    times: list[float] = []
    buffer = next(iter(st.scenario.buffers), None)
    for _ in range(repeats):
        steps: list[Callable[[], Any]] = []
        if buffer is not None:
            shape = st.scenario.buffers[buffer].shape
            wider = [*shape[:-1], shape[-1] * 2] if shape else []
            steps.append(partial(st.edit, ("replace", f"buffers.{buffer}.shape", wider)))
        steps.append(lambda: lab.call.add_arg(buffer))
        steps.append(
            lambda: st.edit(
                ("replace", f"call.args[{len(st.scenario.call.args) - 1}].param", "renamed_ref")
            )
        )
        done = 0
        for step in steps:
            if step().ok:
                times.append(st.feedback_ms)
                done += 1
        for _ in range(done):
            st.undo()
            times.append(st.feedback_ms)
    graph: list[float] = []
    if with_graph:
        for _ in range(2):
            lab.graph.redraw(force=True)
            graph.append(lab.graph.draw_ms)
    return {
        "median_ms": statistics.median(times),
        "max_ms": max(times),
        "graph_median_ms": statistics.median(graph) if graph else 0.0,
        "edits": float(len(times)),
    }


if __name__ == "__main__":
    from mpmd_lab import gallery

    for name in gallery.names():
        r = feedback_ms(name, repeats=3, with_graph=True)
        print(
            f"{name:28} feedback median {r['median_ms']:6.1f} ms  max {r['max_ms']:6.1f} ms"
            f"  graph {r['graph_median_ms']:6.1f} ms"
        )
