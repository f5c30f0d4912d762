"""Static validation: ``check(scenario)`` predicts what JAX would raise, without JAX.

No tracing, no jax import: microseconds to milliseconds per scenario. Diagnostics come
back in the order JAX would meet them (build, trace, gpu-lower, interpret), so the
first error is the one JAX shows first. The scenario is resolved once
(:mod:`mpmd_lab.resolve`: names bound, views propagated, XREF_* problems); each rule
module then reads that result and has one job:

- ``build``: meshes, scratch types, the kernel object;
- ``trace``: argument transforms, duplicate Refs, bodies, returns, captures;
- ``lower``: what the Mosaic GPU lowering rejects;
- ``devices``: a device mesh whose ids are not row-major, for a kernel that talks to
  other devices (the lowering's last check);
- ``runtime``: what only runs reveal (program ids);
- ``interp``: what the CPU interpreters cannot run (views, statements);
- ``sync``: races, deadlocks, semaphore balance, out-of-bounds indices and device ids,
  judged by running the call data-free through the simulation engine;
- ``imported``: what an import could not carry (IMPORT_UNSUPPORTED: the scenario is
  partial).

``analyze(scenario)`` returns the resolved form with its diagnostics (an
:class:`Analysis`): compute it once per scenario version and pass it along.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

from mpmd_lab.diagnostics import Diagnostic, ordered
from mpmd_lab.record import Record
from mpmd_lab.resolve import Resolved, resolve
from mpmd_lab.scenario import Scenario, load_scenario
from mpmd_lab.validate.context import Ctx

#: how many times the rules have run in this process (the Lab's tests count them)
RUNS = 0


class Analysis(Record):
    """One scenario version, resolved and checked: what every view reads."""

    __slots__ = ("scenario", "resolved", "diagnostics")

    def __init__(
        self, scenario: Scenario, resolved: Resolved, diagnostics: tuple[Diagnostic, ...]
    ) -> None:
        self.scenario = scenario
        self.resolved = resolved
        self.diagnostics = diagnostics

    @property
    def valid(self) -> bool:
        return not any(d.is_error for d in self.diagnostics)

    @property
    def first_error(self) -> Diagnostic | None:
        return first_error(list(self.diagnostics))


def analyze(
    scenario: Scenario | dict | str,
    *,
    fixes: bool = True,
    timings: dict[str, float] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Analysis:
    """Resolve the scenario and run every rule once: the :class:`Analysis` views share.

    ``fixes``: offer only the fixes that make it better (``mpmd_lab.fixes.offer``, which
    checks each fixed scenario with ``fixes=False``). ``timings``: filled with the seconds
    each stage took (``resolve``, ``build``, ``trace``, ``lower``, ``runtime``,
    ``interp``, ``sync``, ``fixes``), for ``make bench``; ``clock``: what measures them
    (``bench.icount`` counts instructions)."""
    check_build, stages = _RULES or _import_rules()
    global RUNS
    RUNS += fixes  # the checks of candidate fixes are part of this one
    s = load_scenario(scenario) if not isinstance(scenario, Scenario) else scenario
    # the check allocates many small acyclic objects: collecting cycles meanwhile only
    # costs time (it grows with the heap); the collector resumes at the end
    collecting = gc.isenabled()
    gc.disable()
    # (stage, clock() after it), from the start: only when timed, added up at the end
    marks = None if timings is None else [("", clock())]
    try:
        ctx = Ctx(s, resolve(s))
        if marks is not None:
            marks.append(("resolve", clock()))
        check_build(ctx)
        ctx.build_failed = any(d.is_error and d.stage in ("schema", "build") for d in ctx.diags)
        if marks is not None:
            marks.append(("build", clock()))
        for stage, rule in stages:
            rule(ctx)
            if marks is not None:
                marks.append((stage, clock()))
    finally:
        if collecting:
            gc.enable()
    diags = ordered(ctx.diags)
    if fixes:
        from mpmd_lab.fixes import offer

        diags = offer(s, diags)
        if marks is not None:
            marks.append(("fixes", clock()))
    if timings is not None and marks is not None:
        for (_, before), (stage, after) in zip(marks, marks[1:], strict=False):
            timings[stage] = timings.get(stage, 0.0) + after - before
    return Analysis(s, ctx.r, tuple(diags))


#: ``(check_build, ((stage, rule), ...))``: the rule modules, imported by the first check
#: (the race check brings the engine and numpy, which importing this package does not)
_RULES: tuple[Any, tuple[tuple[str, Any], ...]] | None = None


def _import_rules() -> tuple[Any, tuple[tuple[str, Any], ...]]:
    global _RULES
    from mpmd_lab.validate.build import check_build
    from mpmd_lab.validate.devices import check_device_order
    from mpmd_lab.validate.imported import check_imported
    from mpmd_lab.validate.interp import check_interpret
    from mpmd_lab.validate.lower import check_lower
    from mpmd_lab.validate.runtime import check_runtime
    from mpmd_lab.validate.sync import check_sync
    from mpmd_lab.validate.trace import check_trace

    _RULES = (
        check_build,
        (
            ("trace", check_trace),
            ("lower", check_lower),
            ("devices", check_device_order),
            ("runtime", check_runtime),
            ("interp", check_interpret),
            ("sync", check_sync),
            ("imported", check_imported),
        ),
    )
    return _RULES


def check(scenario: Scenario | dict | str) -> list[Diagnostic]:
    """Every problem JAX would raise (and what it would not), in JAX's order."""
    return list(analyze(scenario).diagnostics)


def first_error(diags: list[Diagnostic]) -> Diagnostic | None:
    """The error JAX would show first, or None when the call is valid."""
    return next((d for d in diags if d.is_error), None)


__all__ = ["Analysis", "analyze", "check", "first_error"]
