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

import io
import math
import textwrap
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Patch, PathPatch, Polygon
from matplotlib.path import Path as MPath
from mpmd_lab import files
from mpmd_lab import graph as G
from mpmd_lab import layout as L
from mpmd_lab.layout import (  # noqa: F401 - the drawable model, as this module always had it
    BASE_PT,
    CHAR_W,
    LINE_H,
    RING_DEVICES,
    SUMMARY_NODES,
    DEdge,
    DNode,
    Drawing,
    _clip,
    _full,
    _summarise,
    layout,
)
from mpmd_lab.palette import (  # noqa: F401 - re-exported: plot.RED and friends
    EDGE_STYLE,
    FIX,
    FONT,
    INK,
    MULTICAST,
    MUTED,
    NODE_STYLE,
    PEER,
    RED,
    SIGNAL,
    WARN,
    text_color,
)
from mpmd_lab.safetext import clip, printable
from mpmd_lab.scenario import Scenario

DEVICE_IN = 3.0  # height of the device picture (inches)
#: A figure wider than this (inches; 1,000 px at the inline 100 dpi, a notebook column)
#: puts the device panel under the graph instead of beside it, so text stays readable.
INLINE_IN = 10.0

_FAST_PNG = {"compress_level": 1}


class AliasingFigure(Figure):
    """A Figure that shows itself as PNG in a notebook even when pyplot was never imported.

    (With pyplot's inline backend active, its formatter for ``Figure`` applies instead:
    one picture either way.)
    """

    mpmd_lab_mode: str = "full"
    #: what ``draw`` painted (node ids with their text, edges, problems; see ``draw``)
    mpmd_lab_painted: dict[str, Any] | None = None

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi=100, facecolor="white", pil_kwargs=_FAST_PNG)
        return buf.getvalue()


# ---------------------------------------------------------------- painting
#
# Each painter records what it drew in ``rec`` (``fig.mpmd_lab_painted``): the node ids,
# edges and problem marks actually put on the canvas, so a test can hold the picture to
# the model (and to the browser view, ``mpmd_lab.scene``).


def _paint_graph(ax: Any, d: Drawing, scale: float, rec: dict[str, Any]) -> None:
    x0, y0, x1, y1 = d.bb
    pad = 6
    ax.set_xlim(x0 - pad, x1 + pad)
    ax.set_ylim(y0 - pad, y1 + pad)
    ax.set_aspect("equal", adjustable="box")
    ax.set_axis_off()
    fs = BASE_PT * scale
    show_text = fs >= 2.5
    for p, info in sorted(d.clusters.items()):
        if "bb" not in info:
            continue
        bx0, by0, bx1, by1 = info["bb"]
        red = bool(info.get("red"))
        ax.add_patch(
            FancyBboxPatch(
                (bx0, by0),
                bx1 - bx0,
                by1 - by0,
                boxstyle="round,pad=0,rounding_size=6",
                fc="#F7F9FC",
                ec=RED if red else "#9AA8B8",
                lw=(2.0 if red else 1.0) * max(scale, 0.4),
                zorder=0,
            )
        )
        rec["clusters"][p] = {"red": red, "codes": list(info["codes"]) if show_text else []}
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
        _paint_edge(ax, e, scale, fs, show_text, rec)
    for n, node in d.nodes.items():
        _paint_node(ax, n, node, scale, fs, show_text, rec)


def _paint_edge(
    ax: Any, e: DEdge, scale: float, fs: float, show_text: bool, rec: dict[str, Any]
) -> None:
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
    label = e.label if e.label and e.lp is not None and show_text else ""
    rec["edges"].append((e.u, e.v, e.kind, color == RED, label))
    if label and e.lp is not None:
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


