"""Static validation: ``check(scenario)`` predicts what JAX would raise, without JAX.

No tracing, no jax import: microseconds to milliseconds per scenario. Diagnostics come
back in the order JAX would meet them (build, trace, gpu-lower, interpret), so the
first error is the one JAX shows first. The scenario is resolved once
(:mod:`mpmd_lab.plan`: names bound, views propagated, XREF_* problems); each rule
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
:class:`Analysis`): compute it once per scenario version and pass it along. The rules
run in :mod:`mpmd_lab.validate.analysis`; this package's ``analyze`` adds the verified
fixes (:mod:`mpmd_lab.fixes`, a layer above the rules).
"""

from __future__ import annotations

import time
from collections.abc import Callable

# (recheck imports the rules' analysis, a module of this package: either loads first)
from mpmd_lab import recheck
from mpmd_lab.diagnostics import Diagnostic
from mpmd_lab.scenario import Scenario, load_scenario
from mpmd_lab.validate.analysis import Analysis, analyze_rules, first_error

#: how many times the rules have run in this process (the Lab's tests count them)
RUNS = 0


def analyze(
    scenario: Scenario | dict | str,
    *,
    fixes: bool = True,
    timings: dict[str, float] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Analysis:
    """Resolve the scenario and run every rule once: the :class:`Analysis` views share.

    ``fixes``: offer only the fixes that make it better (``mpmd_lab.fixes.offer``, which
    checks each fixed scenario without fixes). ``timings``: filled with the seconds
    each stage took (``compile``, ``build``, ``trace``, ``lower``, ``runtime``,
    ``interp``, ``sync``, ``fixes``; ``recheck``: the part of ``fixes`` spent checking
    candidates), for ``make bench``; ``clock``: what measures them (``bench.icount``
    counts instructions)."""
    global RUNS
    RUNS += fixes  # the checks of candidate fixes are part of this one
    s = load_scenario(scenario) if not isinstance(scenario, Scenario) else scenario
    # a fix's scenario whose candidate was checked (``fixes.apply_fix`` returns it): its
    # rules' analysis is that check's
    found = recheck.known(s) or analyze_rules(s, timings=timings, clock=clock)
    if not fixes:
        return found
    from mpmd_lab.fixes import offer  # the fixes (and difflib) load with the first check

    # (the candidates, made from ``s``'s parts, reuse its plan's records)
    with recheck.reusing(found.plan):
        if timings is None:
            diags = offer(s, list(found.diagnostics))
        else:
            before = clock()
            with recheck.metered(timings, clock):
                diags = offer(s, list(found.diagnostics))
            timings["fixes"] = timings.get("fixes", 0.0) + clock() - before
    return Analysis(s, found.plan, tuple(diags))


def check(scenario: Scenario | dict | str) -> list[Diagnostic]:
    """Every problem JAX would raise (and what it would not), in JAX's order."""
    return list(analyze(scenario).diagnostics)


__all__ = ["Analysis", "analyze", "check", "first_error"]
