"""CallEditor: the call's buffers (arrays or Refs), arguments, outputs, scratch, programs
and the selected program's body. Every row shows the diagnostics found at its path, so a
duplicate Ref is flagged on the argument row the moment it is added."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterator
from functools import partial
from itertools import islice
from typing import Any

import ipywidgets as w
from mpmd_lab import codegen, sharding
from mpmd_lab.dtypes import DTYPES
from mpmd_lab.fixes import parse_path
from mpmd_lab.ops import BY_OP, STATEMENT_CLASSES, STATEMENT_OPS, Let
from mpmd_lab.ops.scratch import SCRATCH_CLASSES, SCRATCH_KINDS
from mpmd_lab.session import Session, rename_key
from mpmd_lab.widgets import common as c
from mpmd_lab.widgets import services

INITS = ("zeros", "ones", "iota", "random")
MEMORY = ("SMEM", "GMEM", "TMEM")
#: every statement kind of the language (the registry's), then ``let``
OPS = (*STATEMENT_OPS, "let")
#: each statement's ref fields, from its op class
OP_FIELDS = {cls.op_name(): tuple(f for f, _ in cls.REFS) for cls in STATEMENT_CLASSES}


def unique(base: str, taken: Collection[str]) -> str:
    """``base``, or ``base2``, ``base3``… whichever is not taken."""
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}{n}"
    return name


def ref_names(state: Session, before: int | None = None) -> list[str]:
    """Names a body statement can use: parameters, tuple leaves, outputs, scratch, views."""
    call = state.scenario.call
    names: list[str] = []
    for a in call.args:
        leaves = getattr(a, "tuple", None)
        names += [f"{a.param}[{i}]" for i in range(len(leaves))] if leaves else [a.param]
    names += list(call.outputs) + list(call.scratch)
    if call.programs and state.program < len(call.programs):
        body = call.programs[state.program].body
        for s in body[: len(body) if before is None else before]:
            if isinstance(s, Let):
                names.append(s.let)
    return names


def _named_rows(
    sec: c.Section,
    st: Session,
    kind: str,
    prefix: str,
    items: dict[str, Any],
    row: Callable[[str, Any], w.Widget],
    context: Any = None,
) -> list[w.Widget]:
    """One row per named item under ``prefix`` (the first ``c.MAX_ROWS``, then a line
    saying how many more there are), rebuilt only when the item, the problems at it or
    the ``context`` it is shown in (hashable) changed."""
    rows = [
        sec.memo(
            (kind, name, v.model_dump_json(), _dkey(st, f"{prefix}.{name}"), context),
            partial(row, name, v),
            ident=(kind, name),
        )
        for name, v in islice(items.items(), c.MAX_ROWS)
    ]
    return rows + c.more_rows(sec, len(items), _PLURAL.get(kind, kind + "s"))


#: what a list of each kind of row is called ("showing the first 100 of 2,000 outputs")
_PLURAL = {"out": "outputs", "buffer": "buffers", "scratch": "scratch refs"}


def _add(
    sec: c.Section, label: str, on_click: Callable[[], Any], tip: str, css: str | None = None
) -> w.Widget:
    """A section's add button (built once)."""
    return sec.memo("add", lambda: c.button(label, on_click, tip, css=css))


def _key(state: Session, *paths: str) -> str:
    """What a section shows: its slice of the scenario and the diagnostics inside it."""
    parts = [state.get(p) for p in paths]
    diags = [(d.code, d.path, d.message) for p in paths for d in services.problems_at(state, p)]
    return json.dumps([parts, diags, state.program], default=str)


