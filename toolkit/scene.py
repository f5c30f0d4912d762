"""The aliasing graph as a scene: plain JSON data that a browser paints as SVG.

``scene(g)`` takes a graph model (``mpmd_lab.graph.build_graph``) and returns a dict of
lists and numbers only: the boxes of ``mpmd_lab.layout`` in SVG coordinates (points,
y down), each with its lines of text and colours, edge paths, program clusters, the
device panel, the legend and every problem in full. The browser view
(``mpmd_lab.widgets.graph_view.GraphSVG``) is a dumb painter of it; colours and
geometry are decided here, from the same layout and palette as ``mpmd_lab.draw``, so
both pictures show the same model. ``to_svg(scene)`` paints it server-side (a file, a
screenshot, a test), the same way the browser does.

Hover data per node: its kind, full label, type, field path and problems; a click in
the browser selects the node's field path.
"""

from __future__ import annotations

import html
import math
from typing import Any

from mpmd_lab import layout as L
from mpmd_lab.palette import (
    CLUSTER,
    EDGE_STYLE,
    FIX,
    INK,
    MULTICAST,
    MUTED,
    NODE_STYLE,
    OK,
    PEER,
    RED,
    SIGNAL,
    WARN,
    text_color,
)

VERSION = 1
PAD = 8.0  # points around the graph
#: Device panel: points per unit of ``layout.DevicePicture`` coordinates.
DEVICE_UNIT = 72.0
TONE = {"error": RED, "ok": OK, "muted": MUTED}


def _r(v: float) -> float:
    return round(v, 1)


def _dash(ls: Any, lw: float) -> str:
    if ls == "--":
        return f"{_r(4 * lw)},{_r(3 * lw)}"
    if isinstance(ls, tuple):  # matplotlib (offset, (on, off)) in line widths
        return ",".join(str(_r(x * lw)) for x in ls[1])
    return ""


def _path_d(pts: list[tuple[float, float]], fx: Any) -> str:
    """graphviz spline points (a cubic Bézier chain) as an SVG path."""
    p = [fx(x, y) for x, y in pts]
    out = f"M{_r(p[0][0])} {_r(p[0][1])}"
    if (len(p) - 1) % 3 == 0:
        for i in range(1, len(p), 3):
            out += "C" + " ".join(f"{_r(x)} {_r(y)}" for x, y in p[i : i + 3])
    else:
        out += "".join(f"L{_r(x)} {_r(y)}" for x, y in p[1:])
    return out


def _arrow(base: tuple[float, float], tip: tuple[float, float], half: float) -> list[list[float]]:
    dx, dy = tip[0] - base[0], tip[1] - base[1]
    n = math.hypot(dx, dy) or 1.0
    nx_, ny_ = -dy / n * half, dx / n * half
    return [
        [_r(tip[0]), _r(tip[1])],
        [_r(base[0] + nx_), _r(base[1] + ny_)],
        [_r(base[0] - nx_), _r(base[1] - ny_)],
    ]


def _problems(diags: list[Any]) -> list[dict[str, Any]]:
    return [
        {"code": d.code, "severity": d.severity, "error": d.is_error, "message": d.message}
        for d in diags
    ]


def _hover(g: Any, node: L.DNode) -> dict[str, Any]:
    """What hovering a box tells: kind, full label, type, field path, problems."""
    if len(node.members) != 1:
        diags = [d for m in node.members for d in g.nodes[m]["diagnostics"]]
        unique = list({(d.code, d.path): d for d in diags}.values())
        return {
            "kind": node.kind,
            "label": f"{len(node.members)} {node.kind} nodes",
            "type": "",
            "path": "",
            "problems": _problems(unique[:6]),
        }
    data = g.nodes[node.members[0]]
    label = data.get("label", "")
    if data["kind"] == "view" and data.get("name"):
        label = f"{data['name']} = {label}"
    elif data["kind"] == "statement":
        label = f"{label}: {data.get('text', '')}"
    return {
        "kind": data["kind"],
        "label": label,
        "type": str(data.get("type") or data.get("mesh") or ""),
        "sharding": str(data.get("sharding") or ""),
        "path": data.get("path") or "",
        "problems": _problems(data["diagnostics"]),
    }


