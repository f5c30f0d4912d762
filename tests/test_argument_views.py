"""An argument's view made by the caller (``plgpu.remote_ref(x, dev)``,
``plgpu.cluster_ref(x, block)``, ``x.at[1]`` passed to ``pl.kernel``): its device id,
block id or integer index is a traced int32 in the caller, which every program of the
kernel closes over, so the Mosaic GPU lowering stops on a captured scalar before any
statement, the view used or not (the check said "valid" with a device mesh, and
DEVICE_ID_UNKNOWN_AXIS at the access without one; "valid" for an integer index or a
cluster_ref). A slice's bounds and ``pl.ds``'s start are static: no scalar. The verified
fix makes the view inside the kernel body. Each case against JAX's trace and lowering;
the fixed ones too.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from jaxprobe import answers, assert_agrees
from mpmd_lab import fixes
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import check

_COPY = [{"op": "copy", "src": "x_ref", "dst": "out"}]


def _arg_view(
    transforms: list[dict[str, Any]],
    mesh: dict[str, int] | None = {"dev": 2},  # noqa: B006 - (read only)
    body: list[dict[str, Any]] = _COPY,  # noqa: B006 - (read only)
    entry: str = "pl.kernel",
) -> dict[str, Any]:
    d: dict[str, Any] = {
        "name": "argument-view",
        "buffers": {"x": {"shape": [8, 128], "dtype": "float32", "as_ref": True}},
        "call": {
            "entry": entry,
            "args": [{"buffer": "x", "param": "x_ref", "transforms": transforms}],
            "outputs": {"out": {"shape": [8, 128], "dtype": "float32"}},
            "programs": [{"mesh": {"grid": {"b": 1}}, "body": copy.deepcopy(body)}],
        },
    }
    if mesh:
        d["device_mesh"] = mesh
    return d


_PEER = {"op": "remote_ref", "device": {"dev": 0}}
_FILL_X = [{"op": "fill", "dst": "x_ref", "value": 1.0}]

CASES = {
    "peer-copied": _arg_view([_PEER]),
    "peer-linear-id": _arg_view([{"op": "remote_ref", "device": 1}]),
    "peer-unused": _arg_view([_PEER], body=[{"op": "fill", "dst": "out", "value": 1.0}]),
    "sliced-peer-filled": _arg_view([{"op": "at", "index": [[0, 4]]}, _PEER], body=_FILL_X),
    "peer-no-mesh": _arg_view([_PEER], mesh=None),
    "peer-two-programs": {
        **_arg_view([_PEER]),
        "call": {
            **_arg_view([_PEER])["call"],
            "programs": [{"mesh": {"grid": {"b": 1}}, "body": _COPY}] * 2,
        },
    },
    "peer-plgpu": _arg_view([_PEER], entry="plgpu.kernel"),
    "multicast": _arg_view([{"op": "multicast_ref", "axes": ["dev"]}]),
    "int-index": _arg_view([{"op": "at", "index": [1]}], body=_FILL_X),
    "negative-int-index": _arg_view([{"op": "at", "index": [-1]}], mesh=None, body=_FILL_X),
    "int-after-slice": _arg_view(
        [{"op": "at", "index": [[0, 4]]}, {"op": "at", "index": [None, 3]}], body=_FILL_X
    ),
    "int-then-bitcast": _arg_view(
        [{"op": "at", "index": [0]}, {"op": "bitcast", "dtype": "int8"}],
        body=[{"op": "fill", "dst": "out", "value": 1.0}],
    ),
    "slice-index": _arg_view([{"op": "at", "index": [[0, 8]]}]),
    "pl-ds-index": _arg_view([{"op": "at", "index": [{"ds": [0, 8]}]}], mesh=None),
    "cluster-block": {
        **_arg_view([{"op": "cluster_ref", "block": {"c": 0}}], mesh=None, body=_FILL_X),
    },
}
CASES["cluster-block"]["call"]["programs"][0]["mesh"]["cluster"] = {"c": 2}


@pytest.fixture(scope="module")
def jax_answers() -> dict[str, dict[str, Any]]:
    return answers(CASES)


@pytest.mark.parametrize("name", list(CASES))
def test_an_argument_view_agrees_with_jax(name: str, jax_answers) -> None:
    assert_agrees(CASES[name], jax_answers[name])


FIXED = (
    "peer-copied",
    "peer-linear-id",
    "peer-unused",
    "sliced-peer-filled",
    "peer-no-mesh",
    "int-index",
    "int-after-slice",
)


@pytest.fixture(scope="module")
def fixed() -> dict[str, dict[str, Any]]:
    out = {}
    for name in FIXED:
        s = load_scenario(copy.deepcopy(CASES[name]))
        d = next(x for x in check(s) if x.is_error)
        assert d.code == "CAPTURED_SCALAR" and d.fix is not None, d
        out[name] = fixes.apply_fix(s, d.fix).to_dict()
    return out


@pytest.fixture(scope="module")
def jax_fixed(fixed) -> dict[str, dict[str, Any]]:
    return answers(fixed)


@pytest.mark.parametrize("name", FIXED)
def test_the_view_made_in_the_body_is_what_jax_then_says(name: str, fixed, jax_fixed) -> None:
    assert_agrees(fixed[name], jax_fixed[name])
    left = [d.code for d in check(load_scenario(copy.deepcopy(fixed[name]))) if d.is_error]
    assert "CAPTURED_SCALAR" not in left


# ------------------------------------------ an array's update helper passed as an operand


def _helper(index: list[Any], before: tuple[dict[str, Any], ...] = (), **kw: Any) -> dict[str, Any]:
    """``x.at[index]`` of the plain array ``x`` (after the array methods ``before``)
    passed to the kernel: JAX prints the array's type and the helper's index."""
    d = _arg_view([*before, {"op": "at", "index": index}], mesh=None)
    d["buffers"]["x"].update(as_ref=False, **kw)
    return d


HELPERS = {
    "slice": _helper([[0, 4]]),
    "two-slices": _helper([[0, 4], [0, 8]]),
    "int": _helper([0]),
    "negative-int": _helper([-1]),
    "int-and-slice": _helper([1, [0, 8]]),
    "whole": _helper([None]),
    "open-slice": _helper([[None, 4]]),
    "pl-ds": _helper([{"ds": [0, 4]}]),
    "float64": _helper([[0, 4]], dtype="float64"),
    "flattened-first": _helper([[0, 4]], ({"op": "reshape", "shape": [-1]},)),
    "transposed-first": _helper([[0, 4]], ({"op": "transpose", "perm": [1, 0]},)),
}


@pytest.fixture(scope="module")
def jax_helpers() -> dict[str, dict[str, Any]]:
    return answers(HELPERS, ("build", "trace"))


@pytest.mark.parametrize("name", list(HELPERS))
def test_an_update_helper_operand_is_printed_as_jax_prints_it(name: str, jax_helpers) -> None:
    assert jax_helpers[name]["code"] == "ARG_TRANSFORM_ON_ARRAY", jax_helpers[name]
    assert_agrees(HELPERS[name], jax_helpers[name])
