"""A candidate fix's check, by content: the rules' diagnostics of a scenario's JSON form,
each distinct form checked once (the fixes and the repairs ask it for every candidate)."""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from mpmd_lab.diagnostics import Diagnostic
from mpmd_lab.scenario import Scenario
from mpmd_lab.validate.analysis import analyze_rules

#: how many candidates' checks ``offer`` keeps (``checked``)
CACHE_SIZE = 512
_CHECKED: OrderedDict[str, tuple[Diagnostic, ...] | None] = OrderedDict()
#: candidates checked in this process (found by content: not counted)
CHECKS = 0
#: where the candidates' checks are timed (``metered``): the timings and their clock
_METER: list[tuple[dict[str, float], Callable[[], float]]] = []


@contextmanager
def metered(
    timings: dict[str, float], clock: Callable[[], float] = time.perf_counter
) -> Iterator[None]:
    """While inside, the candidates' own checks (not found by content) add their time to
    ``timings["recheck"]`` (``validate.analyze`` times the fixes' part this way)."""
    _METER.append((timings, clock))
    try:
        yield
    finally:
        _METER.pop()


def checked(data: dict[str, Any]) -> tuple[Diagnostic, ...] | None:
    """The diagnostics of the scenario ``data`` (its JSON form) checked without fixes,
    by content: a candidate checked before (by this call or an earlier check of the same
    or another scenario: the Lab checking again, ``check --fix``) is not checked again.
    None when ``data`` is not a valid scenario. The last ``CACHE_SIZE`` are kept."""
    global CHECKS
    key = json.dumps(data, sort_keys=True, separators=(",", ":"))
    if key in _CHECKED:
        _CHECKED.move_to_end(key)
        return _CHECKED[key]
    CHECKS += 1
    meter = _METER[-1] if _METER else None
    before = meter[1]() if meter is not None else 0.0
    try:
        got: tuple[Diagnostic, ...] | None = analyze_rules(
            Scenario.model_validate(data)
        ).diagnostics
    except Exception:  # a fix that does not apply is not offered
        got = None
    if meter is not None:
        timings, clock = meter
        timings["recheck"] = timings.get("recheck", 0.0) + clock() - before
    _CHECKED[key] = got
    if len(_CHECKED) > CACHE_SIZE:
        _CHECKED.popitem(last=False)
    return got


def clear_cache() -> None:
    """Forget every candidate's check (``make bench`` and ``bench.icount`` time a first
    check)."""
    _CHECKED.clear()
