"""A candidate fix's check, by content: the rules' diagnostics of a scenario's JSON form,
each distinct form checked once (the fixes and the repairs ask it for every candidate)."""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from mpmd_lab.diagnostics import Diagnostic
from mpmd_lab.scenario import Scenario
from mpmd_lab.validate.analysis import analyze_rules

#: how many candidates' checks ``offer`` keeps (``checked``)
CACHE_SIZE = 512
_CHECKED: OrderedDict[str, tuple[Diagnostic, ...] | None] = OrderedDict()


def checked(data: dict[str, Any]) -> tuple[Diagnostic, ...] | None:
    """The diagnostics of the scenario ``data`` (its JSON form) checked without fixes,
    by content: a candidate checked before (by this call or an earlier check of the same
    or another scenario: the Lab checking again, ``check --fix``) is not checked again.
    None when ``data`` is not a valid scenario. The last ``CACHE_SIZE`` are kept."""
    key = json.dumps(data, sort_keys=True, separators=(",", ":"))
    if key in _CHECKED:
        _CHECKED.move_to_end(key)
        return _CHECKED[key]
    try:
        got: tuple[Diagnostic, ...] | None = analyze_rules(
            Scenario.model_validate(data)
        ).diagnostics
    except Exception:  # a fix that does not apply is not offered
        got = None
    _CHECKED[key] = got
    if len(_CHECKED) > CACHE_SIZE:
        _CHECKED.popitem(last=False)
    return got


def clear_cache() -> None:
    """Forget every candidate's check (``make bench`` and ``bench.icount`` time a first
    check)."""
    _CHECKED.clear()