class CallEditor(w.VBox):
    """Edit ``buffers`` and ``call`` of the state's scenario."""

    def __init__(self, state: Session, on_edit_view: Callable[[str], None] | None = None):
        super().__init__()
        self.state = state
        self.on_edit_view = on_edit_view or (lambda path: None)
        self.add_class("mpl-call-editor")
        #: statements shown with their field editors (the others as one line of source)
        self.expanded: set[str] = set()
        s = state
        # (on a device mesh, shapes are one device's and arguments and outputs have specs)
        mesh = "device_mesh"
        self.buffers = c.Section(s, lambda: _key(s, "buffers", mesh), self._buffers)
        self.args = c.Section(
            s, lambda: _key(s, "call.args", "buffers", "call.entry", mesh), self._args
        )
        self.outputs = c.Section(s, lambda: _key(s, "call.outputs", mesh), self._outputs)
        self.scratch = c.Section(s, lambda: _key(s, "call.scratch"), self._scratch)
        self.body = c.Section(
            s, lambda: _key(s, "call") + str(ref_names(s)) + str(sorted(self.expanded)), self._body
        )
        self.children = [
            self.buffers,
            self.args,
            self.outputs,
            self.scratch,
            self.body,
        ]
        state.subscribe(self._on_change)

    def _on_change(self, st: Session, why: str) -> None:
        if why.startswith("loaded"):  # another scenario: its statements start folded
            self.expanded.clear()
        self.refresh()

    def refresh(self) -> None:
        for section in self.children:
            section.refresh()

    def row_of(self, path: str) -> w.Widget | None:
        """The row on screen of the statement at ``path`` (None: not drawn)."""
        return self.body.row(("stmt", path))

    def expand(self, path: str, show: bool = True) -> str | None:
        """Show the editors of the statement at ``path`` (or inside it: a graph box's
        path), the loops and conditions around it opened too; ``show=False`` folds it
        back to its line. Returns the statement's path (None: ``path`` is none)."""
        found = _STATEMENT.match(path)
        if found is None:
            return None
        stmt = found.group(0)
        if show:
            self.expanded |= set(_items(stmt))
        else:
            self.expanded.discard(stmt)
        self.body.refresh()
        return stmt

    def remove_statement(self, bp: str, i: int) -> Any:
        """Remove statement ``i`` of the body at ``bp``; the unfolded ones after it stay
        unfolded (their paths follow)."""
        n = len(self.state.get(bp, []) or [])
        order = {j: (None if j == i else j - 1) for j in range(i, n)}
        return self._renumbered(bp, order, lambda: _remove(self.state, f"{bp}[{i}]"))

    def move_statement(self, bp: str, i: int, delta: int) -> Any:
        """Swap statement ``i`` of the body at ``bp`` with its neighbour ``i + delta``;
        unfolded ones stay unfolded."""
        j = i + delta
        n = len(self.state.get(bp, []) or [])
        order: dict[int, int | None] = {i: j, j: i} if 0 <= j < n else {}
        return self._renumbered(bp, order, lambda: _move(self.state, bp, i, delta))

    def _renumbered(self, bp: str, order: dict[int, int | None], edit: Callable[[], Any]) -> Any:
        """Run ``edit`` (a change of the body at ``bp``), the unfolded statements' paths
        renumbered by ``order`` (old index -> new, None: gone) first; restored if refused."""
        before = set(self.expanded)
        self.expanded = _renumber(before, bp, order)
        result = edit()
        if not result.ok:
            self.expanded = before
            self.body.refresh()
        return result

    def expand_all(self) -> None:
        """Show the editors of every statement of the selected program, nested too."""
        program = self.state.program
        if program < len(self.state.scenario.call.programs):
            base = f"call.programs[{program}].body"
            body = self.state.scenario.call.programs[program].body
            self.expanded |= set(_paths(body, base))
        self.body.refresh()

    def fold_all(self) -> None:
        """Show every statement of the selected program as its line."""
        base = f"call.programs[{self.state.program}].body"
        self.expanded = {q for q in self.expanded if not q.startswith(base)}
        self.body.refresh()

    # ------------------------------------------------------------ buffers

    def add_buffer(self, name: str | None = None, **spec: Any):
        name = name or unique("x", self.state.scenario.buffers)
        value = {"shape": [256], "dtype": "float32", "init": "iota", **spec}
        return self.state.edit(("add", f"buffers.{name}", value), label=f"add buffer {name}")

    def _buffers(self, sec: c.Section) -> list[w.Widget]:
        st = self.state
        return [
            _head("Buffers", "host values the call is given; Ref = jax.new_ref" + _per_device(st)),
            *_named_rows(sec, st, "buffer", "buffers", st.scenario.buffers, self._buffer_row),
            _add(sec, "+ buffer", self.add_buffer, "add a buffer", "mpl-add-buffer"),
        ]

    def _buffer_row(self, name: str, b: Any) -> w.Widget:
        st = self.state
        p = f"buffers.{name}"
        init = b.init if isinstance(b.init, str) else "explicit"
        init_dd = c.make(
            w.Dropdown,
            options=INITS + (("explicit",) if init == "explicit" else ()),
            value=init,
            layout=c.lay(width="76px"),
        )
        ref_cb = c.make(w.Checkbox, width="60px", value=b.as_ref, description="Ref", indent=False)
        ref_cb.add_class("mpl-as-ref")
        return _row(
            _field(c.name_box(name, "70px"), _rename(st, "buffers", name), css="mpl-name"),
            _field(
                c.text(c.show_shape(b.shape), "70px"),
                _set(st, f"{p}.shape"),
                c.parse_shape,
                label="shape",
                css="mpl-buffer-shape",
            ),
            _field(_dtype(b.dtype), _set(st, f"{p}.dtype")),
            _field(init_dd, partial(_set_init, st, p)),
            _field(ref_cb, _set(st, f"{p}.as_ref")),
            c.small("✕", partial(_remove, st, f"buffers.{name}"), "remove buffer"),
            c.badges_at(st, p, _wide()),
        )

    # ------------------------------------------------------------ arguments

    def add_arg(self, buffer: str | None = None, param: str | None = None):
        """Pass a buffer (default: the first) as the next positional argument."""
        st = self.state
        names = list(st.scenario.buffers)
        buffer = buffer or (names[0] if names else "x")
        param = param or unique(f"{buffer}_ref", ref_names(st))
        n = len(st.scenario.call.args)
        return st.edit(
            ("add", f"call.args[{n}]", {"buffer": buffer, "param": param}),
            label=f"pass {buffer} as {param}",
        )

    def _args(self, sec: c.Section) -> list[w.Widget]:
        st = self.state
        call = st.scenario.call

        def entry() -> w.Widget:
            pick = c.make(
                w.Dropdown,
                options=("pl.kernel", "plgpu.kernel"),
                value=call.entry,
                layout=c.lay(width="130px"),
            )
            return c.field(pick, _set(st, "call.entry"), label="entry")

        rows: list[w.Widget] = [
            _head("Arguments", "positional, in order; the same Ref twice is a duplicate"),
            sec.memo(("entry", call.entry), entry),
        ]
        buffers = list(st.scenario.buffers)
        for i, a in enumerate(call.args[: c.MAX_ROWS]):
            key = (
                "arg",
                i,
                a.model_dump_json(),
                tuple(buffers),
                _dkey(st, f"call.args[{i}]"),
                _mesh(st),
            )
            build = lambda i=i, a=a: self._arg_row(i, a, buffers)  # noqa: E731
            rows.append(sec.memo(key, build, ident=("arg", i)))
        rows += c.more_rows(sec, len(call.args), "arguments")
        rows.append(
            _add(sec, "+ argument", self.add_arg, "pass a buffer to the kernel", "mpl-add-arg")
        )
        return rows

    def _arg_row(self, i: int, a: Any, buffers: list[str]) -> w.Widget:
        st = self.state
        p = f"call.args[{i}]"
        leaves = getattr(a, "tuple", None)
        if leaves:
            src = _field(
                c.text(", ".join(leaves), "150px"),
                _set(st, f"{p}.tuple"),
                lambda s: [x.strip() for x in s.split(",") if x.strip()],
                label="tuple",
            )
        else:
            opts = c.choices(buffers, a.buffer)
            dd = c.make(w.Dropdown, options=opts, value=a.buffer, layout=c.lay(width="90px"))
            dd.add_class("mpl-arg-buffer")
            src = _field(dd, _set(st, f"{p}.buffer"), label="buffer")
        extra: list[w.Widget] = []
        if a.transforms:
            extra.append(
                c.button(
                    f"view ({len(a.transforms)})",
                    partial(self.on_edit_view, p),
                    "edit this argument's transforms",
                )
            )
        row = _row(
            c.make(w.HTML, value=f"<span class='mpl-hint'>{i}</span>"),
            src,
            _field(
                c.name_box(a.param, "100px"), _set(st, f"{p}.param"), label="as", css="mpl-param"
            ),
            *_spec_field(st, p, a.spec, "mpl-arg-spec"),
            *extra,
            c.small("↑", partial(_move, st, "call.args", i, -1), "move up"),
            c.small("✕", partial(_remove, st, p), "remove argument", css="mpl-remove-arg"),
            c.badges_at(st, p, _wide()),
        )
        row.add_class(f"mpl-arg-{i}")
        return row

    # ------------------------------------------------------------ outputs, scratch

    def add_output(self, name: str | None = None, shape: list[int] | None = None, dtype="float32"):
        st = self.state
        name = name or unique("out", ref_names(st))
        value = {"shape": shape or [256], "dtype": dtype}
        return st.edit(("add", f"call.outputs.{name}", value), label=f"add output {name}")

    def _outputs(self, sec: c.Section) -> list[w.Widget]:
        st = self.state
        outputs = st.scenario.call.outputs
        return [
            _head("Outputs", "out types in order; each is also a parameter" + _per_device(st)),
            *_named_rows(sec, st, "out", "call.outputs", outputs, self._output_row, _mesh(st)),
            _add(sec, "+ output", self.add_output, "add an output", "mpl-add-output"),
        ]

    def _output_row(self, name: str, o: Any) -> w.Widget:
        st = self.state
        p = f"call.outputs.{name}"
        return _row(
            _field(c.name_box(name, "70px"), _rename(st, "call.outputs", name)),
            _field(
                c.text(c.show_shape(o.shape), "70px"),
                _set(st, f"{p}.shape"),
                c.parse_shape,
                label="shape",
                css="mpl-output-shape",
            ),
            _field(_dtype(o.dtype), _set(st, f"{p}.dtype")),
            *_spec_field(st, p, o.spec, "mpl-output-spec"),
            c.small("✕", partial(_remove, st, p), "remove output"),
            c.badges_at(st, p, _wide()),
        )

    def add_scratch(self, name: str | None = None):
        st = self.state
        name = name or unique("s", ref_names(st))
        value = SCRATCH_CLASSES[0].example(st.fit())
        return st.edit(("add", f"call.scratch.{name}", value), label=f"add scratch {name}")

    def _scratch(self, sec: c.Section) -> list[w.Widget]:
        st = self.state
        scratch = st.scenario.call.scratch
        return [
            _head("Scratch", "refs allocated for the kernel, after outputs"),
            *_named_rows(sec, st, "scratch", "call.scratch", scratch, self._scratch_row),
            _add(sec, "+ scratch", self.add_scratch, "add a scratch ref"),
        ]

    def _scratch_row(self, name: str, s: Any) -> w.Widget:
        st = self.state
        p = f"call.scratch.{name}"
        kind = c.make(
            w.Dropdown,
            options=list(SCRATCH_KINDS),
            value=s.KIND,
            layout=c.lay(width="120px"),
            tooltip="what JAX allocates: an array, a semaphore, a barrier, a cluster barrier",
        )
        kind_field = _field(kind, partial(self._scratch_kind, name), css="mpl-kind")
        if s.KIND != "array":  # the kind's own fields, as its model declares them
            cls = type(s)
            fields = [
                c.model_field(st, f"{p}.{f}", cls, f, getattr(s, f), wrap=False)
                for f in cls.model_fields
                if f != "kind"
            ]
            return _row(
                _field(c.name_box(name, "70px"), _rename(st, "call.scratch", name)),
                kind_field,
                *fields,
                c.small("✕", partial(_remove, st, p), "remove scratch"),
                c.badges_at(st, p, _wide()),
            )
        mem = c.make(w.Dropdown, options=MEMORY, value=s.memory_space, layout=c.lay(width="80px"))
        extra = []
        if s.transforms:
            extra.append(
                c.button(
                    f"view ({len(s.transforms)})",
                    partial(self.on_edit_view, p),
                    "edit tiling/swizzle",
                )
            )
        return _row(
            _field(c.name_box(name, "70px"), _rename(st, "call.scratch", name)),
            _field(
                c.text(c.show_shape(s.shape), "70px"),
                _set(st, f"{p}.shape"),
                c.parse_shape,
                label="shape",
            ),
            kind_field,
            _field(_dtype(s.dtype), _set(st, f"{p}.dtype")),
            _field(mem, _set(st, f"{p}.memory_space")),
            c.model_field(st, f"{p}.alloc", type(s), "alloc", s.alloc, wrap=False),
            *extra,
            c.small("✕", partial(_remove, st, p), "remove scratch"),
            c.badges_at(st, p, _wide()),
        )

    def _scratch_kind(self, name: str, kind: str) -> Any:
        """Make scratch ``name`` another kind: that kind's defaults (the model's)."""
        cls = next(k for k in SCRATCH_CLASSES if k.KIND == kind)
        value = cls.example(self.state.fit())
        return self.state.edit(
            ("replace", f"call.scratch.{name}", value), label=f"make scratch {name} a {kind}"
        )

    # ------------------------------------------------------------ programs, body

    def add_statement(self, kind: str = "copy", body: str | None = None, **fields: Any):
        """Append a statement of ``kind`` to a body: the selected program's, or the one
        at the field path ``body`` (a loop's or a condition's: ``…body[2].body``)."""
        st = self.state
        if not st.scenario.call.programs:
            st.edit(("add", "call.programs[0]", {}), label="add program")
        stmt = self.default_statement(kind, **fields)
        where = body or f"call.programs[{st.program}].body"
        n = len(st.get(where, []) or [])
        path = f"{where}[{n}]"
        opened = path not in self.expanded
        self.expanded.add(path)  # a new statement shows its editors, to be filled in
        result = st.edit(("add", path, stmt), label=f"add {kind}")
        if not result.ok and opened:
            self.expanded.discard(path)
        return result

    def default_statement(self, kind: str, **fields: Any) -> dict[str, Any]:
        st = self.state
        names = ref_names(st) or ["x_ref"]
        outs = list(st.scenario.call.outputs) or names
        if kind == "let":
            taken = ref_names(st)
            return {"let": unique("v", taken), "ref": outs[0], "transforms": [], **fields}
        stmt = BY_OP[kind].example(st.fit())
        stmt.update(fields)
        return stmt

    def _body(self, sec: c.Section) -> list[w.Widget]:
        st = self.state
        call = st.scenario.call
        n = len(call.programs)
        rows: list[w.Widget] = [_head("Programs", "one (mesh, body) pair each")]
        key = ("programs", n, st.program, _dkey(st, "call.programs"))
        rows.append(sec.memo(key, lambda: self._programs_row(n)))
        if not n:
            return rows
        pp = f"call.programs[{st.program}]"
        some = any(q.startswith(f"{pp}.body") for q in self.expanded)
        head = partial(self._body_head, st.program, some)
        rows.append(sec.memo(("body-head", st.program, some), head))
        body = call.programs[st.program].body
        budget = [c.MAX_ROWS]  # statement rows left to draw, nested bodies included
        rows += self._body_rows(sec, f"{pp}.body", body, 0, ref_names(st, before=0), budget)
        if budget[0] < 0:
            rows += c.more_rows(sec, _count(body), "statements", shown=c.MAX_ROWS)
        return rows

    def _body_rows(
        self,
        sec: c.Section,
        bp: str,
        body: list[Any],
        depth: int,
        outer: list[str],
        budget: list[int],
    ) -> list[w.Widget]:
        """The statements of the body at ``bp`` (a list's field path), nested bodies
        (loop, when) indented under their statement, each with its own add row; at most
        ``budget[0]`` statements in all (it goes below 0 when some are not drawn)."""
        st = self.state
        rows: list[w.Widget] = []
        lets: list[str] = []
        for i, s in enumerate(body):
            if budget[0] <= 0:
                budget[0] = -1
                return rows
            budget[0] -= 1
            p = f"{bp}[{i}]"
            names = [*outer, *lets]
            opened = p in self.expanded
            line = self._line(p, s)
            if opened:
                head = s.model_dump_json(exclude={"body"}) if _has_body(s) else s.model_dump_json()
                key: tuple = ("stmt", p, head, _dkey(st, p, shallow=_has_body(s)), depth, line)
                build = partial(self._opened, bp, i, s, depth, names, line)
            else:
                inside = _count(s.body) if _has_body(s) else 0
                key = ("line", p, line, inside, _dkey(st, p), depth)
                build = partial(self._folded, bp, i, s, depth, line)
            row = sec.memo(key, build, ident=("stmt", p))
            for box in getattr(row, "mpl_combos", ()):
                if list(box.options) != c.choices(names):
                    box.options = c.choices(names)
            rows.append(row)
            if getattr(s, "let", None):
                lets.append(s.let)
            if _has_body(s) and opened:
                rows += self._body_rows(sec, f"{p}.body", s.body, depth + 1, names, budget)
                if budget[0] < 0:
                    return rows
        rows.append(sec.memo(("add-stmt", bp, depth), lambda: self._add_statement_row(bp, depth)))
        return rows

    def _body_head(self, program: int, unfolded: bool) -> w.Widget:
        """The body's heading and its fold all (some unfolded) or unfold all button."""
        head = _head(f"Body of program {program}", "statements, run in order; ▸ a line to edit it")
        toggle = c.button(
            "▸ fold all" if unfolded else "▾ unfold all",
            self.fold_all if unfolded else self.expand_all,
            "show every statement as its line" if unfolded else "show every statement's editors",
            css="mpl-fold-all" if unfolded else "mpl-unfold-all",
            layout=c.lay(width="104px", margin="0 0 0 12px"),
        )
        return w.HBox([head, toggle], layout=c.lay(align_items="center"))

    def _line(self, p: str, s: Any) -> str:
        """The statement at ``p`` as the kernel's source writes it, on one line."""
        around = [_model(self.state, q) for q in _items(p)[:-1]]
        loops = [v for v in (getattr(x, "var", None) for x in around) if isinstance(v, str)]
        return codegen.statement_line(self.state.scenario, s, p, loops)

    def _summary(
        self, i: int, p: str, line: str, opened: bool, depth: int = 0, note: str = ""
    ) -> w.Widget:
        """A statement's line (one widget, a button: its index, its source, what is
        inside it) that opens or folds its editors; folded, the codes of the problems in
        it beside (a folded row hides none)."""
        line_button = c.button(
            _line_text(i, line, opened, note),
            partial(self.expand, p, not opened),
            "fold to one line" if opened else "edit this statement",
            css=("mpl-stmt-line", "mpl-fold" if opened else "mpl-expand"),
            layout=_line_layout(0 if opened else depth),
        )
        diags = [] if opened else services.problems_at(self.state, p)
        if not diags:
            return line_button
        codes = c.make(w.HTML, value=c.badges(diags), _dom_classes=("mpl-stmt-badges",))
        layout = c.lay(align_items="center")
        return w.HBox([line_button, codes], layout=layout, _dom_classes=("mpl-stmt-summary",))

    def _folded(self, bp: str, i: int, s: Any, depth: int, line: str) -> w.Widget:
        """A statement folded to its line (a loop's or a condition's body folded in it)."""
        n = _count(s.body) if _has_body(s) else 0
        note = f"   … {n} statement(s) inside" if n else ""
        return self._summary(i, f"{bp}[{i}]", line, False, depth, note)

    def _opened(self, bp: str, i: int, s: Any, depth: int, names: list[str], line: str) -> w.Widget:
        """A statement's line over its editors, marked as the one being edited."""
        p = f"{bp}[{i}]"
        editor = self._statement(bp, i, s, 0, names)
        summary = self._summary(i, p, line, True)
        box = w.VBox([summary, editor], layout=_open_layout(depth))
        box.add_class("mpl-stmt-open")
        box.mpl_combos = editor.mpl_combos

        def refresh() -> None:  # kept while a field is typed into: the line follows
            now = _model(self.state, p)
            if now is not None:
                summary.description = _line_text(i, self._line(p, now), True)

        box.mpl_refresh = refresh
        if _has_body(s):
            box.add_class("mpl-block-head")
        return box

    def _add_statement_row(self, bp: str | None = None, depth: int = 0) -> w.Widget:
        """The palette of a body: every statement kind the registry has, its help."""
        kind = c.make(w.Dropdown, options=OPS, value="copy", layout=c.lay(width="140px"))
        kind.add_class("mpl-stmt-kind")
        hint = c.make(w.HTML, value=_help("copy"))
        kind.observe(lambda ch: setattr(hint, "value", _help(ch["new"])), names="value")
        where = "the body" if depth == 0 else "this block"
        add = c.button(
            "+ statement",
            lambda: self.add_statement(kind.value, body=bp),
            f"append to {where}",
        )
        add.add_class("mpl-add-stmt")
        row = _row(kind, add, hint)
        _indent(row, depth)
        if depth:
            row.add_class("mpl-add-nested")
        return row

    def _programs_row(self, n: int) -> w.Widget:
        st = self.state
        pick = c.make(
            w.Dropdown,
            options=[(f"program {i}", i) for i in range(n)] or [("no programs", -1)],
            value=st.program if n else -1,
            layout=c.lay(width="130px"),
        )
        pick.observe(lambda ch: self._select_program(ch["new"]), names="value")
        return _row(
            pick,
            c.button("+ program", lambda: _add_program(st), "add a (mesh, body) pair"),
            c.button(
                "remove program",
                lambda: _remove(st, f"call.programs[{st.program}]"),
                "remove the selected program",
            )
            if n
            else c.make(w.HTML, value=""),
            c.badge_line(services.problems_at(st, "call.programs", exact=True)),
        )

    def _select_program(self, i: int) -> None:
        self.state.select_program(i)

    def _statement(
        self, bp: str, i: int, s: Any, depth: int = 0, names: list[str] | None = None
    ) -> w.Widget:
        """One statement of the body at ``bp``: its kind, its ref fields (names in scope),
        the other fields as the model declares them (help in each tooltip)."""
        st = self.state
        p = f"{bp}[{i}]"
        names = names if names is not None else ref_names(st, before=i)
        kind_now = "let" if getattr(s, "let", None) else s.op
        combos: list[w.Combobox] = []
        kind = c.make(w.Dropdown, options=OPS, value=kind_now, layout=c.lay(width="104px"))
        parts: list[w.Widget] = [  # (its index is on its line, above)
            c.small("↑", partial(self.move_statement, bp, i, -1), "move up", "mpl-move-up"),
            c.small("✕", partial(self.remove_statement, bp, i), "remove it", "mpl-remove-stmt"),
            _field(kind, partial(self._change_kind, bp, i)),
        ]
        if kind_now == "let":
            parts.append(
                c.make(
                    w.HTML,
                    value=f"<code>{c.esc(s.let)} = {c.esc(s.ref)}</code>"
                    f" <span class='mpl-hint'>+ {len(s.transforms)} transform(s)</span>",
                )
            )
            parts.append(
                c.button(
                    "edit view",
                    partial(self.on_edit_view, p),
                    "open in the Views tab",
                    css="mpl-edit-view",
                    width="84px",
                )
            )
        else:
            helps = type(s).field_help()
            for f in OP_FIELDS[s.op]:
                box = c.make(
                    w.Combobox,
                    value=getattr(s, f),
                    options=c.choices(names),
                    ensure_option=False,
                    continuous_update=False,
                    layout=c.lay(width="96px"),
                    tooltip=helps.get(f, ""),
                )
                combos.append(box)
                parts.append(_field(box, _set(st, f"{p}.{f}"), label=f, css=f"mpl-{f}"))
            for f in type(s).model_fields:  # the other fields, as the model declares them
                if f in ("op", "body") or f in OP_FIELDS[s.op]:
                    continue
                parts.append(c.model_field(st, f"{p}.{f}", type(s), f, getattr(s, f), wrap=False))
        own = _own(st, p) if _has_body(s) else services.problems_at(st, p)
        parts.append(c.badge_line(own, p, _wide()))
        row = _row(*parts)
        row.mpl_combos = combos  # their options follow the names in scope (set by _body)
        _indent(row, depth)
        if _has_body(s):
            row.add_class("mpl-block-head")
        return row

    def _change_kind(self, bp: str, i: int, kind: str):
        old = self.state.get(f"{bp}[{i}]") or {}
        carry = {f: old[f] for f in ("src", "dst", "lhs", "rhs") if f in old}
        if kind != "let":
            carry = {k: v for k, v in carry.items() if k in OP_FIELDS[kind]}
        else:
            carry = {}
        stmt = self.default_statement(kind, **carry)
        return self.state.edit(("replace", f"{bp}[{i}]", stmt), label=f"make {bp}[{i}] {kind}")


