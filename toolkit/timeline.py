"""A witness drawn as a timeline (matplotlib): one row per actor, its statements in the
order the witness schedule ran them; the racing accesses, or the waits of a deadlock's
wait-for cycle, marked in red; each semaphore wait's choice labelled with the signals it
saw. ``plot_witness(witness)`` returns a Figure; ``witness_png(witness)`` PNG bytes."""

from __future__ import annotations

import io
from typing import Any

from matplotlib.figure import Figure
from mpmd_lab.palette import RED


def _short(path: str) -> str:
    return path.split(".", 2)[-1] if path.startswith("call.programs[") else path


def plot_witness(witness: dict[str, Any]) -> Figure:
    """The timeline of a race's or deadlock's witness (``Diagnostic.witness``)."""
    sched = witness["schedule"]
    steps = sched.get("steps", [])
    actors = sorted({s["actor"] for s in steps})
    if witness["kind"] == "deadlock":
        for c in witness["wait_for"]:
            if c["actor"] not in actors:
                actors.append(c["actor"])
    row = {a: i for i, a in enumerate(actors)}
    n = max(len(steps), 1)
    fig = Figure(figsize=(min(4 + 0.35 * n, 24), 1.2 + 0.6 * len(actors)))
    ax = fig.add_subplot()
    xs = list(range(len(steps)))
    ax.scatter(xs, [row[s["actor"]] for s in steps], s=14, color="0.55", zorder=2)
    marked: list[tuple[str, str, str]] = []
    if witness["kind"] == "race":
        r = witness["race"]
        marked = [
            (r["first"]["actor"], r["first"]["path"], r["first"]["access"]),
            (r["second"]["actor"], r["second"]["path"], r["second"]["access"]),
        ]
        title = f"race on {r['region']}: {r['kind']}"
    else:
        marked = [(c["actor"], c["at"], "waits") for c in witness["wait_for"]]
        title = "deadlock: " + " -> ".join(c["actor"] for c in witness["wait_for"])
    for who, path, what in marked:
        agent = who.startswith("the async copies of ")
        owner = who.removeprefix("the async copies of ") if agent else who
        hits = [i for i, s in enumerate(steps) if s["actor"] == owner and s["at"] == path]
        x = hits[-1] if hits else len(steps)
        y = row.get(owner, 0)
        ax.scatter([x], [y], s=90, color=RED, marker="X", zorder=3)
        ax.annotate(
            f"{what} {_short(path)}",
            (x, y),
            textcoords="offset points",
            xytext=(4, 8),
            fontsize=7,
            color=RED,
        )
    seen_wait: dict[str, int] = {}
    for c in sched.get("choices", []):
        who, wait = c.get("who"), c.get("wait")
        if who is None:
            continue
        k = seen_wait.get(f"{who}|{wait}", 0)
        seen_wait[f"{who}|{wait}"] = k + 1
        hits = [i for i, s in enumerate(steps) if s["actor"] == who and s["at"] == wait]
        if k < len(hits):
            saw = ", ".join(x.split(" (")[0] for x in c.get("saw", []))
            ax.annotate(
                f"saw {saw}",
                (hits[k], row[who]),
                textcoords="offset points",
                xytext=(4, -12),
                fontsize=7,
                color="0.25",
            )
    ax.set_yticks(range(len(actors)), actors, fontsize=8)
    ax.set_ylim(-0.7, len(actors) - 0.3)
    ax.invert_yaxis()
    ax.set_xlabel("statements in the order the witness schedule ran them")
    ax.set_title(title, fontsize=9)
    ax.grid(axis="x", color="0.92")
    fig.tight_layout()
    return fig


def witness_png(witness: dict[str, Any]) -> bytes:
    """The timeline as PNG bytes."""
    buf = io.BytesIO()
    plot_witness(witness).savefig(buf, format="png", dpi=110)
    return buf.getvalue()


__all__ = ["plot_witness", "witness_png"]
