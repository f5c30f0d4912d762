"""What the widgets show that is not the Session itself: a stack's steps, cards, the
graph picture, the exported source, a run's outcome. Each reads the Session's one
analysis; none re-checks or re-resolves anything. ``Unavailable`` carries a one-line
message the UI shows in place (a scenario codegen cannot write, a crashed run).
"""

from __future__ import annotations

import io
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mpmd_lab import catalogue, codegen, knowledge, runtime
from mpmd_lab.diagnostics import Diagnostic
from mpmd_lab.session import Session


class Unavailable(Exception):
    """What the UI needs cannot be had; ``str()`` says why, in a line."""


def _fail(what: str, e: BaseException) -> Unavailable:
    last = traceback.format_exception_only(type(e), e)[-1].strip()
    return Unavailable(f"{what} failed: {last}")


# ---------------------------------------------------------------- shapes


@dataclass
class Step:
    """The view after one transform (``f32[8,128] GMEM peer``), or why it has none."""

    text: str | None
    error: str = ""  # "CODE: JAX's message" of the step that fails

    def label(self) -> str:
        if self.text is not None:
            return self.text
        return "✘ fails here" if self.error else "—"


def stack_steps(session: Session, program: int, statement: int) -> list[Step]:
    """The base ref, then one Step per transform of the ``let`` at
    ``call.programs[program].body[statement]``, as resolved (steps after the first
    failing one are absent)."""
    try:
        stmt = session.plan.programs[program].stmts[statement]
    except IndexError:
        return [Step(None, "no such statement")]
    src = stmt.refs.get("ref")
    if src is None or src.info is None:
        return [Step(None, "the base ref is unknown or unusable")]
    out = [Step(src.info.describe())]
    for step in stmt.steps:
        err = f"{step.error.code}: {step.error.message}" if step.error else ""
        out.append(Step(step.after.describe() if step.after is not None else None, err))
    return out


# ---------------------------------------------------------------- knowledge


def card_html(code: str) -> str | None:
    """The knowledge base's card for a code as HTML, or None when there is none."""
    card = knowledge.card(code)
    return None if card is None else card.to_html()


def interpreter_notes(session: Session) -> list[Diagnostic]:
    """The notes that JAX's CPU interpreter cannot run this call (said once, plainly)."""
    return [d for d in session.diagnostics if runtime.interpreter_limit(d)]


def problems_of(session: Session) -> list[Diagnostic]:
    """The diagnostics that are problems of the call (the interpreter's notes apart)."""
    return [d for d in session.diagnostics if not runtime.interpreter_limit(d)]


def problems_at(session: Session, path: str, exact: bool = False) -> list[Diagnostic]:
    """``session.diagnostics_at(path)`` less the interpreter's notes (a row's badges)."""
    return [d for d in session.diagnostics_at(path, exact) if not runtime.interpreter_limit(d)]


def where_raised(d: Diagnostic) -> str:
    """Who reports it, and where: JAX at a stage, or mpmd-lab's own check."""
    if d.stage == "schema":
        return "the scenario file itself"
    if d.code in catalogue.BY_CODE:
        if d.stage == "interpret":
            return "JAX's CPU interpreter raises it"
        if d.stage == "gpu-run":
            return "JAX raises it on a GPU"
        return f"JAX raises it at {d.stage}"
    if d.stage == "gpu-run":
        return "found by mpmd-lab's check; on a GPU nothing is raised, the result is wrong"
    if d.stage == "simulate":
        return "found by mpmd-lab's simulator"
    return f"found by mpmd-lab's check (before {d.stage})"


def title_of(code: str, message: str = "") -> str:
    """The catalogue's one-line title for a code ("" when unknown; a race's by its kind)."""
    return catalogue.title(code, message)


# ---------------------------------------------------------------- graph


def aliasing_png(session: Session, dpi: int = 80) -> bytes:
    """The aliasing graph of the session's version (``plot.plot_aliasing``) as PNG bytes."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from mpmd_lab import draw as plot

    try:
        fig = plot.plot_aliasing(session.scenario, analysis=session.analysis)
    except Exception as e:  # a drawing bug shows as a message, never hides the problems
        raise _fail("plot_aliasing", e) from None
    try:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
        return buf.getvalue()
    finally:
        plt.close(fig)


# ---------------------------------------------------------------- export


def jax_source(session: Session) -> str:
    """The plain JAX program this version stands for."""
    try:
        return session.export()
    except codegen.CodegenError as e:
        raise Unavailable(f"cannot write this call as JAX: {e.path or 'call'}: {e}") from None


# ---------------------------------------------------------------- runtime


@dataclass
class RunOutcome:
    """What the RunPanel shows: status, backend, outputs (numpy), or the error."""

    status: str  # "ok" | "error"
    backend: str = ""
    seconds: float | None = None
    outputs: dict[str, Any] = field(default_factory=dict)
    error: Diagnostic | None = None
    reason: str = ""  # why this backend ran (``auto``)
    version: int = -1  # the session version it ran
    timing: str = ""  # what the time covers (``RunResult.timing``)
    races: list[str] = field(default_factory=list)  # the simulator's races, summarised
    note: str = ""  # the simulator's note (what a simulation is)
    name: str = ""  # the scenario's name when it ran
    #: the GPU-lowering error a simulation ran past (shown first), None otherwise
    lowering: Diagnostic | None = None


def backends() -> tuple[str, ...]:
    """The runtime's backends, ``auto`` first."""
    return tuple(runtime.BACKENDS)


def run(
    session: Session,
    backend: str = "auto",
    timeout: float = 120.0,
    on_progress: Callable[[str, float], None] | None = None,
    past_lowering: bool = False,
) -> RunOutcome:
    """Run the session's version (a change under way finishes first); a crash comes
    back as an error outcome. ``past_lowering``: simulate past a GPU-lowering error
    (``runtime.run``'s)."""
    version, scenario, _ = session.snapshot()
    name = scenario.name
    try:
        result = session.run(
            backend, timeout=timeout, on_progress=on_progress, past_lowering=past_lowering
        )
    except Exception as e:  # errors are data: the panel shows it
        return RunOutcome("error", backend, error=run_error(e), version=version, name=name)
    record = session.last_run
    if record is not None and record.result is result:  # the version that really ran
        version, name = record.version, record.name
    note = getattr(result.detail, "note", "") or ""
    return RunOutcome(
        status=result.status,
        backend=result.backend,
        seconds=result.seconds,
        outputs=dict(result.outputs),
        error=result.diagnostic(),
        reason=result.reason,
        version=version,
        timing=result.timing(),
        races=result.race_lines(),
        note=note if isinstance(note, str) else "",
        name=name,
        lowering=result.lowering,
    )


def run_error(e: BaseException) -> Diagnostic:
    """A crash of the run machinery itself, as the diagnostic the panel shows."""
    return Diagnostic(code="RUN_ERROR", stage="interpret", message=str(_fail("run", e)))