def _paint_node(
    ax: Any, n: str, node: DNode, scale: float, fs: float, show_text: bool, rec: dict[str, Any]
) -> None:
    st = NODE_STYLE.get(node.kind, NODE_STYLE["unknown"])
    ec = RED if node.red else st["ec"]
    ax.add_patch(
        FancyBboxPatch(
            (node.x - node.w / 2, node.y - node.h / 2),
            node.w,
            node.h,
            boxstyle="round,pad=0,rounding_size=5",
            fc=st["fc"],
            ec=ec,
            lw=(2.6 if node.red else 1.1) * max(scale, 0.3),
            ls="--" if node.missing else "-",
            zorder=3,
        )
    )
    lines = node.lines if show_text else []
    rec["nodes"][n] = {"kind": node.kind, "red": ec == RED, "lines": [t for t, _ in lines]}
    top = node.y + (len(node.lines) - 1) * LINE_H / 2
    for k, (text, style) in enumerate(lines):
        ax.text(
            node.x,
            top - k * LINE_H,
            text,
            fontsize=fs,
            family=FONT,
            color=text_color(node.kind, style),
            weight="bold" if style in ("title", "code", "warn") else "normal",
            ha="center",
            va="center",
            zorder=4,
        )


# ---------------------------------------------------------------- device panel


def _paint_devices(ax: Any, pic: L.DevicePicture, fs: float, rec: dict[str, Any]) -> None:
    ax.set_axis_off()
    ax.set_title(pic.title, fontsize=fs + 1, family=FONT, weight="bold", color=INK, loc="left")
    rec["devices"] = {
        "n": pic.n,
        "shape": pic.shape,
        "red": [],
        "peers": [],
        "signals": [],
        "hubs": [],
    }
    if pic.shape == "matrix":
        _paint_matrix(ax, pic, fs, rec)
        return
    pos, r = pic.pos, pic.r
    dfs = fs if r >= 0.15 else fs * max(0.6, r / 0.15)
    arrows = [(a, b, red, False) for (a, b), red in pic.peers.items()]
    arrows += [(a, b, red, True) for (a, b), red in pic.signals.items()]
    for a, b, red, signal in arrows:
        color = RED if red else (SIGNAL if signal else PEER)
        rec["devices"]["signals" if signal else "peers"].append((a, b, color == RED))
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
                lw=2.2 if red else (1.4 if signal else 1.8),
                ls="--" if signal else "-",
                shrinkA=0,
                shrinkB=0,
                zorder=2,
                mutation_scale=1.0,
            )
        )
    for hub in pic.hubs:
        color = RED if hub["red"] else MULTICAST
        rec["devices"]["hubs"].append((tuple(hub["members"]), color == RED))
        cx, cy = hub["at"]
        for m in hub["members"]:
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
    for i, (x, y) in enumerate(pos):
        red = i in pic.red_devices
        if red:
            rec["devices"]["red"].append(i)
        ax.add_patch(
            Circle((x, y), r, fc="#FFFFFF", ec=RED if red else "#333333", lw=1.5, zorder=4)
        )
        ax.text(x, y, f"d{i}", ha="center", va="center", fontsize=dfs, family=FONT, zorder=5)
    _device_caption(ax, pic, fs)
    xs, ys = [p[0] for p in pos], [p[1] for p in pos]
    m = 0.55
    ax.set_xlim(min(xs) - m, max(xs) + m)
    ax.set_ylim(min(ys) - m, max(ys) + m)
    ax.set_aspect("equal", adjustable="box")
    ax.set_anchor("NW")
    if not pic.peers and not pic.hubs:
        ax.text(
            0.5, 0.02, "no peer or multicast traffic", transform=ax.transAxes,
            ha="center", fontsize=fs * 0.9, color=MUTED, family=FONT,
        )  # fmt: skip
    if pic.truncated:
        ax.text(0.5, -0.05, "(device edges capped)", transform=ax.transAxes, ha="center",
                fontsize=fs * 0.8, color=MUTED)  # fmt: skip


def _toward(p: tuple[float, float], q: tuple[float, float], dist: float) -> tuple[float, float]:
    """The point ``dist`` from ``p`` in the direction of ``q``."""
    dx, dy = q[0] - p[0], q[1] - p[1]
    n = math.hypot(dx, dy) or 1.0
    return p[0] + dx / n * dist, p[1] + dy / n * dist


