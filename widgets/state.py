"""The Lab's model: the scenario being edited, its diagnostics, undo/redo, and who to tell.

Views never change a scenario themselves: they ask ``LabState.edit`` (field-path edits,
the same ``Edit`` form a ``Fix`` uses) or ``LabState.change`` (a function on the JSON
form). A change that is not a scenario is refused and its problems are returned, so the
view can show them beside the field; the work in the scenario is never lost. A change
that is a scenario is committed, pushed on the undo stack, re-validated (static, no
tracing) and announced to every subscriber.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpmd_lab.diagnostics import Diagnostic, Edit, Fix
from mpmd_lab.fixes import apply_edit, parse_path
from mpmd_lab.scenario import Scenario, ScenarioError, load_scenario, problems_of, save_scenario
from mpmd_lab.widgets import services
from pydantic import ValidationError

__all__ = ["BLANK", "EditResult", "LabState", "apply_edit", "parse_path", "rename_key"]

Problems = list[tuple[str, str]]
Listener = Callable[["LabState", str], None]

BLANK: dict[str, Any] = {
    "schema": "mpmd-lab/scenario@1",
    "name": "untitled",
    "description": "",
    "buffers": {},
    "call": {"entry": "pl.kernel", "args": [], "outputs": {}, "programs": [{}]},
}


@dataclass
class EditResult:
    """``ok``: committed. Otherwise ``problems`` as (field path, message)."""

    ok: bool
    problems: Problems = field(default_factory=list)

    def message(self) -> str:
        return "; ".join(f"{p or 'scenario'}: {m}" for p, m in self.problems)


class LabState:
    """One scenario under edit; views subscribe and re-render from it."""

    def __init__(self, source: Any = None, history: int = 200):
        self.scenario: Scenario = _load(source)
        self.diagnostics: list[Diagnostic] = []
        self.check_error: str = ""  # why validation could not run ("" when it ran)
        self.program: int = 0  # the program the editors show (UI selection, not data)
        self.message: str = ""  # the last status line ("saved to …", "undone: …")
        self.path: Path | None = _path_of(source)
        self.check_ms: float = 0.0
        self.feedback_ms: float = 0.0
        self._undo: list[tuple[dict[str, Any], str]] = []
        self._redo: list[tuple[dict[str, Any], str]] = []
        self._history = history
        self._listeners: list[Listener] = []
        self._revalidate()

    # ------------------------------------------------------------ observers

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener(state, reason)`` after every committed change."""
        self._listeners.append(listener)

    def _notify(self, reason: str) -> None:
        for listener in list(self._listeners):
            try:
                listener(self, reason)
            except Exception as e:  # one broken view must not stop the others
                self.message = f"a view failed to update: {type(e).__name__}: {e}"

    def select_program(self, index: int) -> None:
        """Show program ``index`` in the editors (a UI selection; not undoable)."""
        if 0 <= index < len(self.scenario.call.programs) and index != self.program:
            self.program = index
            self._notify("program selected")

    # ------------------------------------------------------------ reading

    @property
    def data(self) -> dict[str, Any]:
        """A fresh JSON copy of the scenario (safe to mutate)."""
        return self.scenario.to_dict()

    def get(self, path: str, default: Any = None) -> Any:
        """The JSON value at a field path (``call.args[1].param``), or ``default``."""
        try:
            node: Any = self.scenario.to_dict()
            for part in parse_path(path):
                node = node[part]
            return node
        except (KeyError, IndexError, TypeError):
            return default

    def diagnostics_at(self, path: str, exact: bool = False) -> list[Diagnostic]:
        """Diagnostics whose path is ``path`` or (unless exact) lies inside it."""
        out = []
        for d in self.diagnostics:
            if d.path == path or (
                not exact and path and d.path.startswith(path) and d.path[len(path)] in ".["
            ):
                out.append(d)
        return out

    @property
    def valid(self) -> bool:
        return not self.check_error and not any(d.is_error for d in self.diagnostics)

    # ------------------------------------------------------------ changing

    def edit(self, *edits: Edit | tuple[str, str, Any], label: str = "") -> EditResult:
        """Make field-path edits (``Edit`` or ``(op, path, value)``) as one undoable step."""
        es = [e if isinstance(e, Edit) else Edit(op=e[0], path=e[1], value=e[2]) for e in edits]

        def run(data: dict[str, Any]) -> None:
            for e in es:
                apply_edit(data, e)

        return self.change(run, label or ", ".join(f"{e.op} {e.path}" for e in es))

    def change(self, fn: Callable[[dict[str, Any]], Any], label: str = "edit") -> EditResult:
        """Apply ``fn`` to a JSON copy; commit it if it is still a scenario."""
        t0 = time.perf_counter()
        data = self.data
        try:
            fn(data)
        except Exception as e:  # whatever the edit trips on, the scenario stays as it was
            return EditResult(False, [("", f"cannot {label}: {e}")])
        try:
            new = Scenario.model_validate(data)
        except ValidationError as e:
            return EditResult(False, problems_of(e))
        except RecursionError:
            return EditResult(False, [("", "nested too deeply")])
        self._commit(new, label, t0)
        return EditResult(True)

    def replace(self, scenario: Scenario, label: str) -> None:
        """Commit a whole new scenario (a fix, a load) as one undoable step."""
        self._commit(scenario, label, time.perf_counter())

    def _commit(self, new: Scenario, label: str, t0: float) -> None:
        if new == self.scenario:
            return
        self._undo.append((self.scenario.to_dict(), label))
        del self._undo[: -self._history]
        self._redo.clear()
        self._set(new, label, t0)

    def _set(self, new: Scenario, reason: str, t0: float) -> None:
        self.scenario = new
        self.program = min(self.program, max(len(new.call.programs) - 1, 0))
        self.message = reason
        self._revalidate()
        self._notify(reason)
        self.feedback_ms = (time.perf_counter() - t0) * 1000

    def _revalidate(self) -> None:
        t0 = time.perf_counter()
        try:
            self.diagnostics = services.check(self.scenario)
            self.check_error = ""
        except services.Unavailable as e:
            self.diagnostics, self.check_error = [], str(e)
        self.check_ms = (time.perf_counter() - t0) * 1000

    # ------------------------------------------------------------ history

    @property
    def can_undo(self) -> bool:
        return bool(self._undo)

    @property
    def can_redo(self) -> bool:
        return bool(self._redo)

    def undo(self) -> bool:
        """Step back one change; False when there is none."""
        if not self._undo:
            return False
        data, label = self._undo.pop()
        self._redo.append((self.scenario.to_dict(), label))
        self._set(Scenario.model_validate(data), f"undone: {label}", time.perf_counter())
        return True

    def redo(self) -> bool:
        """Redo the last undone change; False when there is none."""
        if not self._redo:
            return False
        data, label = self._redo.pop()
        self._undo.append((self.scenario.to_dict(), label))
        self._set(Scenario.model_validate(data), f"redone: {label}", time.perf_counter())
        return True

    # ------------------------------------------------------------ fixes, files

    def apply_fix(self, fix: Fix) -> EditResult:
        """Apply a diagnostic's fix (``mpmd_lab.fixes``) as one undoable step."""
        try:
            fixed = services.apply_fix(self.scenario, fix)
        except services.Unavailable as e:
            return EditResult(False, [("", str(e))])
        self.replace(fixed, f"fix: {fix.description}")
        return EditResult(True)

    def load(self, source: Any) -> EditResult:
        """Replace the scenario by a file, gallery name, JSON text or dict (undoable)."""
        try:
            new = _load(source)
        except ScenarioError as e:
            return EditResult(False, e.problems)
        self.path = _path_of(source) or self.path
        self.replace(new, f"loaded {new.name}")
        return EditResult(True)

    def save(self, path: str | Path | None = None) -> EditResult:
        """Write the scenario as JSON (atomic); remembers the path."""
        target = Path(path) if path else self.path
        if target is None:
            return EditResult(False, [("", "no file name: type a path to save to")])
        try:
            save_scenario(self.scenario, target)
        except OSError as e:
            return EditResult(False, [("", f"cannot save to {target}: {e.strerror or e}")])
        self.path = target
        self.message = f"saved to {target}"
        self._notify("saved")
        return EditResult(True)


# ---------------------------------------------------------------- helpers


def _load(source: Any) -> Scenario:
    if source is None:
        return Scenario.model_validate(copy.deepcopy(BLANK))
    return load_scenario(source)


def _path_of(source: Any) -> Path | None:
    if isinstance(source, Path) or (
        isinstance(source, str) and source.endswith(".json") and Path(source).is_file()
    ):
        return Path(source)
    return None


def rename_key(mapping: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """The mapping with key ``old`` renamed to ``new``, order kept."""
    if new in mapping and new != old:
        raise ValueError(f"{new!r} is already used")
    return {(new if k == old else k): v for k, v in mapping.items()}
