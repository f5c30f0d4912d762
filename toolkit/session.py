"""A headless editing session: one scenario, its analysis, history, file and runs.

The Lab's widgets are thin views of a :class:`Session`; a script or a test drives the
same object without ipywidgets::

    s = Session("dup-ref")
    s.diagnostics[0].code                 # 'MPMD_DUP_REF'
    s.apply_fix(s.diagnostics[0].fix)     # one undoable step
    s.fix_all().steps                     # or: best fixes until valid, one undoable step
    s.valid                               # True
    s.save("mine.json")                   # a new file: written
    s.run("simulate").outputs["out"]

Every committed change makes a new *version*: the scenario is resolved and checked
once (``validate.analyze``) and every view reads that :class:`~mpmd_lab.validate.
Analysis`. A change that is not a scenario is refused with its problems, and nothing
is lost. Saving goes where the user meant: a session that loaded a file saves back to
it; one started from a gallery name or a dict has no file until ``save(path)``; and a
file the session did not load or create is never replaced unless ``overwrite=True``.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpmd_lab import files, validate
from mpmd_lab.diagnostics import Diagnostic, Edit, Fix
from mpmd_lab.fields import MAX_FILE_BYTES
from mpmd_lab.fixes import MAX_STEPS, FixRun, apply_edit, apply_fix, fix_all, parse_path, retitled
from mpmd_lab.ops import Let
from mpmd_lab.ops.base import Fit
from mpmd_lab.plan import compile
from mpmd_lab.safetext import clip
from mpmd_lab.scenario import Scenario, ScenarioError, load_scenario, problems_of, save_scenario
from pydantic import ValidationError

__all__ = ["BLANK", "EditResult", "Session", "rename_key"]

Problems = list[tuple[str, str]]
Listener = Callable[["Session", str], None]
BusyListener = Callable[["Session"], None]

BLANK: dict[str, Any] = {
    "schema": "mpmd-lab/scenario@1",
    "name": "untitled",
    "description": "",
    "buffers": {},
    "call": {"entry": "pl.kernel", "args": [], "outputs": {}, "programs": [{}]},
}

#: edits of one field this close together (typing) are one undo step
MERGE_SECONDS = 1.5
#: undo history bounds: this many steps, and this many bytes of JSON in all
HISTORY_STEPS = 200
HISTORY_BYTES = 64 * 2**20


@dataclass
class EditResult:
    """``ok``: committed (or done). Otherwise ``problems`` as (field path, message)."""

    ok: bool
    problems: Problems = field(default_factory=list)

    def message(self) -> str:
        return "; ".join(f"{p or 'scenario'}: {m}" for p, m in self.problems)


@dataclass
class RunRecord:
    """A run and the scenario version it ran (stale once the session moves on)."""

    version: int
    backend: str
    result: Any
    name: str = ""


class _History:
    """Undo or redo steps as compact JSON, bounded by count and by total size."""

    def __init__(self, steps: int, nbytes: int):
        self.steps, self.nbytes = steps, nbytes
        self.items: list[tuple[str, str]] = []
        self.size = 0

    def push(self, scenario: Scenario, label: str) -> None:
        text = scenario.model_dump_json(by_alias=True)
        self.items.append((text, label))
        self.size += len(text)
        while self.items and (len(self.items) > self.steps or self.size > self.nbytes):
            old, _ = self.items.pop(0)
            self.size -= len(old)

    def pop(self) -> tuple[Scenario, str]:
        text, label = self.items.pop()
        self.size -= len(text)
        return Scenario.model_validate_json(text), label

    def clear(self) -> None:
        self.items.clear()
        self.size = 0

    def __bool__(self) -> bool:
        return bool(self.items)


def _locked(method: Callable[..., Any]) -> Callable[..., Any]:
    """One change at a time (a field that commits as you type does so from a timer)."""

    @functools.wraps(method)
    def run(self: Session, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return run


#: what a change says while it is under way (``Session.busy``)
_DOING = {
    "change": "applying the edit",
    "replace": "applying the change",
    "apply_fix": "applying the fix",
    "fix_all": "applying every fix",
    "load": "opening",
    "undo": "undoing",
    "redo": "redoing",
}


def _changing(method: Callable[..., Any]) -> Callable[..., Any]:
    """A change of the scenario: one at a time, and ``busy`` while it runs (views
    disable Run, Save and Export until the scenario they show is the session's)."""
    doing = _DOING[method.__name__]

    @functools.wraps(method)
    def run(self: Session, *args: Any, **kwargs: Any) -> Any:
        with self._lock, self.working(doing):
            return method(self, *args, **kwargs)

    return run


class Session:
    """One scenario under edit; views subscribe and re-render from it."""

    def __init__(
        self,
        source: Any = None,
        *,
        history_steps: int = HISTORY_STEPS,
        history_bytes: int = HISTORY_BYTES,
    ):
        #: the import this session opened (``mpmd_lab.from_jax``), or None
        self.imported: Any = source if _is_imported(source) else None
        self._import_shape = _shape(self.imported.scenario) if self.imported else None
        self.scenario: Scenario = _load(source)
        self.path: Path | None = _path_of(source)
        #: what the session's file was when loaded or last saved (Save compares)
        self._disk: _OnDisk | None = _OnDisk.of(self.path)
        self.version = 0
        #: the version that was opened (a load): a run of an older one is of another scenario
        self.opened_version = 0
        self._opened = self._saved = self.scenario
        self.program: int = 0  # the program the editors show (UI selection, not data)
        self.message: str = ""  # the last status line ("saved to …", "undone: …")
        self.check_error: str = ""  # why the check could not run ("" when it ran)
        self.check_ms = 0.0
        self.feedback_ms = 0.0
        self.last_run: RunRecord | None = None
        self._last_label, self._last_time = "", 0.0
        self._lock = threading.RLock()
        self._undo = _History(history_steps, history_bytes)
        self._redo = _History(history_steps, history_bytes)
        self._listeners: list[Listener] = []
        self._busy_listeners: list[BusyListener] = []
        #: what the session is doing now ("opening", "undoing"...), "" when idle
        self.busy: str = ""
        self._analyse()

    # ------------------------------------------------------------ observers

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener(session, reason)`` after every change."""
        self._listeners.append(listener)

    def subscribe_busy(self, listener: BusyListener) -> None:
        """Call ``listener(session)`` when a change starts and when it ends (``busy``)."""
        self._busy_listeners.append(listener)

    @contextlib.contextmanager
    def working(self, doing: str) -> Iterator[None]:
        """Mark the session ``busy`` with ``doing`` while the block runs (nested: the
        outer one counts); busy listeners hear the start and the end."""
        if self.busy:
            yield
            return
        self.busy = doing
        self._notify_busy()
        try:
            yield
        finally:
            self.busy = ""
            self._notify_busy()

    def _notify_busy(self) -> None:
        for listener in list(self._busy_listeners):
            try:
                listener(self)
            except Exception as e:  # one broken view must not stop the others
                self.message = f"a view failed to update: {type(e).__name__}: {e}"

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
    def diagnostics(self) -> list[Diagnostic]:
        """This version's diagnostics, in the order JAX would raise them.

        Opened on an import, JAX's own errors from tracing the user's code come first,
        and each diagnostic carries the user's line (``source``) while the statements
        are still the imported ones."""
        diags = list(self.analysis.diagnostics)
        imp = self.imported
        if imp is None:
            return diags
        from mpmd_lab.importer.api import with_source

        if self._import_shape == _shape(self.scenario):
            diags = [with_source(d, imp.source) for d in diags]
        own = [d for d in imp.diagnostics if d.stage == "trace" and d.jax is not None]
        if imp.scenario is None:
            own = list(imp.diagnostics)
        return own + [d for d in diags if d not in own]

    def source_of(self, path: str) -> str | None:
        """The user's ``"FILE:LINE"`` for a field path of an imported scenario (None when
        the session is not an import, or the statements have changed since)."""
        if self.imported is None or self._import_shape != _shape(self.scenario):
            return None
        return self.imported.source_of(path)

    @property
    def plan(self) -> Any:
        return self.analysis.plan

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
        for d in self.analysis.diagnostics:
            if d.path == path or (
                not exact and path and d.path.startswith(path) and d.path[len(path)] in ".["
            ):
                out.append(d)
        return out

    def fit(self) -> Fit:
        """The names a new op should fit (the Lab's add buttons use ``Op.example(fit)``)."""
        s = self.scenario
        c = s.call
        refs: list[str] = []
        for a in c.args:
            leaves = getattr(a, "tuple", None)
            refs += [f"{a.param}[{i}]" for i in range(len(leaves))] if leaves else [a.param]
        refs += list(c.outputs) + [n for n, sc in c.scratch.items() if sc.KIND == "array"]
        prog = c.programs[self.program] if c.programs else None
        if prog is not None:
            refs += [st.let for st in prog.body if isinstance(st, Let)]
        return Fit(
            refs=refs,
            outputs=list(c.outputs),
            device_axes=list(s.device_mesh or {}),
            cluster_axes=list(prog.mesh.cluster) if prog else [],
            semaphores=[n for n, sc in c.scratch.items() if sc.KIND == "semaphore"],
            barriers=[n for n, sc in c.scratch.items() if "barrier" in sc.KIND],
            smem=[
                n for n, sc in c.scratch.items() if sc.KIND == "array" and sc.memory_space == "SMEM"
            ],
        )

    @property
    def empty(self) -> bool:
        """Nothing to check yet: no buffers, outputs, scratch or statements."""
        c = self.scenario.call
        return not (
            self.scenario.buffers
            or c.outputs
            or c.scratch
            or c.args
            or any(p.body for p in c.programs)
        )

    @property
    def valid(self) -> bool:
        failed_import = self.imported is not None and self.imported.scenario is None
        return not self.check_error and self.analysis.valid and not failed_import

    @property
    def verdict(self) -> str:
        """``valid``, ``valid where checked`` (the check said what it could not check:
        never plain valid then) or ``invalid``."""
        return (
            "valid where checked"
            if self.valid and self.analysis.verdict != "valid"
            else ("valid" if self.valid else "invalid")
        )

    @property
    def dirty(self) -> bool:
        """Unsaved changes: the scenario differs from what was last opened or saved."""
        return self.scenario != self._saved

    @property
    def changed_since_opened(self) -> bool:
        """Whether the scenario differs from what was opened (its description was
        written for what was opened)."""
        return self.scenario != self._opened

    @property
    def run_is_current(self) -> bool:
        """Whether the last run ran this very version of the scenario."""
        return self.last_run is not None and self.last_run.version == self.version

    # ------------------------------------------------------------ changing

    def edit(self, *edits: Edit | tuple[str, str, Any], label: str = "") -> EditResult:
        """Make field-path edits (``Edit`` or ``(op, path, value)``) as one undoable step."""
        es = [e if isinstance(e, Edit) else Edit(op=e[0], path=e[1], value=e[2]) for e in edits]

        def run(data: dict[str, Any]) -> None:
            for e in es:
                apply_edit(data, e)

        return self.change(run, label or ", ".join(f"{e.op} {e.path}" for e in es))

    @_changing
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

    @_changing
    def replace(self, scenario: Scenario, label: str) -> None:
        """Commit a whole new scenario (a fix, a load) as one undoable step."""
        self._commit(scenario, label, time.perf_counter())

    def _commit(self, new: Scenario, label: str, t0: float, dirty: bool = True) -> None:
        if new == self.scenario:
            return
        now = time.monotonic()
        typing = (
            label.startswith("set ")
            and label == self._last_label
            and now - self._last_time < MERGE_SECONDS
            and bool(self._undo)
        )
        if not typing:  # a burst of edits of one field (typing) is one undo step
            self._undo.push(self.scenario, label)
        self._last_label, self._last_time = label, now
        self._redo.clear()
        self._set(new, label, t0, dirty)

    def _set(self, new: Scenario, reason: str, t0: float, dirty: bool = True) -> None:
        if not reason.startswith("set "):
            self._last_label = ""  # an undo, a load, another kind of edit ends a burst
        self.scenario = new
        self.version += 1
        if not dirty:
            self._saved = new
        self.program = min(self.program, max(len(new.call.programs) - 1, 0))
        self.message = reason
        self._analyse()
        self._notify(reason)
        self.feedback_ms = (time.perf_counter() - t0) * 1000

    def _analyse(self) -> None:
        t0 = time.perf_counter()
        try:
            self.analysis = validate.analyze(self.scenario)
            self.check_error = ""
        except Exception as e:  # a rule's bug must not take the session down
            self.analysis = validate.Analysis(self.scenario, compile(self.scenario), ())
            self.check_error = f"the check failed: {type(e).__name__}: {e}"
        self.check_ms = (time.perf_counter() - t0) * 1000

    def refuse(self, path: str, why: str) -> None:
        """A value typed for ``path`` was refused before it reached the scenario: the
        status line says so (the scenario, its version and history are unchanged)."""
        self.message = f"not set: {path}: {why}"
        self._last_label = ""  # the next value typed is a step of its own
        self._notify("refused")

    # ------------------------------------------------------------ history

    @property
    def can_undo(self) -> bool:
        return bool(self._undo)

    @property
    def can_redo(self) -> bool:
        return bool(self._redo)

    @_changing
    def undo(self) -> bool:
        """Step back one change; False when there is none."""
        if not self._undo:
            return False
        old, label = self._undo.pop()
        self._redo.push(self.scenario, label)
        self._set(old, f"undone: {label}", time.perf_counter())
        return True

    @_changing
    def redo(self) -> bool:
        """Redo the last undone change; False when there is none."""
        if not self._redo:
            return False
        new, label = self._redo.pop()
        self._undo.push(self.scenario, label)
        self._set(new, f"redone: {label}", time.perf_counter())
        return True

    # ------------------------------------------------------------ fixes, files

    @_changing
    def apply_fix(self, fix: Fix) -> EditResult:
        """Apply a diagnostic's fix as one undoable step."""
        try:
            fixed = apply_fix(self.scenario, fix)
        except Exception as e:  # a fix that no longer applies is refused, not raised
            return EditResult(False, [("", f"cannot apply the fix: {e}")])
        if fix.after == []:  # (checked: it leaves no error) a name saying "broken" goes
            fixed = retitled(fixed, [fix])
        self.replace(fixed, f"fix: {fix.description}")
        return EditResult(True)

    @_changing
    def fix_all(self, max_steps: int = MAX_STEPS) -> FixRun:
        """Apply the best fix of the first error that has one and check again, until the
        scenario is valid or no fix is left (at most ``max_steps``), as one undoable
        step. The result lists each step: the error, what the fix changed, what it left
        (``mpmd_lab.fixes.fix_all``)."""
        run = fix_all(self.scenario, self.diagnostics, max_steps)
        if run.steps:
            n = len(run.steps)
            self.replace(run.scenario, f"fix all: {n} fix{'es' if n > 1 else ''}, {run.stopped}")
        else:
            self.message = f"fix all: nothing applied ({run.stopped})"
            self._notify(self.message)
        return run

    @_changing
    def load(self, source: Any) -> EditResult:
        """Replace the scenario by a file, gallery name, JSON text or dict (undoable).

        The session then saves to that file, or (a gallery name, text, a dict) to no
        file until ``save(path)`` names one."""
        try:
            new = _load(source)
        except ScenarioError as e:
            return EditResult(False, e.problems)
        self.path = _path_of(source)
        self._disk = _OnDisk.of(self.path)
        self._undo.push(self.scenario, f"load {new.name}")
        self._redo.clear()
        self.opened_version = self.version + 1  # the version _set makes (views see it)
        self._opened = new
        self._set(new, f"loaded {new.name}", time.perf_counter(), dirty=False)
        return EditResult(True)

    @_locked
    def save(self, path: str | Path | None = None, *, overwrite: bool = False) -> EditResult:
        """Write the scenario as JSON; afterwards the session saves to that file.

        With no ``path``, the session's own file (an error when it has none: "save as").
        A ``path`` other than the session's own that already exists is replaced only
        with ``overwrite=True`` (the caller asked the user); so is the session's own file
        when another program changed it since it was loaded (or last saved). The target
        is resolved again now: a link or folder swapped in since is refused."""
        target = Path(path) if path else self.path
        if target is None:
            return EditResult(False, [("", "this scenario has no file yet: save it as a file")])
        shown = clip(str(target), 120)
        try:
            real, existing = files.target_of(target)  # never a device, a FIFO, a folder
        except OSError as e:
            return EditResult(False, [("", f"cannot save to {shown}: {e.strerror or e}")])
        own = self.path is not None and _same_file(target, self.path)
        if own and self._disk is not None and real != self._disk.real:
            return EditResult(
                False,
                [
                    (
                        "",
                        f"{shown} now leads to {clip(str(real), 120)}, not the file that was "
                        "loaded (a link swapped in since): save it as a file",
                    )
                ],
            )
        if own and self._disk is not None and not overwrite:
            why = self._disk.changed(real, existing)
            if why:
                return EditResult(
                    False, [("", f"{shown} {why} since it was loaded: confirm to replace it")]
                )
        if existing is not None and not own and not overwrite:
            return EditResult(
                False,
                [("", f"{shown} exists and is not this session's file: confirm to replace it")],
            )
        try:
            save_scenario(self.scenario, target)
        except (OSError, ValueError) as e:
            msg = getattr(e, "strerror", None) or str(e)
            return EditResult(False, [("", f"cannot save to {shown}: {clip(msg, 200)}")])
        self.path = target
        self._disk = _OnDisk.of(target)
        self._saved = self.scenario
        self.message = f"saved to {target}"
        self._notify("saved")
        return EditResult(True)

    # ------------------------------------------------------------ running, exporting

    def run(self, backend: str = "auto", **kwargs: Any) -> Any:
        """Run this version (``runtime.run``; ``processes=N``: as N JAX controller
        processes here); the result is kept as ``last_run``."""
        from mpmd_lab import runtime

        version, scenario, analysis = self.snapshot()
        result = runtime.run(scenario, backend, analysis=analysis, **kwargs)
        self.last_run = RunRecord(version, result.backend, result, scenario.name)
        self._notify("ran")
        return result

    def snapshot(self) -> tuple[int, Scenario, validate.Analysis]:
        """This version, its scenario and its analysis, taken together: a change under
        way (another thread's commit) finishes first, so a run or an export acts on
        the scenario the views show once it is done, never on half of one."""
        with self._lock:
            return self.version, self.scenario, self.analysis

    def export(self) -> str:
        """The plain JAX program of this version (``codegen.generate``)."""
        from mpmd_lab import codegen

        _, scenario, analysis = self.snapshot()
        return codegen.generate(scenario, analysis=analysis)

    def graph(self, access_log: Any = None) -> Any:
        """The aliasing graph model of this version (``graph.build_graph``)."""
        from mpmd_lab.graph import build_graph

        return build_graph(self.scenario, access_log=access_log, analysis=self.analysis)


# ---------------------------------------------------------------- helpers


def _is_imported(source: Any) -> bool:
    return type(source).__name__ == "Imported" and hasattr(source, "unsupported")


def _shape(scenario: Scenario | None) -> Any:
    """The statement kinds of every body, nested: field paths mean the same while it holds."""
    if scenario is None:
        return None

    def body(stmts: list[Any]) -> list[Any]:
        return [(st.kind, body(getattr(st, "body", None) or [])) for st in stmts]

    return [body(p.body) for p in scenario.call.programs]


def _load(source: Any) -> Scenario:
    if source is None:
        return Scenario.model_validate(copy.deepcopy(BLANK))
    if _is_imported(source):
        if source.scenario is not None:
            return source.scenario
        blank = copy.deepcopy(BLANK)
        blank["name"] = "import-failed"
        blank["description"] = f"{source.function or 'the function'} could not be imported"
        return Scenario.model_validate(blank)
    return load_scenario(source)


def _path_of(source: Any) -> Path | None:
    if isinstance(source, Path) or (
        isinstance(source, str)
        and not source.lstrip().startswith("{")
        and source.endswith(".json")
        and Path(source).is_file()
    ):
        return Path(source)
    return None


class _OnDisk:
    """A file as the session read or wrote it: where it leads (symlinks followed), its
    identity and time, and the hash of its bytes."""

    __slots__ = ("real", "dev", "ino", "mtime_ns", "size", "digest")

    def __init__(self, real: Path, st: os.stat_result, digest: str) -> None:
        self.real = real
        self.dev, self.ino = st.st_dev, st.st_ino
        self.mtime_ns, self.size = st.st_mtime_ns, st.st_size
        self.digest = digest

    @classmethod
    def of(cls, path: Path | None) -> _OnDisk | None:
        """``path``'s file now (None: no path, or not a readable regular file)."""
        if path is None:
            return None
        try:
            real = Path(os.path.realpath(path))
            with open(real, "rb") as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
                    return None
                return cls(real, st, hashlib.sha256(f.read()).hexdigest())
        except (OSError, ValueError):
            return None

    def changed(self, real: Path, st: os.stat_result | None) -> str:
        """How the file at ``real`` (stat ``st``, None: gone) differs from this one, in
        words ("" when the same bytes are there)."""
        if st is None:
            return "was removed"
        same = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size) == (
            self.dev,
            self.ino,
            self.mtime_ns,
            self.size,
        )
        if same:
            return ""
        now = _OnDisk.of(real)
        if now is not None and now.digest == self.digest:
            return ""  # touched or rewritten with the same bytes
        return "was changed by another program"


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False


def rename_key(mapping: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """The mapping with key ``old`` renamed to ``new``, order kept."""
    if new in mapping and new != old:
        raise ValueError(f"{new!r} is already used")
    return {(new if k == old else k): v for k, v in mapping.items()}