CAPTION_ROWS = 6


def _device_caption(ax: Any, pic: L.DevicePicture, fs: float) -> None:
    """Which views make which traffic, under the device picture (one line per transform)."""
    for k, row in enumerate(pic.caption[:CAPTION_ROWS]):
        ax.annotate(
            _clip(L.caption_text(row), 38),
            xy=(0.0, 0.0),
            xycoords="axes fraction",
            xytext=(0, -6 - k * fs * 1.5),
            textcoords="offset points",
            fontsize=fs * 0.9,
            family=FONT,
            va="top",
            color=RED if row["red"] else (PEER if row["kind"] == "peer-of" else MULTICAST),
        )


def _paint_matrix(ax: Any, pic: L.DevicePicture, fs: float, rec: dict[str, Any]) -> None:
    import numpy as np

    n, bins = pic.n, pic.bins
    img = np.ones((bins, bins, 3))
    colours = {
        "peer-of": (0.0, 0.45, 0.70),
        "multicast-to": (0.80, 0.47, 0.65),
        "signals": (0.84, 0.37, 0.0),
    }
    for (i, j, kind), red in sorted(pic.cells.items(), key=lambda kv: kv[1]):  # red on top
        img[i, j] = (0.84, 0.15, 0.16) if red else colours[kind]
        if red:
            rec["devices"]["red"].append((i, j))
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


def _device_height(pic: L.DevicePicture, width: float = 3.3) -> float:
    """Inches the device picture needs at ``width`` inches (a row of devices is flat)."""
    if pic.shape == "matrix" or not pic.pos:
        return DEVICE_IN - 0.25
    xs, ys = [p[0] for p in pic.pos], [p[1] for p in pic.pos]
    aspect = (max(ys) - min(ys) + 1.1) / (max(xs) - min(xs) + 1.1)
    return max(1.0, min(DEVICE_IN - 0.25, width * aspect))


def _legend_handles(d: Drawing, g: Any) -> list[Any]:
    """Legend entries for what this picture shows, nothing else (``layout.legend``)."""
    handles: list[Any] = []
    for mark, key in L.legend(d, g):
        if mark == "node":
            st = NODE_STYLE[key]
            handles.append(Patch(fc=st["fc"], ec=st["ec"], label=st["name"]))
        elif mark == "edge":
            st = EDGE_STYLE[key]
            handles.append(Line2D([], [], color=st["color"], lw=2, ls=st["ls"], label=st["name"]))
        elif mark == "peer":
            handles.append(Line2D([], [], color=PEER, lw=2, label="peer view (remote_ref)"))
        elif mark == "multicast":
            handles.append(
                Line2D([], [], color=MULTICAST, lw=2, marker="D", label="multicast (multicast_ref)")
            )
        elif mark == "signal":
            handles.append(Line2D([], [], color=SIGNAL, lw=2, ls="--", label="semaphore signal"))
        else:
            handles.append(Patch(fc="white", ec=RED, lw=2.5, label="problem (code inside)"))
    return handles


LEGEND_COLS = 5
#: At most this many problems are listed under the picture (the rest are counted).
FOOTER_PROBLEMS = 5


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


def _problem_lines(g: Any, width: int, rec: dict[str, Any]) -> list[tuple[str, str]]:
    """The footer: each problem in full, wrapped at ``width`` characters (never cut)."""
    rows = L.problem_rows(g)
    out: list[tuple[str, str]] = []
    for row in rows[:FOOTER_PROBLEMS]:
        sev = "x" if row["error"] else "!"
        line = f"{sev} {row['code']}  {row['path'] or 'scenario'}: {row['message']}"
        color = RED if row["error"] else WARN
        out += [(t, color) for t in textwrap.wrap(line, width, subsequent_indent="    ")]
        if row["fix"]:
            fix = textwrap.wrap(
                f"fix: {row['fix']}", width, initial_indent="    ", subsequent_indent="         "
            )
            out += [(t, FIX) for t in fix]
        rec["problems"].append((row["code"], row["error"]))
    if len(rows) > FOOTER_PROBLEMS:
        out.append((f"and {len(rows) - FOOTER_PROBLEMS} more (see the problems list)", MUTED))
    rec["more_problems"] = max(0, len(rows) - FOOTER_PROBLEMS)
    if g.graph.get("validator_note"):
        out += [(t, MUTED) for t in textwrap.wrap(f"({g.graph['validator_note']})", width)]
    return out


