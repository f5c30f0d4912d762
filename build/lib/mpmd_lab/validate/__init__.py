"""Static validation: ``check(scenario)`` predicts what JAX would raise, without JAX.

No tracing, no jax import: microseconds to milliseconds per scenario. Diagnostics come
back in the order JAX would meet them (build, trace, gpu-lower, interpret), so the
first error is the one JAX shows first. Rule modules, each one job:

- ``analyse``: names resolved, views propagated (``mpmd_lab.shapes``), XREF_* codes;
- ``build``: meshes, scratch types, the kernel object;
- ``trace``: argument transforms, duplicate Refs, bodies, returns, captures;
- ``lower``: what the Mosaic GPU lowering rejects;
- ``runtime``: what only runs reveal (races, out-of-bounds indices, device ids,
  interpreter limits).
"""

from __future__ import annotations

import gc

from mpmd_lab.diagnostics import Diagnostic, ordered
from mpmd_lab.scenario import Scenario, load_scenario
from mpmd_lab.validate.context import Ctx


def check(scenario: Scenario | dict | str) -> list[Diagnostic]:
    """Every problem JAX would raise (and what it would not), in JAX's order."""
    from mpmd_lab.validate.analyse import analyse
    from mpmd_lab.validate.build import check_build
    from mpmd_lab.validate.lower import check_lower
    from mpmd_lab.validate.runtime import check_runtime
    from mpmd_lab.validate.trace import check_trace

    s = load_scenario(scenario) if not isinstance(scenario, Scenario) else scenario
    ctx = Ctx(s)
    # the check allocates many small acyclic objects: collecting cycles meanwhile only
    # costs time (it grows with the heap); the collector resumes at the end
    collecting = gc.isenabled()
    gc.disable()
    try:
        analyse(ctx)
        check_build(ctx)
        ctx.build_failed = any(d.is_error and d.stage in ("schema", "build") for d in ctx.diags)
        check_trace(ctx)
        check_lower(ctx)
        check_runtime(ctx)
    finally:
        if collecting:
            gc.enable()
    return ordered(ctx.diags)


def first_error(diags: list[Diagnostic]) -> Diagnostic | None:
    """The error JAX would show first, or None when the call is valid."""
    return next((d for d in diags if d.is_error), None)


__all__ = ["check", "first_error"]
