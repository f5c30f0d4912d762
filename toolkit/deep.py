"""Deep check: the static rules, then real JAX, and where they disagree JAX wins.

``deep_check(scenario)`` runs ``mpmd_lab.validate.check`` (no tracing) and asks JAX
itself in a child process (``mpmd_lab.probe``): build the call, trace it, lower it
for the GPU (``jax.export`` for ``cuda``, which runs on a CPU-only machine). JAX's
failure becomes a diagnostic with JAX's exact type, message and stage. Where the
static rules predicted something else, or an error JAX does not raise, the JAX
verdict stands and a ``RULES_DISAGREE`` warning says what the rules got wrong, so
every gap in the rules is visible.
"""

from __future__ import annotations

from mpmd_lab import probe
from mpmd_lab.catalogue import BY_CODE, OWN
from mpmd_lab.diagnostics import STAGE_ORDER, Diagnostic, JaxError, ordered
from mpmd_lab.scenario import Scenario

#: Stages at which JAX can be asked on any machine (what a deep check runs).
JAX_STAGES = ("build", "trace", "gpu-lower")


def _title(code: str) -> str:
    if code in BY_CODE:
        return BY_CODE[code].title
    if code in OWN:
        return OWN[code][0]
    return ""


def static_check(scenario: Scenario) -> list[Diagnostic]:
    """The static rules' findings (``validate.check``)."""
    from mpmd_lab import validate

    return validate.check(scenario)


def _jax_diagnostic(r: probe.ProbeResult, static: list[Diagnostic]) -> Diagnostic:
    """JAX's failure as a diagnostic; path, explanation and fix from a static twin."""
    twin = next((d for d in static if d.code == r.code), None)
    if r.code == probe.CODEGEN_CODE:
        return Diagnostic(
            code=r.code,
            stage="build",
            path=r.path,
            message=f"cannot be written as a JAX call, so JAX was not asked: {r.message}",
            explanation="mpmd-lab's code generator has no JAX call for this scenario.",
        )
    if r.timed_out or r.crashed:
        return Diagnostic(
            code=r.code or "RUN_CRASHED",
            severity="warning",
            stage=r.stage or "trace",
            path=r.path,
            message=r.message or "",
            explanation="JAX gave no verdict: the deep check could not finish. "
            "The static findings stand.",
        )
    explanation = twin.explanation if twin else _title(r.code or "")
    return Diagnostic(
        code=r.code or "JAX_UNKNOWN",
        severity="error",
        stage=r.stage or "trace",
        path=twin.path if twin else "",
        message=r.message or "",
        jax=JaxError(type=r.error_type or "", message=r.message or ""),
        explanation=explanation or "JAX raised an error that no rule of mpmd-lab knows.",
        fixes=list(twin.fixes) if twin else [],
    )


def _describe(d: Diagnostic) -> str:
    return f"{d.code} at stage {d.stage}" + (f" ({d.path})" if d.path else "")


def reconcile(static: list[Diagnostic] | None, r: probe.ProbeResult) -> list[Diagnostic]:
    """Merge static findings with what JAX did (``r``): JAX wins, gaps are reported."""
    known = static is not None
    static = ordered(list(static or []))
    checkable = [d for d in static if d.is_error and d.stage in JAX_STAGES]
    predicted = checkable[0] if checkable else None
    if probe.not_from_jax(r) and any(d.is_error and d.stage == "schema" for d in static):
        return static  # the scenario itself is broken, as the rules said: JAX never saw it
    if r.code == probe.CODEGEN_CODE or r.timed_out or r.crashed:
        # JAX gave no verdict: the static findings stand
        return ordered([*static, _jax_diagnostic(r, static)])

    if r.ok:
        # every build/trace/gpu-lower error the rules predicted is refuted by JAX
        out = [d for d in static if d not in checkable]
        if predicted is not None:
            refuted = ", ".join(_describe(d) for d in checkable)
            out.append(
                Diagnostic(
                    code="RULES_DISAGREE",
                    severity="warning",
                    stage=predicted.stage,
                    path=predicted.path,
                    message=f"the static rules predicted {refuted}, but JAX built, traced "
                    "and lowered the call for the GPU without an error",
                    explanation="JAX is the ground truth: the prediction is a gap in "
                    "mpmd-lab's rules and is dropped from this deep check.",
                )
            )
        return ordered(out)

    jax_diag = _jax_diagnostic(r, static)
    jax_stage = STAGE_ORDER.get(jax_diag.stage, 99)
    out = [jax_diag]
    for d in static:
        if d.code == jax_diag.code and d.is_error:
            continue  # merged into JAX's diagnostic
        if d in checkable and STAGE_ORDER.get(d.stage, 99) < jax_stage:
            continue  # JAX passed that stage: refuted
        out.append(d)
    if known and (predicted is None or predicted.code != jax_diag.code):
        said = f"their first error was {_describe(predicted)}" if predicted else "found nothing"
        out.append(
            Diagnostic(
                code="RULES_DISAGREE",
                severity="warning",
                stage=jax_diag.stage,
                path=jax_diag.path or (predicted.path if predicted else ""),
                message=f"JAX raised {jax_diag.code} ({r.error_type}) at stage "
                f"{jax_diag.stage}, but the static rules {said}",
                explanation="JAX is the ground truth: its error is reported first; "
                "the difference is a gap in mpmd-lab's rules.",
            )
        )
    # JAX's error first: a stable sort keeps it ahead of others at its stage
    return ordered(out)


def deep_check(
    scenario: Scenario,
    timeout: float = 120.0,
    *,
    static: list[Diagnostic] | None = None,
) -> list[Diagnostic]:
    """Static rules plus real JAX (build, trace, GPU lowering) in a child process.

    ``static``: the static findings to hold against JAX (default: ``validate.check``).
    """
    if static is None:
        static = static_check(scenario)
    r = probe.probe(scenario, JAX_STAGES, timeout=timeout)
    return reconcile(static, r)


__all__ = ["JAX_STAGES", "deep_check", "reconcile", "static_check"]
