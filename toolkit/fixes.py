"""Apply fixes: a :class:`~mpmd_lab.diagnostics.Fix` is a list of edits of the JSON form.

``apply_fix(scenario, fix)`` returns a new, validated scenario; ``apply_all`` applies
the first fixable error's fix, checks again, and repeats until nothing is left to fix.

``offer(scenario, diagnostics)`` decides what is offered: every fix a rule proposes (and
"did you mean" renames, ``mpmd_lab.suggest``) is applied and checked, and kept only if
the check after it has fewer errors and no code that was not there before, up to where
JAX stopped (a warning's fix: fewer warnings, no more errors); what a fix uncovers
further on, where JAX never got, is the next step and is said (``Fix.after``). The ones
kept are ranked best first (fewest errors left, then fewest warnings, then fewest
edits). ``validate.analyze`` calls it, so every view (the Lab, ``check``, ``check
--fix``) offers the same verified fixes.
"""

from __future__ import annotations

import copy
import json
from collections import OrderedDict
from typing import Any

from mpmd_lab import suggest
from mpmd_lab.diagnostics import STAGE_ORDER, Diagnostic, Edit, Fix
from mpmd_lab.fields import parse_path
from mpmd_lab.scenario import Scenario
from mpmd_lab.validate.analysis import analyze_rules


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
    return Scenario.model_validate(_fixed_data(scenario, fix))


def _fixed_data(scenario: Scenario, fix: Fix) -> dict[str, Any]:
    """The JSON form of the scenario with the fix's edits applied (in order)."""
    data = scenario.to_dict()
    for edit in fix.edits:
        apply_edit(data, edit)
    return data


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


def _place(d: Diagnostic) -> tuple[int, int, tuple[tuple[int, Any], ...]]:
    """Where JAX meets a diagnostic: its stage; then what it checks when the call is made
    (meshes, arguments, run options) before the kernel bodies, which it traces in
    program order."""
    try:
        parts = tuple((0, p) if isinstance(p, int) else (1, p) for p in parse_path(d.path))
    except ValueError:
        parts = ()
    in_body = ".body[" in d.path
    return STAGE_ORDER.get(d.stage, len(STAGE_ORDER)), int(in_body), parts


def _judge(d: Diagnostic, before: list[Diagnostic], after: list[Diagnostic]) -> bool:
    """Whether a fix of ``d`` is worth offering: where the check could see before (up to
    ``d``, where JAX stopped) it leaves fewer errors (a warning's fix: fewer warnings and
    no more errors) and no code that was not there. What it uncovers further on (where
    JAX never got before) is the next step, not a trade."""
    here = _place(d)
    seen_before = [x for x in before if _place(x) <= here]
    seen_after = [x for x in after if _place(x) <= here]
    if {x.code for x in seen_after} - {x.code for x in before}:
        return False  # it trades one problem for another
    e0 = sum(x.is_error for x in seen_before)
    e1 = sum(x.is_error for x in seen_after)
    if d.is_error:
        return e1 < e0
    w0, w1 = len(seen_before) - e0, len(seen_after) - e1
    return e1 <= e0 and w1 < w0


def offer(scenario: Scenario, diags: list[Diagnostic]) -> list[Diagnostic]:
    """``diags`` with only the fixes that make things better, best first (``fix`` is the
    best one; each fix's ``after`` says what errors are left), and unknown names' "did
    you mean" hints and renames."""
    found: dict[str, tuple[Diagnostic, ...] | None] = {}
    out: list[Diagnostic] = []
    for d in diags:
        options = list(d.fixes) or ([d.fix] if d.fix is not None else [])
        message = d.message
        near = suggest.for_diagnostic(scenario, d)
        if near is not None:
            text, rename = near
            if text and text not in message:
                message = f"{message.rstrip()} ({text})"
            if rename is not None:
                options.append(rename)
        if not options and message == d.message:
            out.append(d)
            continue
        ranked: list[tuple[tuple[int, int, int, int], Fix]] = []
        for k, fix in enumerate(options):
            key = fix.model_copy(update={"after": None}).model_dump_json()
            if key not in found:
                try:
                    data = _fixed_data(scenario, fix)
                except Exception:  # a fix that does not apply is not offered
                    found[key] = None
                else:
                    found[key] = checked(data)
            got = found[key]
            if got is None or not _judge(d, diags, list(got)):
                continue
            left = [x.code for x in got if x.is_error]
            errors, warnings = len(left), len(got) - len(left)
            shown = fix.model_copy(update={"after": list(dict.fromkeys(left))})
            if all(f.edits != fix.edits for _, f in ranked):
                ranked.append(((errors, warnings, len(fix.edits), k), shown))
        kept = [f for _, f in sorted(ranked, key=lambda x: x[0])]
        out.append(
            d.model_copy(
                update={"fix": kept[0] if kept else None, "fixes": kept, "message": message}
            )
        )
    return out


def apply_all(
    scenario: Scenario, diags: list[Diagnostic] | None = None, max_rounds: int = 20
) -> tuple[Scenario, list[Fix]]:
    """Apply fixes one at a time (re-checking after each) until none is left."""
    applied: list[Fix] = []
    current = scenario
    if diags is None:
        diags = _checked_with_fixes(current)
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
        diags = _checked_with_fixes(current)
    return current, applied


def _checked_with_fixes(s: Scenario) -> list[Diagnostic]:
    """What ``validate.check`` says: the rules' diagnostics with the fixes that work."""
    return offer(s, list(analyze_rules(s).diagnostics))
