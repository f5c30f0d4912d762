"""Draw the aliasing graph with matplotlib: graphviz ``dot`` lays it out, we paint it.

``plot_aliasing(scenario)`` returns a ``matplotlib.figure.Figure`` (shown inline in a
notebook); ``save_aliasing(scenario, "out.png")`` writes PNG, SVG or PDF.

Left to right: host buffers, arguments, kernel parameters, then each program's views
and statements in a box. Problems are red, with their code inside the node. With a
device mesh, a panel on the right shows peer (``remote_ref``) and multicast traffic on
a ring (one axis) or a grid (several); past 64 devices as a traffic matrix. Past
``SUMMARY_NODES`` nodes the graph is summarised: nodes of one kind (per program and
transform) collapse into one counted node, while nodes with problems stay visible.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import sys
import textwrap
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Patch, PathPatch, Polygon
from matplotlib.path import Path as MPath
from mpmd_lab import graph as G
from mpmd_lab.scenario import Scenario

#: Above this many drawable nodes the graph is summarised per kind.
SUMMARY_NODES = 120
#: Above this many devices the device panel is a traffic matrix.
RING_DEVICES = 64
DEVICE_IN = 3.0  # height of the device picture (inches)

FONT = "DejaVu Sans Mono"
BASE_PT = 10.0  # label size at layout scale (points)
CHAR_W = 0.602 * BASE_PT  # DejaVu Sans Mono advance width
LINE_H = 1.3 * BASE_PT
RED = "#D62728"
WARN = "#B8860B"
INK = "#222222"
MUTED = "#555555"
FIX = "#2E7D32"

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
PEER = "#0072B2"
MULTICAST = "#CC79A7"
SIGNAL = "#D55E00"


_FAST_PNG = {"compress_level": 1}


class AliasingFigure(Figure):
    """A Figure that shows itself as PNG in a notebook even when pyplot was never imported.

    (With pyplot's inline backend active, its formatter for ``Figure`` applies instead:
    one picture either way.)
    """

    mpmd_lab_mode: str = "full"

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi=100, facecolor="white", pil_kwargs=_FAST_PNG)
        return buf.getvalue()


# ---------------------------------------------------------------- drawable model


@dataclass
class DNode:
    kind: str
    lines: list[tuple[str, str]]  # (text, style): title, body, code, warn, count
    red: bool = False
    missing: bool = False
    cluster: int | None = None
    w: float = 0.0
    h: float = 0.0
    x: float = 0.0
    y: float = 0.0


@dataclass
class DEdge:
    u: str
    v: str
    kind: str
    red: bool = False
    label: str = ""
    count: int = 1
    pts: list[tuple[float, float]] = field(default_factory=list)
    head: tuple[float, float] | None = None
    lp: tuple[float, float] | None = None


@dataclass
class Drawing:
    nodes: dict[str, DNode]
    edges: list[DEdge]
    clusters: dict[int, dict[str, Any]]
    summary: str = ""
    bb: tuple[float, float, float, float] = (0, 0, 1, 1)


def _code_lines(data: dict[str, Any]) -> list[tuple[str, str]]:
    out, seen = [], set()
    for d in data.get("diagnostics", ()):
        if d.code in seen:
            continue
        seen.add(d.code)
        out.append((("x " if d.is_error else "! ") + d.code, "code" if d.is_error else "warn"))
    return out[:3] + ([(f"+{len(out) - 3} more", "code")] if len(out) > 3 else [])


def _counts_line(data: dict[str, Any]) -> list[tuple[str, str]]:
    parts = [f"{k} {data[k]:,}" for k in ("reads", "writes") if data.get(k)]
    return [(" · ".join(parts), "count")] if parts else []


def _clip(s: str, n: int = 30) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _node_lines(data: dict[str, Any]) -> list[tuple[str, str]]:
    kind, label = data["kind"], _clip(data["label"])
    t = _clip(str(data.get("type") or ""))
    if kind == "buffer":
        lines = [(label, "title"), ("missing buffer" if data.get("missing") else t, "body")]
    elif kind == "argument":
        lines = [(label, "body")]
    elif kind in ("param", "output", "scratch", "capture"):
        pre = {"output": "output ", "capture": "captured "}.get(kind, "")
        lines = [(label, "title"), (_clip(pre + t), "body")]
    elif kind == "view":
        lines = [(_clip(data["name"]), "title")] if data.get("name") else []
        lines += [(label, "body"), (t, "body")]
    elif kind == "statement":
        lines = [(label, "title"), (_clip(str(data.get("text", ""))), "body")]
    elif kind == "unknown":
        lines = [(label, "title"), ("undefined name", "body")]
    else:
        lines = [(label, "title")]
    return lines + _counts_line(data) + _code_lines(data)


def _full(g: Any) -> Drawing:
    nodes: dict[str, DNode] = {}
    for n, data in g.nodes(data=True):
        if data["kind"] in ("device", "program"):
            continue
        nodes[n] = DNode(
            kind=data["kind"],
            lines=_node_lines(data),
            red=G.is_red(data),
            missing=bool(data.get("missing")) or data["kind"] == "unknown",
            cluster=data.get("program") if data["kind"] in ("view", "statement") else None,
        )
    edges = []
    for u, v, data in g.edges(data=True):
        if u not in nodes or v not in nodes or data["kind"] not in EDGE_STYLE:
            continue
        red = G.is_red(data)
        shown = {d.code for d in g.nodes[v]["diagnostics"]}
        codes = sorted({d.code for d in data["diagnostics"]} - shown)
        label = " ".join(("" if red else "! ") + c for c in codes) if codes else ""
        edges.append(DEdge(u, v, data["kind"], red=red, label=label))
    nodes.update(_program_nodes(g, {n.cluster for n in nodes.values()}, only_red=False))
    return Drawing(nodes, edges, _clusters(g))


def _clusters(g: Any) -> dict[int, dict[str, Any]]:
    out = {}
    for _n, data in g.nodes(data=True):
        if data["kind"] == "program":
            codes = [c for c, _ in _code_lines(data)]
            title = f"{data['label']} · {data.get('mesh', '')}"
            out[data["index"]] = {"title": title, "codes": codes, "red": G.is_red(data)}
    return out


def _group_key(n: str, data: dict[str, Any], by_program: bool) -> tuple[Any, ...]:
    kind = data["kind"]
    prog = data.get("program") if by_program else None
    if kind == "view":
        root = data.get("base")
        return (
            "view",
            prog if data.get("program") is not None else "args",
            data.get("op"),
            data.get("step"),
            root.split(":")[0] if isinstance(root, str) else None,
        )
    if kind == "statement":
        return ("statement", prog, data["label"])
    return (kind,)


def _summarise(g: Any, budget: int = SUMMARY_NODES) -> Drawing:
    """Collapse nodes per kind (and program, transform, op); problems stay visible."""
    items = [(n, d) for n, d in g.nodes(data=True) if d["kind"] not in ("device", "program")]
    red = [n for n, d in items if G.is_red(d)]
    red += [x for u, v, d in g.edges(data=True) if G.is_red(d) for x in (u, v)]
    solo = set(dict.fromkeys(n for n in red if g.nodes[n]["kind"] not in ("device", "program")))
    solo = set(list(solo)[:40])
    for by_program in (True, False):
        groups: dict[tuple[Any, ...], list[str]] = defaultdict(list)
        for n, d in items:
            if n in solo:
                groups[("solo", n)].append(n)
            elif G.is_red(d):
                code = next(x.code for x in d["diagnostics"] if x.is_error)
                groups[("red", d["kind"], code)].append(n)
            else:
                groups[_group_key(n, d, by_program)].append(n)
        if len(groups) <= budget:
            break
    gid_of: dict[str, str] = {}
    nodes: dict[str, DNode] = {}
    for i, (key, members) in enumerate(groups.items()):
        gid = f"g{i}"
        for m in members:
            gid_of[m] = gid
        first = g.nodes[members[0]]
        cluster = first.get("program") if first["kind"] in ("view", "statement") else None
        if len(members) == 1:
            lines = _node_lines(first)
        else:
            kind = first["kind"]
            noun = {"statement": "statements", "argument": "arguments", "view": "views"}.get(
                kind, f"{G_NOUN.get(kind, kind)}s"
            )
            what = first.get("op") if kind == "view" else first["label"]
            names = ", ".join(_clip(str(_member_name(g.nodes[m])), 12) for m in members[:2])
            lines = [(f"{len(members)} {noun}", "title")]
            if kind in ("view", "statement"):
                lines.append((_clip(str(what)), "body"))
            lines.append((_clip(f"{names}, …"), "body"))
            if key[0] == "red":
                lines.append((f"x {key[2]}", "code"))
        nodes[gid] = DNode(
            kind=first["kind"],
            lines=lines,
            red=any(G.is_red(g.nodes[m]) for m in members),
            missing=first["kind"] == "unknown",
            cluster=cluster if all(g.nodes[m].get("program") == cluster for m in members) else None,
        )
    agg: dict[tuple[str, str, str], DEdge] = {}
    for u, v, data in g.edges(data=True):
        if u not in gid_of or v not in gid_of or data["kind"] not in EDGE_STYLE:
            continue
        key = (gid_of[u], gid_of[v], data["kind"])
        e = agg.get(key)
        if e is None:
            agg[key] = e = DEdge(key[0], key[1], key[2], count=0)
        e.count += 1
        if G.is_red(data):
            e.red = True
            codes = {d.code for d in data["diagnostics"] if d.is_error}
            e.label = " ".join(sorted(codes | set(e.label.split())))
    for e in agg.values():
        if e.count > 1:
            e.label = (f"×{e.count} " + e.label).strip()
    n_all = len(items)
    summary = f"summary: {n_all:,} nodes in {len(nodes)} groups; problems drawn one by one"
    clustered = {n.cluster for n in nodes.values()}
    nodes.update(_program_nodes(g, clustered, only_red=not by_program))
    return Drawing(nodes, list(agg.values()), _clusters(g), summary=summary)


def _program_nodes(g: Any, clustered: set[Any], only_red: bool) -> dict[str, DNode]:
    """Programs with nothing drawn inside them (an empty body, or summarised away)."""
    out = {}
    for n, data in g.nodes(data=True):
        if data["kind"] != "program" or data["index"] in clustered:
            continue
        if only_red and not G.is_red(data):
            continue
        lines = [(data["label"], "title"), (_clip(data.get("mesh", "")), "body")]
        out[n] = DNode(kind="program", lines=lines + _code_lines(data), red=G.is_red(data))
        if len(out) >= 40:
            break
    return out


G_NOUN = {"param": "parameter", "buffer": "buffer", "output": "output", "unknown": "unknown name"}


# ---------------------------------------------------------------- layout


def _size(node: DNode) -> None:
    chars = max((len(t) for t, _ in node.lines), default=4)
    node.w = chars * CHAR_W + 14
    node.h = len(node.lines) * LINE_H + 8


def _pt(s: str) -> tuple[float, float]:
    x, y = s.split(",")[:2]
    return float(x), float(y)


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence C-level stderr, fd 2 (graphviz's fontconfig noise), for the duration."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (AttributeError, OSError, ValueError):
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)


def layout(d: Drawing) -> Drawing:
    """Positions (points) from graphviz ``dot``: nodes, edge splines, cluster boxes."""
    import pygraphviz as pgv

    a = pgv.AGraph(directed=True, strict=False)
    a.graph_attr.update(
        rankdir="LR",
        nodesep="0.22",
        ranksep="0.42",
        newrank="true",
        fontname=FONT,
        fontsize=str(BASE_PT),
        splines="spline",
        outputorder="edgesfirst",
    )
    for n, node in d.nodes.items():
        _size(node)
        a.add_node(
            n, shape="box", fixedsize="true", width=node.w / 72, height=node.h / 72, label=""
        )
    for i, e in enumerate(d.edges):
        attrs: dict[str, Any] = {"key": str(i)}
        if e.kind == "aliases":
            attrs.update(dir="none", constraint="false")
        if e.label:
            attrs.update(label=e.label, fontsize="9", fontname=FONT)
        if e.kind == "derived-by":
            attrs["weight"] = "3"
        a.add_edge(e.u, e.v, **attrs)
    params = [n for n, node in d.nodes.items() if node.kind == "param" and node.cluster is None]
    if len(params) > 1:
        a.add_subgraph(params, rank="same")
    buffers = [n for n, node in d.nodes.items() if node.kind == "buffer"]
    if len(buffers) > 1:
        a.add_subgraph(buffers, rank="same")
    members: dict[int, list[str]] = defaultdict(list)
    for n, node in d.nodes.items():
        if node.cluster is not None:
            members[node.cluster].append(n)
    for p, ns in members.items():
        info = d.clusters.get(p, {"title": f"program {p}", "codes": []})
        label = _clip(info["title"], 60) + "".join("\n" + c for c in info["codes"])
        a.add_subgraph(
            ns, name=f"cluster_p{p}", label=label, labeljust="l", fontname=FONT, fontsize="10"
        )
    with _quiet_stderr():  # the bundled fontconfig warns about the system's config
        a.layout(prog="dot")
    d.bb = tuple(float(v) for v in a.graph_attr["bb"].split(","))  # type: ignore[assignment]
    for n, node in d.nodes.items():
        node.x, node.y = _pt(a.get_node(n).attr["pos"])
    for i, e in enumerate(d.edges):
        attr = a.get_edge(e.u, e.v, str(i)).attr
        pts, head = [], None
        for tok in (attr.get("pos") or "").split():
            if tok.startswith("e,"):
                head = _pt(tok[2:])
            elif not tok.startswith("s,"):
                pts.append(_pt(tok))
        e.pts, e.head = pts, head
        if attr.get("lp"):
            e.lp = _pt(attr["lp"])
    for p in members:
        sg = a.get_subgraph(f"cluster_p{p}")
        info = d.clusters.setdefault(p, {"title": f"program {p}", "codes": [], "red": False})
        info["bb"] = tuple(float(v) for v in sg.graph_attr["bb"].split(","))
        info["lines"] = len(info["codes"]) + 1
    return d


# ---------------------------------------------------------------- painting


def _paint_graph(ax: Any, d: Drawing, scale: float) -> None:
    x0, y0, x1, y1 = d.bb
    pad = 6
    ax.set_xlim(x0 - pad, x1 + pad)
    ax.set_ylim(y0 - pad, y1 + pad)
    ax.set_aspect("equal", adjustable="box")
    ax.set_axis_off()
    fs = BASE_PT * scale
    show_text = fs >= 2.5
    for _p, info in sorted(d.clusters.items()):
        if "bb" not in info:
            continue
        bx0, by0, bx1, by1 = info["bb"]
        ax.add_patch(
            FancyBboxPatch(
                (bx0, by0),
                bx1 - bx0,
                by1 - by0,
                boxstyle="round,pad=0,rounding_size=6",
                fc="#F7F9FC",
                ec=RED if info.get("red") else "#9AA8B8",
                lw=(2.0 if info.get("red") else 1.0) * max(scale, 0.4),
                zorder=0,
            )
        )
        if show_text:
            ax.text(
                bx0 + 6,
                by1 - 4,
                _clip(info["title"], 60),
                fontsize=fs,
                family=FONT,
                color=MUTED,
                weight="bold",
                va="top",
                ha="left",
                zorder=1,
            )
            for k, code in enumerate(info["codes"]):
                ax.text(
                    bx0 + 6,
                    by1 - 4 - (k + 1) * LINE_H,
                    code,
                    fontsize=fs,
                    family=FONT,
                    color=RED,
                    weight="bold",
                    va="top",
                    zorder=1,
                )
    for e in d.edges:
        _paint_edge(ax, e, scale, fs, show_text)
    for node in d.nodes.values():
        _paint_node(ax, node, scale, fs, show_text)


def _paint_edge(ax: Any, e: DEdge, scale: float, fs: float, show_text: bool) -> None:
    if len(e.pts) < 2:
        return
    st = EDGE_STYLE[e.kind]
    color = RED if e.red else st["color"]
    lw = (st["lw"] + (1.0 if e.red else 0.0) + 0.8 * math.log10(max(e.count, 1))) * max(scale, 0.3)
    codes = [MPath.MOVETO] + [MPath.CURVE4] * (len(e.pts) - 1)
    if (len(e.pts) - 1) % 3:
        codes = [MPath.MOVETO] + [MPath.LINETO] * (len(e.pts) - 1)
    ax.add_patch(PathPatch(MPath(e.pts, codes), fc="none", ec=color, lw=lw, ls=st["ls"], zorder=2))
    if e.head is not None:
        (bx, by), (tx, ty) = e.pts[-1], e.head
        dx, dy = tx - bx, ty - by
        length = math.hypot(dx, dy) or 1.0
        nx_, ny_ = -dy / length * 3.5, dx / length * 3.5
        ax.add_patch(
            Polygon(
                [(tx, ty), (bx + nx_, by + ny_), (bx - nx_, by - ny_)],
                closed=True,
                fc=color,
                ec=color,
                lw=0.5,
                zorder=2,
            )
        )
    if e.label and e.lp is not None and show_text:
        ax.text(
            *e.lp,
            e.label,
            fontsize=fs * 0.9,
            family=FONT,
            color=RED if e.red else (WARN if e.label.startswith("! ") else MUTED),
            weight="bold" if e.red or e.label.startswith("! ") else "normal",
            ha="center",
            va="center",
            zorder=5,
            bbox={"fc": "white", "ec": "none", "pad": 0.5, "alpha": 0.85},
        )


def _paint_node(ax: Any, node: DNode, scale: float, fs: float, show_text: bool) -> None:
    st = NODE_STYLE.get(node.kind, NODE_STYLE["unknown"])
    ax.add_patch(
        FancyBboxPatch(
            (node.x - node.w / 2, node.y - node.h / 2),
            node.w,
            node.h,
            boxstyle="round,pad=0,rounding_size=5",
            fc=st["fc"],
            ec=RED if node.red else st["ec"],
            lw=(2.6 if node.red else 1.1) * max(scale, 0.3),
            ls="--" if node.missing else "-",
            zorder=3,
        )
    )
    if not show_text:
        return
    top = node.y + (len(node.lines) - 1) * LINE_H / 2
    text_color = st.get("text", INK)
    for k, (text, style) in enumerate(node.lines):
        color = {"code": RED, "warn": WARN, "count": "#0B5394"}.get(style, text_color)
        if style == "body" and text_color == INK:
            color = "#333333"
        if node.kind == "statement" and style in ("code", "count"):
            color = {"code": "#FF8A80", "count": "#A8D8FF"}[style]
        ax.text(
            node.x,
            top - k * LINE_H,
            text,
            fontsize=fs,
            family=FONT,
            color=color,
            weight="bold" if style in ("title", "code", "warn") else "normal",
            ha="center",
            va="center",
            zorder=4,
        )


# ---------------------------------------------------------------- device panel


def _device_positions(mesh: dict[str, int]) -> tuple[list[tuple[float, float]], str]:
    sizes = list(mesh.values())
    n = math.prod(sizes)
    if len(sizes) == 1 or n <= 2 or sum(s > 1 for s in sizes) <= 1:
        if n == 1:
            return [(0.0, 0.0)], "ring"
        if n == 2:
            return [(0.0, 0.0), (1.6, 0.0)], "ring"
        return [
            (math.sin(2 * math.pi * i / n), math.cos(2 * math.pi * i / n)) for i in range(n)
        ], "ring"
    rows = sizes[0]
    cols = n // rows
    return [(float(i % cols), float(-(i // cols))) for i in range(n)], "grid"


def _paint_devices(ax: Any, g: Any, fs: float) -> None:
    mesh = g.graph.get("device_mesh") or {}
    n = math.prod(mesh.values()) if mesh else 0
    ax.set_axis_off()
    title = "devices  " + " × ".join(f"{k}={v}" for k, v in mesh.items())
    ax.set_title(title, fontsize=fs + 1, family=FONT, weight="bold", color=INK, loc="left")
    traffic: dict[tuple[int, int, str], dict[str, Any]] = {}
    hubs: dict[tuple[str, tuple[int, ...]], dict[str, Any]] = {}
    for u, v, data in g.edges(data=True):
        kind = data["kind"]
        if kind not in ("peer-of", "multicast-to", "signals") or g.nodes[u]["kind"] != "device":
            continue
        a, b = g.nodes[u]["index"], g.nodes[v]["index"]
        t = traffic.setdefault((a, b, kind), {"red": False, "n": 0})
        t["n"] += 1
        t["red"] |= G.is_red(data)
        if kind == "multicast-to":
            hubs.setdefault((data.get("path") or "", ()), {"members": set(), "red": False})
            h = hubs[(data.get("path") or "", ())]
            h.setdefault("groups", defaultdict(set))[a].add(b)
            h["red"] |= G.is_red(data)
    if n > RING_DEVICES:
        _paint_matrix(ax, traffic, n, fs)
        return
    pos, shape = _device_positions(mesh)
    r = 0.2
    if shape == "ring" and n > 2:
        r = max(0.07, min(0.22, 0.22 * 2 * math.sin(math.pi / n)))
    dfs = fs if r >= 0.15 else fs * max(0.6, r / 0.15)
    for (a, b, kind), t in traffic.items():
        if kind not in ("peer-of", "signals"):
            continue
        signal = kind == "signals"
        color = RED if t["red"] else (SIGNAL if signal else PEER)
        if a == b:
            x, y = pos[a]
            ax.add_patch(
                Circle((x + r * 0.9, y + r * 0.9), r * 0.55, fc="none", ec=color, lw=1.6, zorder=2)
            )
            continue
        (ax_, ay), (bx, by) = pos[a], pos[b]
        rad = 0.34 if signal else 0.18  # signals bow wider than the data they guard
        cx = (ax_ + bx) / 2 + rad * (by - ay)
        cy = (ay + by) / 2 - rad * (bx - ax_)
        start, end = _toward((ax_, ay), (cx, cy), r * 1.08), _toward((bx, by), (cx, cy), r * 1.08)
        ax.add_patch(
            FancyArrowPatch(
                start,
                end,
                arrowstyle="-|>,head_length=7,head_width=4",
                connectionstyle=f"arc3,rad={rad}",
                color=color,
                lw=2.2 if t["red"] else (1.4 if signal else 1.8),
                ls="--" if signal else "-",
                shrinkA=0,
                shrinkB=0,
                zorder=2,
                mutation_scale=1.0,
            )
        )
    for (_path, _), h in hubs.items():
        color = RED if h["red"] else MULTICAST
        seen: set[frozenset[int]] = set()
        for _src, dsts in h["groups"].items():
            grp = frozenset(dsts)
            if grp in seen or len(grp) < 2:
                continue
            seen.add(grp)
            cx = sum(pos[m][0] for m in grp) / len(grp)
            cy = sum(pos[m][1] for m in grp) / len(grp)
            if all(abs(pos[m][1] - cy) < 1e-6 for m in grp):
                cy += 0.35  # a row: lift the hub off the line
            elif all(abs(pos[m][0] - cx) < 1e-6 for m in grp):
                cx += 0.35
            for m in grp:
                ax.add_patch(
                    FancyArrowPatch(
                        (cx, cy),
                        _toward(pos[m], (cx, cy), r * 1.08),
                        arrowstyle="-|>,head_length=6,head_width=3.5",
                        color=color,
                        lw=1.6,
                        ls="-",
                        shrinkA=2,
                        shrinkB=0,
                        zorder=2,
                        alpha=0.9,
                    )
                )
            ax.add_patch(
                Polygon(
                    [(cx, cy + 0.09), (cx + 0.09, cy), (cx, cy - 0.09), (cx - 0.09, cy)],
                    fc=color,
                    ec="white",
                    lw=1,
                    zorder=3,
                )
            )
    reds = {a for (a, b, _), t in traffic.items() if t["red"]}
    reds |= {
        d for n, d in g.nodes(data="index") if n.startswith("device:") and G.is_red(g.nodes[n])
    }
    for i, (x, y) in enumerate(pos):
        ax.add_patch(
            Circle((x, y), r, fc="#FFFFFF", ec=RED if i in reds else "#333333", lw=1.5, zorder=4)
        )
        ax.text(x, y, f"d{i}", ha="center", va="center", fontsize=dfs, family=FONT, zorder=5)
    _device_caption(ax, g, fs)
    xs, ys = [p[0] for p in pos], [p[1] for p in pos]
    m = 0.55
    ax.set_xlim(min(xs) - m, max(xs) + m)
    ax.set_ylim(min(ys) - m, max(ys) + m)
    ax.set_aspect("equal", adjustable="box")
    ax.set_anchor("NW")
    if not traffic:
        ax.text(
            0.5, 0.02, "no peer or multicast traffic", transform=ax.transAxes,
            ha="center", fontsize=fs * 0.9, color=MUTED, family=FONT,
        )  # fmt: skip
    if g.graph.get("truncated"):
        ax.text(0.5, -0.05, "(device edges capped)", transform=ax.transAxes, ha="center",
                fontsize=fs * 0.8, color=MUTED)  # fmt: skip


def _toward(p: tuple[float, float], q: tuple[float, float], dist: float) -> tuple[float, float]:
    """The point ``dist`` from ``p`` in the direction of ``q``."""
    dx, dy = q[0] - p[0], q[1] - p[1]
    n = math.hypot(dx, dy) or 1.0
    return p[0] + dx / n * dist, p[1] + dy / n * dist


def _caption_rows(g: Any) -> int:
    return len(
        {
            (data["kind"], g.nodes[data["view"]]["label"])
            for _, _, data in g.edges(data=True)
            if data["kind"] in ("peer-of", "multicast-to") and data.get("view") in g
        }
    )


def _device_caption(ax: Any, g: Any, fs: float) -> None:
    """Which views make which traffic, under the device picture (one line per transform)."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for _, _, data in g.edges(data=True):
        if data["kind"] in ("peer-of", "multicast-to") and data.get("view") in g:
            v = g.nodes[data["view"]]
            row = rows.setdefault((data["kind"], v["label"]), {"names": [], "red": False})
            who = v.get("let") or "arg"
            if who not in row["names"]:
                row["names"].append(who)
            row["red"] |= G.is_red(data)
    for k, ((kind, label), row) in enumerate(list(rows.items())[:6]):
        names = ", ".join(row["names"][:3]) + (", …" if len(row["names"]) > 3 else "")
        mark = "->" if kind == "peer-of" else "<>"
        ax.annotate(
            _clip(f"{mark} {label}: {names}", 38),
            xy=(0.0, 0.0),
            xycoords="axes fraction",
            xytext=(0, -6 - k * fs * 1.5),
            textcoords="offset points",
            fontsize=fs * 0.9,
            family=FONT,
            va="top",
            color=RED if row["red"] else (PEER if kind == "peer-of" else MULTICAST),
        )


