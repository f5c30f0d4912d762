"""Diagnostics as text for terminals (the CLI's `check` output)."""

from __future__ import annotations

from typing import Any

from mpmd_lab.diagnostics import Diagnostic, interpreter_limit, ordered, verdict


def format_diagnostic(d: Diagnostic) -> str:
    """A diagnostic as a few indented lines: where, what JAX says, why, the fix. A note
    that this machine's CPU interpreter cannot run the call is its one line (a fact of
    the machine, not of the kernel: ``mpmd-lab explain CODE`` has the rest)."""
    if interpreter_limit(d):
        return d.one_line()
    lines = [d.one_line()]
    if d.jax is not None:
        lines.append(f"    JAX {d.jax.type}: {d.jax.message}")
    if d.explanation:
        lines.append(f"    why: {d.explanation}")
    fixes = list(d.fixes) or ([d.fix] if d.fix is not None else [])
    if len(fixes) == 1:
        lines.append(f"    fix: {fixes[0].description}{after_fix(fixes[0])}")
    for i, fix in enumerate(fixes if len(fixes) > 1 else [], 1):
        best = " (best)" if i == 1 else ""
        lines.append(f"    fix {i}{best}: {fix.description}{after_fix(fix)}")
    return "\n".join(lines)


def after_fix(fix: Any) -> str:
    """`` -> valid`` or `` -> then CODE`` (what the check finds once the fix is made)."""
    after = getattr(fix, "after", None)
    if after is None:
        return ""
    return " -> then " + ", ".join(after) if after else " -> valid"


def format_diagnostics(name: str, diags: list[Diagnostic]) -> str:
    """Every diagnostic of a scenario, in the order JAX would raise them, and a verdict."""
    diags = ordered(diags)
    errors = sum(d.is_error for d in diags)
    notes = sum(d.severity == "info" for d in diags)  # how a verdict was reached
    warnings = len(diags) - errors - notes
    body = [format_diagnostic(d) for d in diags]
    said = f", {notes} note(s)" if notes else ""
    body.append(f"{name}: {verdict(diags)} ({errors} error(s), {warnings} warning(s){said})")
    return "\n".join(body)