# ---------------------------------------------------------------- helpers


def _dkey(st: Session, path: str, shallow: bool = False) -> tuple:
    """The diagnostics at a path, as a hashable key (``shallow``: not those inside its
    nested body, which rows of their own show)."""
    diags = _own(st, path) if shallow else services.problems_at(st, path)
    return tuple((d.code, d.path, d.message) for d in diags)


def _own(st: Session, path: str) -> list[Any]:
    """The problems at ``path`` less those inside its nested ``body``."""
    inner = f"{path}.body["
    return [d for d in services.problems_at(st, path) if not d.path.startswith(inner)]


#: a statement's path (a graph box's path starts with it)
_STATEMENT = re.compile(r"call\.programs\[\d+\](?:\.body\[\d+\])+")


def _items(path: str) -> list[str]:
    """The statements a statement's path goes through, outermost first, itself last."""
    return [path[: m.end()] for m in re.finditer(r"\.body\[\d+\]", path)]


def _paths(body: list[Any], base: str) -> Iterator[str]:
    """The path of every statement of the body at ``base``, nested ones too."""
    for i, s in enumerate(body):
        yield f"{base}[{i}]"
        if _has_body(s):
            yield from _paths(s.body, f"{base}[{i}].body")


def _renumber(paths: set[str], bp: str, order: dict[int, int | None]) -> set[str]:
    """``paths`` with the statements of the body at ``bp`` (and what is inside them)
    renumbered by ``order`` (old index -> new, None: dropped)."""
    out = set()
    head = f"{bp}["
    for q in paths:
        if not q.startswith(head):
            out.add(q)
            continue
        close = q.index("]", len(head))
        j = int(q[len(head) : close])
        new = order.get(j, j)
        if new is not None:
            out.add(f"{head}{new}{q[close:]}")
    return out