def _paint_matrix(ax: Any, traffic: dict[tuple[int, int, str], dict[str, Any]], n: int, fs: float):
    import numpy as np

    bins = min(n, 128)
    img = np.ones((bins, bins, 3))
    colours = {
        "peer-of": (0.0, 0.45, 0.70),
        "multicast-to": (0.80, 0.47, 0.65),
        "signals": (0.84, 0.37, 0.0),
    }
    for (a, b, kind), t in traffic.items():
        i, j = a * bins // n, b * bins // n
        img[i, j] = (0.84, 0.15, 0.16) if t["red"] else colours[kind]
    ax.imshow(img, interpolation="nearest", extent=(0, n, n, 0))
    ax.set_axis_on()
    ax.set_xlabel("to device", fontsize=fs)
    ax.set_ylabel("from device", fontsize=fs)
    ax.tick_params(labelsize=fs * 0.8)
    ax.set_title(
        ax.get_title(loc="left") + "\nwho writes to whom",
        fontsize=fs + 1,
        family=FONT,
        weight="bold",
        color=INK,
        loc="left",
    )


# ---------------------------------------------------------------- figure


def _legend_handles(d: Drawing, g: Any) -> list[Any]:
    """Legend entries for what this picture shows, nothing else."""
    kinds = [k for k in NODE_STYLE if any(n.kind == k for n in d.nodes.values())]
    handles: list[Any] = [
        Patch(fc=NODE_STYLE[k]["fc"], ec=NODE_STYLE[k]["ec"], label=NODE_STYLE[k]["name"])
        for k in kinds
    ]
    ekinds = [k for k in EDGE_STYLE if any(e.kind == k for e in d.edges)]
    handles += [
        Line2D(
            [],
            [],
            color=EDGE_STYLE[k]["color"],
            lw=2,
            ls=EDGE_STYLE[k]["ls"],
            label=EDGE_STYLE[k]["name"],
        )  # fmt: skip
        for k in ekinds
    ]
    kinds_dev = {data["kind"] for _, _, data in g.edges(data=True)}
    if "peer-of" in kinds_dev:
        handles.append(Line2D([], [], color=PEER, lw=2, label="peer write (remote_ref)"))
    if "multicast-to" in kinds_dev:
        handles.append(
            Line2D([], [], color=MULTICAST, lw=2, marker="D", label="multicast (multicast_ref)")
        )
    if any(d_.get("kind") == "device" for _, d_ in g.nodes(data=True)) and any(
        e["kind"] == "signals" and g.nodes[u]["kind"] == "device" for u, _, e in g.edges(data=True)
    ):
        handles.append(Line2D([], [], color=SIGNAL, lw=2, ls="--", label="semaphore signal"))
    if any(n.red for n in d.nodes.values()) or any(e.red for e in d.edges):
        handles.append(Patch(fc="white", ec=RED, lw=2.5, label="problem (code inside)"))
    return handles


