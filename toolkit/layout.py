"""Where the aliasing graph's parts go: the drawable model and its positions, no painting.

``drawing(g)`` turns a graph model (``mpmd_lab.graph.build_graph``) into a ``Drawing``:
boxes with their lines of text, edges, program clusters; past ``SUMMARY_NODES`` nodes a
summary where nodes of one kind collapse into one counted node (problems stay visible).
``layout(d)`` places it with graphviz ``dot`` (points, y up). ``LayoutCache`` keeps the
positions of recent drawings by their structure (which boxes, of what size, joined how),
so a change of labels or problem marks that keeps the structure costs no new layout.
``device_picture(g)`` is the device panel's model: devices on a ring or grid and the peer
and multicast traffic between them.

Every painter (``mpmd_lab.draw`` with matplotlib, ``mpmd_lab.scene`` for the browser)
draws from these, so the pictures show the same model.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections import OrderedDict, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from mpmd_lab import graph as G
from mpmd_lab.palette import EDGE_STYLE, FONT, NODE_STYLE

#: Above this many drawable nodes the graph is summarised per kind.
SUMMARY_NODES = 120
#: Above this many devices the device panel is a traffic matrix.
RING_DEVICES = 64

BASE_PT = 10.0  # label size at layout scale (points)
CHAR_W = 0.602 * BASE_PT  # DejaVu Sans Mono advance width
LINE_H = 1.3 * BASE_PT
#: Box widths grow in steps of this many characters, so typing a name rarely moves the
#: layout (a box keeps its size, and the cached positions, for a few more characters).
WIDTH_STEP = 2

# ---------------------------------------------------------------- drawable model


@dataclass
class DNode:
    kind: str
    lines: list[tuple[str, str]]  # (text, style): title, body, code, warn, count
    red: bool = False
    missing: bool = False
    cluster: int | None = None
    members: list[str] = field(default_factory=list)  # the graph nodes it stands for
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
    keys: list[tuple[str, str, int]] = field(default_factory=list)  # the graph edges drawn
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


def _repeat_line(data: dict[str, Any]) -> list[tuple[str, str]]:
    """A loop is a repeat marker: it says how often its body runs, and each statement in
    a loop how often it runs (per program instance; ``?`` for a traced trip count)."""
    if data.get("repeat"):
        trips = data.get("trips")
        return [(f"body runs ×{'?' if trips is None else trips} ({data.get('var')})", "body")]
    if not any(str(c).startswith("stmt:") for c in data.get("scope", ())):
        return []
    n = data.get("repeats")
    if n == 1:
        return []
    return [(f"in loop ×{'?' if n is None else n}", "body")]


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
        step = statement_number(str(data.get("path") or ""))
        title = _clip(f"{step} · {data['label']}" if step else label)
        lines = [(title, "title"), (_clip(str(data.get("text", ""))), "body")]
        lines += _repeat_line(data)
    elif kind == "unknown":
        lines = [(label, "title"), ("undefined name", "body")]
    else:
        lines = [(label, "title")]
    return lines + _counts_line(data) + _code_lines(data)


def statement_number(path: str) -> str:
    """Where a statement is in its program, as the editors number it: ``body[15].body[5]
    .body[2]`` -> ``15.5.2`` ("" for a path that is not a statement's)."""
    if ".body[" not in path:
        return ""
    return ".".join(part.split("]", 1)[0] for part in path.split(".body[")[1:])


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
            members=[n],
        )
    edges = []
    for u, v, k, data in g.edges(keys=True, data=True):
        if u not in nodes or v not in nodes or data["kind"] not in EDGE_STYLE:
            continue
        red = G.is_red(data)
        shown = {d.code for d in g.nodes[v]["diagnostics"]}
        codes = sorted({d.code for d in data["diagnostics"]} - shown)
        label = " ".join(("" if red else "! ") + c for c in codes) if codes else ""
        edges.append(DEdge(u, v, data["kind"], red=red, label=label, keys=[(u, v, k)]))
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
            members=list(members),
        )
    agg: dict[tuple[str, str, str], DEdge] = {}
    for u, v, k, data in g.edges(keys=True, data=True):
        if u not in gid_of or v not in gid_of or data["kind"] not in EDGE_STYLE:
            continue
        key = (gid_of[u], gid_of[v], data["kind"])
        e = agg.get(key)
        if e is None:
            agg[key] = e = DEdge(key[0], key[1], key[2], count=0)
        e.count += 1
        e.keys.append((u, v, k))
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
        out[n] = DNode(
            kind="program", lines=lines + _code_lines(data), red=G.is_red(data), members=[n]
        )
        if len(out) >= 40:
            break
    return out


