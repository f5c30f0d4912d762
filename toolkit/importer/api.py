"""``from_jax``: a real JAX function's kernel call, read into a scenario.

    imported = mpmd_lab.from_jax(fn, *args)     # traces fn(*args); never runs it
    imported.scenario                            # the Scenario (None: nothing built)
    imported.diagnostics                         # JAX's errors + the static check,
                                                 #   each with .source = "FILE:LINE"
    imported.unsupported                         # what was not translated, by name
    mpmd_lab.simulate(imported.scenario).outputs # what the kernel computes

Tracing is ``jax.jit(fn).trace(*args)`` (or ``fn.trace`` for a jitted function): no
device computation, no interpreter. It runs in the calling thread (JAX's context
managers, such as a mesh set with ``jax.set_mesh``, stay in effect) under a watchdog:
past ``timeout`` seconds an exception is raised into the tracing thread, which stops
a user function that loops forever in Python (one stuck inside a C call cannot be
stopped in-process: ``mpmd-lab import`` runs the import in a child process it kills).
"""

from __future__ import annotations

import ctypes
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mpmd_lab import sharding
from mpmd_lab.diagnostics import Diagnostic, JaxError
from mpmd_lab.importer import call as C
from mpmd_lab.importer import frames as F
from mpmd_lab.importer import kernel as K

#: Seconds an import (trace, translation, static check) may take before it is stopped.
DEFAULT_TIMEOUT = 120.0
#: Mosaic GPU compiler parameters that do not change what a scenario's statements
#: compute or whether JAX accepts them: profiling, the multi-process deployment, and
#: approximate transcendental math (no scenario statement computes one). The lowering
#: semantics, barriers and the device barrier at the start do, and stay unsupported.
NO_EFFECT_PARAMS = frozenset(
    {
        "approx_math",
        "profile_space",
        "profile_dir",
        "profile_trace_scope",
        "profile_bounds_check",
        "is_multi_process",
    }
)


class ImportTimeout(BaseException):  # noqa: N818 - raised into the user's code, like KeyboardInterrupt
    """Raised into a trace that ran past its time limit."""


@dataclass
class Result:
    """One output of the user's function: which scenario output (or as_ref buffer) it
    is, and how the user's ``shard_map`` puts its shards together."""

    kind: str  # "output" | "buffer" | "computed"
    name: str | None = None
    spec: Any = None  # the out_spec (None: not under shard_map)
    what: str = ""  # for "computed": what the function does after the kernel
    where: str | None = None  # (the user's line of it)


@dataclass
class Imported:
    """What ``from_jax`` found (see the module docstring)."""

    scenario: Any  # Scenario | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    #: field path -> "FILE:LINE" of the user's line it came from
    source: dict[str, str] = field(default_factory=dict)
    results: list[Result] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    function: str = ""
    device_axes: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """A faithful scenario that JAX (and the static check) accept."""
        return (
            self.scenario is not None
            and not self.unsupported
            and not any(d.is_error for d in self.diagnostics)
        )

    @property
    def faithful(self) -> bool:
        """The scenario carries the whole kernel (False: partial, or none at all)."""
        return self.scenario is not None and not self.unsupported

    def source_of(self, path: str) -> str | None:
        """``"FILE:LINE"`` for a field path (its own, or the nearest enclosing one's)."""
        return source_for(self.source, path)

    def line_of(self, path: str) -> str:
        """The user's source text for a field path ("" when unknown)."""
        return F.line_text(self.source_of(path))

    def outputs(self, outputs: Any) -> list[np.ndarray | None]:
        """The user's function's results, from a run's or a simulation's outputs
        (global arrays by name, as ``mpmd_lab.simulate(...).outputs`` gives them): each
        put together as the user's ``shard_map`` out_spec says; None for a result the
        function computes after the kernel."""
        out: list[np.ndarray | None] = []
        n = max(1, int(np.prod(list(self.device_axes.values())))) if self.device_axes else 1
        for r in self.results:
            if r.kind == "computed" or r.name is None or r.name not in outputs:
                out.append(None)
                continue
            value = np.asarray(outputs[r.name])
            if not self.device_axes or r.spec is None or self._carried_spec(r):
                out.append(value)  # (a spec the scenario carries: already put together)
                continue
            shards = np.split(value, n, axis=0) if value.ndim else [value] * n
            out.append(C.assemble(shards, r.spec, self.device_axes))
        return out

    def _carried_spec(self, r: Result) -> bool:
        """Whether the scenario gathers this result by its own out spec."""
        if self.scenario is None:
            return False
        o = self.scenario.call.outputs.get(r.name) if r.kind == "output" else None
        return o is not None and o.spec is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": None if self.scenario is None else self.scenario.to_dict(),
            "diagnostics": [d.to_json() for d in self.diagnostics],
            "unsupported": list(self.unsupported),
            "source": dict(self.source),
            "results": [
                {"kind": r.kind, "name": r.name, "spec": _spec_json(r.spec), "what": r.what}
                for r in self.results
            ],
            "notes": list(self.notes),
            "seconds": self.seconds,
            "function": self.function,
            "device_axes": dict(self.device_axes),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Imported:
        from mpmd_lab.scenario import Scenario

        sc = data.get("scenario")
        return cls(
            scenario=None if sc is None else Scenario.model_validate(sc),
            diagnostics=[Diagnostic.model_validate(d) for d in data.get("diagnostics", [])],
            unsupported=list(data.get("unsupported", [])),
            source=dict(data.get("source", {})),
            results=[
                Result(r["kind"], r.get("name"), _spec_from_json(r.get("spec")), r.get("what", ""))
                for r in data.get("results", [])
            ],
            notes=list(data.get("notes", [])),
            seconds=float(data.get("seconds", 0.0)),
            function=data.get("function", ""),
            device_axes=dict(data.get("device_axes", {})),
        )

    def summary(self) -> str:
        """A few lines for a terminal."""
        lines = []
        name = self.scenario.name if self.scenario is not None else "(no scenario)"
        what = self.function or "?"
        head = f"imported {what}" if what == name else f"imported {what} -> {name}"
        lines.append(f"{head} in {self.seconds:.2f} s")
        if self.unsupported:
            lines.append(
                f"  PARTIAL: {len(self.unsupported)} construct(s) not imported; the scenario "
                "is not your whole kernel (check, simulate and run say so)"
            )
        said = any(d.code == "IMPORT_UNSUPPORTED" for d in self.diagnostics)
        for d in self.diagnostics:
            where = f" ({F.display(d.source)})" if d.source and d.source not in d.message else ""
            if d.code == "IMPORT_UNSUPPORTED":
                where = ""  # its message says where, as the user reads it
            lines.append(f"  {d.severity} {d.code}{where}: {d.message}")
        if not said:
            for u in self.unsupported:
                lines.append(f"  unsupported: {u}")
        for n in self.notes:
            lines.append(f"  note: {n}")
        if self.faithful and not self.diagnostics:
            lines.append("  faithful; no problems found")
        return "\n".join(lines)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython
        p.text(self.summary())


