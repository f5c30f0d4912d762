"""GraphSVG: the aliasing graph in the browser, as SVG, fast enough to follow typing.

``GraphSVG().show(scene)`` sends a scene (``mpmd_lab.scene.scene(g)``) painted as SVG
strings; the browser side (``graph_view.js``, an anywidget module) only places them:
crisp at any zoom, drag to pan, Ctrl+wheel or the buttons to zoom, hover a box for its
kind, type, field path and problems, click it to select its field path (``selected``).
Only the parts that changed travel (``svg``, ``devices``, ``legend``, ``problems``).

``GraphSVG.of(scenario)`` is the one-liner for a notebook.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import anywidget
import traitlets as t

CSS = """
.mpl-gsvg { position: relative; font-family: 'DejaVu Sans Mono', monospace; font-size: 12px;
  color: #222; }
.mpl-gsvg-bar { display: flex; gap: 4px; align-items: center; flex-wrap: wrap; margin: 2px 0; }
.mpl-gsvg-bar button { font: inherit; padding: 0 8px; min-width: 28px; cursor: pointer;
  border: 1px solid #bbb; background: #f7f7f7; border-radius: 3px; }
.mpl-gsvg-hint { color: #777; margin-left: 6px; }
.mpl-gsvg-sel { color: #0B5394; margin-left: auto; }
.mpl-gsvg-row { display: flex; flex-wrap: wrap; gap: 12px; align-items: flex-start; }
.mpl-gsvg-view { flex: 1 1 560px; min-width: 320px; max-width: 100%; overflow: hidden; cursor: grab;
  border: 1px solid #e3e3e3; border-radius: 4px; background: #fff; touch-action: none; }
.mpl-gsvg-view svg { display: block; user-select: none; }
.mpl-gsvg-view g.node { cursor: pointer; }
.mpl-gsvg-view g.node:hover rect { stroke-width: 2.6px; }
.mpl-gsvg-view g.node.sel rect { stroke: #111 !important; stroke-width: 3.2px; }
.mpl-gsvg-dev { flex: 0 0 auto; }
.mpl-gsvg-dev-h { font-weight: bold; margin: 2px 0 4px; }
.mpl-gsvg-cap { margin: 1px 0; }
.mpl-gsvg-legend { display: flex; flex-wrap: wrap; gap: 2px 14px; margin: 6px 0 2px; }
.mpl-gsvg-legend span { display: inline-flex; align-items: center; gap: 5px; }
.mpl-gsvg-problems div { margin: 2px 0; overflow-wrap: anywhere; }
.mpl-gsvg-problems .fix { color: #2E7D32; margin-left: 2.5em; }
.mpl-gsvg-tip { position: absolute; z-index: 10; max-width: 320px; background: #fff;
  border: 1px solid #999; border-radius: 4px; padding: 4px 7px; pointer-events: none;
  box-shadow: 0 2px 6px rgba(0,0,0,.18); overflow-wrap: anywhere; }
.mpl-gsvg-tip-h { margin-bottom: 2px; }
.mpl-gsvg-tip-path { color: #0B5394; }
.mpl-gsvg-tip-err { color: #D62728; margin-top: 2px; }
.mpl-gsvg-tip-warn { color: #B8860B; margin-top: 2px; }
.mpl-gsvg-tip-hint { color: #777; margin-top: 3px; }
.mpl-gsvg.mpl-stale { opacity: 0.45; }
"""


def _esc(s: Any) -> str:
    return html.escape(str(s), quote=True)


def legend_html(s: dict[str, Any]) -> str:
    """The legend of a scene: one swatch per kind of mark the picture shows."""
    out = []
    for e in s["legend"]:
        if e["mark"] in ("node", "problem"):
            width = 2.5 if e["mark"] == "problem" else 1.2
            sw = (
                f'<rect x="1" y="2" width="20" height="10" rx="2" fill="{e["fc"]}" '
                f'stroke="{e["ec"]}" stroke-width="{width}"/>'
            )
        else:
            dash = f' stroke-dasharray="{e["dash"]}"' if e["dash"] else ""
            sw = (
                f'<line x1="1" y1="7" x2="21" y2="7" stroke="{e["color"]}" stroke-width="2"{dash}/>'
            )
            if e["mark"] == "multicast":
                sw += f'<polygon points="11,3 15,7 11,11 7,7" fill="{e["color"]}"/>'
        out.append(
            f'<span class="mpl-gsvg-key-{_esc(e["key"])}"><svg width="22" height="14">{sw}</svg>'
            f"{_esc(e['name'])}</span>"
        )
    return "".join(out)


def problems_html(s: dict[str, Any], fixes: bool = True) -> str:
    """Every problem of a scene in full, wrapped (never cut), errors first."""
    out = []
    for p in s["problems"]:
        color = "#D62728" if p["error"] else "#B8860B"
        mark = "x" if p["error"] else "!"
        out.append(
            f'<div class="mpl-gsvg-p-{_esc(p["code"])}" style="color:{color}">{mark} '
            f"<b>{_esc(p['code'])}</b> {_esc(p['path'] or 'scenario')}: {_esc(p['message'])}"
            "</div>"
        )
        if fixes and p["fix"]:
            out.append(f'<div class="fix">fix: {_esc(p["fix"])}</div>')
    if s.get("note"):
        out.append(f'<div style="color:#555">({_esc(s["note"])})</div>')
    return "".join(out)


def devices_html(s: dict[str, Any]) -> str:
    """The device panel: title, the picture, one caption line per transform."""
    from mpmd_lab import scene as S

    dv = s.get("devices")
    if not dv:
        return ""
    caption = "".join(
        f'<div class="mpl-gsvg-cap" style="color:{c["color"]}">{_esc(c["text"])}</div>'
        for c in dv["caption"]
    )
    if not dv.get("peers") and not dv.get("hubs") and not dv.get("cells"):
        caption += '<div class="mpl-gsvg-cap" style="color:#555">no peer or multicast traffic</div>'
    if dv.get("truncated"):
        caption += '<div class="mpl-gsvg-cap" style="color:#555">(device edges capped)</div>'
    return f'<div class="mpl-gsvg-dev-h">{_esc(dv["title"])}</div>{S.devices_svg(s)}{caption}'


def hover_info(s: dict[str, Any]) -> dict[str, Any]:
    """Per node (``n:ID``) and per edge with problems (``e:INDEX``) what hovering shows."""
    info: dict[str, Any] = {}
    for n in s["nodes"]:
        info[f"n:{n['id']}"] = {k: n[k] for k in ("kind", "label", "type", "path", "problems")}
    for e in s["edges"]:
        if e["problems"]:
            info[f"e:{e['id']}"] = {
                "kind": e["kind"],
                "label": f"{e['u']} → {e['v']}",
                "type": "",
                "path": "",
                "problems": e["problems"],
            }
    return info


class GraphSVG(anywidget.AnyWidget):
    """The aliasing graph as SVG in the browser (see the module docstring)."""

    _esm = Path(__file__).with_name("graph_view.js")
    _css = CSS

    svg = t.Unicode("", help="the graph, one SVG document (mpmd_lab.scene.to_svg)").tag(sync=True)
    devices = t.Unicode("", help="the device panel as HTML + SVG ('' without a mesh)").tag(
        sync=True
    )
    legend = t.Unicode("", help="the legend as HTML").tag(sync=True)
    problems = t.Unicode("", help="every problem in full, as HTML").tag(sync=True)
    info = t.Dict(help="hover text per node 'n:ID' and per edge 'e:INDEX'").tag(sync=True)
    seq = t.Int(0, help="bumped with each new picture; the browser repaints on it").tag(sync=True)
    painted_seq = t.Int(0, help="set by the browser: the last seq it painted").tag(sync=True)
    render_ms = t.Float(0.0, help="set by the browser: ms to paint the last picture").tag(sync=True)
    selected = t.Unicode("", help="field path of the node clicked last ('' none)").tag(sync=True)
    selected_id = t.Unicode("", help="graph node id of the node clicked last").tag(sync=True)
    readable_px = t.Float(11.0, help="the first view never shows text smaller than this").tag(
        sync=True
    )
    max_height = t.Int(560, help="tallest the picture gets before it pans (px)").tag(sync=True)
    stale = t.Bool(False, help="the picture shows an older scenario (greyed)").tag(sync=True)
    focus = t.Unicode(
        "", help="CSS class of the editor a click opened: the browser scrolls it into view"
    ).tag(sync=True)
    subject = t.Unicode(
        "",
        help="what the picture is of: another one (an open, a fix renaming it) is shown "
        "from its first view again, not where the user had panned or zoomed the last one",
    ).tag(sync=True)

    def __init__(self, show_problems: bool = True, **kwargs: Any):
        super().__init__(**kwargs)
        self.show_problems = show_problems
        self.scene: dict[str, Any] | None = None

    def show(self, s: dict[str, Any], subject: str | None = None) -> None:
        """Show scene ``s`` (of ``subject``, None: the same as before): paint it to
        strings, send what changed in one message."""
        from mpmd_lab import scene as S

        svg = S.to_svg(s, titles=False)  # the browser side shows its own tooltips
        with self.hold_sync():
            self.svg = svg
            self.devices = devices_html(s)
            self.legend = legend_html(s)
            self.problems = problems_html(s) if self.show_problems else ""
            self.info = hover_info(s)
            if subject is not None:
                self.subject = subject
            ids = {n["id"] for n in s["nodes"]}
            if self.selected_id and self.selected_id not in ids:
                self.selected_id, self.selected = "", ""
            self.seq += 1
        self.scene = s

    @classmethod
    def of(cls, scenario: Any, diagnostics: list[Any] | None = None, **kwargs: Any) -> GraphSVG:
        """The widget for a scenario (a file, gallery name, dict or ``Scenario``)."""
        from mpmd_lab import graph, scene

        view = cls(**kwargs)
        view.show(scene.scene(graph.build_graph(scenario, diagnostics=diagnostics)))
        return view
