"""ALIASED_REF: one Ref given to ``plgpu.kernel`` twice, written through one parameter
and read or written through the other: JAX accepts the call (traces and lowers it for
the GPU), the check warns; ``pl.kernel`` refuses the same call (MPMD_DUP_REF)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from mpmd_lab import probe, validate
from mpmd_lab.scenario import load_scenario
from mpmd_lab.simulator import simulate

SCENARIO = Path(__file__).resolve().parent / "scenarios" / "honesty" / "aliased_ref.json"


def _data() -> dict:
    return json.loads(SCENARIO.read_text())


def _codes(data: dict) -> list[tuple[str, str]]:
    return [(d.code, d.severity) for d in validate.check(data)]


def test_written_through_one_read_through_the_other_is_a_warning():
    diags = validate.check(_data())
    (d,) = [d for d in diags if d.code == "ALIASED_REF"]
    assert d.severity == "warning" and d.path == "call.programs[0].body[0]"
    assert "b_ref and a_ref are one Ref ('x')" in d.message and "a_ref is read" in d.message
    assert not any(x.is_error for x in diags)
    # and it is one memory: b = y + a, where a is b: x + 1
    r = simulate(load_scenario(_data()))
    assert r.ok and float(r.outputs["x"][3]) == 4.0


def test_both_written_is_a_warning_too():
    data = _data()
    data["call"]["programs"][0]["body"] = [
        {"op": "fill", "dst": "a_ref", "value": 1.0},
        {"op": "fill", "dst": "b_ref", "value": 2.0},
    ]
    (d,) = [d for d in validate.check(data) if d.code == "ALIASED_REF"]
    assert "is written at call.programs[0].body[1]" in d.message


def test_read_only_twice_or_passed_once_says_nothing():
    data = _data()
    data["call"]["programs"][0]["body"] = [
        {"op": "add", "dst": "y_ref", "lhs": "a_ref", "rhs": "b_ref"}
    ]
    data["buffers"]["y"]["as_ref"] = True
    assert "ALIASED_REF" not in [c for c, _ in _codes(data)]
    once = _data()
    once["buffers"]["z"] = {"shape": [256], "dtype": "float32", "init": "zeros", "as_ref": True}
    once["call"]["args"][1]["buffer"] = "z"
    assert "ALIASED_REF" not in [c for c, _ in _codes(once)]


@pytest.mark.slow
def test_jax_accepts_it_for_plgpu_kernel_and_refuses_it_for_pl_kernel():
    s = load_scenario(_data())
    r = probe.probe(s, ("build", "trace", "gpu-lower"), timeout=300)
    assert r.ok, (r.stage, r.error_type, r.message)
    data = copy.deepcopy(_data())
    data["call"]["entry"] = "pl.kernel"
    assert ("MPMD_DUP_REF", "error") in _codes(data)
    assert "ALIASED_REF" not in [c for c, _ in _codes(data)]
    r = probe.probe(load_scenario(data), ("build", "trace"), timeout=300)
    assert not r.ok and "Cannot pass the same ref into a mpmd map multiple times" in r.message
