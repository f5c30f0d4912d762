"""Diagnostics as text for terminals (the CLI's `check` output)."""

from __future__ import annotations

from mpmd_lab.diagnostics import Diagnostic, ordered


def format_diagnostic(d: Diagnostic) -> str:
    """A diagnostic as a few indented lines: where, what JAX says, why, the fix."""
    lines = [d.one_line()]
    if d.jax is not None:
        lines.append(f"    JAX {d.jax.type}: {d.jax.message}")
    if d.explanation:
        lines.append(f"    why: {d.explanation}")
    if d.fix is not None:
        lines.append(f"    fix: {d.fix.description}")
    return "\n".join(lines)


def format_diagnostics(name: str, diags: list[Diagnostic]) -> str:
    """Every diagnostic of a scenario, in the order JAX would raise them, and a verdict."""
    diags = ordered(diags)
    errors = sum(d.is_error for d in diags)
    warnings = len(diags) - errors
    body = [format_diagnostic(d) for d in diags]
    verdict = "valid" if not errors else "invalid"
    body.append(f"{name}: {verdict} ({errors} error(s), {warnings} warning(s))")
    return "\n".join(body)