def _devices(pic: L.DevicePicture) -> dict[str, Any]:
    out: dict[str, Any] = {
        "title": pic.title,
        "shape": pic.shape,
        "n": pic.n,
        "truncated": pic.truncated,
        "caption": [
            {
                "text": L.caption_text(row),
                "color": RED if row["red"] else (PEER if row["kind"] == "peer-of" else MULTICAST),
            }
            for row in pic.caption
        ],
    }
    if pic.shape == "matrix":
        colours = {"peer-of": PEER, "multicast-to": MULTICAST}
        out["bins"] = pic.bins
        out["cells"] = [
            {"i": i, "j": j, "red": red, "color": RED if red else colours[kind]}
            for (i, j, kind), red in sorted(pic.cells.items(), key=lambda kv: kv[1])
        ]
        return out
    xs, ys = [p[0] for p in pic.pos], [p[1] for p in pic.pos]
    m = 0.55
    u = DEVICE_UNIT
    x0, y1 = min(xs) - m, max(ys) + m

    def fx(x: float, y: float) -> tuple[float, float]:
        return (x - x0) * u, (y1 - y) * u

    r = pic.r * u
    out["w"] = _r((max(xs) + m - x0) * u)
    out["h"] = _r((y1 - (min(ys) - m)) * u)
    out["r"] = _r(r)
    out["font"] = _r(min(12.0, max(8.0, r * 0.75)))
    out["devices"] = [
        {"i": i, "x": _r(fx(*p)[0]), "y": _r(fx(*p)[1]), "red": i in pic.red_devices}
        for i, p in enumerate(pic.pos)
    ]

    def arrows(pairs: dict[tuple[int, int], bool], signal: bool) -> list[dict[str, Any]]:
        """Peer writes, or (``signal``) semaphore signals: wider, dashed arcs."""
        got = []
        for (a, b), red in pairs.items():
            color = RED if red else (SIGNAL if signal else PEER)
            pa, pb = fx(*pic.pos[a]), fx(*pic.pos[b])
            if a == b:
                got.append({"a": a, "b": b, "red": red, "color": color, "signal": signal,
                            "loop": [_r(pa[0] + r * 0.9), _r(pa[1] - r * 0.9),
                                     _r(r * 0.55)]})  # fmt: skip
                continue
            rad = 0.34 if signal else 0.18  # matplotlib's arc3: control point off the chord
            cx = (pa[0] + pb[0]) / 2 - rad * (pb[1] - pa[1])
            cy = (pa[1] + pb[1]) / 2 + rad * (pb[0] - pa[0])
            start = _toward(pa, (cx, cy), r * 1.08)
            end = _toward(pb, (cx, cy), r * 1.08)
            base = _toward(end, (cx, cy), 9.0)
            d = f"M{_r(start[0])} {_r(start[1])}Q{_r(cx)} {_r(cy)} {_r(base[0])} {_r(base[1])}"
            got.append({"a": a, "b": b, "red": red, "color": color, "signal": signal, "d": d,
                        "head": _arrow(base, end, 4.0)})  # fmt: skip
        return got

    out["peers"] = arrows(pic.peers, False)
    out["signals"] = arrows(pic.signals, True)
    hubs = []
    for hub in pic.hubs:
        c = fx(*hub["at"])
        spokes = []
        for mbr in hub["members"]:
            tip = _toward(fx(*pic.pos[mbr]), c, r * 1.08)
            base = _toward(tip, c, 8.0)
            spokes.append({"to": mbr, "line": [_r(c[0]), _r(c[1]), _r(base[0]), _r(base[1])],
                           "head": _arrow(base, tip, 3.5)})  # fmt: skip
        hubs.append({"members": hub["members"], "x": _r(c[0]), "y": _r(c[1]), "red": hub["red"],
                     "color": RED if hub["red"] else MULTICAST, "spokes": spokes})  # fmt: skip
    out["hubs"] = hubs
    return out