TONE = {"error": RED, "ok": "#2E7D32", "muted": MUTED}


def _verdict(g: Any) -> tuple[str, str]:
    text, tone = L.verdict(g)
    return text, TONE[tone]


def draw(g: Any, ax: Any = None) -> Figure:
    """Paint a graph from ``mpmd_lab.graph.build_graph`` onto ``ax`` (or a new Figure).

    The figure's ``mpmd_lab_painted`` says what was painted: node ids with their text
    and problem mark, edges, cluster and device marks, the problems listed."""
    d = L.laid_out(g)
    rec: dict[str, Any] = {"nodes": {}, "edges": [], "clusters": {}, "devices": None}
    rec["problems"] = []
    x0, y0, x1, y1 = d.bb
    gw, gh = max(x1 - x0, 1.0) + 12, max(y1 - y0, 1.0) + 12
    pic = L.device_picture(g)
    handles = _legend_handles(d, g)
    rows = math.ceil(len(handles) / LEGEND_COLS)
    header_in, legend_in = (1.05 if d.summary else 0.9), 0.22 * rows + 0.15
    panel_in = 3.4 if pic else 0.0
    caption_in = 0.2 * min(CAPTION_ROWS, len(pic.caption)) + 0.15 if pic else 0.0
    below_in = 0.0  # the device panel under the graph, when beside it is too wide
    if ax is None:
        scale = min(1.0, 18.0 / (gw / 72), 15.0 / (gh / 72))
        if pic and gw / 72 * scale + panel_in + 0.4 > INLINE_IN:
            panel_in, below_in = 0.0, _device_height(pic) + 0.25 + caption_in + 0.1
        W = max(8.0, gw / 72 * scale + panel_in + 0.4)
    else:
        bbox = ax.get_position()
        W = bbox.width * ax.figure.get_size_inches()[0]
    width = int((W - 0.3) * 72 / (0.66 * 9))  # 9 pt mono across the footer (hinted wider)
    problems = _problem_lines(g, width, rec)
    footer_in = legend_in + 0.2 * len(problems) + 0.1
    if ax is None:
        H = max(3.6, gh / 72 * scale + header_in + footer_in + below_in + 0.2)
        if pic and not below_in:  # room for the device picture and its caption
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
    main_h = max(H - header_in - footer_in - below_in - 0.1, H * 0.4)
    scale = min(main_w * 72 / gw, main_h * 72 / gh)
    fs_ui = max(7.0, min(10.0, 9.0 * max(scale, 0.8)))

    def rect(x: float, y: float, w: float, h: float) -> tuple[float, float, float, float]:
        return (x / W, y / H, w / W, h / H)

    main = host.inset_axes(rect(0.15, footer_in + below_in, main_w, main_h))
    _paint_graph(main, d, scale, rec)
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
    if pic and below_in:
        y = footer_in + caption_in + 0.05
        dev = host.inset_axes(rect(0.15, y, min(3.3, W - 0.3), _device_height(pic)))
        _paint_devices(dev, pic, fs_ui, rec)
    elif pic:
        ph = max(1.0, min(DEVICE_IN, main_h - caption_in - 0.1))
        top = footer_in + main_h
        dev = host.inset_axes(rect(W - panel_in - 0.05, top - ph, panel_in - 0.1, ph - 0.25))
        _paint_devices(dev, pic, fs_ui, rec)
    leg = host.inset_axes(rect(0.15, footer_in - legend_in, W - 0.3, legend_in))
    _legend(leg, handles, fs_ui)
    for k, (line, color) in enumerate(problems):
        host.text(
            0.15 / W,
            (footer_in - legend_in - 0.05 - 0.2 * k) / H,
            line,
            transform=host.transAxes,
            fontsize=9,
            family=FONT,
            color=color,
            va="top",
            weight="bold" if k == 0 and color == RED else "normal",
        )
    fig.mpmd_lab_mode = "summary" if d.summary else "full"
    fig.mpmd_lab_painted = rec
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
    ax.text(0.01, 0.99, clip(f"drawing failed: {type(error).__name__}: {error}", 150),
            color=RED, va="top", fontsize=9, family=FONT, transform=ax.transAxes)  # fmt: skip
    ax.text(0.01, 0.94, "\n".join(_clip(x, 140) for x in lines), va="top", fontsize=7,
            family=FONT, transform=ax.transAxes)  # fmt: skip
    fig.mpmd_lab_mode = "fallback"
    return fig


