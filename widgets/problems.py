"""ProblemsView: the static check's diagnostics as explanation cards, each fix one click
away; GraphView: the aliasing graph (SVG in the browser, or ``mpmd_lab.draw``'s PNG),
redrawn on every change."""

from __future__ import annotations

import threading
import time
from functools import partial
from typing import Any

import ipywidgets as w
from mpmd_lab.diagnostics import Diagnostic
from mpmd_lab.importer.frames import display
from mpmd_lab.session import Session
from mpmd_lab.widgets import common as c
from mpmd_lab.widgets import services
from mpmd_lab.widgets.timeline_view import WitnessTimeline

#: a fix pressed on problems that are no longer the scenario's (it changed meanwhile)
STALE = (
    "not applied: the scenario changed since those problems were shown; "
    "the problems shown now are its own"
)


class ProblemsView(w.VBox):
    """Every diagnostic of the current scenario, in the order JAX would raise them; that
    JAX's CPU interpreter cannot run the call is said once, as a note with a switch to
    ``simulate`` (``on_backend(name)``, the Lab's run panel)."""

    def __init__(self, state: Session, on_backend: Any = None):
        super().__init__()
        self.state = state
        self.on_backend = on_backend
        self.add_class("mpl-problems")
        self.error = w.HTML("")
        self.section = c.Section(state, self._key, self._render)
        self.children = [self.section, self.error]
        state.subscribe(lambda st, why: self.refresh())
        state.subscribe_busy(self._on_busy)

    def _on_busy(self, state: Session) -> None:
        """While the scenario changes, its fixes wait (disabled): the cards shown are of
        the scenario before the change."""
        for b in self.fix_buttons(all_fixes=True):
            b.disabled = bool(state.busy)

    def _key(self):
        st = self.state
        return (st.check_error, [d.model_dump_json() for d in st.diagnostics])

    def refresh(self) -> None:
        self.section.refresh()

    def fix_buttons(self, all_fixes: bool = False) -> list[w.Button]:
        """The "Apply fix" buttons shown now: by diagnostic, each one's fixes best first
        (``all_fixes``: "Fix all" too)."""
        from mpmd_lab.widgets.testing import walk

        css = ("mpl-fix", "mpl-fix-all") if all_fixes else ("mpl-fix",)
        return [
            x
            for x in walk(self.section)
            if isinstance(x, w.Button) and any(k in x._dom_classes for k in css)
        ]

    def apply(self, d: Diagnostic, fix: Any = None) -> None:
        """Apply one of ``d``'s fixes (its best by default) as one undoable step; a card
        of a scenario since replaced (pressed while it changed) applies nothing."""
        if self.state.busy or d not in self.state.diagnostics:
            self.error.value = c.problems_html([("", STALE)])
            return
        result = self.state.apply_fix(fix if fix is not None else d.fix)
        self.error.value = "" if result.ok else c.problems_html(result.problems)

    def fix_all(self, shown: Any = None) -> None:
        """Apply the best fixes until the scenario is valid (``Session.fix_all``, one
        undoable step) and show each step: the error, what it changed, what it left.
        ``shown``: the problems on screen when pressed (``_key``); other problems now
        (the scenario changed meanwhile) apply nothing."""
        if self.state.busy or (shown is not None and shown != self._key()):
            self.error.value = c.problems_html([("", STALE)])
            return
        run = self.state.fix_all()
        steps = "".join(f"<li>{c.esc(st.describe())}</li>" for st in run.steps)
        self.error.value = (
            f"<div class='mpl-note mpl-fix-all-steps'><b>Fix all</b>: {c.esc(run.stopped)}"
            f"<ol>{steps}</ol></div>"
        )

    def _render(self, sec: c.Section) -> list[w.Widget]:
        st = self.state
        if st.check_error:
            return [
                w.HTML(
                    f"<div class='mpl-note'>Validation unavailable: {c.esc(st.check_error)}</div>"
                )
            ]
        if st.empty and not st.diagnostics:
            return [
                w.HTML(
                    "<div class='mpl-note'>Nothing to check yet: the call has no buffers, "
                    "outputs or statements.</div>"
                )
            ]
        problems = services.problems_of(st)
        notes = services.interpreter_notes(st)
        rows: list[w.Widget] = []
        imported = getattr(st, "imported", None)
        left_out = [
            f"{n.what}" + (f" <code>({c.esc(display(n.source))})</code>" if n.source else "")
            for n in st.scenario.not_imported
        ]
        if not left_out and imported is not None and imported.unsupported:
            left_out = list(imported.unsupported)
        if left_out:  # the first thing shown: this is not the whole kernel
            items = "".join(f"<li>{u if '<code>' in u else c.esc(u)}</li>" for u in left_out)
            rows.append(
                w.HTML(
                    "<div class='mpl-note mpl-unsupported'><b>Partial import: not imported</b> "
                    "(the scenario leaves these out of your kernel, so nothing here is said "
                    f"valid, and simulate and run refuse it):<ul>{items}</ul></div>"
                )
            )
        if not problems:
            rows.append(
                w.HTML(
                    f"<div class='mpl-ok'>✔ <b>{c.esc(st.scenario.name)}</b>: no problems "
                    f"found. JAX should accept this call.</div>"
                )
            )
        else:
            errors = sum(d.is_error for d in problems)
            warns = len(problems) - errors
            head: list[w.Widget] = [
                w.HTML(
                    f"<div class='mpl-h'>{errors} error(s), {warns} warning(s) "
                    f"<span class='mpl-hint'>found before running anything</span></div>"
                )
            ]
            if any(d.is_error and d.fix is not None for d in problems):
                b = c.button(
                    "Fix all",
                    partial(self.fix_all, self._key()),
                    "apply the best fix and check again, until valid (one undo step)",
                    css="mpl-fix-all",
                )
                b.layout = c.lay(width="90px", flex="0 0 auto")
                head.append(b)
            rows.append(w.HBox(head, layout=c.lay(align_items="center", flex_flow="row wrap")))
        for d in problems:
            rows.append(sec.memo(d.model_dump_json(), partial(self._card, d)))
        if notes and not any(d.is_error for d in problems):  # the problems come first
            key = ("note", notes[0].model_dump_json())
            rows.append(sec.memo(key, lambda: self._note(notes[0])))
        return rows

    def _note(self, d: Diagnostic) -> w.Widget:
        """The interpreter's limit, said once: what cannot run here, and a switch."""
        text = w.HTML(
            f"<div class='mpl-interp-note'><span class='mpl-i'>i</span>{c.esc(d.message)}. "
            "<span class='mpl-hint'>A limit of this machine's CPU interpreter, not of the "
            "kernel: it traces and lowers for the GPU here, and a GPU runs it. "
            "<b>auto</b> runs simulate.</span></div>"
        )
        kids: list[w.Widget] = [text]
        if self.on_backend is not None:
            kids.append(c.use_simulate_button(lambda: self.on_backend("simulate")))
        box = w.HBox(kids, layout=c.lay(align_items="center", flex_flow="row wrap"))
        box.add_class("mpl-interp")
        return box

    def _card(self, d: Diagnostic) -> w.Widget:
        fixes = list(d.fixes) or ([d.fix] if d.fix is not None else [])
        kids: list[w.Widget] = [w.HTML(c.diagnostic_html(d, with_fix=False))]
        if d.source:
            kids.append(w.HTML(source_html(d.source)))
        if d.witness is not None:  # a race's or deadlock's schedule, drawn on demand
            kids.append(WitnessTimeline(d.witness))
        for i, fix in enumerate(fixes):
            best = i == 0 and len(fixes) > 1
            kids.append(c.fix_row(fix, i, partial(self.apply, d, fix), best))
        box = w.VBox(kids)
        box.add_class(f"mpl-diag-{d.code}")
        return box


