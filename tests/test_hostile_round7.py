"""Hostile inputs, seventh round: what a fuzz against real JAX found, each held to JAX's
own verdict (its trace and Mosaic GPU lowering, run here on a CPU)."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import check, first_error

sys.path.insert(0, str(Path(__file__).parent))
from jaxprobe import answers, assert_agrees, probe_many  # noqa: E402
from test_global_sharding import _global  # noqa: E402


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
    return answers(RETURNS)


@pytest.mark.parametrize("name", list(RETURNS))
def test_a_returned_views_error_is_raised_by_its_load(name: str, jax_says: dict) -> None:
    assert_agrees(RETURNS[name], jax_says[name])


# ------------------------------------------------ a TMA copy of one element (a 0-d view)


def _tma_one(entry: str, dtype: str, index: list[Any], store: bool) -> dict[str, Any]:
    """A TMA store of ``s.at[*index]`` (SMEM scratch) into an output of its shape, or a
    TMA load of ``x_ref.at[*index]`` into a 0-d SMEM scratch."""
    vshape = [128] if len(index) == 1 else []
    if store:
        body = [
            {"let": "v", "ref": "s", "transforms": [{"op": "at", "index": index}]},
            {"op": "tma_store", "src": "v", "dst": "r"},
        ]
        scratch = {"s": {"shape": [128, 128], "dtype": dtype, "memory_space": "SMEM"}}
        buffers: dict[str, Any] = {}
        args: list[dict[str, str]] = []
        out = {"shape": vshape, "dtype": dtype}
    else:
        body = [
            {"let": "v", "ref": "x_ref", "transforms": [{"op": "at", "index": index}]},
            {"op": "copy_gmem_to_smem", "src": "v", "dst": "s", "barrier": "bar"},
            {"op": "barrier_wait", "barrier": "bar"},
        ]
        scratch = {
            "s": {"shape": vshape, "dtype": dtype, "memory_space": "SMEM"},
            "bar": {"kind": "barrier"},
        }
        buffers = {"x": {"shape": [8, 128], "dtype": dtype, "init": "iota"}}
        args = [{"buffer": "x", "param": "x_ref"}]
        out = {"shape": [128], "dtype": "float32"}
    return {
        "name": "tma-one",
        "buffers": buffers,
        "call": {
            "entry": entry,
            "args": args,
            "outputs": {"r": out},
            "scratch": scratch,
            "programs": [{"mesh": {"grid": {"b": 1}}, "body": body}],
        },
    }


#: a TMA copy of one element moves its dtype's bits along "the last dimension", fewer
#: than 128: JAX's lowering refuses it (stacks fuzz: a 0-d uint8 store was "valid")
TMA_ONE = {
    "store-0d-uint8": _tma_one("plgpu.kernel", "uint8", [88, -1], store=True),
    "store-0d-float32": _tma_one("plgpu.kernel", "float32", [3, 4], store=True),
    "store-row-float32": _tma_one("plgpu.kernel", "float32", [3], store=True),
    "load-0d-float32": _tma_one("plgpu.kernel", "float32", [1, 2], store=False),
    "load-0d-uint8": _tma_one("plgpu.kernel", "uint8", [1, 2], store=False),
}


@pytest.fixture(scope="module")
def jax_tma() -> dict[str, dict[str, Any]]:
    return answers(TMA_ONE)


@pytest.mark.parametrize("name", list(TMA_ONE))
def test_a_tma_copy_of_one_element_is_refused_as_jax_does(name: str, jax_tma: dict) -> None:
    jax = jax_tma[name]
    assert_agrees(TMA_ONE[name], jax)
    if jax["stage"] is not None:  # (JAX's exact message: no generated file in it)
        d = first_error(check(load_scenario(copy.deepcopy(TMA_ONE[name]))))
        assert d is not None and d.jax is not None and d.jax.message == jax["message"]


# ------------------------------------ an add that broadcasts or promotes, run as JAX runs it


def _add(a: tuple[list[int], str], b: tuple[list[int], str], out: tuple[list[int], str]) -> dict:
    """``out[...] = a_ref[...] + b_ref[...]`` over one block."""
    return {
        "name": "add",
        "buffers": {
            "a": {"shape": a[0], "dtype": a[1], "init": "iota"},
            "b": {"shape": b[0], "dtype": b[1], "init": "random"},
        },
        "call": {
            "entry": "pl.kernel",
            "args": [{"buffer": "a", "param": "a_ref"}, {"buffer": "b", "param": "b_ref"}],
            "outputs": {"out": {"shape": out[0], "dtype": out[1]}},
            "programs": [
                {"mesh": {}, "body": [{"op": "add", "dst": "out", "lhs": "a_ref", "rhs": "b_ref"}]}
            ],
        },
        "run": {"interpret": "gpu", "detect_races": False},
    }


#: jnp's ``+`` broadcasts (numpy's rule) and promotes (JAX's lattice); the trace typed it
#: so, the simulator refused it (SIM_SHAPE_MISMATCH / SIM_DTYPE_MISMATCH: the
#: CAPTURED_SCALAR card's own fixed example was "valid where checked")
ADDS = {
    "vector-plus-scalar": _add(([128], "float32"), ([], "float32"), ([128], "float32")),
    "matrix-plus-row": _add(([4, 128], "float32"), ([128], "float32"), ([4, 128], "float32")),
    "matrix-plus-column": _add(([4, 128], "int32"), ([4, 1], "int32"), ([4, 128], "int32")),
    "float16-plus-float32": _add(([128], "float16"), ([128], "float32"), ([128], "float32")),
    "int8-plus-uint8": _add(([128], "int8"), ([128], "uint8"), ([128], "int16")),
    "bfloat16-plus-scalar-float16": _add(([128], "bfloat16"), ([], "float16"), ([128], "float32")),
    "bool-plus-int32": _add(([128], "bool"), ([128], "int32"), ([128], "int32")),
}


def test_an_add_that_broadcasts_or_promotes_simulates_as_jax_runs_it() -> None:
    import numpy as np
    from mpmd_lab.simulator import simulate
    from simulate_support import run_in_jax, same_bits

    scenarios = [load_scenario(copy.deepcopy(s)) for s in ADDS.values()]
    for name, s, jax in zip(ADDS, scenarios, run_in_jax(scenarios), strict=True):
        assert isinstance(jax, dict), (name, jax)
        # (a lowering error of a small or narrow operand aside: the interpreter runs it)
        said = [d for d in check(s) if d.severity != "info" and d.stage != "gpu-lower"]
        assert said == [], name
        got = simulate(s, past_lowering=True)  # (as JAX's interpreter: no GPU lowering)
        assert got.ok, (name, got.error and got.error.one_line())
        assert same_bits(np.asarray(got.outputs["out"]), np.asarray(jax["out"]), flushed=True), name


# ------------------------------------------ a device-mesh call without shard_map: JAX's words


def test_a_call_outside_shard_map_is_refused_in_jaxs_words() -> None:
    """MPMD_NOT_MANUAL's message as JAX 0.12 raises it, for either entry and any number
    of mesh axes (the check said ``got (Explicit,)`` under pl.kernel)."""
    from mpmd_lab.knowledge import EXAMPLES

    base = json.loads((EXAMPLES / "MPMD_NOT_MANUAL.json").read_text())
    cases = [base, {**base, "call": {**base["call"], "entry": "plgpu.kernel"}}]
    two = copy.deepcopy(base)
    two["device_mesh"] = {"x": 2, "y": 2}
    two["buffers"]["x"]["shape"] = [512]
    two["call"]["outputs"]["out"]["shape"] = [512]
    cases.append(two)
    for s, jax in zip(cases, probe_many(copy.deepcopy(cases), ("build", "trace")), strict=True):
        d = first_error(check(load_scenario(copy.deepcopy(s))))
        assert d is not None and d.code == jax["code"] == "MPMD_NOT_MANUAL", (d, jax)
        assert d.jax is not None and d.jax.message == jax["message"]


# ------------------------------------------------ an access of a view with no element


def _empty(entry: str, body: list[dict[str, Any]], scratch: bool = False) -> dict[str, Any]:
    s: dict[str, Any] = {
        "name": "empty-view",
        "buffers": {"x": {"shape": [64, 128], "dtype": "float32", "init": "iota"}},
        "call": {
            "entry": entry,
            "args": [{"buffer": "x", "param": "x_ref"}],
            "outputs": {"o": {"shape": [64, 128], "dtype": "float32"}},
            "programs": [{"mesh": {"grid": {"b": 1}}, "body": body}],
        },
    }
    if scratch:
        s["call"]["scratch"] = {
            "s": {"shape": [64, 128], "dtype": "float32", "memory_space": "SMEM"}
        }
    return s


def _let(name: str, ref: str, index: list[Any]) -> dict[str, Any]:
    return {"let": name, "ref": ref, "transforms": [{"op": "at", "index": index}]}


#: a plain load or store, or a TMA copy, of a view with a dimension of size 0: JAX's GPU
#: lowering fails (an MLIR 'Invalid type', an AssertionError, a layout inference failure,
#: 'a must be strictly positive'), the check said "valid"; a dropped load lowers
EMPTY = {
    "fill-empty-rows": _empty(
        "pl.kernel", [_let("v", "o", [[32, 32]]), {"op": "fill", "dst": "v", "value": 1}]
    ),
    "fill-empty-columns": _empty(
        "plgpu.kernel", [_let("v", "o", [[0, 64], [5, 5]]), {"op": "fill", "dst": "v", "value": 1}]
    ),
    "fill-empty-ds": _empty(
        "pl.kernel", [_let("v", "o", [{"ds": ["0", 0]}]), {"op": "fill", "dst": "v", "value": 1}]
    ),
    "copy-empty": _empty(
        "pl.kernel",
        [
            _let("v", "x_ref", [[32, 32]]),
            _let("w", "o", [[0, 0]]),
            {"op": "copy", "src": "v", "dst": "w"},
        ],
    ),
    "add-empty": _empty(
        "pl.kernel", [_let("v", "o", [[32, 32]]), {"op": "add", "dst": "v", "lhs": "v", "rhs": "v"}]
    ),
    "tma-store-empty": _empty(
        "plgpu.kernel",
        [
            _let("v", "s", [[0, 0]]),
            _let("w", "o", [[0, 0]]),
            {"op": "tma_store", "src": "v", "dst": "w"},
        ],
        scratch=True,
    ),
    "dropped-empty-load": _empty(
        "plgpu.kernel",
        [
            _let("v", "x_ref", [[32, 32]]),
            {"op": "fill", "dst": "o", "value": 1},
            {"op": "return", "src": "v"},
        ],
    ),
}


@pytest.fixture(scope="module")
def jax_empty() -> dict[str, dict[str, Any]]:
    return answers(EMPTY)


@pytest.mark.parametrize("name", list(EMPTY))
def test_an_access_of_no_element_is_refused_where_jax_refuses_it(name: str, jax_empty) -> None:
    d = first_error(check(load_scenario(copy.deepcopy(EMPTY[name]))))
    jax = jax_empty[name]
    if jax["stage"] is None:
        assert d is None or d.stage not in ("build", "trace", "gpu-lower"), d
    else:
        assert jax["stage"] == "gpu-lower", jax
        assert d is not None and (d.code, d.stage) == ("GPU_ZERO_SIZE_ACCESS", "gpu-lower"), d


# ------------------------- a bitcast of the global array (no shard_map): its shape rule first


def _sharded_bitcast(shape: list[int], dtype: str) -> dict[str, Any]:
    """``x_ref.bitcast(dtype).at[0]`` on a float16 input over a 2-device mesh, called
    without shard_map (the kernel sees the global array)."""
    return {
        "name": "sharded-bitcast",
        "device_mesh": {"dev": 2},
        "buffers": {"x": {"shape": shape, "dtype": "float16"}},
        "call": {
            "entry": "pl.kernel",
            "args": [{"buffer": "x", "param": "x_ref"}],
            "outputs": {"out": {"shape": [8, 128], "dtype": "float16"}},
            "programs": [
                {
                    "mesh": {"grid": {"b": 1}},
                    "body": [
                        {
                            "let": "v",
                            "ref": "x_ref",
                            "transforms": [
                                {"op": "bitcast", "dtype": dtype},
                                {"op": "at", "index": [0]},
                            ],
                        },
                        {"op": "fill", "dst": "out", "value": 0},
                    ],
                }
            ],
        },
        "run": {"shard_map": False},
    }


#: JAX types a bitcast with ``eval_shape`` of its shape rule, which raises its own errors
#: (a 1-d width change, a 1-d ``shape[-2]``, a second-minor dim that does not divide)
#: before the array ops refuse the sharded array (fz48 of plain seed 7777 said the bare
#: sharding error where JAX raised the 1-d width change)
SHARDED_BITCASTS = {
    "1d-width-change": _sharded_bitcast([128], "int32"),
    "1d-same-width": _sharded_bitcast([128], "int16"),
    "3d-second-minor": _sharded_bitcast([2, 3, 128], "float32"),
    "2d-fine": _sharded_bitcast([8, 128], "int32"),
}


@pytest.fixture(scope="module")
def jax_bitcasts() -> dict[str, dict[str, Any]]:
    return answers(SHARDED_BITCASTS)


@pytest.mark.parametrize("name", list(SHARDED_BITCASTS))
def test_a_sharded_bitcasts_shape_rule_comes_first(name: str, jax_bitcasts) -> None:
    assert_agrees(SHARDED_BITCASTS[name], jax_bitcasts[name])


# --------------------- a plain array argument's transforms keep the global array's sharding


def _global_array(arg: list[dict[str, Any]], body: list[dict[str, Any]], shape: list[int]) -> dict:
    """``x`` (a plain array over a 2-device mesh, no shard_map) through the argument
    transforms ``arg`` (array methods, in the caller), then ``v0 = x_ref`` through ``body``
    (tests/test_global_sharding.py's scenario)."""
    return _global(arg, body, shape=shape)


#: an array reshaped to its own shape stays sharded, so the kernel's reshape of its ref
#: raises the bare sharding error first (plain fuzz seed 2024 fz273 said MPMD_NOT_MANUAL)
GLOBAL_ARRAYS = {
    "array-reshaped-to-itself": _global_array(
        [{"op": "reshape", "shape": [-1]}], [{"op": "reshape", "shape": [-1]}], [4]
    ),
    "array-reshaped-wrong": _global_array(
        [{"op": "reshape", "shape": [16, 64]}], [{"op": "transpose", "perm": [1, 0]}], [8, 128]
    ),
    "array-sliced": _global_array(
        [{"op": "at", "index": [[0, 4]]}], [{"op": "transpose", "perm": [1, 0]}], [8, 128]
    ),
    "array-as-is": _global_array([], [{"op": "transpose", "perm": [1, 0]}], [8, 128]),
}


@pytest.fixture(scope="module")
def jax_global() -> dict[str, dict[str, Any]]:
    return answers(GLOBAL_ARRAYS, ("build", "trace"))


@pytest.mark.parametrize("name", list(GLOBAL_ARRAYS))
def test_an_array_arguments_sharding_is_kept_through_its_transforms(name: str, jax_global):
    assert jax_global[name]["stage"] == "trace", jax_global[name]
    assert_agrees(GLOBAL_ARRAYS[name], jax_global[name])