def safe_texts(fig: Figure) -> Figure:
    """Every text of ``fig`` as plain text: no mathtext (a ``$\\undefinedcmd$`` in a
    description would raise at draw time) and no control characters (they make an SVG
    ill-formed XML)."""
    from matplotlib.text import Text

    for t in fig.findobj(Text):
        t.set_parse_math(False)
        text = t.get_text()
        clean = printable(text)
        if clean != text:
            t.set_text(clean)
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
    return _picture(g, ax)


def _picture(g: Any, ax: Any = None) -> Figure:
    """``draw(g, ax)``, or the fallback picture when drawing fails."""
    try:
        fig = draw(g, ax)
    except Exception as e:  # noqa: BLE001 - a picture must come out for any scenario
        fig = _fallback(g, e, ax)
    return safe_texts(fig)


def _savefig(fig: Figure, fmt: str) -> bytes:
    buf = io.BytesIO()
    if fmt == "png":  # fast zlib level: a third of the time, a slightly larger file
        fig.savefig(buf, format="png", dpi=130, facecolor="white", pil_kwargs=_FAST_PNG)
    else:
        fig.savefig(buf, format=fmt, facecolor="white")
    return buf.getvalue()


def render_aliasing(
    scenario: Scenario | Any,
    fmt: str = "png",
    diagnostics: list[Any] | None = None,
    access_log: Any = None,
) -> bytes:
    """The aliasing graph as PNG, SVG or PDF bytes; a failure while rendering gives the
    fallback picture (the graph as text and the error), never an exception."""
    if fmt not in ("png", "svg", "pdf"):
        raise ValueError(f"{fmt!r}: the picture is written as png, svg or pdf")
    g = G.build_graph(scenario, diagnostics=diagnostics, access_log=access_log)
    fig = _picture(g)
    try:
        return _savefig(fig, fmt)
    except (MemoryError, OSError):
        raise
    except Exception as e:  # noqa: BLE001
        return _savefig(safe_texts(_fallback(g, e)), fmt)


def save_aliasing(
    scenario: Scenario | Any,
    path: str | Path,
    diagnostics: list[Any] | None = None,
    access_log: Any = None,
) -> Path:
    """Write the aliasing graph as PNG, SVG or PDF (by the file's suffix), the way every
    user file is written (``mpmd_lab.files``). Returns the file written."""
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".") or "png"
    if fmt not in ("png", "svg", "pdf"):
        raise ValueError(f"{clip(str(path), 200)}: the picture is written as .png, .svg or .pdf")
    files.target_of(path)  # refuse a device or a directory before drawing
    data = render_aliasing(scenario, fmt, diagnostics=diagnostics, access_log=access_log)
    return files.write_bytes(path, data)


__all__ = ["draw", "layout", "plot_aliasing", "render_aliasing", "safe_texts", "save_aliasing"]