def source_html(where: str, context: int = 2) -> str:
    """The user's line ``FILE:LINE`` with a few lines around it, the line marked."""
    import linecache

    file, _, line = where.rpartition(":")
    try:
        n = int(line)
    except ValueError:
        return ""
    rows = []
    for k in range(max(1, n - context), n + context + 1):
        text = linecache.getline(file, k)
        if not text and k > n:
            break
        mark = "▶" if k == n else " "
        style = " style='background:#fff3c4;font-weight:600'" if k == n else ""
        rows.append(f"<span{style}>{mark} {k:>4} │ {c.esc(text.rstrip())}</span>")
    code = "\n".join(rows)
    return (
        f"<div class='mpl-source' data-source='{c.esc(where)}'><span class='mpl-hint'>your line: "
        f"<code>{c.esc(display(where))}</code></span><pre style='margin:2px 0;font-size:12px'>"
        f"{code}</pre></div>"
    )


class GraphView(w.VBox):
    """The aliasing graph of the current scenario, redrawn after each change.

    ``fast=True`` (the default): SVG in the browser (``GraphSVG``) from the graph model
    and the problems the state already has, with a cached layout: tens of milliseconds
    per edit, crisp at any zoom, hover for details, click to select a node's field path
    (``selected``). ``fast=False``: the matplotlib PNG (``mpmd_lab.draw``), as files are.

    Inside a kernel (``deferred``) the redraw runs on a timer thread just after the edit,
    so the problems and badges (the feedback) never wait for the picture.
    """

    def __init__(
        self,
        state: Session,
        auto: bool = True,
        deferred: bool = False,
        delay: float = 0.05,
        fast: bool = True,
    ):
        super().__init__()
        self.state = state
        self.deferred, self.delay = deferred, delay
        self.fast = fast
        self.add_class("mpl-graph")
        self.image = w.Image(format="png", layout=w.Layout(max_width="860px", display="none"))
        self.image.add_class("mpl-graph-img")
        self.view = None
        if fast:
            from mpmd_lab.layout import LayoutCache
            from mpmd_lab.widgets.graph_view import GraphSVG

            self.cache = LayoutCache()
            self.view = GraphSVG(layout=w.Layout(display="none"))
            self.view.add_class("mpl-graph-svg")
        self.note = w.HTML("")
        self.auto = w.Checkbox(value=auto, description="redraw on every change", indent=False)
        self.draw_ms = 0.0
        self.draws = 0
        self._drawn: str | None = None
        self._drawn_diags: list[str] | None = None
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self.children = [
            w.HTML(
                "<div class='mpl-h'>Aliasing graph <span class='mpl-hint'>buffers → params "
                "→ views → programs/devices</span></div>"
            ),
            self.picture,
            self.note,
            self.auto,
        ]
        self.auto.observe(lambda ch: self.schedule() if ch["new"] else None, names="value")
        # (a refused value changed nothing to draw)
        state.subscribe(
            lambda st, why: self.schedule() if self.auto.value and why != "refused" else None
        )
        if auto:
            self.schedule()
        else:
            self.note.value = "<div class='mpl-note'>tick the box to draw the graph</div>"

    @property
    def picture(self) -> w.DOMWidget:
        """The widget that shows the graph: the SVG view, or the PNG image."""
        return self.view if self.view is not None else self.image

    @property
    def selected(self) -> str:
        """The field path of the node clicked last in the SVG view ("" for none)."""
        return self.view.selected if self.view is not None else ""

    def _stale(self, on: bool) -> None:
        if on:
            self.picture.add_class("mpl-stale")
        else:
            self.picture.remove_class("mpl-stale")

    def schedule(self) -> None:
        """Redraw now, or (deferred) shortly after the last of a burst of edits."""
        if not self.deferred:
            self.redraw()
            return
        if self._timer is not None:
            self._timer.cancel()
        self._stale(True)  # the picture shows an older scenario until redrawn
        self.note.value = "<div class='mpl-hint'>updating the graph…</div>"
        self._timer = threading.Timer(self.delay, self.redraw)
        self._timer.name = "mpmd-lab-redraw"
        self._timer.daemon = True
        self._timer.start()

    def _show(self) -> None:
        """Put the picture of the session's version on screen (or ``services.Unavailable``).

        The fast view draws the session's own graph model (its analysis: no second check)."""
        if self.view is None:
            self.image.value = services.aliasing_png(self.state)
            return
        try:
            from mpmd_lab import graph, scene
        except ImportError as e:
            raise services.Unavailable(f"the graph view is not available ({e})") from None
        st = self.state
        try:
            shown = [] if st.check_error else services.problems_of(st)  # the notes said once
            g = graph.build_graph(st.scenario, diagnostics=shown, analysis=st.analysis)
            subject = f"{st.opened_version}:{st.scenario.name}"  # a new one: its first view
            self.view.show(scene.scene(g, cache=self.cache), subject=subject)
        except Exception as e:  # a drawing bug must not take the Lab down
            msg = f"drawing the graph failed: {type(e).__name__}: {e}"
            raise services.Unavailable(msg) from None

    def redraw(self, force: bool = False) -> None:
        with self._lock:
            scenario = self.state.scenario
            key = scenario.model_dump_json()
            diags = [d.model_dump_json() for d in self.state.diagnostics]
            if key == self._drawn and diags == self._drawn_diags and not force:
                self._stale(False)
                self.note.value = ""
                return
            t0 = time.perf_counter()
            try:
                self._show()
            except services.Unavailable as e:
                self.note.value = f"<div class='mpl-note'>{c.esc(e)}</div>"
                self.picture.layout.display = "none"
                return
            self._drawn, self._drawn_diags = key, diags
            self.picture.layout.display = None
            if self.state.scenario.model_dump_json() == key:
                self._stale(False)
                self.note.value = ""
            else:  # edited while drawing: a newer redraw is already scheduled
                self._stale(True)
            self.draws += 1
            self.draw_ms = (time.perf_counter() - t0) * 1000
