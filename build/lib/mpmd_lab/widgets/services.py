"""The widgets' one door into ``toolkit``: every call the UI makes goes through here.

Each function returns data or a short message; none raises. While a helper module has
not landed yet (or fails), the UI shows the message in place instead of crashing.
"""

from __future__ import annotations

import importlib
import io
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mpmd_lab.diagnostics import Diagnostic, Fix, ordered
from mpmd_lab.scenario import Scenario


class Unavailable(Exception):
    """A toolkit module the UI needs is missing or failed; ``str()`` says which, in a line."""


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise Unavailable(f"{name} is not available yet ({e})") from None


def _fail(what: str, e: BaseException) -> Unavailable:
    last = traceback.format_exception_only(type(e), e)[-1].strip()
    return Unavailable(f"{what} failed: {last}")


# ---------------------------------------------------------------- validate


def check(scenario: Scenario) -> list[Diagnostic]:
    """``mpmd_lab.validate.check``: static, no tracing; ordered as JAX would raise them."""
    validate = _module("mpmd_lab.validate")
    try:
        return ordered(list(validate.check(scenario)))
    except Exception as e:  # a validator bug must not take the UI down
        raise _fail("mpmd_lab.validate.check", e) from None


def apply_fix(scenario: Scenario, fix: Fix) -> Scenario:
    """``mpmd_lab.fixes.apply_fix``: the scenario with the fix's edits made."""
    fixes = _module("mpmd_lab.fixes")
    try:
        return fixes.apply_fix(scenario, fix)
    except Exception as e:
        raise _fail("mpmd_lab.fixes.apply_fix", e) from None


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


def stack_steps(scenario: Scenario, program: int, statement: int) -> list[Step]:
    """The base ref, then one Step per transform of the ``let`` at
    ``call.programs[program].body[statement]``, as the validator resolved them
    (``mpmd_lab.shapes`` semantics); steps after the first failing one are absent."""
    try:
        from mpmd_lab.validate.analyse import analyse
        from mpmd_lab.validate.context import Ctx
    except ImportError as e:
        raise Unavailable(f"mpmd_lab.validate is not available yet ({e})") from None
    try:
        ctx = Ctx(scenario)
        analyse(ctx)
        stmt = ctx.programs[program].stmts[statement]
    except Exception as e:
        raise _fail("mpmd_lab.validate.analyse", e) from None
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
    try:
        knowledge = _module("mpmd_lab.knowledge")
        card = knowledge.card(code)
        return None if card is None else card.to_html()
    except Exception:
        return None


def title_of(code: str) -> str:
    """The catalogue's one-line title for a code ("" when unknown)."""
    from mpmd_lab import catalogue

    for entry in getattr(catalogue, "ENTRIES", []):
        if getattr(entry, "code", None) == code:
            return entry.title
    own = getattr(catalogue, "OWN", {}).get(code)
    return own[0] if isinstance(own, tuple) else ""


# ---------------------------------------------------------------- graph


def aliasing_png(scenario: Scenario, dpi: int = 80) -> bytes:
    """``mpmd_lab.plot.plot_aliasing`` as PNG bytes."""
    plot = _module("mpmd_lab.plot")
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    try:
        fig = plot.plot_aliasing(scenario)
    except Exception as e:
        raise _fail("mpmd_lab.plot.plot_aliasing", e) from None
    try:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
        return buf.getvalue()
    finally:
        plt.close(fig)


# ---------------------------------------------------------------- export


def jax_source(scenario: Scenario) -> str:
    """``mpmd_lab.codegen.generate``: the plain JAX program this scenario stands for."""
    from mpmd_lab import codegen

    try:
        return codegen.generate(scenario)
    except codegen.CodegenError as e:
        raise Unavailable(f"cannot write this call as JAX: {e.path or 'call'}: {e}") from None
    except Exception as e:
        raise _fail("mpmd_lab.codegen.generate", e) from None


# ---------------------------------------------------------------- runtime


@dataclass
class RunOutcome:
    """What the RunPanel shows: status, backend, outputs (numpy), or the error."""

    status: str  # "ok" | "error"
    backend: str = ""
    seconds: float | None = None
    outputs: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None  # {"code", "type", "message", "stage"}


def backends() -> tuple[str, ...]:
    """The runtime's backends (``mpmd_lab.runtime.BACKENDS``), ``auto`` first."""
    try:
        return tuple(_module("mpmd_lab.runtime").BACKENDS)
    except (Unavailable, AttributeError):
        return ("auto", "interpret", "gpu")


def run(
    scenario: Scenario,
    backend: str = "auto",
    timeout: float = 120.0,
    on_progress: Callable[[str, float], None] | None = None,
) -> RunOutcome:
    """``mpmd_lab.runtime.run``; a missing runtime or a crash comes back as an error outcome."""
    try:
        runtime = _module("mpmd_lab.runtime")
    except Unavailable as e:
        return RunOutcome("error", backend, error={"code": None, "type": "", "message": str(e)})
    kwargs: dict[str, Any] = {"backend": backend, "timeout": timeout}
    if on_progress is not None:
        kwargs["on_progress"] = on_progress
    try:
        try:
            result = runtime.run(scenario, **kwargs)
        except TypeError as e:
            if "on_progress" not in str(e):
                raise
            kwargs.pop("on_progress")
            result = runtime.run(scenario, **kwargs)
        data = result.to_json()
    except Exception as e:
        err = _fail("mpmd_lab.runtime.run", e)
        return RunOutcome("error", backend, error={"code": None, "type": "", "message": str(err)})
    outputs = getattr(result, "outputs", None) or {}
    if not outputs and data.get("outputs"):
        outputs = {k: _decode(v) for k, v in data["outputs"].items()}
    return RunOutcome(
        status=data.get("status", "error"),
        backend=str(data.get("backend", backend)),
        seconds=data.get("seconds"),
        outputs=dict(outputs),
        error=data.get("error"),
    )


def _decode(entry: dict[str, Any]) -> Any:
    """An output of ``run --json`` back to numpy (values, or None past 1024 elements)."""
    import numpy as np

    if "values" not in entry:
        return None
    vals = [float(v) if isinstance(v, str) else v for v in entry["values"]]
    return np.asarray(vals).reshape(entry["shape"])
