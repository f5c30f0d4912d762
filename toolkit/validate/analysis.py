"""The rules of one check, run once over a resolved scenario: :func:`analyze_rules`.

No fixes here (``mpmd_lab.fixes`` offers them on top, and checks its candidates with
this); :func:`mpmd_lab.validate.analyze` is both. A rule that needs to check another
scenario (``symmetry`` judges a big mesh from two small ones) asks ``ctx.recheck``.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

from mpmd_lab.diagnostics import Diagnostic, ordered, verdict
from mpmd_lab.plan import Plan, compile
from mpmd_lab.record import Record
from mpmd_lab.scenario import Scenario
from mpmd_lab.validate.context import Ctx


class Analysis(Record):
    """One scenario version, resolved and checked: what every view reads."""

    __slots__ = ("scenario", "plan", "diagnostics")

    def __init__(self, scenario: Scenario, plan: Plan, diagnostics: tuple[Diagnostic, ...]) -> None:
        self.scenario = scenario
        self.plan = plan
        self.diagnostics = diagnostics

    @property
    def valid(self) -> bool:
        return not any(d.is_error for d in self.diagnostics)

    @property
    def verdict(self) -> str:
        """``valid``, ``valid where checked`` (the check says what it could not check) or
        ``invalid`` (``diagnostics.verdict``)."""
        return verdict(self.diagnostics)

    @property
    def first_error(self) -> Diagnostic | None:
        return first_error(list(self.diagnostics))


def analyze_rules(
    s: Scenario,
    *,
    plan: Plan | None = None,
    like: Plan | None = None,
    timings: dict[str, float] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Analysis:
    """Resolve ``s`` and run every rule once, without offering fixes. ``plan``: ``s``'s
    plan when the caller has it (``Plan.fits``: e.g. the plan of a copy with other run
    options), not compiled again; ``like``: another scenario's plan whose unchanged
    records ``s``'s compiles reuses (``plan.compile``: a fix's candidate, the
    original's plan). ``timings``: filled with the seconds each stage took
    (``compile``, ``build``, ``trace``, ``lower``, ``runtime``, ``interp``, ``sync``);
    ``clock``: what measures them."""
    if plan is not None and not plan.fits(s):
        raise ValueError("the plan given is another scenario's")
    check_build, stages = _RULES or _import_rules()
    # the check allocates many small acyclic objects: collecting cycles meanwhile only
    # costs time (it grows with the heap); the collector resumes at the end
    collecting = gc.isenabled()
    gc.disable()
    # (stage, clock() after it), from the start: only when timed, added up at the end
    marks = None if timings is None else [("", clock())]
    try:
        ctx = Ctx(s, plan if plan is not None else compile(s, like), recheck=_recheck)
        if marks is not None:
            marks.append(("compile", clock()))
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
    if timings is not None and marks is not None:
        for (_, before), (stage, after) in zip(marks, marks[1:], strict=False):
            timings[stage] = timings.get(stage, 0.0) + after - before
    return Analysis(s, ctx.r, tuple(ordered(ctx.diags)))


def _recheck(s: Scenario) -> tuple[Diagnostic, ...]:
    return analyze_rules(s).diagnostics


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


def first_error(diags: list[Diagnostic]) -> Diagnostic | None:
    """The error JAX would show first, or None when the call is valid."""
    return next((d for d in diags if d.is_error), None)


__all__ = ["Analysis", "analyze_rules", "first_error"]
