"""TransformStackEditor: a view's transform stack, step by step.

Pick a view (a ``let`` of the selected program, or an argument / scratch with
transforms), pick its base ref, add transforms from the palette, edit their fields,
reorder, delete. After every step the shape and dtype (``mpmd_lab.shapes``); the step a
diagnostic points at is highlighted with its explanation.
"""

from __future__ import annotations

import json
from typing import Any

import ipywidgets as w
from mpmd_lab.dtypes import DTYPES
from mpmd_lab.ops import BY_OP, TRANSFORM_OPS, Let
from mpmd_lab.ops.peers import DeviceId
from mpmd_lab.session import Session
from mpmd_lab.widgets import common as c
from mpmd_lab.widgets import services
from mpmd_lab.widgets.call_editor import _dkey, _head, _key, _move, _remove, _row, ref_names, unique

PALETTE = TRANSFORM_OPS
#: each transform's help: its one line, then its fields' (from the op class)
HELP = {
    op: BY_OP[op].HELP + "; " + "; ".join(f"{k}: {v}" for k, v in BY_OP[op].field_help().items())
    for op in TRANSFORM_OPS
}


def default_transform(state: Session, op: str) -> dict[str, Any]:
    """A transform of kind ``op`` with values that fit the scenario where possible."""
    return BY_OP[op].example(state.fit())


