"""MeshEditor: the selected program's kernel mesh (grid, cluster and thread axes) with its
blocks drawn, and the outer device mesh with its devices drawn.

Only a window of blocks (devices) is drawn, the first MAX_ROWS x MAX_COLS, and each drawn
cell's coordinates are computed from its index: the work is proportional to what is
drawn, so a grid of 2**31 - 1 blocks opens as fast as one of 2, with a note that says
how many of how many are shown.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import ipywidgets as w
from mpmd_lab.session import Session
from mpmd_lab.widgets import common as c
from mpmd_lab.widgets import services
from mpmd_lab.widgets.call_editor import _dkey, _head, _key, _remove, _rename, _row, unique

CELL, MAX_COLS, MAX_ROWS = 34, 16, 8


def _grid_dims(sizes: list[int]) -> tuple[int, int]:
    """Rows and columns a list of axis sizes is drawn as (the last axis across)."""
    if not sizes:
        return 1, 1
    return math.prod(sizes[:-1]), sizes[-1]


def _coords(names: list[str], sizes: list[int], index: int) -> dict[str, int]:
    """The axis coordinates of block ``index`` (C order: the last axis varies fastest)."""
    out: dict[str, int] = {}
    for name, size in zip(reversed(names), reversed(sizes), strict=True):
        index, out[name] = divmod(index, size)
    return dict(reversed(out.items()))


def _window_note(total: int, shown_r: int, shown_c: int, noun: str) -> str | None:
    """``showing 128 of 2,147,483,647 blocks (…)``, when not everything is drawn."""
    shown = shown_r * shown_c
    if total <= shown:
        return None
    return f"showing {shown:,} of {total:,} {noun} (the first {shown_r} × {shown_c})"


def _axes_text(sizes: dict[str, int]) -> str:
    return " × ".join(f"{k}={v}" for k, v in sizes.items()) or "none"


def blocks_svg(grid: dict[str, int], cluster: dict[str, int], threads: Any) -> str:
    """The kernel mesh as boxes, one per grid block (coordinates in the tooltip), the
    cluster drawn inside each, and a caption that says what is drawn."""
    names, sizes = list(grid), list(grid.values())
    rows, cols = _grid_dims(sizes)
    shown_r, shown_c = min(rows, MAX_ROWS), min(cols, MAX_COLS)
    ncl = math.prod(cluster.values()) if cluster else 1
    sub = min(ncl, 4)
    w_, h_ = shown_c * (CELL + 6) + 4, shown_r * (CELL + 6) + 4
    parts = [f"<svg class='mpl-blocks' width='{w_}' height='{h_}' font-size='9'>"]
    for r in range(shown_r):
        for col in range(shown_c):
            i = r * cols + col
            x, y = col * (CELL + 6) + 2, r * (CELL + 6) + 2
            coord = _coords(names, sizes, i)
            where = ", ".join(f"{k}={v}" for k, v in coord.items()) or "the only block"
            parts.append(
                f"<g><title>block {i}: {c.esc(where)}</title><rect x='{x}' y='{y}' "
                f"width='{CELL}' height='{CELL}' rx='3' fill='#dbe8f6' stroke='#3a6ea5'/>"
            )
            if ncl > 1:
                step = (CELL - 4) / sub
                for k in range(sub):
                    parts.append(
                        f"<rect x='{x + 2 + k * step:.1f}' y='{y + CELL - 12}' "
                        f"width='{step - 1:.1f}' height='9' fill='#f2c14e'/>"
                    )
            parts.append(f"<text x='{x + 3}' y='{y + 11}' fill='#123'>{i}</text></g>")
    parts.append("</svg>")
    total = rows * cols
    lines = [f"grid {_axes_text(grid)} → {total} block{'s' if total != 1 else ''}"]
    if len(names) >= 2:
        lines.append(f"rows: {', '.join(names[:-1])}; columns: {names[-1]}")
    if note := _window_note(total, shown_r, shown_c, "blocks"):
        lines.append(note)
    if ncl > 1:
        lines.append(f"cluster {_axes_text(cluster)}: {ncl} blocks per cluster (yellow)")
    if threads is not None:
        lines.append(f"{threads.count} threads per block (axis {threads.name or 'unnamed'})")
    caption = "<br>".join(c.esc(x) for x in lines)
    return f"<div>{''.join(parts)}<div class='mpl-hint'>{caption}</div></div>"


def devices_svg(mesh: dict[str, int] | None) -> str:
    """The device mesh as boxes, each labelled with its axis coordinates."""
    if not mesh:
        return "<div class='mpl-hint'>no device mesh: the kernel runs on one device</div>"
    names, sizes = list(mesh), list(mesh.values())
    rows, cols = _grid_dims(sizes)
    shown_r, shown_c = min(rows, MAX_ROWS), min(cols, MAX_COLS)
    cw, ch = 62, 30
    parts = [
        f"<svg class='mpl-devices' width='{shown_c * (cw + 6) + 4}' "
        f"height='{shown_r * (ch + 6) + 20}' font-size='10'>"
    ]
    for r in range(shown_r):
        for col in range(shown_c):
            i = r * cols + col
            x, y = col * (cw + 6) + 2, r * (ch + 6) + 2
            label = ",".join(f"{k}={v}" for k, v in _coords(names, sizes, i).items())
            parts.append(
                f"<rect x='{x}' y='{y}' width='{cw}' height='{ch}' rx='4' fill='#e3f1e3' "
                f"stroke='#2e7d32'/><text x='{x + 4}' y='{y + 12}'>dev {i}</text>"
                f"<text x='{x + 4}' y='{y + 25}' fill='#355'>{c.esc(label)}</text>"
            )
    total = rows * cols
    window = _window_note(total, shown_r, shown_c, "devices")
    note = window or f"{total} devices"
    parts.append(f"<text x='2' y='{shown_r * (ch + 6) + 14}' font-size='11'>{note}</text></svg>")
    return "".join(parts)


class MeshEditor(w.VBox):
    """Edit the selected program's kernel mesh and the device mesh."""

    def __init__(self, state: Session):
        super().__init__()
        self.state = state
        self.add_class("mpl-mesh-editor")
        mp = lambda: f"call.programs[{state.program}].mesh"  # noqa: E731
        self.kernel = c.Section(state, lambda: _key(state, mp()), self._kernel)
        self.devices = c.Section(state, lambda: _key(state, "device_mesh"), self._devices)
        self.children = [self.kernel, self.devices]
        state.subscribe(lambda st, why: self.refresh())

    def refresh(self) -> None:
        self.kernel.refresh()
        self.devices.refresh()

    def _mesh_path(self) -> str:
        return f"call.programs[{self.state.program}].mesh"

    # ------------------------------------------------------------ edits (also used by tests)

    def add_axis(self, kind: str, name: str | None = None, size: int = 2):
        """Add a ``grid``/``cluster`` axis to the kernel mesh, or a ``device`` axis."""
        st = self.state
        if kind == "device":
            taken = list(st.scenario.device_mesh or {})
            name = name or unique("dev", taken)
            if st.scenario.device_mesh is None:
                return st.edit(("replace", "device_mesh", {name: size}), label="add device axis")
            return st.edit(("add", f"device_mesh.{name}", size), label=f"add device axis {name}")
        mesh = st.scenario.call.programs[st.program].mesh
        taken = list(mesh.grid) + list(mesh.cluster)
        name = name or unique({"grid": "b", "cluster": "c"}[kind], taken)
        path = f"{self._mesh_path()}.{kind}.{name}"
        return st.edit(("add", path, size), label=f"add {kind} axis {name}")

    def set_threads(self, name: str | None, count: int | None):
        """Thread axis ``name`` × ``count``; ``count=None`` removes it."""
        value = None if count is None else {"name": name, "count": count}
        return self.state.edit(("replace", f"{self._mesh_path()}.threads", value), label="threads")

    def _threads_now(self) -> Any:
        return self.state.scenario.call.programs[self.state.program].mesh.threads

    # ------------------------------------------------------------ views

    def _axes(
        self, where: str, sizes: dict[str, int], kind: str, sec: c.Section | None = None
    ) -> list[w.Widget]:
        rows = []
        for name, size in sizes.items():
            key = ("axis", where, name, size, _dkey(self.state, f"{where}.{name}"))
            build = lambda name=name, size=size: self._axis_row(where, name, size)  # noqa: E731
            rows.append(sec.memo(key, build, ident=("axis", where, name)) if sec else build())
        add = lambda: c.button(  # noqa: E731
            f"+ {kind} axis",
            lambda: self.add_axis(kind),
            f"add a {kind} axis",
            css=f"mpl-add-{kind}",
        )
        rows.append(sec.memo(("add", kind), add) if sec else add())
        return rows

    def _axis_row(self, where: str, name: str, size: int) -> w.Widget:
        st = self.state
        return _row(
            c.field(
                c.name_box(name, "80px"),
                _rename(st, where, name),
                label="axis",
                css="mpl-axis-name",
            ),
            c.field(
                c.int_box(size),
                lambda v: st.edit(("replace", f"{where}.{name}", v), label=f"resize {name}"),
                c.parse_int,
                label="size",
                css="mpl-axis-size",
            ),
            c.small("✕", partial(self._remove_axis, where, name), f"remove axis {name}"),
            c.badges_at(st, f"{where}.{name}"),
        )

    def _remove_axis(self, where: str, name: str):
        st = self.state
        if where == "device_mesh" and len(st.scenario.device_mesh or {}) == 1:
            return st.edit(("replace", "device_mesh", None), label="remove device mesh")
        return _remove(st, f"{where}.{name}")

    def _kernel(self, sec: c.Section) -> list[w.Widget]:
        st = self.state
        if not st.scenario.call.programs:
            return [
                _head("Kernel mesh"),
                c.make(w.HTML, value="<i>no programs: add one in the Call tab</i>"),
            ]
        mesh = st.scenario.call.programs[st.program].mesh
        mp = self._mesh_path()
        t = mesh.threads
        on = c.make(
            w.Checkbox,
            value=t is not None,
            description="threads",
            indent=False,
            layout=c.lay(width="90px"),
        )
        on.add_class("mpl-threads")
        on.observe(
            lambda ch: self.set_threads("wg" if ch["new"] else None, 2 if ch["new"] else None),
            names="value",
        )
        thread_row: list[w.Widget] = [on]
        if t is not None:
            thread_row += [
                c.field(
                    c.name_box(t.name or "", "70px", "name"),
                    lambda v: self.set_threads(v.strip() or None, self._threads_now().count),
                    label="axis",
                    css="mpl-threads-name",
                ),
                c.field(
                    c.int_box(t.count),
                    lambda v: self.set_threads(self._threads_now().name, v),
                    c.parse_int,
                    label="count",
                    css="mpl-threads-count",
                ),
            ]
        thread_row.append(c.badges_at(st, f"{mp}.threads"))
        threads_key = ("threads", mp, t and t.model_dump_json(), _dkey(st, f"{mp}.threads"))
        return [
            _head(f"Kernel mesh of program {st.program}", "plgpu.Mesh: grid × cluster, threads"),
            c.badge_line(services.problems_at(st, mp, exact=True)),
            c.make(w.HTML, value="<div class='mpl-hint'>grid</div>"),
            *self._axes(f"{mp}.grid", mesh.grid, "grid", sec),
            c.make(w.HTML, value="<div class='mpl-hint'>cluster (at most 3 axes)</div>"),
            *self._axes(f"{mp}.cluster", mesh.cluster, "cluster", sec),
            sec.memo(threads_key, lambda: _row(*thread_row), ident=("threads", mp)),
            c.make(w.HTML, value=blocks_svg(mesh.grid, mesh.cluster, t)),
        ]

    def _devices(self, sec: c.Section) -> list[w.Widget]:
        st = self.state
        mesh = st.scenario.device_mesh or {}
        return [
            _head("Device mesh", "jax.shard_map over these devices; shapes are per device"),
            *self._axes("device_mesh", mesh, "device", sec),
            c.badges_at(st, "device_mesh"),
            c.make(w.HTML, value=devices_svg(st.scenario.device_mesh)),
        ]
