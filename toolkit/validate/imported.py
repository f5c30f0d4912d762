"""What an import left out: a scenario read from a JAX kernel by ``from_jax`` that could
not carry all of it (``not_imported``) is partial, an error at each place it lacks
something (IMPORT_UNSUPPORTED). The rest is checked as usual; nothing says "valid"
about a kernel that is not all there, and simulate and run refuse it.
"""

from __future__ import annotations

from typing import Any

from mpmd_lab.diagnostics import Diagnostic
from mpmd_lab.validate.context import Ctx, _explanation

#: verdicts on the order of what runs (which signals, waits, arrivals and accesses there
#: are): a partial scenario lacks some of them, so none of these is the kernel's
JUDGED_BY_ORDER = frozenset(
    {"DEADLOCK_BARRIER", "DEADLOCK_SEMAPHORE", "RACE", "RACE_DETECTED", "SEMAPHORE_IMBALANCE"}
)


def check_imported(ctx: Ctx) -> None:
    if ctx.s.not_imported:
        n = len(ctx.s.not_imported)
        ctx.diags = [_not_judged(d, n) if d.code in JUDGED_BY_ORDER else d for d in ctx.diags]
        ctx.diags += not_imported_diagnostics(ctx.s.not_imported)


def _not_judged(d: Diagnostic, left_out: int) -> Diagnostic:
    """A deadlock, race or imbalance found in a partial scenario: a warning that says it
    was judged without what the import left out (a signal or a wait among it, say)."""
    if not d.is_error:
        return d
    return d.model_copy(
        update={
            "severity": "warning",
            "message": f"not judged: the import left out {left_out} construct(s) "
            "(IMPORT_UNSUPPORTED), and a signal, wait, arrival or access among them could "
            f"change this; on what was imported: {d.message}",
        }
    )


def not_imported_diagnostics(entries: list[Any]) -> list[Diagnostic]:
    """One IMPORT_UNSUPPORTED error per entry (``NotImported`` or its dict), at the
    user's line: where it is (``cell [3], line 11`` in a notebook) and its text."""
    from mpmd_lab.importer import frames as F

    out = []
    for n in entries:
        e = n if isinstance(n, dict) else n.model_dump()
        source = e.get("source")
        at = ""
        if source:
            line = F.line_text(source)
            at = f" at {F.display(source)}" + (f": {line}" if line else "")
        out.append(
            Diagnostic(
                code="IMPORT_UNSUPPORTED",
                severity="error",
                stage="trace",
                path=e.get("path") or "",
                message=f"not imported: {e['what']}{at}",
                explanation=_explanation("IMPORT_UNSUPPORTED"),
                source=source,
            )
        )
    return out
