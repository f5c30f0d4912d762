"""The collectives puzzle track: graded puzzles from a ring shift to the collective
matmul, for workshops on a laptop (the puzzles are data: :mod:`mpmd_lab.puzzle_data`).

``grade(name, scenario)`` judges any answer on a CPU, in milliseconds:

0. the inputs and the device mesh must be the puzzle's (the expected values follow
   from the inputs: changing them is no answer);
1. the static check (what JAX would raise, and races and deadlocks judged over every
   schedule that matters): any error fails, and so does a semaphore left raised
   (SEMAPHORE_IMBALANCE) or a call the check could not run whole (SYNC_NOT_CHECKED:
   no "right" for what was not checked);
2. what the puzzle asks besides the values (e.g. "keeps its signals and waits");
3. the simulator's outputs against numpy's, device by device: a wrong answer says which
   device, which output and which elements (in the device's own coordinates).

JAX's own trace and GPU lowering are not run by the grade (they take seconds); the
static check stands for them, and the tests hold every key to real JAX.

    >>> from mpmd_lab import puzzles
    >>> puzzles.grade("shift-right", puzzles.start("shift-right")).right
    False
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import numpy as np
from mpmd_lab.accesslog import runs
from mpmd_lab.diagnostics import Diagnostic
from mpmd_lab.exercises import Verdict, inputs_of
from mpmd_lab.puzzle_data import PUZZLES, Puzzle
from mpmd_lab.scenario import Scenario, ScenarioError, load_scenario

#: codes that fail a grade although they are warnings: a verdict is a promise
FAILING_WARNINGS = ("SEMAPHORE_IMBALANCE", "SYNC_NOT_CHECKED")
#: wrong elements listed per device and output at most (as runs)
MAX_RUNS = 3


def names() -> list[str]:
    """Every puzzle's name, easiest first."""
    return sorted(PUZZLES, key=lambda n: PUZZLES[n].level)


def get(name: str) -> Puzzle:
    """The puzzle called ``name``."""
    try:
        return PUZZLES[name]
    except KeyError:
        raise KeyError(f"no puzzle {name!r}; try one of: {', '.join(names())}") from None


def start(name: str) -> Scenario:
    """A fresh copy of the puzzle's starting point (edit it freely)."""
    return load_scenario(copy.deepcopy(get(name).start))


def key(name: str) -> Scenario:
    """The facilitator's key: one correct answer (others pass too)."""
    return load_scenario(copy.deepcopy(get(name).key))


def hint(name: str, level: int = 0) -> str:
    """Hint ``level`` (0 first) of the puzzle; each says more, the last gives it away."""
    hints = get(name).hints
    return hints[min(max(level, 0), len(hints) - 1)]