def _line_text(i: int, line: str, opened: bool, note: str = "") -> str:
    """A statement's line: folded ▸ or unfolded ▾, its index, its source, ``note``."""
    return f"{'▾' if opened else '▸'} {i}  {line}{note}"


def _line_layout(depth: int) -> w.Layout:
    """A statement's line, indented as its place in the body, as wide as its text."""
    return c.lay(width="auto", max_width="100%", height="auto", margin=f"0 0 0 {24 * depth}px")


def _open_layout(depth: int) -> w.Layout:
    """The statement being edited: a box apart, indented as its place in the body."""
    return c.lay(
        margin=f"3px 0 3px {24 * depth}px",
        border_left="3px solid #1565c0",
        padding="2px 0 4px 6px",
    )


def _model(st: Session, path: str) -> Any:
    """The statement model at ``path`` of the session's scenario (None: no such one)."""
    node: Any = st.scenario
    try:
        for part in parse_path(path):
            node = node[part] if isinstance(part, int) else getattr(node, part)
    except (IndexError, AttributeError, TypeError):
        return None
    return node


def _has_body(s: Any) -> bool:
    return bool(getattr(type(s), "BODY", False))


def _help(kind: str) -> str:
    """A statement kind's one line of help, from its op class."""
    text = "let NAME = REF with transforms (a view)" if kind == "let" else BY_OP[kind].HELP
    return f"<span class='mpl-hint'>{c.esc(text)}</span>"


