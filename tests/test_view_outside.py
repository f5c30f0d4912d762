"""An index outside a view, held to JAX's GPU interpreter.

JAX checks no integer index of a ref transform inside a kernel, and its GPU interpreter
checks an access against its buffer, not against the view it went through: a view
nobody reads does nothing (even over a dimension of size 0), and a read outside a view
that stays inside the buffer reads the buffer's other elements. The check still calls
the latter an error of the kernel (OOB_INDEX: on a GPU too it reads what the view does
not hold), but never with an interpreter error JAX does not raise; an access that leaves
the buffer stays the interpreter's OOB_READ."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mpmd_lab.scenario import load_scenario
from mpmd_lab.simulator import simulate
from mpmd_lab.validate import check

sys.path.insert(0, str(Path(__file__).parent))
from simulate_support import run_in_jax  # noqa: E402


def _views(first: list[Any], second: list[Any], copied: str) -> dict:
    """``a = x_ref.at[*first]``, ``v = a.at[*second]``, then ``copied`` into ``out``."""
    return {
        "schema": "mpmd-lab/scenario@1",
        "name": "view-outside",
        "buffers": {
            "x": {"shape": [8, 128], "dtype": "float32", "init": "iota"},
            "y": {"shape": [128], "dtype": "float32", "init": "iota"},
        },
        "call": {
            "entry": "pl.kernel",
            "args": [{"buffer": "x", "param": "x_ref"}, {"buffer": "y", "param": "y_ref"}],
            "outputs": {"out": {"shape": [128], "dtype": "float32"}},
            "programs": [
                {
                    "mesh": {"grid": {}, "cluster": {}, "threads": None},
                    "body": [
                        {"let": "a", "ref": "x_ref", "transforms": [{"op": "at", "index": first}]},
                        {"let": "v", "ref": "a", "transforms": [{"op": "at", "index": second}]},
                        {"op": "copy", "src": copied, "dst": "out"},
                    ],
                }
            ],
        },
        "run": {"interpret": "gpu", "detect_races": False},
    }


CASES = {
    # (first, second, copied) -> what the check says: None (valid) or (code, stage)
    "unused-view-over-size-0": ([[0, 0]], [0], "y_ref", None),
    "read-outside-size-0-inside-buffer": ([[0, 0]], [0], "v", ("OOB_INDEX", "gpu-run")),
    "read-outside-view-inside-buffer": ([[0, 4]], [6], "v", ("OOB_INDEX", "gpu-run")),
    "read-outside-buffer": ([[4, 4]], [5], "v", ("OOB_READ", "interpret")),
}


@pytest.fixture(scope="module")
def interpreted() -> dict[str, Any]:
    names = list(CASES)
    got = run_in_jax([load_scenario(_views(*CASES[n][:3])) for n in names])
    return dict(zip(names, got, strict=True))


@pytest.mark.parametrize("name", list(CASES))
def test_the_check_says_what_jaxs_interpreter_does(name: str, interpreted: dict) -> None:
    first, second, copied, said = CASES[name]
    s = load_scenario(_views(first, second, copied))
    diags = check(s)
    errors = [(d.code, d.stage) for d in diags if d.is_error]
    jax = interpreted[name]
    if said is None:
        assert errors == [], diags
        assert isinstance(jax, dict), jax
    else:
        assert errors == [said], diags
        (d,) = [d for d in diags if d.is_error]
        if said[0] == "OOB_READ":  # JAX's interpreter raises it, with this message
            assert isinstance(jax, str) and "Out-of-bounds read" in jax, jax
            assert d.jax is not None and d.jax.message.split("): ", 1)[1] in jax
        else:  # JAX runs it: the check claims no error of JAX's
            assert isinstance(jax, dict), jax
            assert d.jax is None
            assert "does not see this" in d.message


def test_the_simulator_runs_an_unused_view_over_size_0_as_jax_does(interpreted) -> None:
    s = load_scenario(_views([[0, 0]], [0], "y_ref"))
    got = simulate(s)
    assert got.ok, got
    jax = interpreted["unused-view-over-size-0"]
    np.testing.assert_array_equal(got.outputs["out"], np.asarray(jax["out"]))


def test_a_read_outside_a_size_0_view_is_found_where_it_reads() -> None:
    """The simulator fails at the read (the view is marked), as at any other index
    outside a view: not at the view."""
    s = load_scenario(_views([[0, 0]], [0], "v"))
    got = simulate(s)
    assert not got.ok and got.error is not None
    assert got.error.code == "OOB_INDEX"
    assert "out of bounds for size 0" in got.error.message
