"""Lab: the editors, the problems, the graph and the run panel over one scenario.

``Lab()`` starts blank, ``Lab("ring-shift")`` opens a gallery scenario, ``Lab(path)`` a
file. Load, save, undo and redo in the toolbar; everything else is in the views.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import ipywidgets as w
from mpmd_lab import gallery
from mpmd_lab.session import Session
from mpmd_lab.widgets import common as c
from mpmd_lab.widgets.call_editor import CallEditor
from mpmd_lab.widgets.mesh_editor import MeshEditor
from mpmd_lab.widgets.problems import GraphView, ProblemsView
from mpmd_lab.widgets.run_panel import RunPanel
from mpmd_lab.widgets.transform_editor import TransformStackEditor

TABS = ("Call", "Meshes", "Views")


class Lab(w.VBox):
    """The whole mpmd-lab UI over one scenario (``self.state``)."""

    def __init__(self, source: Any = None, background: bool | None = None, graph: bool = True):
        super().__init__()
        self.add_class("mpl-lab")
        self.state = state = Session(source)
        self.transforms = TransformStackEditor(state)
        self.call = CallEditor(state, on_edit_view=self.edit_view)
        self.meshes = MeshEditor(state)
        self.runner = RunPanel(state, background=background)
        self.problems = ProblemsView(state, on_backend=self.runner.use_backend)
        self.graph = GraphView(state, auto=graph, deferred=self.runner.background)
        self._focused: w.Widget | None = None  # the editor a graph click brought into view
        self._focus_class, self._focus_count = "", 0
        if self.graph.view is not None:  # a click on a box opens its editor
            self.graph.view.observe(self._graph_selected, names="selected")
        self.tabs = w.Tab(children=[self.call, self.meshes, self.transforms])
        for i, title in enumerate(TABS):
            self.tabs.set_title(i, title)
        self.tabs.add_class("mpl-tabs")
        self.transforms.show(False)  # drawn when its tab is
        self.tabs.observe(self._tab_picked, names="selected_index")
        self._build_toolbar()
        left = w.VBox([self.tabs], layout=w.Layout(width="58%", min_width="420px"))
        right = w.VBox(
            [self.problems, self.runner],
            layout=w.Layout(width="42%", min_width="320px", padding="0 0 0 10px"),
        )
        self.children = [
            c.style(),
            self.toolbar,
            self.description,
            w.HBox([left, right], layout=w.Layout(flex_flow="row wrap", width="100%")),
            self.graph,
        ]
        state.subscribe(self._on_change)
        state.subscribe_busy(self._on_busy)
        self._sync()

    # ------------------------------------------------------------ toolbar

    def _build_toolbar(self) -> None:
        st = self.state
        self.title = w.HTML()
        self.title.add_class("mpl-titlebar")
        self.gallery = w.Dropdown(
            options=[("open from gallery…", "(gallery)"), *((n, n) for n in gallery.names())],
            value="(gallery)",
            layout=w.Layout(width="190px"),
        )
        self.gallery.add_class("mpl-gallery")
        self.gallery.observe(self._open_gallery, names="value")
        self.path = c.text(str(st.path or ""), "200px", "path/to/scenario.json")
        self.path.add_class("mpl-path")
        self.load_button = c.button("Load", self.load, "load the file named beside")
        self.save_button = c.button("Save", self.save, "save to the file named beside")
        self.replace_button = c.button(
            "Replace it",
            self.confirm_replace,
            "replace the file named beside with this scenario",
            css="mpl-replace",
        )
        self.replace_button.layout = w.Layout(width="100px", display="none")
        self._replace_target: str | None = None
        #: a Save pressed while the scenario was changing: (path, overwrite), done after
        self._queued_save: tuple[str | Path | None, bool] | None = None
        self.undo_button = c.button("↶ Undo", self.undo, "undo the last change", css="mpl-undo")
        self.redo_button = c.button("↷ Redo", self.redo, "redo", css="mpl-redo")
        for b in (self.load_button, self.save_button, self.undo_button, self.redo_button):
            b.layout = w.Layout(width="80px")
        self.message = w.HTML()
        self.message.add_class("mpl-message")
        self.busy = w.HTML(layout=w.Layout(display="none"))
        self.busy.add_class("mpl-busy-line")
        self.description = w.HTML()
        self.toolbar = w.VBox(
            [
                self.title,
                w.HBox(
                    [
                        self.gallery,
                        self.path,
                        self.load_button,
                        self.save_button,
                        self.replace_button,
                        self.undo_button,
                        self.redo_button,
                        self.busy,
                    ],
                    layout=w.Layout(align_items="center", flex_flow="row wrap"),
                ),
                self.message,
            ]
        )

    def _on_change(self, st: Session, why: str) -> None:
        if why.startswith("loaded") or why == "saved":  # the box shows where Save goes
            self.path.value = str(st.path or "")
            self._ask_replace(None)
        self._sync()

    def _on_busy(self, st: Session) -> None:
        """A change under way: say so, and hold Load, Save and the gallery until the
        scenario on screen is the session's (the run panel holds Run and Export)."""
        for control in (self.load_button, self.save_button, self.replace_button, self.gallery):
            control.disabled = bool(st.busy)
        if st.busy:
            self.busy.value = f"<span class='mpl-busy'>⏳ {c.esc(st.busy)}…</span>"
            self.busy.layout.display = None
            return
        self.busy.value = ""
        self.busy.layout.display = "none"
        queued, self._queued_save = self._queued_save, None
        if queued is not None:  # a Save pressed during the change: of what is now shown
            target, overwrite = queued
            if overwrite:
                self._say(self.state.save(target, overwrite=True))
            else:
                self.save(target)

    def _sync(self) -> None:
        st = self.state
        errors = [d for d in st.diagnostics if d.is_error]
        if st.valid:
            verdict = f"<span style='color:#2e7d32'>✔ {st.verdict}</span>"
        elif any(d.jax is not None for d in errors):
            verdict = "<span style='color:#b00020'>✘ JAX would reject this</span>"
        else:  # races, deadlocks, out-of-bounds: JAX raises nothing, the result is wrong
            verdict = (
                f"<span style='color:#b00020'>✘ {len(errors)} problem(s) JAX does not report</span>"
            )
        if st.scenario.not_imported:  # before any other verdict: not the whole kernel
            rejected = "JAX would reject this · " if any(d.jax is not None for d in errors) else ""
            verdict = (
                f"<span style='color:#b00020'>✘ {rejected}partial import: "
                f"{len(st.scenario.not_imported)} construct(s) not imported</span>"
            )
        if st.empty and not st.diagnostics:
            verdict = "<span class='mpl-hint'>○ empty: nothing to check yet</span>"
        if st.check_error:
            verdict = "<span class='mpl-hint'>(not validated)</span>"
        where = (
            f"<span class='mpl-hint'>file: {c.esc(c.clip_path(st.path))}</span>"
            if st.path
            else "<span class='mpl-hint'>no file yet (type a path, then Save)</span>"
        )
        unsaved = " <span class='mpl-unsaved' title='changes not saved'>● unsaved</span>"
        self.title.value = (
            f"<span class='mpl-title'>mpmd-lab · {c.esc(st.scenario.name)}</span> {verdict}"
            f"{unsaved if st.dirty else ''} &nbsp;{where}"
        )
        empty = not st.scenario.buffers and not st.scenario.call.outputs
        start = (
            "<div class='mpl-note'>Start here: <b>+ buffer</b>, <b>+ output</b>, pass the buffer "
            "with <b>+ argument</b>, then add a statement to the body (Call tab); or open a "
            "scenario from the gallery.</div>"
            if empty
            else ""
        )
        about = ""
        if st.scenario.description:
            about = f"<div class='mpl-hint mpl-about'>{c.esc(st.scenario.description)}</div>"
            if st.changed_since_opened:  # written for what was opened, not for the edits
                about = (
                    "<div class='mpl-hint mpl-about mpl-about-stale'><i>As opened (changed "
                    f"since, see Problems for now):</i> {c.esc(st.scenario.description)}</div>"
                )
        self.description.value = start + about
        self.undo_button.disabled = not st.can_undo
        self.redo_button.disabled = not st.can_redo
        checked = f" · checked in {st.check_ms:.0f} ms"
        self.message.value = (
            c.problems_html([("", st.message)])
            if st.message.startswith("not set:")  # a typed value refused (``refuse``)
            else f"<span class='mpl-hint'>{c.esc(st.message)}{checked}</span>"
            if st.message
            else ""
        )

    def _say(self, result: Any) -> None:
        if not result.ok:
            self.message.value = c.problems_html(result.problems)

    # ------------------------------------------------------------ actions

    def load(self, source: Any = None) -> None:
        """Load ``source`` (or the path in the toolbar): a file, gallery name or JSON."""
        source = source or self.path.value.strip()
        if not source:
            self.message.value = c.problems_html([("", "type a file path or pick a gallery one")])
            return
        self._say(self.state.load(source))

    def save(self, path: str | Path | None = None) -> None:
        """Save to ``path`` (or the path in the toolbar). A file this session did not open
        or create, or its own file changed by another program since it was loaded, is
        replaced only after "Replace it"."""
        target = path or self.path.value.strip() or self.state.path or None
        if self.state.busy:  # the scenario on screen is not yet the session's: after it
            self._queued_save = (target, False)
            self.message.value = "<span class='mpl-hint'>Save: once the change is done…</span>"
            return
        result = self.state.save(target)
        self._say(result)
        exists = not result.ok and any("confirm to replace" in m for _, m in result.problems)
        self._ask_replace(str(target) if exists and target else None)

    def confirm_replace(self) -> None:
        """The user confirmed: replace the file named when Save asked."""
        target = self._replace_target
        self._ask_replace(None)
        if target and self.state.busy:
            self._queued_save = (target, True)
        elif target:
            self._say(self.state.save(target, overwrite=True))

    def _ask_replace(self, target: str | None) -> None:
        self._replace_target = target
        self.replace_button.layout.display = None if target else "none"

    def undo(self) -> None:
        self.state.undo()

    def redo(self) -> None:
        self.state.redo()

    def _open_gallery(self, change: dict[str, Any]) -> None:
        if change["new"] and change["new"] != "(gallery)":
            self._say(self.state.load(change["new"]))
            self.gallery.value = "(gallery)"

    def _tab_picked(self, change: dict[str, Any]) -> None:
        self.transforms.show(change["new"] == TABS.index("Views"))

    def _graph_selected(self, change: dict[str, Any]) -> None:
        """A click on a box opens its editor and brings it into view: a view's stack
        in the Views tab, a statement's row (unfolded) in the Call tab."""
        path = change["new"] or ""
        for _label, target in self.transforms.targets():
            if path == target or path.startswith(target + "."):
                self.edit_view(target)
                self._bring_into_view(self.transforms)
                return
        program = re.match(r"call\.programs\[(\d+)\]\.body\[", path)
        if program is None:
            return
        self.state.select_program(int(program.group(1)))
        self.tabs.selected_index = TABS.index("Call")
        stmt = self.call.expand(path)  # its editors shown, the loops around it opened
        row = self.call.row_of(stmt) if stmt else None
        if row is not None:
            self._bring_into_view(row)

    def _bring_into_view(self, editor: w.Widget) -> None:
        """Mark ``editor`` (a class of its own) and ask the graph's browser side to
        scroll it into view."""
        view = self.graph.view
        if view is None:
            return
        if self._focused is not None:
            self._focused.remove_class(self._focus_class)
        self._focus_count += 1
        self._focus_class = f"mpl-focus-{self._focus_count}"
        editor.add_class(self._focus_class)
        self._focused = editor
        view.focus = self._focus_class

    def edit_view(self, path: str) -> None:
        """Show the transform stack at ``path`` in the Views tab."""
        self.transforms.select(path)
        self.tabs.selected_index = TABS.index("Views")