def _indent(row: w.Widget, depth: int) -> None:
    """Show a nested body's rows under their loop or condition."""
    if depth:
        row.layout = c.lay(
            align_items="center",
            flex_flow="row wrap",
            margin=f"0 0 0 {24 * depth}px",
            border_left="2px solid #c9d6e3",
            padding="0 0 0 6px",
        )


def _mesh(st: Session) -> tuple[tuple[str, int], ...]:
    """The device mesh as a key (a spec field shows under it, and reads by it)."""
    return tuple((st.scenario.device_mesh or {}).items())


def _per_device(st: Session) -> str:
    """On a device mesh, the shapes typed are one device's (a run shows the whole)."""
    n = st.scenario.num_devices
    return f"; shapes are per device ({n} devices)" if st.scenario.device_mesh else ""


def _head(title: str, hint: str = "") -> w.HTML:
    hint = f" <span class='mpl-hint'>{c.esc(hint)}</span>" if hint else ""
    return c.make(w.HTML, value=f"<div class='mpl-h'>{c.esc(title)}{hint}</div>")


def _row(*kids: w.Widget) -> w.HBox:
    """A row of fields that wraps when narrow: its small buttons (↑ ↓ ✕) first, so they
    never end up alone on a line, and its badges on a line of their own below."""
    small = [k for k in kids if isinstance(k, w.Button) and k.description in ("↑", "↓", "✕")]
    badges = [k for k in kids if "mpl-diag-line" in getattr(k, "_dom_classes", ())]
    rest = [k for k in kids if k not in small and k not in badges]
    lead = rest[:1] if rest and isinstance(rest[0], w.HTML) else []  # a row's index
    order = [*lead, *small, *rest[len(lead) :], *badges]
    for b in badges:
        if b.layout is not _wide():
            b.layout = _wide()
    layout = c.lay(align_items="center", flex_flow="row wrap")
    return c.host(w.HBox(order, layout=layout, _dom_classes=("mpl-row",)))


