"""Workshop exercises: scenarios to repair or build, judged by the real toolkit.

The exercises are data (:mod:`mpmd_lab.exercise_data`). ``check_exercise``
judges *any* scenario the way JAX would: it must load, pass the static check, meet
the exercise's requirements (e.g. "two blocks"), run (JAX's CPU interpreter, or the
simulator for cross-device traffic no CPU interpreter runs), and give the expected
outputs. Nothing compares JSON text, so every correct answer passes.

    >>> from mpmd_lab import exercises
    >>> s = exercises.start("dup-ref")
    >>> exercises.check_exercise("dup-ref", s).right
    False
"""

from __future__ import annotations

import copy
import html
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mpmd_lab.diagnostics import INTERP_CANNOT, Diagnostic
from mpmd_lab.exercise_data import EXERCISES, Arrays, Exercise
from mpmd_lab.memory import host_value
from mpmd_lab.ops import Let
from mpmd_lab.scenario import Scenario, ScenarioError, load_scenario


@dataclass(frozen=True, repr=False)
class Verdict:
    """The judgement of an answer: right or wrong, why, and a hint when wrong."""

    right: bool
    message: str
    hint: str = ""
    details: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.right

    def __str__(self) -> str:
        head = ("RIGHT: " if self.right else "WRONG: ") + self.message
        extra = [f"  {d}" for d in self.details]
        if self.hint and not self.right:
            extra.append(f"  hint: {self.hint}")
        return "\n".join([head, *extra])

    __repr__ = __str__

    def _repr_html_(self) -> str:
        colour, mark = ("#1b7f3b", "✔ right") if self.right else ("#b00020", "✘ not yet")
        parts = [
            f'<div style="border-left:4px solid {colour};padding:4px 10px">',
            f'<b style="color:{colour}">{mark}</b>: {html.escape(self.message)}',
        ]
        parts += [f"<br><code>{html.escape(d)}</code>" for d in self.details]
        if self.hint and not self.right:
            parts.append(f"<br><i>Hint:</i> {html.escape(self.hint)}")
        return "".join(parts) + "</div>"


def names() -> list[str]:
    """Every exercise's name, in curriculum order (by the notebook that teaches it)."""
    return sorted(EXERCISES, key=lambda n: EXERCISES[n].notebook[:2])


def get(name: str) -> Exercise:
    """The exercise called ``name``."""
    try:
        return EXERCISES[name]
    except KeyError:
        raise KeyError(f"no exercise {name!r}; try one of: {', '.join(EXERCISES)}") from None


def start(name: str) -> Scenario:
    """A fresh copy of the exercise's starting scenario (edit it freely)."""
    return load_scenario(copy.deepcopy(get(name).start))


def solution(name: str) -> Scenario:
    """A fresh copy of one correct answer (others pass too)."""
    return load_scenario(copy.deepcopy(get(name).solution))


def outline(scenario: Any) -> str:
    """A scenario in a few lines, with the field paths a learner edits.

    ``call.programs[0].body[1]: copy x_ref -> p`` and the like: enough to see the
    whole call at once and to know where to change it.
    """
    from mpmd_lab.graph import transform_label

    s = load_scenario(scenario)
    c = s.call
    lines = [f"{s.name}: {s.description}"]
    if s.device_mesh:
        lines.append(f"device_mesh: {dict(s.device_mesh)}  ({s.num_devices} devices)")
    for name, b in s.buffers.items():
        kind = "Ref" if b.as_ref else "array"
        lines.append(f"buffers.{name}: {b.dtype}{list(b.shape)} {kind}, init={b.init!r}")
    lines.append(f"call.entry: {c.entry}")
    for i, a in enumerate(c.args):
        src = getattr(a, "buffer", None) or f"tuple{list(getattr(a, 'tuple', []))}"
        views = "".join("." + transform_label(t) for t in a.transforms)
        lines.append(f"call.args[{i}]: {a.param} <- {src}{views}")
    for cap in c.captures:
        lines.append(f"call.captures: {cap.name} <- {cap.buffer} (closed over)")
    for name, o in c.outputs.items():
        lines.append(f"call.outputs.{name}: {o.dtype}{list(o.shape)}")
    for name, sc in c.scratch.items():
        lines.append(f"call.scratch.{name}: {sc.dtype}{list(sc.shape)} {sc.memory_space}")
    for pi, p in enumerate(c.programs):
        mesh = {"grid": dict(p.mesh.grid), "cluster": dict(p.mesh.cluster)}
        lines.append(f"call.programs[{pi}].mesh: {mesh}")
        lines += _outline_body(p.body, f"call.programs[{pi}]", "")
    return "\n".join(lines)


def _outline_body(body: list[Any], parent: str, indent: str) -> list[str]:
    """One line per statement; a loop's or a condition's body under it, indented, each
    line with its own field path."""
    from mpmd_lab.graph import transform_label

    lines = []
    for si, st in enumerate(body):
        where = f"{parent}.body[{si}]"
        if isinstance(st, Let):
            views = "".join("." + transform_label(t) for t in st.transforms)
            lines.append(f"{indent}{where}: let {st.let} = {st.ref}{views}")
            continue
        fields = {k: v for k, v in st.model_dump().items() if k not in ("op", "body")}
        args = ", ".join(f"{k}={v}" for k, v in fields.items())
        inner = getattr(st, "body", None)
        lines.append(f"{indent}{where}: {st.op}({args}){':' if inner is not None else ''}")
        if inner is not None:
            lines += _outline_body(inner, where, indent + "    ")
    return lines


