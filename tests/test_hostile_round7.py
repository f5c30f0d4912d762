"""Hostile inputs, seventh round: what a fuzz against real JAX found, each held to JAX's
own verdict (its trace and Mosaic GPU lowering, run here on a CPU)."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import check, first_error

sys.path.insert(0, str(Path(__file__).parent))
from jaxprobe import probe_many  # noqa: E402


def _returning(entry: str, perm: list[int] | None) -> dict[str, Any]:
    """``v = x_ref.at[0:2]`` (then ``.transpose(perm)``), ``out[...] = y_ref[...]``,
    ``return v[...]``."""
    at: list[dict[str, Any]] = [{"op": "at", "index": [[0, 2]]}]
    if perm is not None:
        at.append({"op": "transpose", "perm": perm})
    return {
        "name": "returning",
        "buffers": {
            "x": {"shape": [8, 128], "dtype": "float32"},
            "y": {"shape": [8, 128], "dtype": "float32"},
        },
        "call": {
            "entry": entry,
            "args": [{"buffer": "x", "param": "x_ref"}, {"buffer": "y", "param": "y_ref"}],
            "outputs": {"out": {"shape": [8, 128], "dtype": "float32"}},
            "programs": [
                {
                    "mesh": {"grid": {"b": 2}},
                    "body": [
                        {"let": "v", "ref": "x_ref", "transforms": at},
                        {"op": "copy", "src": "y_ref", "dst": "out"},
                        {"op": "return", "src": "v"},
                    ],
                }
            ],
        },
    }


def _dropped(*transforms: dict[str, Any]) -> dict[str, Any]:
    """plgpu.kernel returning ``x_ref`` through ``transforms`` (the value is dropped; the
    load is lowered all the same)."""
    s = _returning("plgpu.kernel", None)
    s["call"]["programs"][0]["body"][0]["transforms"] = list(transforms)
    return s


#: name -> scenario: a returned view's waiting error is raised by the load of
#: ``return v[...]`` before anything is returned (the fuzz's fz294 was "valid" where JAX
#: raised the transpose's rank error); under plgpu.kernel the value is dropped, but the
#: load is lowered, its view's transforms with it (fz78: "valid" where the lowering
#: raised the unknown cluster axis), not its register layout (a 4-element load lowers)
RETURNS = {
    "plgpu-bad-transpose": _returning("plgpu.kernel", [0]),
    "pl-bad-transpose": _returning("pl.kernel", [0]),
    "plgpu-good-transpose": _returning("plgpu.kernel", [1, 0]),
    "pl-good-transpose": _returning("pl.kernel", [1, 0]),
    "dropped-cluster-ref-unknown-axis": _dropped({"op": "cluster_ref", "block": {"c": 1}}),
    "dropped-4-elements": _dropped({"op": "at", "index": [0, {"ds": ["0", 4]}]}),
    "dropped-strided-column": _dropped({"op": "at", "index": [{"ds": ["0", 8]}, 0]}),
    "dropped-bitcast": _dropped({"op": "bitcast", "dtype": "int16"}),
    "dropped-reshape": _dropped({"op": "reshape", "shape": [1024]}),
    "dropped-slice-outside": _dropped({"op": "at", "index": [{"ds": ["b * 20", 4]}]}),
}


@pytest.fixture(scope="module")
def jax_says() -> dict[str, dict[str, Any]]:
    got = probe_many([copy.deepcopy(s) for s in RETURNS.values()])
    return dict(zip(RETURNS, got, strict=True))


@pytest.mark.parametrize("name", list(RETURNS))
def test_a_returned_views_error_is_raised_by_its_load(name: str, jax_says: dict) -> None:
    d = first_error(check(load_scenario(copy.deepcopy(RETURNS[name]))))
    jax = jax_says[name]
    if jax["stage"] is None:
        assert d is None or d.stage not in ("build", "trace", "gpu-lower"), d
    else:
        assert d is not None and d.code == jax["code"], (d, jax)
        if d.jax is not None:  # (JAX's message names the generated file where it says "at")
            assert d.jax.message.split(" at <")[0] in jax["message"]