LEGEND_COLS = 5


def _legend(ax: Any, handles: list[Any], fs: float) -> None:
    ax.set_axis_off()
    if handles:
        ax.legend(
            handles=handles,
            loc="upper left",
            ncol=min(LEGEND_COLS, len(handles)),
            fontsize=fs,
            frameon=False,
            handlelength=2.2,
            columnspacing=1.4,
            borderaxespad=0.2,
        )


def _problem_lines(g: Any, width: int) -> list[tuple[str, str]]:
    diags = g.graph.get("diagnostics", [])
    out = []
    diags = sorted(diags, key=lambda d: not d.is_error)  # errors first, stable
    for dg in diags[:5]:
        where = dg.path or "scenario"
        sev = "x" if dg.is_error else "!"
        line = f"{sev} {dg.code}  {where}: {' '.join(dg.message.split())}"
        out.append((_clip(line, width), RED if dg.is_error else WARN))
        if dg.fix is not None and dg.is_error:
            out.append((_clip(f"    fix: {dg.fix.description}", width), FIX))
    if len(diags) > 5:
        out.append((f"… and {len(diags) - 5} more", MUTED))
    if g.graph.get("validator_note"):
        out.append((f"({g.graph['validator_note']})", MUTED))
    return out


def _verdict(g: Any) -> tuple[str, str]:
    diags = g.graph.get("diagnostics", [])
    errors = sum(d.is_error for d in diags)
    if errors:
        return f"{errors} problem{'s' if errors > 1 else ''}", RED
    if g.graph.get("validator_note"):
        return "not checked", MUTED
    warns = len(diags)
    return ("valid" + (f", {warns} warning{'s' if warns > 1 else ''}" if warns else "")), "#2E7D32"