# ---------------------------------------------------------------- judging


def inputs_of(scenario: Scenario) -> Arrays:
    """Every buffer's global host value, as the real call receives it (computed without
    JAX: ``memory.host_value``, which the tests hold equal to ``callsupport.host_array``)."""
    return {name: host_value(b, scenario.num_devices) for name, b in scenario.buffers.items()}


def _execute(scenario: Scenario, backend: str, analysis: Any) -> tuple[Arrays | None, str, str]:
    """(outputs or None, who ran it, the error) of the call: JAX's CPU interpreter, or
    the simulator where no CPU interpreter can run it (cross-device traffic)."""
    from mpmd_lab import deep, runtime

    if backend == "interpret":
        result = runtime.run(scenario, backend="interpret", analysis=analysis)
        if result.ok:
            return dict(result.outputs), "JAX's CPU interpreter", ""
        assert result.error is not None
        # a limit of the CPU interpreter, not a mistake in the kernel: simulate instead
        if result.error.code not in INTERP_CANNOT:
            return None, "JAX's CPU interpreter", _error_line(result.error)
    rejected = [
        d for d in deep.deep_check(scenario, static=list(analysis.diagnostics)) if d.is_error
    ]
    if rejected:
        return None, "JAX (trace and GPU lowering)", _error_line(rejected[0])
    result = runtime.run(scenario, backend="simulate", analysis=analysis)
    if not result.ok:
        assert result.error is not None
        return None, "the simulator", _error_line(result.error)
    races = getattr(result.detail, "races", [])
    if races:
        return None, "the simulator", f"RACE: {races[0].describe()}"
    return dict(result.outputs), "the simulator", ""


def _error_line(d: Diagnostic) -> str:
    """``CODE: the line of JAX's message that says what went wrong``."""
    message = d.jax.message if d.jax else d.message
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    named = [ln for ln in lines if re.match(r"^[A-Za-z_.]*(Error|Exception)\b", ln)]
    line = (named[-1] if named else lines[0]) if lines else ""
    return f"{d.code}: {line[:240]}"


def _compare(name: str, got: np.ndarray, want: np.ndarray) -> str | None:
    """None when ``got`` is ``want``, else what differs, in a sentence."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"`{name}` has shape {list(got.shape)}, expected {list(want.shape)}"
    if got.dtype != want.dtype:
        return f"`{name}` has dtype {got.dtype}, expected {want.dtype}"
    if want.dtype.kind == "f":
        bad = ~np.isclose(got, want, rtol=1e-6, atol=0.0)
    else:
        bad = got != want
    if not bad.any():
        return None
    n, first = int(bad.sum()), tuple(int(i) for i in np.argwhere(bad)[0])
    where = first[0] if len(first) == 1 else first
    msg = f"`{name}` differs at {n} of {want.size} elements (first at {where}: got "
    msg += f"{got[first].item()!r}, expected {want[first].item()!r})"
    if got.dtype.kind == "f" and np.isnan(got[bad]).any():
        msg += f"; {int(np.isnan(got).sum())} were never written (NaN)"
    return msg


def check_exercise(name: str, scenario: Any) -> Verdict:
    """Judge an answer to exercise ``name``: a Scenario, a dict, JSON text or a path."""
    ex = get(name)
    try:
        s = load_scenario(scenario)
    except ScenarioError as e:
        problems = [f"{p or '<top>'}: {m}" for p, m in e.problems]
        return Verdict(False, "this is not a scenario yet", ex.hint, problems)

    from mpmd_lab import validate

    analysis = validate.analyze(s)
    errors = [d for d in analysis.diagnostics if d.is_error]
    if errors:
        first = errors[0]
        details = [d.one_line() for d in errors[:3]]
        if first.stage in ("gpu-run", "simulate"):  # a race, a deadlock: JAX never says
            head = "JAX accepts this call, but on a GPU it goes wrong"
        else:
            head = "JAX would reject this call"
        return Verdict(False, f"{head} ({first.code}: {first.message})", ex.hint, details)
    for req in ex.requirements:
        if not req.holds(s):
            return Verdict(False, f"not what was asked: {req.description}", ex.hint)

    want = ex.expected(inputs_of(s))
    missing = [k for k in want if k not in s.call.outputs]
    if missing:
        return Verdict(False, f"the call must return an output named `{missing[0]}`", ex.hint)
    got, source, error = _execute(s, ex.backend, analysis)
    if got is None:
        return Verdict(False, f"the call failed when {source} ran it: {error}", ex.hint)
    for out_name, value in want.items():
        diff = _compare(out_name, got[out_name], value)
        if diff:
            return Verdict(False, f"JAX accepts it, but {diff} ({source})", ex.hint)
    outs = ", ".join(f"`{k}`" for k in want)
    return Verdict(True, f"JAX accepts the call and {outs} is as expected ({source} ran it)")