def _toward(p: tuple[float, float], q: tuple[float, float], dist: float) -> tuple[float, float]:
    dx, dy = q[0] - p[0], q[1] - p[1]
    n = math.hypot(dx, dy) or 1.0
    return p[0] + dx / n * dist, p[1] + dy / n * dist


def _legend(d: L.Drawing, g: Any) -> list[dict[str, Any]]:
    out = []
    for mark, key in L.legend(d, g):
        if mark == "node":
            st = NODE_STYLE[key]
            out.append({"mark": mark, "key": key, "name": st["name"], "fc": st["fc"],
                        "ec": st["ec"]})  # fmt: skip
        elif mark == "edge":
            st = EDGE_STYLE[key]
            out.append({"mark": mark, "key": key, "name": st["name"], "color": st["color"],
                        "dash": _dash(st["ls"], 2.0)})  # fmt: skip
        elif mark == "peer":
            out.append({"mark": mark, "key": key, "name": "peer view (remote_ref)",
                        "color": PEER, "dash": ""})  # fmt: skip
        elif mark == "multicast":
            out.append({"mark": mark, "key": key, "name": "multicast (multicast_ref)",
                        "color": MULTICAST, "dash": ""})  # fmt: skip
        elif mark == "signal":
            out.append({"mark": mark, "key": key, "name": "semaphore signal",
                        "color": SIGNAL, "dash": "6 4"})  # fmt: skip
        else:
            out.append({"mark": mark, "key": key, "name": "problem (code inside)",
                        "fc": "#FFFFFF", "ec": RED})  # fmt: skip
    return out


def scene(g: Any, cache: L.LayoutCache | None = L.CACHE) -> dict[str, Any]:
    """The graph model as a JSON-serialisable scene (see the module docstring)."""
    d = L.laid_out(g, cache)
    x0, y0, x1, y1 = d.bb

    def fx(x: float, y: float) -> tuple[float, float]:
        return x - x0 + PAD, y1 - y + PAD

    nodes = []
    for n, node in d.nodes.items():
        st = NODE_STYLE.get(node.kind, NODE_STYLE["unknown"])
        cx, cy = fx(node.x, node.y)
        nodes.append(
            {
                "id": n,
                "kind": node.kind,
                "x": _r(cx),
                "y": _r(cy),
                "w": _r(node.w),
                "h": _r(node.h),
                "fc": st["fc"],
                "ec": RED if node.red else st["ec"],
                "lw": 2.6 if node.red else 1.1,
                "dash": "4,3" if node.missing else "",
                "red": node.red,
                "lines": [
                    [t, text_color(node.kind, style), style in ("title", "code", "warn")]
                    for t, style in node.lines
                ],
                "members": len(node.members),
                **_hover(g, node),
            }
        )
    edges = []
    for i, e in enumerate(d.edges):
        if len(e.pts) < 2:
            continue
        st = EDGE_STYLE[e.kind]
        color = RED if e.red else st["color"]
        lw = float(st["lw"]) + (1.0 if e.red else 0.0) + 0.8 * math.log10(max(e.count, 1))
        item: dict[str, Any] = {
            "id": i,
            "u": e.u,
            "v": e.v,
            "kind": e.kind,
            "red": e.red,
            "color": color,
            "lw": _r(lw),
            "dash": _dash(st["ls"], lw),
            "d": _path_d(e.pts, fx),
            "head": _arrow(fx(*e.pts[-1]), fx(*e.head), 3.5) if e.head else None,
            "label": "",
            "count": e.count,
            "problems": _problems(
                list({x.code: x for k in e.keys for x in g.edges[k]["diagnostics"]}.values())
            ),
        }
        if e.label and e.lp is not None:
            lx, ly = fx(*e.lp)
            item.update(
                label=e.label,
                lx=_r(lx),
                ly=_r(ly),
                lcolor=RED if e.red else (WARN if e.label.startswith("! ") else MUTED),
                lbold=e.red or e.label.startswith("! "),
            )
        edges.append(item)
    clusters = []
    for p, info in sorted(d.clusters.items()):
        if "bb" not in info:
            continue
        bx0, by0, bx1, by1 = info["bb"]
        left, top = fx(bx0, by1)
        clusters.append(
            {
                "id": p,
                "x": _r(left),
                "y": _r(top),
                "w": _r(bx1 - bx0),
                "h": _r(by1 - by0),
                "title": L._clip(info["title"], 60),
                "codes": list(info["codes"]),
                "red": bool(info.get("red")),
                "fc": CLUSTER["fc"],
                "ec": RED if info.get("red") else CLUSTER["ec"],
                "path": f"call.programs[{p}]",
            }
        )
    text, tone = L.verdict(g)
    pic = L.device_picture(g)
    return {
        "v": VERSION,
        "name": g.graph.get("name", ""),
        "description": g.graph.get("description") or "",
        "verdict": {"text": text, "tone": tone, "color": TONE[tone]},
        "mode": "summary" if d.summary else "full",
        "summary": d.summary,
        "w": _r(x1 - x0 + 2 * PAD),
        "h": _r(y1 - y0 + 2 * PAD),
        "font": L.BASE_PT,
        "line_h": L.LINE_H,
        "ink": INK,
        "nodes": nodes,
        "edges": edges,
        "clusters": clusters,
        "devices": _devices(pic) if pic else None,
        "legend": _legend(d, g),
        "problems": L.problem_rows(g),
        "fix_color": FIX,
        "note": g.graph.get("validator_note") or "",
        "layout_cached": bool(cache is not None and cache.last_hit),
    }