def _in_spec(origin: Any) -> Any:
    """The ``shard_map`` in spec an operand is split by (None: not under one)."""
    o = origin.of if isinstance(origin, C.NewRef) else origin
    if isinstance(origin, C.Shard):
        return origin.spec
    return o.spec if isinstance(o, C.Shard) else None


def _spec_json(spec: Any) -> Any:
    if spec is None:
        return None
    out = []
    for e in spec:
        out.append(list(e) if isinstance(e, tuple | list) else e)
    return out


def _spec_from_json(spec: Any) -> Any:
    if spec is None:
        return None
    return tuple(tuple(e) if isinstance(e, list) else e for e in spec)


def source_for(source: dict[str, str], path: str) -> str | None:
    """The source of ``path``, or of the nearest enclosing path that has one."""
    p = path
    while p:
        if p in source:
            return source[p]
        cut = max(p.rfind("."), p.rfind("["))
        if cut <= 0:
            break
        p = p[:cut]
    return source.get(p) if p else None


# ---------------------------------------------------------------- tracing, bounded


#: seconds between the watchdog's raises after the first (a finalizer can drop one):
#: short, so a dropped stop costs little past the limit
_RETRY = 0.05


def bounded(fn: Any, timeout: float | None) -> Any:
    """``fn()`` in this thread, stopped with ImportTimeout after ``timeout`` seconds.

    The exception is raised into this thread asynchronously; Python drops one that lands
    in a finalizer (``Exception ignored in ...``), so the watchdog raises it again every
    ``_RETRY`` seconds until ``fn`` has stopped. When ``fn`` is done (returned or raised), the
    watchdog is joined and any exception still pending is taken back, so none escapes
    past this call."""
    if not timeout:
        return fn()
    target = ctypes.c_ulong(threading.get_ident())
    done = threading.Event()
    state = {"finished": False}

    def watchdog() -> None:
        wait = timeout
        while not done.wait(wait):
            if state["finished"]:
                return
            ctypes.pythonapi.PyThreadState_SetAsyncExc(target, ctypes.py_object(ImportTimeout))
            wait = _RETRY

    t = threading.Thread(target=watchdog, name="mpmd-lab-import-watchdog", daemon=True)
    t.start()
    try:
        return fn()
    finally:
        while True:  # an ImportTimeout landing here is one too many: fn is done
            try:
                state["finished"] = True
                done.set()
                t.join()
                ctypes.pythonapi.PyThreadState_SetAsyncExc(target, None)
                break
            except ImportTimeout:
                continue


def _bounded_step(fn: Any, timeout: float | None) -> Any:
    """``bounded(fn, timeout)``, its stop raised as ImportTimeout even where the code it
    stopped wrapped it in an error of its own (JAX does)."""
    try:
        return bounded(fn, timeout)
    except Exception as e:
        if _stopped(e):
            raise ImportTimeout from e
        raise


def _timeout(what: str, timeout: float | None, explanation: str) -> Diagnostic:
    """IMPORT_TIMEOUT: ``what`` did not finish in ``timeout`` seconds."""
    return Diagnostic(
        code="IMPORT_TIMEOUT",
        severity="error",
        stage="trace",
        message=f"{what} did not finish in {timeout:g} s and was stopped",
        explanation=explanation,
    )


