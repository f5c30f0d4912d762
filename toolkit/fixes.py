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

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from mpmd_lab import repairs, suggest
from mpmd_lab.diagnostics import STAGE_ORDER, Diagnostic, Fix, apply_edit
from mpmd_lab.fields import parse_path
from mpmd_lab.recheck import (
    CACHE_SIZE,
    candidate,
    checked,
    clear_cache,
    content_key,
    edited,
    form_of,
    known,
    one_form,
    renamed,
    scenario_of,
    with_edits,
)
from mpmd_lab.scenario import Scenario
from mpmd_lab.validate.analysis import analyze_rules


def apply_fix(scenario: Scenario, fix: Fix) -> Scenario:
    """A new scenario with the fix's edits applied (in order): the candidate ``offer``
    checked when it is kept (``recheck.scenario_of``: its check is then reused)."""
    return scenario_of(_fixed_data(scenario, fix), lambda: edited(scenario, fix.edits))


def _fixed_data(scenario: Scenario, fix: Fix, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON form of the scenario with the fix's edits applied (in order); ``base``:
    the scenario's JSON form, when the caller made it once for many fixes (shared, not
    changed: ``recheck.with_edits``)."""
    return with_edits(scenario.to_dict() if base is None else base, fix.edits)


def _place(d: Diagnostic) -> tuple[int, int, tuple[tuple[int, Any], ...]]:
    """Where JAX meets a diagnostic: its stage; then what it checks when the call is made
    (meshes, arguments, run options) before the kernel bodies, which it traces in
    program order (``_place_at``'s answer for its stage and path)."""
    return _place_at(d.stage, d.path)


@functools.lru_cache(maxsize=4096)
def _place_at(stage: str, path: str) -> tuple[int, int, tuple[tuple[int, Any], ...]]:
    """``_place`` of a diagnostic at ``stage`` and ``path``, worked out once per pair
    (``offer`` judges every candidate against every diagnostic before and after it)."""
    try:
        parts = tuple((0, p) if isinstance(p, int) else (1, p) for p in parse_path(path))
    except ValueError:
        parts = ()
    in_body = ".body[" in path
    return STAGE_ORDER.get(stage, len(STAGE_ORDER)), int(in_body), parts


class _Before:
    """What the check saw before a fix of ``d`` (``before``: every diagnostic of the
    scenario), counted once for all the fixes of ``d`` (``better`` judges each one's
    check). ``place``: where JAX meets a diagnostic (``_place``)."""

    def __init__(
        self,
        d: Diagnostic,
        before: list[Diagnostic],
        place: Callable[[Diagnostic], tuple[int, int, tuple[tuple[int, Any], ...]]] = _place,
    ) -> None:
        self.d, self.place = d, place
        self.here = place(d)
        seen = [x for x in before if place(x) <= self.here]
        self.codes = {x.code for x in before}
        self.errors = sum(x.is_error for x in seen)
        self.warnings = len(seen) - self.errors

    def better(self, after: Iterable[Diagnostic]) -> bool:
        """Whether a fix of ``d`` whose check says ``after`` is worth offering: where
        the check could see before (up to ``d``, where JAX stopped) it leaves fewer
        errors (a warning's fix: fewer warnings and no more errors) and no code that
        was not there. What it uncovers further on (where JAX never got before) is the
        next step, not a trade."""
        seen = [x for x in after if self.place(x) <= self.here]
        if {x.code for x in seen} - self.codes:
            return False  # it trades one problem for another
        errors = sum(x.is_error for x in seen)
        if self.d.is_error:
            return errors < self.errors
        return errors <= self.errors and len(seen) - errors < self.warnings


def offer(scenario: Scenario, diags: list[Diagnostic]) -> list[Diagnostic]:
    """``diags`` with only the fixes that make things better, best first (``fix`` is the
    best one; each fix's ``after`` says what errors are left), and unknown names' "did
    you mean" hints and renames."""
    if not diags:
        return []
    with one_form(scenario):  # (its JSON form: made once, for the repairs and the trials)
        trials: _Trials | None = None  # (made with the first fix to try)
        out: list[Diagnostic] = []
        for d in diags:
            options, message = proposed(scenario, d)
            if not options and message == d.message:
                out.append(d)
                continue
            trials = trials or _Trials(scenario)
            before = _Before(d, diags)
            ranked: list[tuple[tuple[int, int, int, int], Fix]] = []
            for k, fix in enumerate(options):
                got = trials.checked(fix)
                if got is None or not before.better(got):
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


def proposed(scenario: Scenario, d: Diagnostic) -> tuple[list[Fix], str]:
    """Every fix proposed for ``d`` (its rule's, the repairs', the "did you mean"
    renames), before any is checked, and ``d``'s message with the "did you mean" hint."""
    options = list(d.fixes) or ([d.fix] if d.fix is not None else [])
    options += repairs.for_code(scenario, d)
    message = d.message
    near = suggest.for_diagnostic(scenario, d)
    if near is not None:
        text, renames = near
        if text and text not in message:
            message = f"{message.rstrip()} ({text})"
        options += renames
    return options, message


class _Trials:
    """The candidate fixes of one scenario, each distinct one (by content) built,
    validated and checked once (``recheck.candidate``: the same content is found, not
    checked again, whichever fix made it), over the scenario's JSON form made once
    (``data``, shared by every candidate's, and with the repairs: ``recheck.form_of``)."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.data = form_of(scenario)
        self._key: str | None = None

    def checked(self, fix: Fix) -> tuple[Diagnostic, ...] | None:
        """What the check says of the scenario with ``fix`` applied, None when the fix
        does not apply or makes no scenario, or changes nothing (it cannot leave fewer
        problems)."""
        try:
            data = _fixed_data(self.scenario, fix, self.data)
        except Exception:  # a fix that does not apply is not offered
            return None
        content = content_key(data)
        if self._same(data, content):
            return None
        found = candidate(data, content, lambda: edited(self.scenario, fix.edits))
        return None if found is None else found.diagnostics

    def _same(self, data: dict[str, Any], content: str) -> bool:
        """Whether a candidate's JSON form ``data`` (its content key ``content``) is the
        scenario's own content. Content keys that are equal are of equal forms, so one
        that differs (``==`` looks only along the edits' paths: the rest is shared) is
        not the same; only one equal to it needs the scenario's key, made then. (A form
        unequal by ``==`` whose key is the same, a NaN or a tuple for a list in an edit's
        value, is checked: it says what the scenario says, which is not better.)"""
        if data != self.data:
            return False
        if self._key is None:
            self._key = content_key(self.data)
        return content == self._key


#: how many fixes ``fix_all`` applies at most before it stops
MAX_STEPS = 10


@dataclass(frozen=True)
class FixStep:
    """One fix applied by ``fix_all``: the error it was for (``code`` at ``path``), the
    fix (its description and edits, and ``fix.after``: the errors it said it leaves) and
    ``left``, the error codes the check found after it."""

    code: str
    path: str
    fix: Fix
    left: list[str]

    @property
    def as_said(self) -> bool:
        """Whether it left exactly the errors it said it would."""
        return self.fix.after is None or list(self.fix.after) == self.left

    def describe(self) -> str:
        """``fixed CODE at PATH: DESCRIPTION (leaves ...)``."""
        leaves = ", ".join(self.left) if self.left else "no error"
        where = self.path or "the scenario"
        return f"fixed {self.code} at {where}: {self.fix.description} (leaves {leaves})"


@dataclass(frozen=True)
class FixRun:
    """What ``fix_all`` did: the scenario it reached, each step, and why it stopped."""

    scenario: Scenario
    steps: list[FixStep]
    diagnostics: list[Diagnostic]
    stopped: str

    @property
    def valid(self) -> bool:
        """No error-severity diagnostic is left."""
        return not any(d.is_error for d in self.diagnostics)


def fix_all(
    scenario: Scenario, diags: list[Diagnostic] | None = None, max_steps: int = MAX_STEPS
) -> FixRun:
    """Apply the best fix of the first error that has one, check again, and repeat until
    no error is left, none has a fix, or ``max_steps`` fixes were applied. When it ends
    valid, a name or description that says the scenario is broken is updated
    (``retitled``)."""
    current = scenario
    diags = _checked_with_fixes(current) if diags is None else diags
    steps: list[FixStep] = []
    stopped = ""
    while not stopped:
        errors = [d for d in diags if d.is_error]
        target = next((d for d in errors if d.fix is not None), None)
        if not errors:
            stopped = "valid: no error left"
        elif target is None or target.fix is None:
            stopped = f"no fix for {errors[0].code} at {errors[0].path or 'the scenario'}"
        elif len(steps) >= max_steps:
            stopped = f"stopped after {max_steps} fixes"
        else:
            try:
                current = apply_fix(current, target.fix)
            except Exception as e:  # a fix that no longer applies: stop rather than loop
                stopped = f"the fix of {target.code} does not apply: {e}"
                continue
            diags = _checked_with_fixes(current)
            left = list(dict.fromkeys(d.code for d in diags if d.is_error))
            steps.append(FixStep(target.code, target.path, target.fix, left))
    if steps and not any(d.is_error for d in diags):
        renamed = retitled(current, [st.fix for st in steps])
        if renamed != current:
            current, diags = renamed, _checked_with_fixes(renamed)
    return FixRun(current, steps, list(diags), stopped)


def apply_all(
    scenario: Scenario, diags: list[Diagnostic] | None = None, max_rounds: int = MAX_STEPS
) -> tuple[Scenario, list[Fix]]:
    """Apply fixes one at a time (re-checking after each) until none is left
    (``fix_all``, its scenario and fixes)."""
    run = fix_all(scenario, diags, max_rounds)
    return run.scenario, [st.fix for st in run.steps]


#: words of a name or description that say the scenario is broken
_BROKEN = re.compile(
    r"\b(refuses?|rejects?|fails?|failing|errors?|invalid|broken|bad|wrong|races?|racy|"
    r"deadlocks?|out[- ]of[- ]bounds?|oob|mismatch(es|ed)?|triggers?|crash(es)?|"
    r"not allowed|unsupported|cannot|can't|without a word|mistakes?|missing|buggy)\b",
    re.IGNORECASE,
)


def retitled(scenario: Scenario, applied: list[Fix]) -> Scenario:
    """A repaired scenario whose name or description still says it is broken, with both
    updated: the name gets ``-fixed`` and the description says which fixes made it and
    what it said before. Unchanged when neither says so."""
    name, text = scenario.name, scenario.description or ""
    if not applied or not (_BROKEN.search(name.replace("-", " ")) or _BROKEN.search(text)):
        return scenario
    from mpmd_lab.fields import MAX_NAME_LEN

    new_name = name if name.endswith("-fixed") else f"{name[: MAX_NAME_LEN - 6]}-fixed"
    how = "; ".join(dict.fromkeys(f.description for f in applied))
    was = f" Before the fix{'es' if len(applied) > 1 else ''}: {text}" if text else ""
    # a copy sharing the call and buffers (so the candidate's plan fits it), its two new
    # fields validated as they are set (``validate_assignment``)
    new = scenario.model_copy()
    new.name = new_name
    new.description = f"Repaired by mpmd-lab ({how}).{was}"
    renamed(scenario, new)  # (a checked candidate's check holds for its new name)
    return new


def _checked_with_fixes(s: Scenario) -> list[Diagnostic]:
    """What ``validate.check`` says: the rules' diagnostics (a checked candidate's own,
    ``recheck.known``) with the fixes that work."""
    found = known(s) or analyze_rules(s)
    return offer(s, list(found.diagnostics))


#: what this module offers (the path helpers and the candidate cache live below it)
__all__ = [
    "CACHE_SIZE",
    "MAX_STEPS",
    "FixRun",
    "FixStep",
    "apply_all",
    "apply_edit",
    "apply_fix",
    "checked",
    "clear_cache",
    "fix_all",
    "offer",
    "parse_path",
    "proposed",
    "retitled",
]