def facilitator_key() -> str:
    """The facilitator's key as a Markdown table: each puzzle's hole, what its start shows
    when graded, and the fix (docs/PUZZLES.md holds this table; a test keeps it so)."""
    lines = [
        "| # | puzzle | topic | the start shows | the key's fix |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in names():
        p = get(name)
        lines.append(f"| {p.level} | `{name}`: {p.title} | {p.topic} | {p.symptom} | {p.fix} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- grading


def grade(name: str, scenario: Any) -> Verdict:
    """Judge an answer to puzzle ``name`` (a Scenario, a dict, JSON text or a path)."""
    from mpmd_lab import simulator, validate

    puzzle = get(name)
    first_hint = puzzle.hints[0]
    try:
        s = load_scenario(scenario)
    except ScenarioError as e:
        problems = [f"{p or '<top>'}: {m}" for p, m in e.problems]
        return Verdict(False, "this is not a scenario yet", first_hint, problems)

    changed = _inputs_changed(name, s)
    if changed:
        return Verdict(False, changed, first_hint)
    analysis = validate.analyze(s, fixes=False)
    failing = [d for d in analysis.diagnostics if d.is_error or d.code in FAILING_WARNINGS]
    if failing:
        return Verdict(
            False, _headline(failing[0]), first_hint, [d.one_line() for d in failing[:3]]
        )
    for req in puzzle.requirements:
        if not req.holds(s):
            return Verdict(False, f"not what was asked: {req.description}", first_hint)

    want = puzzle.expected(inputs_of(s))
    absent = [k for k in want if k not in s.call.outputs]
    if absent:
        return Verdict(False, f"the call must return an output named `{absent[0]}`", first_hint)
    sim = simulator.simulate(s, diagnostics=list(analysis.diagnostics), log=0)
    if not sim.ok or sim.races:
        found = sim.diagnostics()
        return Verdict(
            False,
            f"the simulator could not run it: {found[0].one_line()}",
            first_hint,
            [d.one_line() for d in found[1:4]],
        )
    details = [
        line
        for out_name, value in want.items()
        for line in differences(out_name, sim.outputs[out_name], value, s.num_devices)
    ]
    if details:
        devices = sorted({line.split(":")[0] for line in details})
        return Verdict(
            False,
            f"no race, no deadlock, but the values are wrong on {', '.join(devices)}",
            first_hint,
            details,
        )
    outs = ", ".join(f"`{k}`" for k in want)
    return Verdict(
        True,
        f"{outs} right on all {s.num_devices} devices, no race or deadlock in any schedule "
        "(static check and simulator; JAX's lowering not run here)",
    )


def _inputs_changed(name: str, s: Scenario) -> str:
    """Why the answer's inputs or device mesh are not the puzzle's ("" when they are):
    the expected outputs are worked out from the inputs, so changing them (x = zeros) is
    no answer."""
    given = _given(name)
    if s.device_mesh != given.device_mesh:
        return f"keep the device mesh as given: {given.device_mesh}"
    for buf, b in given.buffers.items():
        if s.buffers.get(buf) != b:
            return (
                f"keep the inputs as given: buffer `{buf}` is {b.dtype}{list(b.shape)}, "
                f"init={b.init!r}"
            )
    return ""


@functools.cache
def _given(name: str) -> Scenario:
    """The key as loaded once (only read): its mesh and buffers are the puzzle's."""
    return key(name)


def _headline(d: Diagnostic) -> str:
    """What the first problem means for the kernel, with its code and where it is (its
    message follows in the details)."""
    at = f"{d.code} at {d.path or '<scenario>'}"
    if d.code.startswith(("RACE", "DEADLOCK")):
        return f"JAX accepts it, but on a GPU it goes wrong: {at}"
    if d.code == "SEMAPHORE_IMBALANCE":
        return f"the kernel ends with a semaphore still raised: {at}"
    if d.code == "SYNC_NOT_CHECKED":
        return f"not graded: the check could not run every schedule: {at}"
    if d.stage in ("gpu-run", "simulate"):
        return f"JAX accepts it, but on a GPU it goes wrong: {at}"
    return f"JAX would reject this call: {at}"


def differences(name: str, got: np.ndarray, want: np.ndarray, devices: int) -> list[str]:
    """One line per device whose part of output ``name`` is not ``want``'s: how many
    elements, where (runs in the device's own coordinates: rows for a 2-D output), the
    first one's got and expected values, how many were never written (NaN), and whether
    it holds what another device should (a device index off by some)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return [
            f"all devices: `{name}` is {got.dtype}{list(got.shape)} (global), expected "
            f"{want.dtype}{list(want.shape)}"
        ]
    wants = _split(want, devices)
    lines = []
    for d, (g, w) in enumerate(zip(_split(got, devices), wants, strict=True)):
        bad = _wrong(g, w)
        if not bad.any():
            continue
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        spans = runs(np.flatnonzero(bad.reshape(len(bad), -1).any(axis=1)))
        where = ", ".join(f"[{a}:{b}]" for a, b in spans[:MAX_RUNS])
        where += f" and {len(spans) - MAX_RUNS} more" if len(spans) > MAX_RUNS else ""
        rows = "rows " if g.ndim > 1 else ""
        at = first[0] if len(first) == 1 else list(first)
        line = (
            f"device {d}: `{name}` wrong at {int(bad.sum())} of {w.size} elements, {rows}{where}"
            f" (first at {at}: got {g[first].item()!r}, expected {w[first].item()!r})"
        )
        if g.dtype.kind == "f" and np.isnan(g[bad]).any():
            line += f"; {int(np.isnan(g[bad]).sum())} never written (NaN)"
        others = [e for e, other in enumerate(wants) if e != d and not _wrong(g, other).any()]
        if others:
            line += f"; it holds what device {others[0]} should get"
        lines.append(line)
    return lines


def _wrong(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Where ``got`` is not ``want`` (floats to a relative 1e-6; NaN is never right)."""
    if want.dtype.kind == "f":
        return ~np.isclose(got, want, rtol=1e-6, atol=0.0)
    return np.asarray(got != want)


def _split(a: np.ndarray, devices: int) -> list[np.ndarray]:
    """A global output's per-device parts (each device's is a slice of dim 0)."""
    return list(a.reshape(devices, a.shape[0] // devices, *a.shape[1:]))