def _stopped(e: BaseException) -> bool:
    """The watchdog's ImportTimeout is somewhere in the chain of ``e`` (code that catches
    everything and raises its own error)."""
    seen = 0
    x: BaseException | None = e
    while x is not None and seen < 20:
        if isinstance(x, ImportTimeout):
            return True
        x = x.__cause__ or x.__context__
        seen += 1
    return False


def trace(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The traced function (``jax.stages.Traced``): its jaxpr, nothing run."""
    import jax

    f = fn if hasattr(fn, "trace") else jax.jit(fn)
    return f.trace(*args, **kwargs)


def error_diagnostic(exc: BaseException, stage: str = "trace") -> Diagnostic:
    """A JAX error raised while tracing the user's code, as a Diagnostic at their line."""
    from mpmd_lab import catalogue, knowledge

    where = F.exception_source(exc)
    type_name = type(exc).__name__
    message = str(exc)
    code = catalogue.classify(type_name, message) or "JAX_UNKNOWN"
    entry = catalogue.BY_CODE.get(code)
    title = entry.title if entry else catalogue.OWN.get(code, ("", ""))[0]
    card = knowledge.lookup(code)
    explanation = ""
    if card is not None:
        explanation = " ".join(card.meaning.split())
        if card.solutions:
            explanation += " How to fix it: " + card.solutions[0]
    line = F.line_text(where)
    at = f" at {_short(where)}" if where else ""
    head = message.strip().splitlines()[0] if message.strip() else type_name
    if code == "JAX_UNKNOWN":  # no rule knows it: the error itself, and where it was raised
        head = f"{type_name}: {head}" if head != type_name else type_name
        title = f"{title}: {head}" if title else head
        if where is None and (raised := F.raised_at(exc)):
            text = F.line_text(raised)
            title += f" (raised at {_short(raised)}" + (f": {text})" if text else ")")
    return Diagnostic(
        code=code,
        severity="error",
        stage=stage,
        path="",
        message=f"{title or head}{at}" + (f": {line}" if line else ""),
        jax=JaxError(type=type_name, message=message),
        explanation=explanation,
        source=where,
    )


def _short(where: str | None) -> str:
    """The user's line as they read it (``cell [3], line 11``, ``kernels.py:11``)."""
    return F.display(where)


# ---------------------------------------------------------------- from_jax


def from_jax(
    fn: Any,
    *args: Any,
    timeout: float | None = DEFAULT_TIMEOUT,
    check: bool = True,
    name: str | None = None,
    **kwargs: Any,
) -> Imported:
    """Trace ``fn(*args, **kwargs)`` (never run it) and read its kernel call into a
    scenario. ``timeout``: seconds the import may take (tracing, translating and the
    static check together: past it, IMPORT_TIMEOUT); ``check``: run the static check
    of the built scenario (its diagnostics carry the user's lines); ``name``: the
    scenario's name (default: the kernel function's). A keyword argument of ``fn``
    named like one of these goes through :func:`import_call` instead."""
    return import_call(fn, args, kwargs, timeout=timeout, check=check, name=name)


def import_call(
    fn: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None = None,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    check: bool = True,
    name: str | None = None,
) -> Imported:
    """:func:`from_jax` with the call's arguments given as a tuple and a dict."""
    kwargs = dict(kwargs or {})
    t0 = time.perf_counter()
    fname = getattr(fn, "__name__", None) or getattr(getattr(fn, "fun", None), "__name__", "") or ""

    def left() -> float | None:  # the time limit covers tracing, translating, checking
        return None if not timeout else max(0.1, timeout - (time.perf_counter() - t0))

    try:
        traced = _bounded_step(lambda: trace(fn, args, kwargs), timeout)
    except ImportTimeout:
        d = _timeout(
            f"tracing {fname or 'the function'}",
            timeout,
            "The function (or the kernel body) ran past the time limit while JAX "
            "traced it: a Python loop that never ends, or one far too long to unroll.",
        )
        return Imported(None, [d], seconds=time.perf_counter() - t0, function=fname)
    except Exception as e:  # noqa: BLE001 - JAX's (or the user's) error is the finding
        rejected = [error_diagnostic(e)]
        budget = retrace_budget(time.perf_counter() - t0, left())
        again = _what_was_traced(fn, args, kwargs, e, budget)
        if again is _RETRACE_STOPPED:
            rejected.append(
                _timeout(
                    f"tracing {fname or 'the function'} again without the statements JAX rejected",
                    budget,
                    "Only JAX's rejection is shown: left out, the rejected statement changed "
                    "what the function does after it (a Python loop that waits on what it "
                    "made never ends), so what JAX traced before it cannot be shown.",
                )
            )
            again = None
        if again is None:
            return Imported(None, rejected, seconds=time.perf_counter() - t0, function=fname)
        traced = again.traced
        rejected += [error_diagnostic(x) for x in again.errors]
        left_out = again.left_out
    else:
        rejected, left_out = [], []
    try:
        imp = _bounded_step(
            lambda: build(traced, args, kwargs, name=name, left_out=left_out), left()
        )
    except ImportTimeout:
        d = _timeout(
            f"translating {fname or 'the function'}'s kernel",
            timeout,
            "JAX traced the function, but its kernel is too large to read into a "
            "scenario within the time limit (a Python loop unrolled into very many "
            "statements): raise the timeout, or use lax.fori_loop / pl.loop.",
        )
        return Imported(None, [d], seconds=time.perf_counter() - t0, function=fname)
    except Exception as e:  # noqa: BLE001 - a bug of ours must not look like the user's
        import traceback

        tb = traceback.format_exc(limit=3).strip().splitlines()[-1]
        imp = Imported(None, unsupported=[f"the importer failed: {type(e).__name__}: {e} ({tb})"])
    if rejected and imp.scenario is None:  # the retrace reached no kernel: nothing to show
        return Imported(None, rejected, seconds=time.perf_counter() - t0, function=fname)
    imp.function = imp.scenario.name if imp.scenario is not None else fname
    if imp.unsupported and (imp.scenario is None or not check):  # else the check says it
        from mpmd_lab.validate.imported import not_imported_diagnostics

        entries = (
            imp.scenario.not_imported
            if imp.scenario is not None
            else not_imported(imp.unsupported, [], imp.source.get("call"))
        )
        imp.diagnostics += not_imported_diagnostics(entries)
    if check and imp.scenario is not None:
        try:
            imp.diagnostics += bounded(lambda: static_diagnostics(imp), left())
        except ImportTimeout:
            imp.diagnostics.append(
                _timeout(
                    "the static check of the imported scenario",
                    timeout,
                    "The scenario is imported without its diagnostics: nothing "
                    "says whether JAX accepts it. Raise the timeout to check it.",
                )
            )
    imp.diagnostics[:0] = rejected  # JAX's rejection first, at its line
    imp.seconds = time.perf_counter() - t0
    return imp


#: the retrace of a rejected kernel may take this many times its first trace, and at
#: least RETRACE_SECONDS (within the import's own limit): it traces the same function
#: with less in it, so past that it is not converging (a loop the rewrite made endless)
RETRACE_FACTOR = 4.0
RETRACE_SECONDS = 15.0
#: ``_what_was_traced``'s answer when its time ran out (None: nothing to show)
_RETRACE_STOPPED: Any = object()


def retrace_budget(first: float, left: float | None) -> float:
    """Seconds the retrace of a rejected kernel may take: ``RETRACE_FACTOR`` times the
    ``first`` trace, at least ``RETRACE_SECONDS``, at most what the import has ``left``
    (None: no limit)."""
    own = max(RETRACE_SECONDS, RETRACE_FACTOR * first)
    return own if left is None else min(own, left)


def _what_was_traced(
    fn: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    exc: BaseException,
    timeout: float | None,
) -> Any:
    """The user's function traced again without the statements JAX rejected
    (``rejected.retrace``), None (nothing to show), or ``_RETRACE_STOPPED`` (its
    ``timeout`` ran out)."""
    from mpmd_lab.importer import rejected

    try:
        again = lambda f: trace(f, args, kwargs)  # noqa: E731
        return _bounded_step(lambda: rejected.retrace(again, fn, exc), timeout)
    except ImportTimeout:
        return _RETRACE_STOPPED
    except Exception:  # noqa: BLE001 - no second view: the rejection alone is reported
        return None


def static_diagnostics(imp: Imported) -> list[Diagnostic]:
    """The static check of the built scenario, each diagnostic at the user's line."""
    from mpmd_lab import validate

    try:
        diags = validate.check(imp.scenario)
    except Exception as e:  # noqa: BLE001 - the rules' bug: say so, keep the import
        if _stopped(e):
            raise ImportTimeout from e
        imp.notes.append(f"the static check failed: {type(e).__name__}: {e}")
        return []
    return [with_source(d, imp.source) for d in diags]


def with_source(d: Diagnostic, source: dict[str, str]) -> Diagnostic:
    if d.source is not None:
        return d
    where = source_for(source, d.path) if d.path else source.get("call")
    return d.model_copy(update={"source": where}) if where else d


# ---------------------------------------------------------------- building


def build(
    traced: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    name: str | None = None,
    left_out: Any = (),
) -> Imported:
    """The scenario of the kernel call in a traced function (``left_out``: statements of
    the user's code left out of the trace, ``rejected.LeftOut``: not imported, each at
    its line)."""
    import jax
    from mpmd_lab.scenario import Scenario, problems_of
    from pydantic import ValidationError

    jaxpr = traced.jaxpr
    leaves = jax.tree.leaves((args, kwargs))
    invars = list(jaxpr.invars)
    values: dict[int, Any] = {}
    if len(leaves) == len(invars):
        values = dict(enumerate(leaves))
    else:
        arrays = [x for x in leaves if hasattr(x, "shape") and hasattr(x, "dtype")]
        if len(arrays) == len(invars):
            values = dict(enumerate(arrays))
    env = {v: C.Arg(k) for k, v in enumerate(invars)}
    w = C.Walk()
    C.walk(jaxpr, env, w)
    unsupported = list(dict.fromkeys(w.others))  # (a loop of calls: each line once)
    if w.found is None:  # (a call it could not read, if any, is the user's call)
        call = next((x for x in w.where_of.values() if x), None)
        return Imported(
            None,
            unsupported=[
                *unsupported,
                "no pl.kernel / plgpu.kernel call (mpmd_map) in the function",
            ],
            source={"call": call} if call else {},
        )
    b = Builder(w.found, values, name)
    data = b.scenario()
    unsupported += b.unsupported
    results = b.results(jaxpr.outvars, env)
    for r in results:  # the user's out specs, where they are not the scenario's default
        o = data["call"]["outputs"].get(r.name) if r.kind == "output" else None
        if o is not None and r.spec is not None and b.axes:
            if not sharding.is_default(r.spec, len(o["shape"]), b.axes):
                o["spec"] = _spec_json(r.spec)
    for r in results:
        if r.kind == "computed" and r.what:
            unsupported.append(r.what)
            w.where_of.setdefault(r.what, r.where)
    in_body = list(b.not_imported)
    for x in left_out:
        text = f"{x.text} ({x.why}; at {_short(x.where)})"
        unsupported.append(text)
        in_body.append(
            {
                "what": f"{x.text}: {x.why}",
                "source": x.where,
                "path": "call.programs[0].body",
                "text": text,
            }
        )
    data["not_imported"] = not_imported(unsupported, in_body, b.source.get("call"), w.where_of)
    try:
        scenario = Scenario.model_validate(data)
    except Exception as e:  # noqa: BLE001 - a translation the schema refuses: our bug
        problems = problems_of(e) if isinstance(e, ValidationError) else [("", str(e))]
        text = "; ".join(f"{p}: {m}" for p, m in problems[:5])
        return Imported(
            None,
            unsupported=[*unsupported, f"the translation is not a scenario ({text})"],
            source=b.source,
            results=results,
            notes=b.notes,
            device_axes=b.axes,
        )
    return Imported(
        scenario,
        unsupported=unsupported,
        source=b.source,
        results=results,
        notes=b.notes,
        device_axes=b.axes,
    )


def not_imported(
    unsupported: list[str],
    in_body: list[dict[str, Any]],
    where: str | None,
    where_of: dict[str, str | None] | None = None,
) -> list[dict[str, Any]]:
    """The scenario's ``not_imported``: each unsupported construct once, those of the
    kernel body at their own lines and bodies, the others (around the kernel call, in
    its parameters) at their own lines where known (``where_of``), else at the call."""
    by_text = {e["text"]: e for e in in_body}
    out = []
    for u in unsupported:
        e = by_text.get(u)
        if e is not None:
            out.append({"what": e["what"], "source": e["source"], "path": e["path"]})
        else:
            at = (where_of or {}).get(u) or where
            out.append({"what": u, "source": at, "path": "call"})
    return out


class Builder:
    """The scenario of one found kernel call."""

    def __init__(self, found: C.Found, values: dict[int, Any], name: str | None):
        self.found = found
        self.values = values
        self.name = name
        self.unsupported: list[str] = []
        #: the kernel body's constructs left out, at their lines (``Translator``)
        self.not_imported: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.source: dict[str, str] = {}
        self.axes: dict[str, int] = C.mesh_axes(found.mesh) if found.mesh is not None else {}
        self.buffer_of: dict[Any, str] = {}  # input origin -> buffer name
        self.outputs: list[str] = []
        self.param_buffer: dict[str, str] = {}  # input parameter -> its buffer
        #: operands that are zeroed semaphores made outside the kernel
        #: (``plgpu.alloc_semaphore``), by position: the scenario's pl.get_global scratch
        self.global_inputs: dict[int, str] = {}

    # ------------------------------------------------------------ the whole scenario

    def scenario(self) -> dict[str, Any]:
        eqn = self.found.eqn
        p = eqn.params
        where = self.found.where
        if where:
            self.source["call"] = where
        order = None
        if self.found.mesh is not None:
            order, problem = C.mesh_device_order(self.found.mesh)
            if problem:
                self.unsupported.append(problem)
        if p.get("input_output_aliases"):
            self.unsupported.append(
                "input_output_aliases on the kernel call: the scenario passes Refs instead"
            )
        self._compiler_params(p.get("compiler_params"))
        jaxprs = list(p["jaxprs"])
        meshes = list(p["meshes"])
        n_in = len(eqn.invars)
        n_out = len(p["out_avals"])
        body0, scoped = self._unwrap(jaxprs[0])
        n_scratch = len(jaxprs[0].invars) - n_in - n_out + len(scoped)
        kernel_frame = _kernel_frame(body0, n_in + n_out + n_scratch)
        names = self._param_names(kernel_frame, n_in, n_out, n_scratch)
        names[n_in + n_out :] = K.scoped_names(body0, len(scoped), names[n_in + n_out :])
        fname = kernel_frame.function.rsplit(".", 1)[-1] if kernel_frame else "kernel"
        if kernel_frame is not None:
            line = kernel_frame.start_line or kernel_frame.line
            self.source["call.programs"] = f"{kernel_frame.file}:{line}"
            self.source.setdefault("call", self.source["call.programs"])
        if where is None:  # the kernel is called by JAX (shard_map): its def is the line
            where = self.found.where = self.source.get("call")

        buffers, args = self._inputs(eqn, jaxprs[0], names[:n_in])
        outputs: dict[str, Any] = {}
        for k, aval in enumerate(p["out_avals"]):
            nm = names[n_in + k]
            outputs[nm] = {
                "shape": list(aval.shape),
                "dtype": self._dtype(aval.dtype, f"output {nm}"),
            }
            self.outputs.append(nm)
            if where:
                self.source[f"call.outputs.{nm}"] = where
        programs = []
        scratch: dict[str, Any] = {}
        for i, (jx, mesh) in enumerate(zip(jaxprs, meshes, strict=True)):
            prog, sc = self._program(i, jx, mesh, names, n_in, n_out)
            programs.append(prog)
            for k, v in sc.items():
                scratch.setdefault(k, v)
        for nm in scratch:
            if where:
                self.source[f"call.scratch.{nm}"] = where
        data: dict[str, Any] = {
            "schema": "mpmd-lab/scenario@1",
            "name": _scenario_name(self.name or fname),
            "description": f"imported from {F.line_text(where) or fname}"
            + (f" ({_short(where)})" if where else ""),
            "buffers": buffers,
            "call": {
                "entry": self.found.entry,
                "args": args,
                "outputs": outputs,
                "scratch": scratch,
                "programs": programs,
            },
        }
        if self.axes:
            data["device_mesh"] = dict(self.axes)
            if order is not None:  # the user's mesh lists its devices in another order
                data["device_order"] = order
        return data

    def _compiler_params(self, cp: Any) -> None:
        if cp is None:
            return
        try:
            from jax.experimental.pallas import mosaic_gpu as plgpu

            default = plgpu.CompilerParams()
            import dataclasses

            diff = [
                f.name
                for f in dataclasses.fields(cp)
                if getattr(cp, f.name) != getattr(default, f.name, None)
            ]
        except Exception:  # noqa: BLE001 - not a Mosaic GPU CompilerParams
            diff = ["compiler_params"]
        quiet = [f for f in diff if f in NO_EFFECT_PARAMS]
        if quiet:
            self.notes.append(
                f"compiler_params ({', '.join(quiet)}) not kept: they change how the kernel is "
                "profiled or deployed (or the precision of math the scenario has no statement "
                "for), not what it computes"
            )
        diff = [f for f in diff if f not in NO_EFFECT_PARAMS]
        if diff:
            self.unsupported.append(
                f"compiler_params ({', '.join(diff)}): the scenario calls the kernel with "
                "JAX's default compiler parameters"
            )

    def _dtype(self, dt: Any, what: str) -> str:
        from mpmd_lab.dtypes import DTYPES

        name = str(getattr(dt, "name", dt))
        if name not in DTYPES:
            self.unsupported.append(f"the dtype {name} of {what}")
            return "float32"
        return name

    def _unwrap(self, jx: Any) -> tuple[Any, list[Any]]:
        """``plgpu.kernel``'s body: the program jaxpr is one ``run_scoped`` allocating the
        scratch around the user's body. (body jaxpr, scoped scratch vars)."""
        if (
            self.found.entry == "plgpu.kernel"
            and len(jx.eqns) == 1
            and jx.eqns[0].primitive.name == "run_scoped"
        ):
            inner = jx.eqns[0].params["jaxpr"]
            n = len(jx.eqns[0].invars)
            allinv = list(getattr(inner, "all_invars", inner.invars))
            return inner, allinv[n:]
        return jx, []

    def _param_names(self, kf: F.Frame | None, n_in: int, n_out: int, n_scratch: int) -> list[str]:
        total = n_in + n_out + n_scratch
        names = F.parameters(kf.file, kf.start_line) if kf and kf.start_line else None
        if names is None or len(names) != total or len(set(names)) != total:
            names = (
                [f"in{k}" for k in range(n_in)]
                + [f"out{k}" for k in range(n_out)]
                + [f"scratch{k}" for k in range(n_scratch)]
            )
        from mpmd_lab.fields import check_identifier

        out = []
        for k, nm in enumerate(names):
            try:
                check_identifier(nm)
            except ValueError:
                nm = f"p{k}"
            out.append(nm)
        return out

    # ------------------------------------------------------------ inputs

    def _inputs(self, eqn: Any, jx: Any, params: list[str]) -> tuple[dict[str, Any], list[Any]]:
        buffers: dict[str, Any] = {}
        args: list[Any] = []
        for k, (origin, param) in enumerate(zip(self.found.inputs, params, strict=True)):
            aval = eqn.invars[k].aval
            if _zeroed_semaphore(origin, aval):
                self.global_inputs[k] = param
                self.notes.append(
                    f"{param}: the semaphore plgpu.alloc_semaphore made before the call (zero, "
                    "in GMEM, shared by the kernel's blocks) is the scenario's pl.get_global "
                    "semaphore, which is the same for this call; what it holds after the call "
                    "is not carried"
                )
                continue
            key = _key(origin)
            if key in self.buffer_of:
                bname = self.buffer_of[key]
            else:
                bname = _unique(_stem(param), set(buffers))
                self.buffer_of[key] = bname
                buffers[bname] = self._buffer(origin, aval, bname)
                if self.found.where:
                    self.source[f"buffers.{bname}"] = self.found.where
            arg: dict[str, Any] = {"buffer": bname, "param": param}
            spec = _in_spec(origin)
            if (
                spec is not None
                and self.axes
                and not sharding.is_default(spec, len(buffers[bname]["shape"]), self.axes)
            ):
                arg["spec"] = _spec_json(spec)
            args.append(arg)
            if buffers[bname].get("as_ref"):  # a Ref: one memory, however often passed
                self.param_buffer[param] = bname
            if self.found.where:
                self.source[f"call.args[{len(args) - 1}]"] = self.found.where
        return buffers, args

    def _buffer(self, origin: Any, aval: Any, bname: str) -> dict[str, Any]:
        inner = getattr(aval, "inner_aval", aval)
        shape = [int(d) for d in inner.shape]
        dtype = self._dtype(inner.dtype, f"buffer {bname}")
        buf: dict[str, Any] = {"shape": shape, "dtype": dtype}
        o, spec, mesh = origin, None, None
        if isinstance(o, C.Shard):
            o, spec, mesh = o.of, o.spec, o.mesh
        if isinstance(o, C.NewRef):
            buf["as_ref"] = True
            o = o.of
        if isinstance(o, C.Shard):  # jax.new_ref inside the shard_map
            o, spec, mesh = o.of, o.spec, o.mesh
        value = None
        if isinstance(o, C.Arg):
            v = self.values.get(o.index)
            if v is not None and not isinstance(v, __import__("jax").ShapeDtypeStruct):
                try:
                    value = np.asarray(v)
                except Exception:  # noqa: BLE001 - an abstract value: no data
                    value = None
            if value is None:
                self.notes.append(
                    f"buffer {bname}: the argument has no value (abstract); it starts at zeros"
                )
        elif isinstance(o, C.Value):
            value = np.asarray(o.array)
        else:
            what = o.primitive if isinstance(o, C.Computed) else type(o).__name__
            self.unsupported.append(
                f"{what} before the kernel (buffer {bname}): the function computes the kernel's "
                "input; the scenario holds the kernel's inputs as values"
            )
        if value is None:
            return buf
        if mesh is not None and self.axes:
            shards = C.shards_of(value, spec, self.axes)
        else:
            n = max(1, int(np.prod(list(self.axes.values())))) if self.axes else 1
            shards = [value] * n
        if shards and tuple(shards[0].shape) != tuple(shape):
            self.unsupported.append(
                f"buffer {bname}: the argument's shards have shape {tuple(shards[0].shape)}, the "
                f"kernel's operand {tuple(shape)}"
            )
            return buf
        init, note = C.init_of(shards, dtype, value if mesh is not None else None)
        buf["init"] = init
        if note:
            self.unsupported.append(f"buffer {bname}: {note}")
        return buf

    # ------------------------------------------------------------ programs

    def _program(self, i: int, jx: Any, mesh: Any, names: list[str], n_in: int, n_out: int):
        grid = self._axes(mesh.grid, mesh.grid_names, "blocks")
        cluster = self._axes(mesh.cluster, mesh.cluster_names, "cluster")
        threads = None
        if getattr(mesh, "num_threads", None):
            threads = {"name": mesh.thread_name, "count": int(mesh.num_threads)}
        if type(mesh).__name__ != "Mesh" or not hasattr(mesh, "cluster"):
            self.unsupported.append(
                f"a {type(mesh).__name__} kernel mesh (mpmd-lab reads plgpu.Mesh)"
            )
        kmesh = K.Mesh(
            dict(self.axes),
            grid,
            cluster,
            (mesh.thread_name, int(mesh.num_threads)) if threads else None,
        )
        body, scoped = self._unwrap(jx)
        refs: list[tuple[Any, K.View]] = []
        scratch: dict[str, Any] = {}
        invars = list(jx.invars)
        for k, v in enumerate(invars):
            shape, dt, space = K._aval_info(v.aval)
            if k in self.global_inputs:  # plgpu.alloc_semaphore's: a pl.get_global scratch
                sc, view = K.scratch_of(names[k], v.aval, ())
                sc["alloc"] = "get_global"
                scratch[names[k]] = sc
                refs.append((v, view))
            elif k < n_in + n_out:
                refs.append((v, K.View(names[k], (), space, shape, dt)))
            else:
                nm = names[k] if k < len(names) else f"scratch{k - n_in - n_out}"
                try:
                    sc, view = K.scratch_of(nm, v.aval, ())
                except K.Unsupported as e:
                    self.unsupported.append(str(e))
                    continue
                scratch[nm] = sc
                refs.append((v, view))
        t = K.Translator(kmesh, i, refs)
        t.memory = {p: f"buffer {b}" for p, b in self.param_buffer.items()}
        if body is not jx:  # plgpu.kernel: the run_scoped's operands are the kernel refs
            rs = jx.eqns[0]
            allinv = list(getattr(body, "all_invars", body.invars))
            for a, op in zip(allinv[: len(rs.invars)], rs.invars, strict=True):
                t.env[a] = t.env[op]
            transforms = rs.params.get("ref_transforms", ()) or ()
            for k, v in enumerate(scoped):
                idx = n_in + n_out + k
                nm = names[idx] if idx < len(names) else f"scratch{k}"
                try:
                    sc, view = K.scratch_of(
                        nm, v.aval, transforms[k] if k < len(transforms) else ()
                    )
                except K.Unsupported as e:
                    self.unsupported.append(str(e))
                    continue
                scratch[nm] = sc
                t.env[v] = view
                t.names.add(nm)
        t.names |= set(names)
        t.where = self.found.where or self.source.get("call.programs")
        scope = K.Scope([], f"call.programs[{i}].body")
        t.body(body, scope)
        t.check_uses()
        for name, spec in t.scratch.items():
            scratch[name] = spec
        self.unsupported += [u for u in t.unsupported if u not in self.unsupported]
        self.not_imported += t.not_imported
        self.source.update(t.source)
        prog = {"mesh": {"grid": grid, "cluster": cluster, "threads": threads}, "body": scope.body}
        return prog, scratch

    def _axes(self, sizes: Any, names: Any, base: str) -> dict[str, int]:
        sizes = tuple(int(s) for s in (sizes or ()))
        names = tuple(str(n) for n in (names or ()))
        if len(names) != len(sizes):
            names = tuple(f"{base}{k}" if len(sizes) > 1 else base for k in range(len(sizes)))
        return dict(zip(names, sizes, strict=True))

    # ------------------------------------------------------------ results

    def results(self, outvars: list[Any], env: dict[Any, Any]) -> list[Result]:
        out = []
        for v in outvars:
            o = C._origin(env, v)
            spec = None
            if isinstance(o, C.Unshard):
                o, spec = o.of, o.spec
            if isinstance(o, C.KernelOut) and o.index < len(self.outputs):
                out.append(Result("output", self.outputs[o.index], spec))
                continue
            if isinstance(o, C.Frozen):
                r = o.ref
                cands = [r, r.of] if isinstance(r, C.Shard) else [r]
                bname = next(
                    (
                        b
                        for k, b in self.buffer_of.items()
                        if k in cands or (isinstance(k, C.Shard) and k.of in cands)
                    ),
                    None,
                )
                if bname is not None:
                    out.append(Result("buffer", bname, spec))
                    continue
            what = ""
            if isinstance(o, C.Computed) and _from_kernel(o):
                what = (
                    f"{o.primitive} after the kernel (at {_short(o.where)}): the function computes "
                    "its result from the kernel's outputs; the scenario holds the kernel"
                )
            where = o.where if isinstance(o, C.Computed) else None
            out.append(Result("computed", None, spec, what, where))
        return out


def _zeroed_semaphore(origin: Any, aval: Any) -> bool:
    """A semaphore operand made as ``plgpu.alloc_semaphore`` makes it: a ``jax.new_ref``
    of zeros converted to semaphores (``to_edtype``), here or inside the shard_map."""
    inner = getattr(aval, "inner_aval", aval)
    if str(getattr(inner, "dtype", "")) != "semaphore":
        return False
    o = origin
    while isinstance(o, C.Shard):
        o = o.of
    if not isinstance(o, C.NewRef):
        return False
    o = o.of
    while isinstance(o, C.Shard):
        o = o.of
    return (
        isinstance(o, C.Computed)
        and o.primitive == "to_edtype"
        and len(o.inputs) == 1
        and isinstance(o.inputs[0], C.Value)
        and not np.asarray(o.inputs[0].array).any()
    )


def _from_kernel(o: Any, depth: int = 0) -> bool:
    if depth > 50:
        return False
    if isinstance(o, C.KernelOut):
        return True
    if isinstance(o, C.Computed):
        return any(_from_kernel(x, depth + 1) for x in o.inputs)
    if isinstance(o, C.Shard | C.Unshard):
        return _from_kernel(o.of, depth + 1)
    return False


def _key(origin: Any) -> Any:
    """A hashable identity of an input's origin (the same argument is the same buffer)."""
    try:
        hash(origin)
        return origin
    except TypeError:
        return id(origin)


def _kernel_frame(body: Any, params: int) -> F.Frame | None:
    """The user's kernel function: the one the body's equations come from, taking one
    parameter per ref."""
    return F.function_of(body.eqns, params=params) or F.function_of(body.eqns)


def _stem(param: str) -> str:
    return param[:-4] if param.endswith("_ref") and len(param) > 4 else param


def _unique(base: str, used: set[str]) -> str:
    if base not in used:
        return base
    k = 1
    while f"{base}{k}" in used:
        k += 1
    return f"{base}{k}"


def _scenario_name(name: str) -> str:
    import re

    out = re.sub(r"[^A-Za-z0-9_-]", "_", name or "kernel")
    if not re.match(r"^[A-Za-z_]", out):
        out = "k_" + out
    return out[:100]


__all__ = [
    "DEFAULT_TIMEOUT",
    "ImportTimeout",
    "Imported",
    "Result",
    "bounded",
    "from_jax",
    "import_call",
]
