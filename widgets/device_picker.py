"""DevicePicker: ``remote_ref``'s device, picked instead of typed as JSON.

A device id has two forms (docs/SCENARIO.md): one index or expression (``3``,
``"(dev + 1) % 4"``), or one entry per device-mesh axis, each the device's own
coordinate (the axis left out), ``{"offset": k}`` (own + k, wrapped), or an index or
expression. The picker shows the form in use, one row per axis of the device mesh, a
list of shortcuts (the neighbours, each device), and what the value means; every change
writes the device-id form the schema takes, through the same commit as any field.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import ipywidgets as w
from mpmd_lab.session import Session
from mpmd_lab.widgets import common as c

MODES = (("own", "own"), ("own + k", "offset"), ("index / expression", "index"))
#: at most this many devices are listed as shortcuts
MAX_SHORTCUTS = 16


def _mode_of(v: Any) -> str:
    if v is None:
        return "own"
    if isinstance(v, dict) and "offset" in v:
        return "offset"
    if hasattr(v, "offset"):
        return "offset"
    return "index"


def _plain(v: Any) -> Any:
    if hasattr(v, "model_dump"):
        return v.model_dump(mode="json")
    return v


def shortcuts(mesh: dict[str, int]) -> list[tuple[str, Any]]:
    """(label, device id) of the usual choices: each axis's neighbours, then devices."""
    out: list[tuple[str, Any]] = []
    for axis in mesh:
        out.append((f"right neighbour along {axis} (+1)", {axis: {"offset": 1}}))
        out.append((f"left neighbour along {axis} (-1)", {axis: {"offset": -1}}))
    total = math.prod(mesh.values()) if mesh else 0
    names = list(mesh)
    for coords in itertools.islice(itertools.product(*(range(n) for n in mesh.values())), 16):
        flat = 0
        for axis, k in zip(names, coords, strict=True):
            flat = flat * mesh[axis] + k
        where = ", ".join(f"{a}={k}" for a, k in zip(names, coords, strict=True))
        out.append((f"device {flat} ({where})", dict(zip(names, coords, strict=True))))
    if total > MAX_SHORTCUTS:
        out.append((f"… {total - MAX_SHORTCUTS} more devices: type an index", None))
    return out


def meaning(value: Any, mesh: dict[str, int]) -> str:
    """What a device id names, in words."""
    value = _plain(value)
    if not isinstance(value, dict):
        return f"device {value}" + (" (along the one axis)" if len(mesh) == 1 else "")
    parts = []
    for axis in mesh:
        v = value.get(axis)
        if v is None:
            parts.append(f"{axis}: own")
        elif isinstance(v, dict) and "offset" in v:
            k = v["offset"]
            parts.append(f"{axis}: own {'+' if k >= 0 else '-'} {abs(k)} (wrapped)")
        else:
            parts.append(f"{axis} = {v}")
    extra = [a for a in value if a not in mesh]
    if extra:
        parts.append(f"unknown axis {', '.join(map(repr, extra))}")
    return "the device with " + ", ".join(parts)


