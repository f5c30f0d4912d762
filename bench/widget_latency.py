"""Widget edit-to-feedback latency: an edit in the Lab until problems (and graph) show."""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench.table import Row, verdict
from bench.timing import fmt_s

TARGET_S = 0.1  # feels instant
OPEN_TARGET_S = 0.3  # opening or undoing the largest gallery scenario (issue 30)


def largest_gallery() -> str:
    """The gallery scenario with the most statements (the most editor rows)."""
    from mpmd_lab import gallery

    def statements(name: str) -> int:
        def count(body: list) -> int:
            return sum(1 + count(getattr(st, "body", None) or []) for st in body)

        return sum(count(p.body) for p in gallery.load(name).call.programs)

    return max(gallery.names(), key=statements)


def open_rows(repeats: int = 5) -> list[Row]:
    """Opening the largest gallery scenario in a Lab (from the gallery menu, over a small
    one), then undoing and redoing that open: each until problems, editors, run panel
    and graph (Python side, drawn at once) show what was opened."""
    import ipywidgets as w
    from mpmd_lab.widgets import Lab

    name = largest_gallery()
    built, updates = [0], [0]
    opened, send = w.Widget.open, w.Widget._send

    def counting(widget: w.Widget) -> None:
        built[0] += 1
        opened(widget)

    def sending(widget: w.Widget, msg: dict, buffers: Any = None) -> None:
        updates[0] += msg.get("method") == "update"
        send(widget, msg, buffers)

    times: dict[str, list[float]] = {"open": [], "undo": [], "redo": []}
    made: dict[str, list[int]] = {k: [] for k in times}
    sent: dict[str, list[int]] = {k: [] for k in times}
    w.Widget.open = counting  # type: ignore[method-assign]
    w.Widget._send = sending  # type: ignore[method-assign]
    try:
        for _ in range(repeats):
            lab = Lab("ring-shift", background=False, graph=True)
            steps = {
                "open": lambda lab=lab: lab.gallery.set_trait("value", name),
                "undo": lab.undo,
                "redo": lab.redo,
            }
            for what, step in steps.items():
                built[0] = updates[0] = 0
                t0 = time.perf_counter()
                step()
                times[what].append(time.perf_counter() - t0)
                made[what].append(built[0])
                sent[what].append(updates[0])
            assert lab.state.scenario.name == name
    finally:
        w.Widget.open = opened  # type: ignore[method-assign]
        w.Widget._send = send  # type: ignore[method-assign]
    out = []
    for what, ts in times.items():
        wall = statistics.median(ts)
        label = {"open": "open", "undo": "undo the open of", "redo": "redo the open of"}[what]
        out.append(
            Row(
                "widgets",
                f"Lab: {label} the largest gallery scenario ({name}) (median of {repeats})",
                fmt_s(wall),
                f"{statistics.median(made[what]):.0f} widgets built, "
                f"{statistics.median(sent[what]):.0f} updates sent",
                "",
                f"< {fmt_s(OPEN_TARGET_S)}",
                verdict(wall < OPEN_TARGET_S),
                value=wall,
                unit="s",
            )
        )
    return out


#: the widgets a folded open leaves on screen, at most, as a share of every statement
#: unfolded (what the browser creates is what makes an open slow there)
FOLDED_SHARE = 0.6


def folded_rows() -> list[Row]:
    """Widgets in the Lab once the largest gallery scenario is open: its statements as
    lines of source (editors built when unfolded) against every statement unfolded
    (what the Lab drew before), all loops opened."""
    from mpmd_lab.widgets import Lab
    from mpmd_lab.widgets.testing import walk

    name = largest_gallery()
    lab = Lab(name, background=False, graph=True)

    def count() -> int:
        return len({id(x) for x in walk(lab)})

    folded = count()
    statements = 0
    for k in range(len(lab.state.scenario.call.programs)):
        lab.state.select_program(k)
        lab.call.expand_all()
        statements = max(statements, len(lab.call.expanded))
    unfolded = count()
    return [
        Row(
            "widgets",
            f"Lab: widgets on screen with the largest gallery scenario ({name}) open, "
            f"statements folded to a line (vs all {statements} unfolded)",
            f"{folded}",
            f"{unfolded} unfolded",
            f"{folded / unfolded:.2f}",
            f"< {FOLDED_SHARE:.0%} of unfolded",
            verdict(folded < FOLDED_SHARE * unfolded),
            value=float(folded),
            unit="widgets",
            base=float(unfolded),
        )
    ]


def rows(edits: int = 15, opens: int = 5) -> list[Row]:
    from mpmd_lab.widgets import Lab

    out = open_rows(opens) + folded_rows()
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
