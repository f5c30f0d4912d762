"""Hostile inputs, second round (issue 32), each made in the test and held to a bound:
a loop whose body is empty (or trivial) counts its trips toward the step and time
bounds in every walk; ``import`` and Save keep to the safe-write rules; index and
semaphore arithmetic is JAX's (int32, wraparound, bounds)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mpmd_lab import gallery
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import analyze

ROOT = Path(__file__).resolve().parents[1]
RS = gallery.load("ring-shift").to_dict()
INT32_MAX = 2**31 - 1


def _cli(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("mpmd-lab")
    return subprocess.run(
        [str(exe), *argv], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def _body(data: dict, body: list) -> dict:
    data = copy.deepcopy(data)
    data["call"]["programs"][0]["body"] = body
    return data


FILL = {"op": "fill", "dst": "out", "value": 0.0}


def _empty_loop(stop: object = INT32_MAX) -> dict:
    return _body(RS, [FILL, {"op": "loop", "var": "i", "stop": stop, "body": []}])


def _nested_empty(n: int, depth: int) -> dict:
    body: list = []
    for k in range(depth):
        body = [{"op": "loop", "var": f"i{k}", "stop": n, "body": body}]
    return _body(RS, [FILL, *body])


# ------------------------------------------------------------ 1. empty loops


@pytest.mark.parametrize("cmd", ["check", "graph", "export", "run"])
def test_an_empty_loop_of_2_31_trips_answers_every_command(cmd, tmp_path):
    """The engine counted a step only when a statement yielded: an empty body yields
    nothing, so neither bound fired and every command hung (~11 minutes a block)."""
    f = tmp_path / "empty.json"
    f.write_text(json.dumps(_empty_loop()))
    argv = {
        "check": ["check", str(f)],
        "graph": ["graph", str(f), "--text"],
        "export": ["export", str(f), "-o", str(tmp_path / "x.py")],
        "run": ["run", str(f), "--backend", "simulate", "--timeout", "20"],
    }[cmd]
    p = _cli(*argv, timeout=90)
    assert "Traceback" not in p.stderr, p.stderr
    if cmd == "check":
        assert "SYNC_NOT_CHECKED" in p.stdout, p.stdout  # said, not silently valid
    if cmd == "run":
        assert "SIM_TOO_LARGE" in p.stdout + p.stderr, (p.stdout, p.stderr)


def test_the_estimate_counts_an_empty_bodys_trips():
    """The up-front estimate counted a loop as trips x statements of its body: 0 for an
    empty one, so simulate ran it instead of refusing it."""
    from mpmd_lab.simulator import step_estimate

    # 4 devices x (fill + loop + its 2**31 - 1 trips)
    assert step_estimate(load_scenario(_empty_loop())) == 4 * (2 + INT32_MAX)
    assert step_estimate(load_scenario(_nested_empty(1000, 2))) == 4 * (2 + 1000 * (1 + 1000))


def test_an_empty_loop_with_a_dynamic_bound_is_stopped_at_the_step_bound():
    """A bound only the devices know is counted once up front; the engine counts its
    trips as it meets them (all at once: nothing runs in them)."""
    from mpmd_lab import simulate

    s = load_scenario(_empty_loop(f"{INT32_MAX} - dev"))
    t0 = time.perf_counter()
    res = simulate(s)
    assert time.perf_counter() - t0 < 30
    assert res.error is not None and res.error.code == "SIM_TOO_LARGE", res
    a = analyze(s)
    assert "stopped after" in " ".join(
        d.message for d in a.diagnostics if d.code == "SYNC_NOT_CHECKED"
    )


def test_empty_loops_nested_in_others_check_and_edit_at_once():
    """An empty innermost loop inside others took every check (and so every Lab edit)
    to the 10 s time bound; deeper, forever. Now the trips count toward the step bound."""
    from mpmd_lab.session import Session

    s = load_scenario(_nested_empty(INT32_MAX, 3))
    t0 = time.perf_counter()
    a = analyze(s)
    assert "SYNC_NOT_CHECKED" in {d.code for d in a.diagnostics}
    sess = Session("ring-shift")
    sess.replace(s, "nested empty loops")
    assert sess.edit(("replace", "call.programs[0].body[1].stop", 1000)).ok
    assert "SYNC_NOT_CHECKED" in {d.code for d in sess.diagnostics}
    assert time.perf_counter() - t0 < 30