class TransformStackEditor(w.VBox):
    """Edit one transform stack; ``target`` is the field path of what holds it."""

    def __init__(self, state: Session):
        super().__init__()
        self.state = state
        self.target: str | None = None
        self.add_class("mpl-transform-editor")
        #: whether it is on screen (the Lab's Views tab): hidden, it is brought up to
        #: date when shown, not at every change (opening a big scenario builds less)
        self.shown = True
        self.section = c.Section(state, self._key, self._render)
        self.children = [self.section]
        state.subscribe(lambda st, why: self.refresh())

    def refresh(self) -> None:
        if self.shown:
            self.section.refresh()

    def show(self, shown: bool) -> None:
        """Say whether it is on screen (shown: brought up to date now)."""
        self.shown = shown
        self.refresh()

    def _key(self) -> str:
        self._fix_target()
        return _key(self.state, "call", "device_mesh") + str(self.target)

    # ------------------------------------------------------------ targets

    def targets(self) -> list[tuple[str, str]]:
        """(label, path) of every view that can be edited here."""
        st = self.state
        call = st.scenario.call
        out = []
        if call.programs:
            for i, s in enumerate(call.programs[st.program].body):
                if isinstance(s, Let):
                    out.append(
                        (f"view {s.let} (body[{i}])", f"call.programs[{st.program}].body[{i}]")
                    )
        for i, a in enumerate(call.args):
            if a.transforms:
                out.append((f"argument {a.param}", f"call.args[{i}]"))
        for name, sc in call.scratch.items():
            if sc.transforms:
                out.append((f"scratch {name}", f"call.scratch.{name}"))
        return out

    def select(self, path: str) -> None:
        self.target = path
        self.refresh()

    def _fix_target(self) -> None:
        paths = [p for _, p in self.targets()]
        if self.target not in paths:
            self.target = paths[0] if paths else None

    def new_view(self, ref: str | None = None, name: str | None = None):
        """Append ``let NAME = REF`` (no transforms yet) to the program and select it."""
        st = self.state
        if not st.scenario.call.programs:
            return st.edit(("add", "call.programs[0]", {}), label="add program")
        names = ref_names(st)
        outs = list(st.scenario.call.outputs) or names or ["out"]
        body = st.scenario.call.programs[st.program].body
        path = f"call.programs[{st.program}].body[{len(body)}]"
        stmt = {"let": name or unique("v", names), "ref": ref or outs[0], "transforms": []}
        self.target = path
        return st.edit(("add", path, stmt), label=f"new view {stmt['let']}")

    def add_transform(self, op: str, **fields: Any):
        """Append a transform of kind ``op`` (defaults, overridden by ``fields``)."""
        if self.target is None:
            r = self.new_view()
            if not r.ok:
                return r
        n = len(self.state.get(f"{self.target}.transforms", []))
        t = {**default_transform(self.state, op), **fields}
        return self.state.edit(("add", f"{self.target}.transforms[{n}]", t), label=f"add {op}")

    # ------------------------------------------------------------ rendering

    def _render(self, sec: c.Section) -> list[w.Widget]:
        st = self.state
        targets = self.targets()
        head = sec.memo("head", lambda: _head("Views", "a transform stack, applied first to last"))
        if self.target is None:
            return [head, c.make(w.HTML, value="<i>no views yet</i>"), self._new_button()]
        tgt = self.target
        rows: list[w.Widget] = [
            head,
            sec.memo(("pick", tuple(targets), tgt), lambda: self._pick_row(targets)),
        ]
        node = st.get(tgt)
        names = tuple(ref_names(st)) if "let" in node else ()
        key: tuple[Any, ...] = ("base", tgt, json.dumps(node.get("let")), node.get("ref"), names)
        rows.append(sec.memo(key, lambda: self._base(node)))
        rows.append(c.badge_line(services.problems_at(st, tgt, exact=True)))
        steps, note = self._steps()
        if steps:
            rows.append(self._shape_line("base", steps[0]))
        for j, t in enumerate(node.get("transforms", [])):
            step = steps[j + 1] if len(steps) > j + 1 else None
            key = (
                "t",
                tgt,
                j,
                json.dumps(t),
                step and (step.label(), step.error),
                _dkey(st, f"{tgt}.transforms[{j}]"),
            )
            build = lambda j=j, t=t, step=step: self._transform_row(j, t, step)  # noqa: E731
            rows.append(sec.memo(key, build, ident=("t", tgt, j)))
        if note:
            rows.append(c.make(w.HTML, value=f"<div class='mpl-note'>shapes: {c.esc(note)}</div>"))
        rows.append(sec.memo(("palette", tgt), self._palette_row))
        return rows

    def _new_button(self) -> w.Button:
        return c.button(
            "+ new view", self.new_view, "let v = ref, with transforms", css="mpl-new-view"
        )

    def _pick_row(self, targets: list[tuple[str, str]]) -> w.Widget:
        pick = c.make(w.Dropdown, options=targets, value=self.target, layout=c.lay(width="260px"))
        pick.observe(lambda ch: self.select(ch["new"]), names="value")
        return _row(pick, self._new_button())

    def _palette_row(self) -> w.Widget:
        op = c.make(w.Dropdown, options=PALETTE, value="at", layout=c.lay(width="140px"))
        op.add_class("mpl-palette")
        hint = c.make(w.HTML, value=f"<span class='mpl-hint'>{c.esc(HELP['at'])}</span>")
        op.observe(
            lambda ch: setattr(
                hint, "value", f"<span class='mpl-hint'>{c.esc(HELP[ch['new']])}</span>"
            ),
            names="value",
        )
        add = c.button(
            "+ transform",
            lambda: self.add_transform(op.value),
            "append to the stack",
            css="mpl-add-transform",
        )
        return _row(op, add, hint)

    def _base(self, node: dict[str, Any]) -> w.Widget:
        st = self.state
        p = self.target
        assert p is not None  # (rendered only for a chosen target)
        if "let" in node:
            i = int(p.rsplit("[", 1)[1].rstrip("]"))
            name = c.field(
                c.text(node["let"], "90px"),
                lambda v: st.edit(("replace", f"{p}.let", v.strip()), label="rename view"),
                label="view",
            )
            base = c.make(
                w.Combobox,
                value=node["ref"],
                options=ref_names(st, before=i),
                ensure_option=False,
                continuous_update=False,
                layout=c.lay(width="110px"),
            )
            base.add_class("mpl-base-ref")
            return _row(
                name,
                c.field(
                    base,
                    lambda v: st.edit(("replace", f"{p}.ref", v.strip()), label="set base ref"),
                    label="= base",
                ),
                c.small("✕", lambda: _remove(st, p), "delete this view"),
            )
        if "buffer" in node:
            return _row(
                c.make(
                    w.HTML,
                    value=f"<code>argument {c.esc(node['param'])} = {c.esc(node['buffer'])}</code>",
                )
            )
        return _row(c.make(w.HTML, value=f"<code>scratch {c.esc(p.rsplit('.', 1)[1])}</code>"))

    def _steps(self) -> tuple[list[services.Step], str]:
        p = self.target or ""
        if ".body[" not in p:
            return [], "shown for views in a body"
        prog = self.state.program
        i = int(p.rsplit("[", 1)[1].rstrip("]"))
        return services.stack_steps(self.state, prog, i), ""

    def _shape_line(self, label: str, step: services.Step) -> w.HTML:
        """``→ f32[128] GMEM peer``: the view after a step (``label``: what it is)."""
        head = f"<span class='mpl-hint'>{c.esc(label)}</span> " if label else ""
        return c.make(
            w.HTML,
            value=f"<div class='mpl-shape-line'>{head}→ "
            f"<code class='mpl-shape'>{c.esc(step.label())}</code></div>",
        )

    def _transform_row(self, j: int, t: dict[str, Any], step: services.Step | None) -> w.Widget:
        """Line 1: the transform, its fields and buttons; line 2: the view it makes; then
        the card of a problem at this step."""
        st = self.state
        p = f"{self.target}.transforms[{j}]"
        target = self.target
        cls = BY_OP.get(t["op"])
        parts: list[w.Widget] = [
            c.make(w.HTML, value=f"<span class='mpl-hint'>{j + 1}.</span> <b>{c.esc(t['op'])}</b>")
        ]
        below: list[w.Widget] = []  # a tall field (the device picker): its own line, under
        for name, value in t.items():
            if name != "op":
                editor = self._field(p, t["op"], name, value, cls)
                (below if isinstance(editor, w.VBox) else parts).append(editor)
        for editor in below:
            editor.add_class("mpl-step-below")
        parts += [
            c.small("↑", lambda: _move(st, f"{target}.transforms", j, -1), "move up"),
            c.small("↓", lambda: _move(st, f"{target}.transforms", j, +1), "move down"),
            c.small("✕", lambda: _remove(st, p), "delete transform", css="mpl-del-transform"),
        ]
        row = _row(*parts)
        row.add_class(f"mpl-step-{j}")
        box = w.VBox([row], layout=c.lay(margin="2px 0 4px 0"))

        def refresh(step: services.Step | None = step, first: bool = False) -> None:
            """The view after this step and its problem, from the session as it is now."""
            if not first:
                steps, _ = self._steps()
                step = steps[j + 1] if len(steps) > j + 1 else None
            diags = services.problems_at(st, p)
            kids: list[w.Widget] = [row, *below]
            if step is not None:
                kids.append(self._shape_line("", step))
            bad = bool(diags) or bool(step and step.error)
            if bad:
                extra = [c.diagnostic_html(d) for d in diags]
                if step and step.error and not diags:
                    extra.append(c.problems_html([("", step.error)]))
                kids.append(c.make(w.HTML, value="".join(extra)))
            old, box.children = box.children, kids
            for kid in old:
                if kid is not row and kid not in below:
                    kid.close()
            if bad:
                box.add_class("mpl-step-bad")
            else:
                box.remove_class("mpl-step-bad")

        refresh(step, first=True)
        box.mpl_refresh = refresh
        return box

    def _field(self, p: str, op: str, name: str, value: Any, cls: Any = None) -> w.Widget:
        """A transform's field: the device picker for a device id (a field typed
        ``DeviceId``), else the editor the op's model declares (help in the tooltip)."""
        st = self.state
        field = cls.model_fields.get(name) if cls is not None else None
        if field is not None and field.annotation == DeviceId:
            from mpmd_lab.widgets.device_picker import DevicePicker

            return DevicePicker(st, f"{p}.{name}", value)
        if cls is not None and name in cls.model_fields:
            return c.model_field(st, f"{p}.{name}", cls, name, value, css=f"mpl-tf-{name}")
        commit = lambda v: st.edit(("replace", f"{p}.{name}", v), label=f"set {op}.{name}")  # noqa: E731
        if name == "dtype":
            dd = c.make(w.Dropdown, options=DTYPES, value=value, layout=c.lay(width="100px"))
            return c.field(dd, commit, label=name)
        return c.field(
            c.text(c.show_json(value), "150px"),
            commit,
            c.parse_json,
            label=name,
            css=f"mpl-tf-{name}",
        )