def marks(s: dict[str, Any]) -> dict[str, Any]:
    """What a scene shows, in the form ``plot.draw`` records what it painted
    (``fig.mpmd_lab_painted``): compare the two to hold both views to one model."""
    return {
        "nodes": {
            n["id"]: {"kind": n["kind"], "red": n["red"], "lines": [t for t, _c, _b in n["lines"]]}
            for n in s["nodes"]
        },
        "edges": sorted((e["u"], e["v"], e["kind"], e["red"], e["label"]) for e in s["edges"]),
        "clusters": {c["id"]: {"red": c["red"], "codes": c["codes"]} for c in s["clusters"]},
        "problems": [(p["code"], p["error"]) for p in s["problems"]],
        "devices": _device_marks(s.get("devices")),
    }


def _device_marks(dv: dict[str, Any] | None) -> dict[str, Any] | None:
    if not dv:
        return None
    if dv["shape"] == "matrix":
        red = sorted((c["i"], c["j"]) for c in dv["cells"] if c["red"])
        return {"n": dv["n"], "shape": "matrix", "red": red, "peers": [], "signals": [], "hubs": []}
    return {
        "n": dv["n"],
        "shape": dv["shape"],
        "red": sorted(d["i"] for d in dv["devices"] if d["red"]),
        "peers": sorted((p["a"], p["b"], p["red"]) for p in dv["peers"]),
        "signals": sorted((p["a"], p["b"], p["red"]) for p in dv.get("signals", [])),
        "hubs": sorted((tuple(h["members"]), h["red"]) for h in dv["hubs"]),
    }


# ---------------------------------------------------------------- server-side SVG


def _esc(s: Any) -> str:
    return html.escape(str(s), quote=True)


def to_svg(s: dict[str, Any], scale: float = 1.2, titles: bool = True) -> str:
    """The scene's graph as one SVG document (``scale`` px per point). ``titles``: each
    node carries a ``<title>`` (the browser's own tooltip; the Lab's view has its own)."""
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_r(s["w"] * scale)}" '
        f'height="{_r(s["h"] * scale)}" viewBox="0 0 {s["w"]} {s["h"]}" '
        f'font-family="\'DejaVu Sans Mono\', monospace" font-size="{s["font"]}">'
    ]
    parts += [_svg_cluster(c, s) for c in s["clusters"]]
    parts += [_svg_edge(e, s) for e in s["edges"]]
    parts += [_svg_node(n, s, titles) for n in s["nodes"]]
    parts.append("</svg>")
    return "".join(parts)


