"""GraphSVG's browser side on a plain page, without Jupyter: for screenshots, timing
and tests in a real browser (Playwright + Chromium).

``open_page(page)`` loads ``graph_view.js`` into an empty page with a stand-in for the
anywidget model (get/set/on/off/save_changes, as anywidget's is); ``push(page, view)``
sends a ``GraphSVG``'s synced state to it the way the comm would (every trait set,
then the change events) and waits until the browser has painted it. ``render_ms`` is
the browser's own time from receiving the state to the next frame.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

JS = Path(__file__).with_name("graph_view.js")
PAGE_WIDTH = 1000  # a JupyterLab notebook column on a 1280 px wide screen, about

_BOOT = """
async ([src, css]) => {
  const style = document.createElement("style");
  style.textContent = css;
  document.head.appendChild(style);
  const url = URL.createObjectURL(new Blob([src], { type: "text/javascript" }));
  const mod = await import(url);
  const state = {}, on = {};
  const fire = (k) => (on["change:" + k] || []).slice().forEach((f) => f());
  const model = {
    get: (k) => state[k],
    set: (k, v) => { state[k] = v; fire(k); },
    save_changes: () => { window.__saves = (window.__saves || 0) + 1; },
    on: (ev, f) => { (on[ev] = on[ev] || []).push(f); },
    off: (ev, f) => { on[ev] = (on[ev] || []).filter((g) => g !== f); },
  };
  window.__model = model;
  window.__state = state;
  window.__push = (next) => new Promise((resolve) => {
    const want = next.seq;
    const done = () => {
      if (state.painted_seq === want) {
        model.off("change:painted_seq", done);
        resolve(state.render_ms);
      }
    };
    model.on("change:painted_seq", done);
    const first = !window.__rendered;
    Object.assign(state, next);
    if (first) {
      window.__rendered = true;
      const el = document.getElementById("view");
      mod.default.render({ model, el });
    } else {
      for (const k of Object.keys(next)) fire(k);
    }
  });
}
"""


def synced_state(view: Any) -> dict[str, Any]:
    """The traits a ``GraphSVG`` syncs to the browser, as the comm would send them."""
    from mpmd_lab.widgets.graph_view import GraphSVG

    names = [n for n in GraphSVG.class_own_traits(sync=True) if not n.startswith("_")]
    return json.loads(json.dumps(view.get_state(names)))


def open_page(page: Any, width: int = PAGE_WIDTH) -> None:
    """Make ``page`` an empty page with GraphSVG's browser side loaded."""
    from mpmd_lab.widgets.graph_view import CSS

    page.set_viewport_size({"width": width, "height": 900})
    page.set_content(
        "<!doctype html><html><body style='margin:8px;background:#fff'>"
        f"<div id='view' style='width:{width - 16}px'></div></body></html>"
    )
    page.evaluate(_BOOT, [JS.read_text(), CSS])


def push(page: Any, view: Any) -> float:
    """Send ``view``'s state to the page; wait for the paint; the browser's ms."""
    return float(page.evaluate("(s) => window.__push(s)", synced_state(view)))


def painted(page: Any) -> dict[str, Any]:
    """What the page shows: node ids with their problem mark, edges, problem codes."""
    return page.evaluate(
        """() => {
      const v = document.querySelector('#view .mpl-gsvg-view');
      const nodes = {};
      for (const g of v.querySelectorAll('g.node')) {
        nodes[g.dataset.id] = { red: g.classList.contains('red'),
          lines: [...g.querySelectorAll('text')].map((t) => t.textContent),
          path: g.dataset.path };
      }
      const edges = [...v.querySelectorAll('g.edge')].map((g) => ({ id: +g.dataset.id,
        kind: g.dataset.kind, red: g.classList.contains('red') }));
      const rows = document.querySelectorAll('#view .mpl-gsvg-problems div[class^=mpl-gsvg-p-]');
      const problems = [...rows].map((d) => d.className.slice('mpl-gsvg-p-'.length));
      const k = v.querySelector('svg').getScreenCTM().a;  // screen px per scene unit
      const px = [...v.querySelectorAll('g.node text')]
        .map((t) => parseFloat(getComputedStyle(t).fontSize) * k);
      return { nodes, edges, problems, nodeTextPx: Math.min(...px) };
    }"""
    )