def draw(g: Any, ax: Any = None) -> Figure:
    """Paint a graph from ``mpmd_lab.graph.build_graph`` onto ``ax`` (or a new Figure)."""
    n_draw = sum(1 for _, k in g.nodes(data="kind") if k not in ("device", "program"))
    d = _summarise(g) if n_draw > SUMMARY_NODES else _full(g)
    layout(d)
    x0, y0, x1, y1 = d.bb
    gw, gh = max(x1 - x0, 1.0) + 12, max(y1 - y0, 1.0) + 12
    mesh = g.graph.get("device_mesh")
    handles = _legend_handles(d, g)
    rows = math.ceil(len(handles) / LEGEND_COLS)
    header_in, legend_in = (1.05 if d.summary else 0.9), 0.22 * rows + 0.15
    problems = _problem_lines(g, 200)
    footer_in = legend_in + 0.2 * len(problems) + 0.1
    panel_in = 3.4 if mesh else 0.0
    caption_in = 0.2 * min(6, _caption_rows(g)) + 0.15 if mesh else 0.0
    if ax is None:
        scale = min(1.0, 18.0 / (gw / 72), 15.0 / (gh / 72))
        W = max(8.0, gw / 72 * scale + panel_in + 0.4)
        H = max(3.6, gh / 72 * scale + header_in + footer_in + 0.2)
        if mesh:  # room for the device picture and its caption
            H = max(H, header_in + footer_in + DEVICE_IN + caption_in + 0.3)
        fig = AliasingFigure(figsize=(W, H), dpi=110)
        host = fig.add_axes((0, 0, 1, 1))
    else:
        host = ax
        fig = ax.figure
    host.set_axis_off()
    bbox = host.get_position()
    fw, fh = fig.get_size_inches()
    W, H = bbox.width * fw, bbox.height * fh
    main_w = max(W - panel_in - 0.3, W * 0.5)
    main_h = max(H - header_in - footer_in - 0.1, H * 0.4)
    scale = min(main_w * 72 / gw, main_h * 72 / gh)
    fs_ui = max(7.0, min(10.0, 9.0 * max(scale, 0.8)))

    def rect(x: float, y: float, w: float, h: float) -> list[float]:
        return [x / W, y / H, w / W, h / H]

    main = host.inset_axes(rect(0.15, footer_in, main_w, main_h))
    _paint_graph(main, d, scale)
    verdict, vcolor = _verdict(g)
    host.text(0.15 / W, 1 - 0.1 / H, g.graph.get("name", ""), transform=host.transAxes,
              fontsize=14, weight="bold", va="top", color=INK)  # fmt: skip
    host.text(1 - 0.15 / W, 1 - 0.1 / H, verdict, transform=host.transAxes, fontsize=12,
              weight="bold", va="top", ha="right", color=vcolor)  # fmt: skip
    desc = g.graph.get("description") or ""
    sub = d.summary or ""
    wrap = textwrap.wrap(" ".join(desc.split()), width=max(40, int(W * 13)))
    sub_text = "\n".join(wrap[:2]) + (" …" if len(wrap) > 2 else "")
    if sub:
        sub_text = f"{sub_text}\n{sub}" if sub_text else sub
    if sub_text:
        host.text(0.15 / W, 1 - 0.42 / H, sub_text, transform=host.transAxes, fontsize=9,
                  va="top", color=MUTED)  # fmt: skip
    if mesh:
        ph = max(1.0, min(DEVICE_IN, main_h - caption_in - 0.1))
        top = footer_in + main_h
        dev = host.inset_axes(rect(W - panel_in - 0.05, top - ph, panel_in - 0.1, ph - 0.25))
        _paint_devices(dev, g, fs_ui)
    leg = host.inset_axes(rect(0.15, footer_in - legend_in, W - 0.3, legend_in))
    _legend(leg, handles, fs_ui)
    width = int((W - 0.3) * 72 / (0.61 * 9))
    for k, (line, color) in enumerate(problems):
        host.text(
            0.15 / W,
            (footer_in - legend_in - 0.05 - 0.2 * k) / H,
            _clip(line, width),
            transform=host.transAxes,
            fontsize=9,
            family=FONT,
            color=color,
            va="top",
            weight="bold" if k == 0 and color == RED else "normal",
        )
    fig.mpmd_lab_mode = "summary" if d.summary else "full"  # type: ignore[attr-defined]
    return fig


