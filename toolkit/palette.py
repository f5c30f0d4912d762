"""The aliasing picture's colours and names, shared by every painter (matplotlib, SVG).

Plain data: importing it costs nothing (no matplotlib), so the fast view can use it.
"""

from __future__ import annotations

from typing import Any

FONT = "DejaVu Sans Mono"
RED = "#D62728"
WARN = "#B8860B"
INK = "#222222"
MUTED = "#555555"
FIX = "#2E7D32"
OK = "#2E7D32"
PEER = "#0072B2"
MULTICAST = "#CC79A7"
SIGNAL = "#D55E00"  # a semaphore signal between devices
COUNT = "#0B5394"

NODE_STYLE: dict[str, dict[str, str]] = {
    "buffer": {"fc": "#E6E6E6", "ec": "#4D4D4D", "name": "host buffer"},
    "argument": {"fc": "#FFF4C2", "ec": "#8C7A1E", "name": "call argument"},
    "param": {"fc": "#D5E8F6", "ec": "#1F5F8B", "name": "kernel parameter"},
    "output": {"fc": "#D7F0D7", "ec": "#2E7D32", "name": "output"},
    "scratch": {"fc": "#EADFF5", "ec": "#6A3D9A", "name": "scratch"},
    "capture": {"fc": "#FCE3CF", "ec": "#A0522D", "name": "captured value"},
    "view": {"fc": "#FFFFFF", "ec": "#0072B2", "name": "view (one transform step)"},
    "statement": {"fc": "#3B4A5A", "ec": "#3B4A5A", "name": "statement", "text": "#FFFFFF"},
    "unknown": {"fc": "#FFFFFF", "ec": "#999999", "name": "undefined name"},
    "program": {"fc": "#F7F9FC", "ec": "#9AA8B8", "name": "program (no body drawn)"},
}
EDGE_STYLE: dict[str, dict[str, Any]] = {
    "passed-as": {"color": "#8A8A8A", "lw": 1.2, "ls": "-", "name": "passed as"},
    "captured-as": {"color": "#A0522D", "lw": 1.2, "ls": "--", "name": "captured as"},
    "derived-by": {"color": "#5F86AD", "lw": 1.4, "ls": "-", "name": "view of (transform)"},
    "reads": {"color": "#009E73", "lw": 1.6, "ls": "-", "name": "reads"},
    "writes": {"color": "#E69F00", "lw": 2.0, "ls": "-", "name": "writes"},
    "aliases": {"color": "#CC79A7", "lw": 2.2, "ls": (0, (1.6, 1.2)), "name": "same Ref (alias)"},
    "sync": {
        "color": "#7B61A8",
        "lw": 1.2,
        "ls": ":",
        "name": "signals / waits on (semaphore, barrier)",
    },
    "signals": {
        "color": "#D55E00",
        "lw": 1.8,
        "ls": "--",
        "name": "signal -> the wait it satisfies",
    },
    "completes": {
        "color": "#56B4E9",
        "lw": 1.6,
        "ls": "--",
        "name": "copy completes -> barrier wait",
    },
    "arrives": {"color": "#56B4E9", "lw": 1.4, "ls": "-.", "name": "arrival -> barrier wait"},
}
CLUSTER = {"fc": "#F7F9FC", "ec": "#9AA8B8"}


def text_color(kind: str, style: str) -> str:
    """The colour of one line of a node's text (``style``: title, body, code, warn, count)."""
    base = NODE_STYLE.get(kind, NODE_STYLE["unknown"]).get("text", INK)
    if kind == "statement" and style in ("code", "count"):
        return {"code": "#FF8A80", "count": "#A8D8FF"}[style]
    if style == "code":
        return RED
    if style == "warn":
        return WARN
    if style == "count":
        return COUNT
    if style == "body" and base == INK:
        return "#333333"
    return base