G_NOUN = {"param": "parameter", "buffer": "buffer", "output": "output", "unknown": "unknown name"}


# ---------------------------------------------------------------- layout


def _size(node: DNode) -> None:
    chars = max((len(t) for t, _ in node.lines), default=4)
    chars = -(-chars // WIDTH_STEP) * WIDTH_STEP
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


def drawing(g: Any, budget: int = SUMMARY_NODES) -> Drawing:
    """The drawable model of a graph, unplaced: every node, or past ``budget`` a summary."""
    n_draw = sum(1 for _, k in g.nodes(data="kind") if k not in ("device", "program"))
    return _summarise(g, budget) if n_draw > budget else _full(g)


def _cluster_label(info: dict[str, Any]) -> str:
    return _clip(info["title"], 60) + "".join("\n" + c for c in info["codes"])


def layout(d: Drawing) -> Drawing:
    """Positions (points) from graphviz ``dot``: nodes, edge splines, cluster boxes."""
    import pygraphviz as pgv

    a = pgv.AGraph(directed=True, strict=False)
    a.graph_attr.update(
        rankdir="LR",
        nodesep="0.22",
        ranksep="0.34",
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
        if d.nodes[e.u].kind == d.nodes[e.v].kind == "statement":
            attrs["constraint"] = "false"  # (statements keep program order: _program_order)
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
        label = _cluster_label(d.clusters.get(p, {"title": f"program {p}", "codes": []}))
        sub = a.add_subgraph(
            ns, name=f"cluster_p{p}", label=label, labeljust="l", fontname=FONT, fontsize="10"
        )
        _program_order(sub, [n for n in ns if d.nodes[n].kind == "statement"])
    with _quiet_stderr():  # the bundled fontconfig warns about the system's config
        a.layout(prog="dot")
    d.bb = tuple(float(v) for v in a.graph_attr["bb"].split(","))  # type: ignore[assignment]
    for n, node in d.nodes.items():
        node.x, node.y = _pt(a.get_node(n).attr["pos"])
    clusters = {p: a.get_subgraph(f"cluster_p{p}").graph_attr["bb"] for p in members}
    routed, dx, dy = a, 0.0, 0.0
    if _restack(d, members):  # the edges drawn again, to the boxes where they now are
        routed, dx, dy = _reroute(d)

    def at(text: str) -> tuple[float, float]:
        x, y = _pt(text)
        return x + dx, y + dy

    for i, e in enumerate(d.edges):
        attr = routed.get_edge(e.u, e.v, str(i)).attr
        pts, head = [], None
        for tok in (attr.get("pos") or "").split():
            if tok.startswith("e,"):
                head = at(tok[2:])
            elif not tok.startswith("s,"):
                pts.append(at(tok))
        e.pts, e.head = pts, head
        if attr.get("lp"):
            e.lp = at(attr["lp"])
    for p in members:
        info = d.clusters.setdefault(p, {"title": f"program {p}", "codes": [], "red": False})
        info["bb"] = tuple(float(v) for v in clusters[p].split(","))
        info["lines"] = len(info["codes"]) + 1
    return d


def _program_order(cluster: Any, statements: list[str]) -> None:
    """A program's statements read top to bottom in program order: one column (a rank
    of their own), chained in order by invisible edges (``stmt:P.K``: K-th statement)."""
    ordered = sorted(statements, key=_statement_index)
    if len(ordered) < 2:
        return
    cluster.add_subgraph(ordered, name=f"{cluster.name}_order", rank="same")
    for u, v in zip(ordered, ordered[1:], strict=False):
        cluster.add_edge(v, u, key=f"order:{u}", style="invis", weight="20", minlen="0")


def _restack(d: Drawing, members: dict[int, list[str]]) -> bool:
    """Put each program's column of statements in program order, top to bottom (``dot``
    keeps a rank together but may order it otherwise): the same column, the same span
    and even gaps. Whether a box moved."""
    moved = False
    for ns in members.values():
        column = [n for n in ns if d.nodes[n].kind == "statement"]
        if len(column) < 2:
            continue
        shown = sorted(column, key=lambda n: -d.nodes[n].y)  # top first (graphviz: y up)
        ordered = sorted(column, key=_statement_index)
        if shown == ordered:
            continue
        top = max(d.nodes[n].y + d.nodes[n].h / 2 for n in column)
        bottom = min(d.nodes[n].y - d.nodes[n].h / 2 for n in column)
        gap = (top - bottom - sum(d.nodes[n].h for n in column)) / (len(column) - 1)
        cursor = top
        for n in ordered:
            node = d.nodes[n]
            y = cursor - node.h / 2
            if abs(y - node.y) > 0.01:
                node.y, moved = y, True
            cursor -= node.h + gap
    return moved


def _reroute(d: Drawing) -> tuple[Any, float, float]:
    """The edges routed again around every box pinned where it now is (``neato`` over
    pinned points: a graph of the boxes and the drawn edges only), and the offset that
    takes its coordinates (centred) back to the drawing's."""
    import pygraphviz as pgv

    a = pgv.AGraph(directed=True, strict=False, splines="spline", inputscale="72")
    for n, node in d.nodes.items():
        a.add_node(
            n,
            shape="box",
            fixedsize="true",
            width=node.w / 72,
            height=node.h / 72,
            label="",
            pos=f"{node.x},{node.y}!",
        )
    for i, e in enumerate(d.edges):
        attrs = {"label": e.label, "fontsize": "9", "fontname": FONT} if e.label else {}
        if e.kind == "aliases":
            attrs["dir"] = "none"
        a.add_edge(e.u, e.v, key=str(i), **attrs)
    with _quiet_stderr():
        a.layout(prog="neato")
    n, node = next(iter(d.nodes.items()))
    x, y = _pt(a.get_node(n).attr["pos"])
    return a, node.x - x, node.y - y


def _statement_index(n: str) -> tuple[int, ...]:
    """``stmt:0.12`` -> ``(0, 12)``; a summarised box (no index) goes last."""
    tail = n.split(":", 1)[-1]
    parts = [int(x) for x in tail.split(".") if x.isdigit()]
    return (*parts, 0) if parts else (1 << 30,)


# ---------------------------------------------------------------- cache


def _steps(text: str) -> int:
    return -(-len(text) // WIDTH_STEP)


def structure_key(d: Drawing) -> tuple[Any, ...]:
    """What ``dot`` sees of a drawing: boxes in order (kind, cluster, size), edges in
    order (ends by box number, kind, label length), cluster labels' lengths; nothing of
    the text itself, the names or the colours (a renamed buffer keeps its place)."""
    for node in d.nodes.values():
        _size(node)
    index = {n: i for i, n in enumerate(d.nodes)}
    nodes = tuple((x.kind, x.cluster, x.w, x.h) for x in d.nodes.values())
    edges = tuple((index[e.u], index[e.v], e.kind, _steps(e.label)) for e in d.edges)
    clusters = tuple(
        sorted(
            (p, tuple(_steps(line) for line in _cluster_label(info).split("\n")))
            for p, info in d.clusters.items()
            if any(x.cluster == p for x in d.nodes.values())
        )
    )
    return nodes, edges, clusters


def _copy_positions(src: Drawing, dst: Drawing) -> None:
    """Positions of ``src`` onto ``dst`` of the same structure (boxes matched in order)."""
    dst.bb = src.bb
    for a, b in zip(src.nodes.values(), dst.nodes.values(), strict=True):
        b.x, b.y = a.x, a.y
    for ea, eb in zip(src.edges, dst.edges, strict=True):
        eb.pts, eb.head, eb.lp = list(ea.pts), ea.head, ea.lp
    for p, info in src.clusters.items():
        if "bb" in info and p in dst.clusters:
            dst.clusters[p]["bb"] = info["bb"]
            dst.clusters[p]["lines"] = len(dst.clusters[p]["codes"]) + 1


class LayoutCache:
    """The positions of the last few drawings, by ``structure_key``.

    ``place(d)`` lays ``d`` out, or copies the positions of a drawing of the same
    structure laid out before: typing a label or a problem mark appearing without a
    new line of text keeps every box where it was (and costs microseconds, not ``dot``).
    """

    def __init__(self, size: int = 16):
        self.size = size
        self._known: OrderedDict[tuple[Any, ...], Drawing] = OrderedDict()
        self.hits = self.misses = 0
        self.last_hit = False

    def place(self, d: Drawing) -> Drawing:
        key = structure_key(d)
        known = self._known.get(key)
        if known is not None:
            self._known.move_to_end(key)
            _copy_positions(known, d)
            self.hits += 1
            self.last_hit = True
            return d
        layout(d)
        self._known[key] = d
        while len(self._known) > self.size:
            self._known.popitem(last=False)
        self.misses += 1
        self.last_hit = False
        return d


#: The process's cache (both painters use it; the Lab's view keeps its own).
CACHE = LayoutCache()


def laid_out(g: Any, cache: LayoutCache | None = CACHE) -> Drawing:
    """``drawing(g)`` with positions: from ``cache`` when the structure is known."""
    d = drawing(g)
    return layout(d) if cache is None else cache.place(d)


# ---------------------------------------------------------------- devices


@dataclass
class DevicePicture:
    """The device panel: devices placed on a ring or grid (unit coordinates, y up) or,
    past ``RING_DEVICES``, a traffic matrix; peer arrows, multicast hubs, a caption."""

    mesh: dict[str, int]
    n: int
    shape: str  # "ring" | "grid" | "matrix"
    title: str
    pos: list[tuple[float, float]] = field(default_factory=list)
    r: float = 0.2
    peers: dict[tuple[int, int], bool] = field(default_factory=dict)  # (from, to) -> red
    signals: dict[tuple[int, int], bool] = field(default_factory=dict)  # semaphore signals
    hubs: list[dict[str, Any]] = field(default_factory=list)  # members, centre, red, path
    red_devices: set[int] = field(default_factory=set)
    cells: dict[tuple[int, int, str], bool] = field(default_factory=dict)  # matrix bins
    bins: int = 0
    caption: list[dict[str, Any]] = field(default_factory=list)  # kind, label, names, red
    truncated: bool = False


def device_picture(g: Any) -> DevicePicture | None:
    """The device panel of a graph with a device mesh (``None`` without one)."""
    mesh = g.graph.get("device_mesh")
    if not mesh:
        return None
    n = math.prod(mesh.values())
    title = "devices  " + " × ".join(f"{k}={v}" for k, v in mesh.items())
    traffic: dict[tuple[int, int, str], bool] = {}
    hubs: dict[str, dict[str, Any]] = {}
    caption: dict[tuple[str, str], dict[str, Any]] = {}
    for u, v, data in g.edges(data=True):
        kind = data["kind"]
        if kind not in ("peer-of", "multicast-to", "signals") or g.nodes[u]["kind"] != "device":
            continue
        a, b = g.nodes[u]["index"], g.nodes[v]["index"]
        red = G.is_red(data)
        traffic[(a, b, kind)] = traffic.get((a, b, kind), False) or red
        if kind == "multicast-to":
            h = hubs.setdefault(data.get("path") or "", {"groups": defaultdict(set), "red": False})
            h["groups"][a].add(b)
            h["red"] |= red
        if data.get("view") in g:
            view = g.nodes[data["view"]]
            row = caption.setdefault(
                (kind, view["label"]),
                {"kind": kind, "label": view["label"], "names": [], "red": False},
            )
            who = view.get("let") or "arg"
            if who not in row["names"]:
                row["names"].append(who)
            row["red"] |= red
    pic = DevicePicture(mesh=dict(mesh), n=n, shape="matrix", title=title)
    pic.caption = list(caption.values())
    pic.truncated = bool(g.graph.get("truncated"))
    if n > RING_DEVICES:
        pic.bins = min(n, 128)
        for (a, b, kind), red in traffic.items():
            key = (a * pic.bins // n, b * pic.bins // n, kind)
            pic.cells[key] = pic.cells.get(key, False) or red
        return pic
    pic.pos, pic.shape = device_positions(mesh)
    if pic.shape == "ring" and n > 2:
        pic.r = max(0.07, min(0.22, 0.22 * 2 * math.sin(math.pi / n)))
    pic.peers = {(a, b): red for (a, b, kind), red in traffic.items() if kind == "peer-of"}
    pic.signals = {(a, b): red for (a, b, kind), red in traffic.items() if kind == "signals"}
    for path, h in hubs.items():
        seen: set[frozenset[int]] = set()
        for _src, dsts in h["groups"].items():
            grp = frozenset(dsts)
            if grp in seen or len(grp) < 2:
                continue
            seen.add(grp)
            cx = sum(pic.pos[m][0] for m in grp) / len(grp)
            cy = sum(pic.pos[m][1] for m in grp) / len(grp)
            if all(abs(pic.pos[m][1] - cy) < 1e-6 for m in grp):
                cy += 0.35  # a row: lift the hub off the line
            elif all(abs(pic.pos[m][0] - cx) < 1e-6 for m in grp):
                cx += 0.35
            pic.hubs.append({"members": sorted(grp), "at": (cx, cy), "red": h["red"], "path": path})
    pic.red_devices = {a for (a, _b, _k), red in traffic.items() if red}
    pic.red_devices |= {
        d
        for nid, d in g.nodes(data="index")
        if nid.startswith("device:") and G.is_red(g.nodes[nid])
    }
    return pic


def device_positions(mesh: dict[str, int]) -> tuple[list[tuple[float, float]], str]:
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


_device_positions = device_positions


def _member_name(data: dict[str, Any]) -> str:
    return data.get("name") or data.get("let") or data.get("text") or data["label"]


def caption_text(row: dict[str, Any]) -> str:
    """One caption line of the device panel: ``-> remote_ref(dev+1): p``."""
    names = ", ".join(row["names"][:3]) + (", …" if len(row["names"]) > 3 else "")
    mark = "->" if row["kind"] == "peer-of" else "<>"
    return f"{mark} {row['label']}: {names}"


# ---------------------------------------------------------------- around the picture


def verdict(g: Any) -> tuple[str, str]:
    """The headline and its tone (``error``, ``ok`` or ``muted``): ``1 problem``."""
    diags = g.graph.get("diagnostics", [])
    errors = sum(d.is_error for d in diags)
    if errors:
        return f"{errors} problem{'s' if errors > 1 else ''}", "error"
    if g.graph.get("validator_note"):
        return "not checked", "muted"
    warns = len(diags)
    return ("valid" + (f", {warns} warning{'s' if warns > 1 else ''}" if warns else "")), "ok"


def problem_rows(g: Any) -> list[dict[str, Any]]:
    """Every diagnostic of the graph, errors first (stable): severity, code, path,
    message on one line, and the fix's description (errors only)."""
    diags = sorted(g.graph.get("diagnostics", []), key=lambda d: not d.is_error)
    return [
        {
            "severity": d.severity,
            "error": d.is_error,
            "code": d.code,
            "path": d.path or "",
            "message": " ".join(d.message.split()),
            "fix": d.fix.description if d.fix is not None and d.is_error else "",
        }
        for d in diags
    ]


def legend(d: Drawing, g: Any) -> list[tuple[str, str]]:
    """What this picture shows, in legend order: ``(kind of mark, key)`` with kind
    ``node`` / ``edge`` (key: a node or edge kind), ``peer``, ``multicast``, ``problem``."""
    out = [("node", k) for k in NODE_STYLE if any(n.kind == k for n in d.nodes.values())]
    out += [("edge", k) for k in EDGE_STYLE if any(e.kind == k for e in d.edges)]
    kinds_dev = {data["kind"] for _, _, data in g.edges(data=True)}
    if "peer-of" in kinds_dev:
        out.append(("peer", "peer-of"))
    if "multicast-to" in kinds_dev:
        out.append(("multicast", "multicast-to"))
    if any(
        data["kind"] == "signals" and g.nodes[u]["kind"] == "device"
        for u, _, data in g.edges(data=True)
    ):
        out.append(("signal", "signals"))
    if any(n.red for n in d.nodes.values()) or any(e.red for e in d.edges):
        out.append(("problem", "problem"))
    return out