def _svg_cluster(c: dict[str, Any], s: dict[str, Any]) -> str:
    out = (
        f'<g class="cluster{" red" if c["red"] else ""}" data-id="{c["id"]}">'
        f'<rect x="{c["x"]}" y="{c["y"]}" width="{c["w"]}" height="{c["h"]}" rx="6" '
        f'fill="{c["fc"]}" stroke="{c["ec"]}" stroke-width="{2 if c["red"] else 1}"/>'
        f'<text x="{_r(c["x"] + 6)}" y="{_r(c["y"] + 4 + s["font"])}" fill="{MUTED}" '
        f'font-weight="bold">{_esc(c["title"])}</text>'
    )
    for k, code in enumerate(c["codes"]):
        y = _r(c["y"] + 4 + s["font"] + (k + 1) * s["line_h"])
        out += (
            f'<text x="{_r(c["x"] + 6)}" y="{y}" fill="{RED}" font-weight="bold">'
            f"{_esc(code)}</text>"
        )
    return out + "</g>"


def _svg_edge(e: dict[str, Any], s: dict[str, Any]) -> str:
    dash = f' stroke-dasharray="{e["dash"]}"' if e["dash"] else ""
    out = (
        f'<g class="edge{" red" if e["red"] else ""}" data-id="{e["id"]}" data-kind="{e["kind"]}">'
        f'<path d="{e["d"]}" fill="none" stroke="{e["color"]}" stroke-width="{e["lw"]}"{dash}/>'
    )
    if e["head"]:
        pts = " ".join(f"{x},{y}" for x, y in e["head"])
        out += f'<polygon points="{pts}" fill="{e["color"]}"/>'
    if e["label"]:
        weight = ' font-weight="bold"' if e["lbold"] else ""
        out += (
            f'<text x="{e["lx"]}" y="{e["ly"]}" text-anchor="middle" dominant-baseline="central" '
            f'font-size="{_r(s["font"] * 0.9)}" fill="{e["lcolor"]}"{weight} '
            f'paint-order="stroke" stroke="#FFFFFF" stroke-width="3">{_esc(e["label"])}</text>'
        )
    return out + "</g>"


def _svg_node(n: dict[str, Any], s: dict[str, Any], titles: bool = True) -> str:
    dash = f' stroke-dasharray="{n["dash"]}"' if n["dash"] else ""
    title = f"<title>{_esc(_title(n))}</title>" if titles else ""
    out = (
        f'<g class="node{" red" if n["red"] else ""}" data-id="{_esc(n["id"])}" '
        f'data-path="{_esc(n["path"])}">{title}'
        f'<rect x="{_r(n["x"] - n["w"] / 2)}" y="{_r(n["y"] - n["h"] / 2)}" width="{n["w"]}" '
        f'height="{n["h"]}" rx="5" fill="{n["fc"]}" stroke="{n["ec"]}" '
        f'stroke-width="{n["lw"]}"{dash}/>'
    )
    top = n["y"] - (len(n["lines"]) - 1) * s["line_h"] / 2
    for k, (text, color, bold) in enumerate(n["lines"]):
        weight = ' font-weight="bold"' if bold else ""
        out += (
            f'<text x="{n["x"]}" y="{_r(top + k * s["line_h"])}" text-anchor="middle" '
            f'dominant-baseline="central" fill="{color}"{weight}>{_esc(text)}</text>'
        )
    return out + "</g>"


def _title(n: dict[str, Any]) -> str:
    lines = [f"{n['kind']} {n['label']}".strip()]
    if n["type"]:
        lines.append(n["type"] + (f" ({n['sharding']})" if n.get("sharding") else ""))
    if n["path"]:
        lines.append(n["path"])
    lines += [f"{p['code']}: {p['message']}" for p in n["problems"]]
    return "\n".join(lines)


