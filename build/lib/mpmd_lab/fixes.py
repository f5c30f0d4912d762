"""Apply fixes: a :class:`~mpmd_lab.diagnostics.Fix` is a list of edits of the JSON form.

``apply_fix(scenario, fix)`` returns a new, validated scenario; ``apply_all`` applies
the first fixable error's fix, checks again, and repeats until nothing is left to fix.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from mpmd_lab.diagnostics import Diagnostic, Edit, Fix
from mpmd_lab.scenario import Scenario

_PART = re.compile(r"\.?([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]")


def parse_path(path: str) -> list[str | int]:
    """``call.args[1].param`` -> ``['call', 'args', 1, 'param']``."""
    out: list[str | int] = []
    pos = 0
    while pos < len(path):
        m = _PART.match(path, pos)
        if not m:
            raise ValueError(f"bad field path {path!r} at {pos}")
        out.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
        pos = m.end()
    return out


def get_path(obj: Any, path: str) -> Any:
    """The value at a field path of a scenario (model or JSON form)."""
    cur = obj
    for part in parse_path(path):
        if isinstance(part, int):
            cur = cur[part]
        elif isinstance(cur, dict):
            cur = cur[part]
        else:
            cur = getattr(cur, part)
    return cur


def apply_edit(data: dict[str, Any], edit: Edit) -> None:
    """Apply one edit to a scenario's JSON form, in place."""
    parts = parse_path(edit.path)
    parent: Any = data
    for part in parts[:-1]:
        parent = parent[part]
    last = parts[-1]
    value = copy.deepcopy(edit.value)
    if edit.op == "replace":
        parent[last] = value
    elif edit.op == "remove":
        del parent[last]
    elif edit.op == "add":
        if isinstance(parent, list):
            parent.insert(int(last), value)
        else:
            parent[last] = value
    else:  # pragma: no cover - Edit.op is a Literal
        raise ValueError(edit.op)


def apply_fix(scenario: Scenario, fix: Fix) -> Scenario:
    """A new scenario with the fix's edits applied (in order)."""
    data = scenario.to_dict()
    for edit in fix.edits:
        apply_edit(data, edit)
    return Scenario.model_validate(data)


def apply_all(
    scenario: Scenario, diags: list[Diagnostic] | None = None, max_rounds: int = 20
) -> tuple[Scenario, list[Fix]]:
    """Apply fixes one at a time (re-checking after each) until none is left."""
    from mpmd_lab.validate import check

    applied: list[Fix] = []
    current = scenario
    if diags is None:
        diags = check(current)
    for _ in range(max_rounds):
        fix = next((d.fix for d in diags if d.fix is not None and d.is_error), None)
        if fix is None:
            break
        try:
            candidate = apply_fix(current, fix)
        except Exception:  # a fix that no longer applies: stop rather than loop
            break
        applied.append(fix)
        current = candidate
        diags = check(current)
    return current, applied