def _wide() -> w.Layout:
    """A row's badge line: a line of its own below its fields."""
    return c.lay(flex="1 1 100%")


def _field(
    widget: w.ValueWidget,
    commit: c.Commit,
    parse: Callable | None = None,
    label: str | None = None,
    css: str | None = None,
) -> w.Widget:
    """A field of a row (``_row`` hosts it: a refused value's reason goes beside it)."""
    return c.field(widget, commit, parse, label, css, wrap=False)


def _dtype(value: str) -> w.Dropdown:
    return c.make(w.Dropdown, options=DTYPES, value=value, layout=c.lay(width="92px"))


def _spec_field(st: Session, p: str, spec: Any, css: str) -> list[w.Widget]:
    """On a device mesh, the partition spec of an argument or output as JAX writes it
    (empty: the default, dim 0 over every axis)."""
    if not st.scenario.device_mesh:
        return []
    shown = "" if spec is None else sharding.text(spec, len(spec), st.scenario.device_mesh)
    tip = "jax.shard_map's PartitionSpec, e.g. P(None, 'y'); empty: dim 0 over every axis"
    box = c.text(shown, "110px", placeholder="default", live=False, tooltip=tip)
    return [_field(box, _set(st, f"{p}.spec"), sharding.parse_text, label="spec", css=css)]