def devices_svg(s: dict[str, Any]) -> str:
    """The device panel as one SVG (``""`` without a device mesh): devices on a ring or
    grid with peer arrows and multicast hubs, or past 64 devices a traffic matrix."""
    dv = s.get("devices")
    if not dv:
        return ""
    if dv["shape"] == "matrix":
        return _svg_matrix(dv)
    r, fs = dv["r"], dv["font"]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="devices" width="{dv["w"]}" '
        f'height="{dv["h"]}" viewBox="0 0 {dv["w"]} {dv["h"]}" '
        f'font-family="\'DejaVu Sans Mono\', monospace" font-size="{fs}">'
    ]
    for p in [*dv["peers"], *dv.get("signals", [])]:
        cls = f"{'signal' if p['signal'] else 'peer'}{' red' if p['red'] else ''}"
        dash = ' stroke-dasharray="6 4"' if p["signal"] else ""
        if "loop" in p:
            x, y, rr = p["loop"]
            parts.append(
                f'<circle class="{cls}" data-a="{p["a"]}" data-b="{p["b"]}" cx="{x}" cy="{y}" '
                f'r="{rr}" fill="none" stroke="{p["color"]}" stroke-width="1.6"/>'
            )
            continue
        pts = " ".join(f"{x},{y}" for x, y in p["head"])
        width = 2.2 if p["red"] else (1.4 if p["signal"] else 1.8)
        parts.append(
            f'<g class="{cls}" data-a="{p["a"]}" data-b="{p["b"]}"><path d="{p["d"]}" '
            f'fill="none" stroke="{p["color"]}" stroke-width="{width}"{dash}/>'
            f'<polygon points="{pts}" fill="{p["color"]}"/></g>'
        )
    for h in dv["hubs"]:
        cls = f"hub{' red' if h['red'] else ''}"
        members = ",".join(map(str, h["members"]))
        parts.append(f'<g class="{cls}" data-members="{members}" opacity="0.9">')
        for sp in h["spokes"]:
            x1, y1, x2, y2 = sp["line"]
            pts = " ".join(f"{x},{y}" for x, y in sp["head"])
            parts.append(
                f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{h["color"]}" '
                f'stroke-width="1.6"/><polygon points="{pts}" fill="{h["color"]}"/>'
            )
        x, y, k = h["x"], h["y"], 6.5
        parts.append(
            f'<polygon points="{x},{_r(y - k)} {_r(x + k)},{y} {x},{_r(y + k)} {_r(x - k)},{y}" '
            f'fill="{h["color"]}" stroke="#FFFFFF"/></g>'
        )
    for d in dv["devices"]:
        ec = RED if d["red"] else "#333333"
        parts.append(
            f'<g class="device{" red" if d["red"] else ""}" data-i="{d["i"]}">'
            f'<circle cx="{d["x"]}" cy="{d["y"]}" r="{r}" fill="#FFFFFF" stroke="{ec}" '
            f'stroke-width="1.5"/><text x="{d["x"]}" y="{d["y"]}" text-anchor="middle" '
            f'dominant-baseline="central" fill="{INK}">d{d["i"]}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _svg_matrix(dv: dict[str, Any]) -> str:
    bins, size = dv["bins"], 240.0
    cell = size / bins
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="devices matrix" width="{size + 40}" '
        f'height="{size + 40}" viewBox="-30 -4 {size + 40} {size + 40}" font-size="11" '
        f"font-family=\"'DejaVu Sans Mono', monospace\">"
        f'<rect x="0" y="0" width="{size}" height="{size}" fill="#FFFFFF" stroke="#999999"/>'
    ]
    for c in dv["cells"]:
        parts.append(
            f'<rect class="cell{" red" if c["red"] else ""}" x="{_r(c["j"] * cell)}" '
            f'y="{_r(c["i"] * cell)}" width="{_r(max(cell, 1))}" height="{_r(max(cell, 1))}" '
            f'fill="{c["color"]}"/>'
        )
    parts.append(
        f'<text x="{size / 2}" y="{size + 16}" text-anchor="middle" fill="{MUTED}">to device'
        f'</text><text x="-8" y="{size / 2}" text-anchor="middle" fill="{MUTED}" '
        f'transform="rotate(-90 -8 {size / 2})">from device</text></svg>'
    )
    return "".join(parts)


__all__ = ["devices_svg", "marks", "scene", "to_svg"]