class DevicePicker(w.VBox):
    """Edit the device id at ``path`` (``…transforms[k].device``)."""

    children: Sequence[w.Widget]  # the Box trait (ipywidgets has no type information)

    def __init__(self, state: Session, path: str, value: Any):
        super().__init__()
        self.state, self.path = state, path
        self.add_class("mpl-device-picker")
        self.mesh: dict[str, int] = dict(state.scenario.device_mesh or {})
        value = _plain(value)
        self.form = c.make(
            w.ToggleButtons,
            options=[("per axis", "axes"), ("one index", "linear")],
            value="axes" if isinstance(value, dict) or not self.mesh else "linear",
            layout=c.lay(width="auto"),
        )
        self.form.style.button_width = "76px"
        self.form.add_class("mpl-device-form")
        self.form.observe(self._form_changed, names="value")
        self.quick = c.make(
            w.Dropdown,
            options=[
                ("pick…", None),
                *[(lab, i) for i, (lab, _) in enumerate(shortcuts(self.mesh))],
            ],
            value=None,
            layout=c.lay(width="220px"),
        )
        self.quick.add_class("mpl-device-quick")
        self.quick.observe(self._quick_picked, names="value")
        self.about = c.make(w.HTML, value="")
        self.error = c.make(w.HTML, value="")
        self.value = value
        self._head = w.HBox(
            [
                c.make(w.HTML, value="<span class='mpl-hint'>device</span>"),
                self.form,
                self.quick,
            ],
            layout=c.lay(align_items="center", flex_flow="row wrap"),
        )
        self._build()

    # ------------------------------------------------------------ rows

    def _build(self) -> None:
        head = self._head
        rows: list[w.Widget] = [head]
        if self.form.value == "linear" or not self.mesh:
            box = c.text(
                c.show_value(self.value if not isinstance(self.value, dict) else 0), "150px"
            )
            box.tooltip = 'a device index or an expression: "(dev + 1) % 4"'
            rows.append(
                c.field(
                    box, self._commit_linear, c.parse_value, label="index", css="mpl-device-index"
                )
            )
        else:
            current = self.value if isinstance(self.value, dict) else {}
            for axis, size in self.mesh.items():
                rows.append(self._axis_row(axis, size, current.get(axis)))
        self.about.value = (
            f"<span class='mpl-hint'>→ {c.esc(meaning(self.value, self.mesh))}</span>"
        )
        rows += [self.about, self.error]
        old, self.children = self.children, rows
        for kid in old:
            if kid not in (head, self.about, self.error):
                c.close_tree(kid)

    def _axis_row(self, axis: str, size: int, v: Any) -> w.Widget:
        mode = _mode_of(v)
        dd = c.make(w.Dropdown, options=list(MODES), value=mode, layout=c.lay(width="150px"))
        dd.add_class("mpl-device-mode")
        shown = "" if mode == "own" else str(v["offset"]) if mode == "offset" else c.show_value(v)
        box = c.text(shown, "120px", "k" if mode == "offset" else "index or expression")
        box.add_class("mpl-device-value")
        box.layout = c.lay(width="120px", display="none" if mode == "own" else "")
        row = w.HBox(
            [
                c.make(
                    w.HTML,
                    value=f"<code>{c.esc(axis)}</code> <span class='mpl-hint'>({size})</span>",
                ),
                c.field(dd, lambda m: self._commit_axis(axis, m, None)),
                c.field(box, lambda t: self._commit_axis(axis, dd.value, t), c.parse_value),
            ],
            layout=c.lay(align_items="center", flex_flow="row wrap", margin="0 0 0 12px"),
        )
        row.add_class(f"mpl-device-axis-{axis}")
        return row

    # ------------------------------------------------------------ commits

    def _commit(self, value: Any) -> c.EditResult:
        with c.committing(self):  # the row holding the picker is kept, not rebuilt
            result = self.state.edit(("replace", self.path, value), label=f"set {self.path}")
        if result.ok:
            self.value = value
            self.about.value = f"<span class='mpl-hint'>→ {c.esc(meaning(value, self.mesh))}</span>"
        return result

    def _commit_linear(self, v: Any) -> c.EditResult:
        return self._commit(v)

    def _commit_axis(self, axis: str, mode: str, typed: Any) -> c.EditResult:
        current = dict(self.value) if isinstance(self.value, dict) else {}
        if mode == "own":
            current.pop(axis, None)
        elif mode == "offset":
            k = typed if typed is not None else _offset(current.get(axis), 1)
            if not isinstance(k, int) or isinstance(k, bool):
                return c.EditResult(False, [("", f"{k!r}: an offset is a whole number")])
            current[axis] = {"offset": k}
        else:
            current[axis] = typed if typed is not None else _index(current.get(axis))
        if not current:
            return c.EditResult(False, [("", "name at least one axis (or pick one index)")])
        current = {a: current[a] for a in self.mesh if a in current} | {
            a: v for a, v in current.items() if a not in self.mesh
        }
        result = self._commit(current)
        if result.ok and typed is None:  # the mode changed: its value box changes too
            self._build()
        return result

    def _form_changed(self, change: dict[str, Any]) -> None:
        if change["new"] == "linear":
            v = to_linear(self.value, self.mesh)
        else:
            v = to_axes(self.value, self.mesh)
        result = self._commit(v)
        self.error.value = "" if result.ok else c.problems_html(result.problems)
        self._build()

    def _quick_picked(self, change: dict[str, Any]) -> None:
        if change["new"] is None:
            return
        _label, value = shortcuts(self.mesh)[change["new"]]
        self.quick.value = None
        if value is None:
            return
        self.form.unobserve(self._form_changed, names="value")
        self.form.value = "axes"
        self.form.observe(self._form_changed, names="value")
        result = self._commit(value)
        self.error.value = "" if result.ok else c.problems_html(result.problems)
        self._build()


def _offset(v: Any, default: int) -> int:
    return v["offset"] if isinstance(v, dict) and "offset" in v else default


def _index(v: Any) -> Any:
    return v if v is not None and not isinstance(v, dict) else 0


def to_linear(value: Any, mesh: dict[str, int]) -> Any:
    """The same device as one index or expression, where it can be said so."""
    value = _plain(value)
    if not isinstance(value, dict):
        return value
    names = list(mesh)
    terms: list[str] = []
    const, stride, exact = 0, 1, True
    for axis in reversed(names):
        v = value.get(axis)
        if isinstance(v, int) and not isinstance(v, bool):
            const += v * stride
        else:
            exact = False
            if v is None:
                part = axis
            elif isinstance(v, dict) and "offset" in v:
                part = f"({axis} + {v['offset']}) % {mesh[axis]}"
            else:
                part = f"({v})"
            terms.append(part if stride == 1 else f"{part} * {stride}")
        stride *= mesh[axis]
    if exact:
        return const
    if const:
        terms.append(str(const))
    return " + ".join(reversed(terms))


def to_axes(value: Any, mesh: dict[str, int]) -> Any:
    """The same device per axis (a 1-D mesh's index is its one axis's coordinate)."""
    value = _plain(value)
    if isinstance(value, dict):
        return value
    axis = next(iter(mesh), "dev")
    if len(mesh) == 1:
        return {axis: value}
    return {axis: {"offset": 1}}