def _fallback(g: Any, error: BaseException, ax: Any = None) -> Figure:
    """A picture even when drawing fails: the text form of the graph and the error."""
    if ax is None:
        fig = AliasingFigure(figsize=(10, 6), dpi=100)
        ax = fig.add_axes((0, 0, 1, 1))
    else:
        fig = ax.figure
        ax.clear()
    ax.set_axis_off()
    try:
        text = G.to_text(g)
    except Exception as e:  # noqa: BLE001
        text = f"(no text form: {e})"
    lines = text.splitlines()[:60]
    ax.text(0.01, 0.99, f"drawing failed: {type(error).__name__}: {error}"[:150],
            color=RED, va="top", fontsize=9, family=FONT, transform=ax.transAxes)  # fmt: skip
    ax.text(0.01, 0.94, "\n".join(_clip(x, 140) for x in lines), va="top", fontsize=7,
            family=FONT, transform=ax.transAxes)  # fmt: skip
    fig.mpmd_lab_mode = "fallback"  # type: ignore[attr-defined]
    return fig


def plot_aliasing(
    scenario: Scenario | Any,
    ax: Any = None,
    diagnostics: list[Any] | None = None,
    access_log: Any = None,
    *,
    analysis: Any = None,
) -> Figure:
    """The aliasing graph of a scenario as a matplotlib Figure (inline in notebooks).

    Problems are drawn in red where they are: the scenario's ``analysis`` (or the
    given ``diagnostics``; else it is checked once). ``ax``: draw into this Axes (its
    figure is returned).
    """
    g = G.build_graph(scenario, diagnostics=diagnostics, access_log=access_log, analysis=analysis)
    try:
        return draw(g, ax)
    except Exception as e:  # noqa: BLE001 - a picture must come out for any scenario
        return _fallback(g, e, ax)


def save_aliasing(
    scenario: Scenario | Any,
    path: str | Path,
    diagnostics: list[Any] | None = None,
    access_log: Any = None,
) -> Path:
    """Write the aliasing graph as PNG, SVG or PDF (by the file's suffix)."""
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".") or "png"
    if fmt not in ("png", "svg", "pdf"):
        raise ValueError(f"{path}: the picture is written as .png, .svg or .pdf")
    fig = plot_aliasing(scenario, diagnostics=diagnostics, access_log=access_log)
    if fmt == "png":  # fast zlib level: a third of the time, a slightly larger file
        fig.savefig(path, format="png", dpi=130, facecolor="white", pil_kwargs=_FAST_PNG)
    else:
        fig.savefig(path, format=fmt, facecolor="white")
    return path


__all__ = ["draw", "layout", "plot_aliasing", "save_aliasing"]


def _member_name(data: dict[str, Any]) -> str:
    return data.get("name") or data.get("let") or data.get("text") or data["label"]