def _set(st: Session, path: str) -> c.Commit:
    return lambda v: st.edit(("replace", path, v), label=f"set {path}")


def _set_init(st: Session, p: str, v: str):
    if v == "explicit":
        return c.EditResult(True)
    return st.edit(("replace", f"{p}.init", v), label=f"set {p}.init")


def _rename(st: Session, where: str, old: str) -> c.Commit:
    """Rename key ``old`` of the mapping at ``where``, keeping its place."""
    parts = parse_path(where)

    def run(data: dict[str, Any], new: str) -> None:
        parent: Any = data
        for part in parts[:-1]:
            parent = parent[part]
        parent[parts[-1]] = rename_key(parent[parts[-1]], old, new)

    return lambda new: st.change(lambda d: run(d, new.strip()), label=f"rename {old} to {new}")


def _remove(st: Session, path: str):
    return st.edit(("remove", path, None), label=f"remove {path}")


def _move(st: Session, path: str, i: int, delta: int):
    def run(data: dict[str, Any]) -> None:
        node: Any = data
        for part in parse_path(path):
            node = node[part]
        j = i + delta
        if 0 <= j < len(node):
            node[i], node[j] = node[j], node[i]

    return st.change(run, label=f"move {path}[{i}]")


def _add_program(st: Session):
    n = len(st.scenario.call.programs)
    mesh = {"grid": {"b": 1}, "cluster": {}, "threads": None}
    r = st.edit(("add", f"call.programs[{n}]", {"mesh": mesh, "body": []}), label="add program")
    if r.ok:
        st.select_program(n)
    return r


def _count(body: list[Any]) -> int:
    """Statements of a body, nested bodies included."""
    return sum(1 + (_count(s.body) if _has_body(s) else 0) for s in body)
