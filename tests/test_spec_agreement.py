"""Partition specs on a call's arguments and outputs: the check (first error: code,
stage, JAX's message) and the simulator (outputs, bit for bit) held against real JAX.

The cases are the classes ``bench/fuzz_specs.py`` found disagreeing, each reduced to a
small scenario; every one failed before its fix.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from jaxprobe import answers
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import check, first_error

pytestmark = pytest.mark.slow  # real JAX in a child process: `make test` only


def _call(
    out_spec: Any,
    body: list[dict[str, Any]],
    outputs: dict[str, Any] | None = None,
    arg: dict[str, Any] | None = None,
    mesh: dict[str, int] | None = None,
) -> dict[str, Any]:
    """``x`` (4 x 16 float32 a device, on dim 1 over ``x``) into ``out`` (its spec
    ``out_spec``) through ``body``, over ``{"x": 2, "y": 1}``."""
    return {
        "name": "spec",
        "device_mesh": mesh or {"x": 2, "y": 1},
        "buffers": {"x": {"shape": [4, 16], "dtype": "float32", "init": "iota"}},
        "call": {
            "entry": "pl.kernel",
            "args": [{"buffer": "x", "param": "x_ref", "spec": [None, "x"], **(arg or {})}],
            "outputs": outputs or {"out": {"shape": [4, 16], "dtype": "float32", "spec": out_spec}},
            "programs": [{"mesh": {"grid": {"b": 2}}, "body": body}],
        },
        "run": {"interpret": "gpu", "detect_races": False},
    }


COPY = [{"op": "copy", "src": "x_ref", "dst": "out"}]
#: a row copied into all 4: SWAP_SHAPE_MISMATCH while the body traces
BAD_BODY = [
    {"let": "s", "ref": "x_ref", "transforms": [{"op": "at", "index": [[0, 1]]}]},
    {"op": "copy", "src": "s", "dst": "out"},
]
#: an argument's array method out of bounds: ARG_TRANSFORM_ON_ARRAY, the caller's
BAD_ARG = {"transforms": [{"op": "at", "index": [9]}]}
TWO_OUTS = {
    "out": {"shape": [4, 16], "dtype": "float32", "spec": ["zz"]},
    "a": {"shape": [4, 16], "dtype": "float32", "spec": [None, ["ww", "x"]]},
}

#: jax.shard_map checks its out specs' axis names when the mapped function is called,
#: before the body traces: ahead of every error of the kernel's (the check found the
#: body's first); dims too many and one axis twice still wait for the body
OUT_SPEC_ORDER = {
    "bad-axis-before-body": _call(["zz"], BAD_BODY),
    "bad-axis-before-arg-method": _call(["zz"], COPY, arg=BAD_ARG),
    "bad-axes-of-two-outputs": _call(None, BAD_BODY, outputs=TWO_OUTS),
    "duplicate-after-body": _call(["x", "x"], BAD_BODY),
    "rank-after-body": _call([None, None, None], BAD_BODY),
    "bad-axis-alone": _call(["zz"], COPY),
}


@pytest.fixture(scope="module")
def jax_order() -> dict[str, dict[str, Any]]:
    return answers(OUT_SPEC_ORDER)


def _sets(text: str) -> str:
    """A frozenset's names sorted (JAX prints them in hash order)."""
    return re.sub(
        r"frozenset\(\{([^}]*)\}\)",
        lambda m: "frozenset({" + ", ".join(sorted(m.group(1).split(", "))) + "})",
        text,
    )


def _agrees(scenario: dict[str, Any], jax: dict[str, Any]) -> None:
    """``jaxprobe.assert_agrees``, a frozenset in JAX's message read in any order."""
    d = first_error(check(load_scenario(copy.deepcopy(scenario))))
    if jax["stage"] is None:
        assert d is None or d.stage not in ("build", "trace", "gpu-lower"), d
        return
    assert d is not None and (d.code, d.stage) == (jax["code"], jax["stage"]), (d, jax)
    if d.jax is not None:
        assert _sets(d.jax.message.split(" at <")[0]) in _sets(jax["message"]), (d.jax, jax)


@pytest.mark.parametrize("name", list(OUT_SPEC_ORDER))
def test_out_spec_axes_are_checked_before_the_body(name: str, jax_order) -> None:
    _agrees(OUT_SPEC_ORDER[name], jax_order[name])


def _sized(value: str, shard_map: bool, index: Any = None) -> dict[str, Any]:
    """``out = value`` (an int32 compute) over ``{"x": 2, "y": 1}``, replicated, with or
    without shard_map; ``index``: a view of x_ref by that ``at`` entry copied instead."""
    body: list[dict[str, Any]] = [{"op": "compute", "dst": "out", "value": value}]
    if index is not None:
        body = [
            {"let": "s", "ref": "x_ref", "transforms": [{"op": "at", "index": [index]}]},
            {"op": "copy", "src": "s", "dst": "s"},
        ]
    return {
        "name": "sized",
        "device_mesh": {"x": 2, "y": 1},
        "buffers": {"x": {"shape": [128], "dtype": "int32", "init": "iota"}},
        "call": {
            "entry": "pl.kernel",
            "args": [{"buffer": "x", "param": "x_ref", "spec": [None]}],
            "outputs": {"out": {"shape": [128], "dtype": "int32", "spec": [None]}},
            "programs": [{"mesh": {"grid": {"b": 1}}, "body": body}],
        },
        "run": {"interpret": "gpu", "detect_races": False, "shard_map": shard_map},
    }


#: lax.axis_size of a device-mesh axis: bound under shard_map only (the generated call
#: wrote its literal size in every mode, so JAX ran a global call the kernel's code
#: fails), and its NameError is not axis_index's
AXIS_SIZE = {
    "global-size": _sized("x_ref[...] * lax.axis_size('x')", False),
    "global-size-in-index": _sized("", False, {"ds": ["axis_size('x') - 1", 1]}),
    "unknown-size": _sized("x_ref[...] * lax.axis_size('zz')", True),
    "unknown-index-and-size": _sized(
        "x_ref[...] * lax.axis_size('zz') + lax.axis_index('zz')", True
    ),
    "shard-map-size": _sized("x_ref[...] * lax.axis_size('x')", True),
    "global-index": _sized("x_ref[...] + lax.axis_index('x')", False),
}


@pytest.fixture(scope="module")
def jax_sizes() -> dict[str, dict[str, Any]]:
    return answers(AXIS_SIZE)


@pytest.mark.parametrize("name", list(AXIS_SIZE))
def test_axis_size_is_bound_only_under_shard_map(name: str, jax_sizes) -> None:
    _agrees(AXIS_SIZE[name], jax_sizes[name])


def _outs(**specs: Any) -> dict[str, Any]:
    """Outputs of 2 x 4 x 8 float32 (``r0``: rank 0), by name, each with its spec, each
    copied from ``x`` (its own slice of the same rank)."""
    outputs = {
        n: {"shape": [] if n.startswith("r0") else [2, 4, 8], "dtype": "float32", "spec": sp}
        for n, sp in specs.items()
    }
    body: list[dict[str, Any]] = []
    for n in outputs:
        if n.startswith("r0"):
            body.append({"op": "fill", "dst": n, "value": 1.0})
        else:
            body.append({"op": "copy", "src": "x_ref", "dst": n})
    return {
        "name": "outs",
        "device_mesh": {"x": 2, "y": 1},
        "buffers": {"x": {"shape": [2, 4, 8], "dtype": "float32", "init": "iota"}},
        "call": {
            "entry": "pl.kernel",
            "args": [{"buffer": "x", "param": "x_ref"}],
            "outputs": outputs,
            "programs": [{"mesh": {"grid": {"b": 1}}, "body": body}],
        },
        "run": {"interpret": "gpu", "detect_races": False},
    }


#: after the body: every out spec's rank (all too long ones named, a bullet each), then
#: an axis twice, in the spec padded to the output's rank (the check printed it as given,
#: and an axis twice before a rank)
OUT_SPEC_AFTER = {
    "duplicate-padded": _outs(out=[["x", "x"]]),
    "duplicate-padded-2": _outs(out=["x", "x"]),
    "duplicate-full": _outs(out=["x", "x", None]),
    "rank0-duplicate": _outs(r0=[["x", "x"]]),
    "two-too-long": _outs(a=[None, None, None, None], b=["x", None, None, None]),
    "rank-before-duplicate": _outs(a=[["x", "x"]], b=[None, None, None, "y"]),
    "duplicates-in-key-order": _outs(b=["x", "x"], a=[None, "y", "y"]),
}


@pytest.fixture(scope="module")
def jax_after() -> dict[str, dict[str, Any]]:
    return answers(OUT_SPEC_AFTER)


@pytest.mark.parametrize("name", list(OUT_SPEC_AFTER))
def test_out_spec_ranks_then_duplicates_after_the_body(name: str, jax_after) -> None:
    _agrees(OUT_SPEC_AFTER[name], jax_after[name])


def _weak(value: str, dtype: str) -> dict[str, Any]:
    """``out = value`` over ``{"x": 2}``, ``x`` and ``out`` of ``dtype``."""
    return {
        "name": "weak",
        "device_mesh": {"x": 2},
        "buffers": {"x": {"shape": [128], "dtype": dtype, "init": "iota"}},
        "call": {
            "entry": "pl.kernel",
            "args": [{"buffer": "x", "param": "x_ref"}],
            "outputs": {"out": {"shape": [128], "dtype": dtype}},
            "programs": [
                {
                    "mesh": {"grid": {"b": 1}},
                    "body": [{"op": "compute", "dst": "out", "value": value}],
                }
            ],
        },
        "run": {"interpret": "gpu", "detect_races": False},
    }


#: a float Python scalar times an int32 (an axis index) is a weakly typed float32, which
#: a float16 operand takes in (the check and the simulator made it a strong float32:
#: SWAP_DTYPE_MISMATCH where JAX runs it); into int8 it is still refused
WEAK = {
    f"{dt}-{k}": _weak(v, dt)
    for dt in ("float16", "bfloat16", "int8")
    for k, v in {
        "add": "x_ref[...] + 1.0 * lax.axis_index('x')",
        "where": "jnp.where(x_ref[...] > 3, x_ref[...], 1.5 * lax.axis_index('x'))",
        "nested": "(1.0 * lax.axis_index('x')) * 0.5 + x_ref[...]",
        "sum-first": "x_ref[...] + (lax.axis_index('x') + 0.5)",
    }.items()
}


@pytest.fixture(scope="module")
def jax_weak() -> dict[str, dict[str, Any]]:
    return answers(WEAK)


@pytest.mark.parametrize("name", list(WEAK))
def test_a_weak_float_of_an_axis_index_takes_the_arrays_dtype(name: str, jax_weak) -> None:
    _agrees(WEAK[name], jax_weak[name])


def test_a_weak_float_of_an_axis_index_simulates_as_jax_runs_it() -> None:
    from mpmd_lab.simulator import simulate
    from simulate_support import run_in_jax, same_bits

    cases = [load_scenario(copy.deepcopy(d)) for k, d in WEAK.items() if "int8" not in k]
    for s, got in zip(cases, run_in_jax(cases), strict=True):
        assert not isinstance(got, str), got
        sim = simulate(s, check=False)
        assert sim.ok, sim.error
        assert all(same_bits(sim.outputs[n], v, flushed=True) for n, v in got.items()), s


def _hlo_global(body: list[dict[str, Any]], entry: str = "pl.kernel") -> dict[str, Any]:
    """``x`` (replicated: placed on the device mesh) and ``out`` through ``body`` on the
    global arrays (no shard_map), under JAX's HLO interpreter."""
    return {
        "name": "hlo-global",
        "device_mesh": {"dev": 2},
        "buffers": {"x": {"shape": [8, 128], "dtype": "float32", "init": "iota"}},
        "call": {
            "entry": entry,
            "args": [{"buffer": "x", "param": "x_ref", "spec": [None]}],
            "outputs": {"out": {"shape": [8, 128], "dtype": "float32", "spec": [None]}},
            "programs": [{"mesh": {"grid": {"b": 1}}, "body": body}],
        },
        "run": {"interpret": "hlo", "detect_races": False, "shard_map": False},
    }


def _copy(src: str, dst: str) -> dict[str, Any]:
    return {"op": "copy", "src": src, "dst": dst}


_FILL_OUT = {"op": "fill", "dst": "out", "value": 1.0}
#: JAX's HLO interpreter on the global arrays refuses a store that mixes an input (typed
#: by its placement on the mesh) with what the kernel makes (the check said "valid" with
#: no note where it fails): name -> (scenario, whether it fails)
HLO_GLOBAL = {
    f"{entry}-{name}": (_hlo_global(body, entry), fails[entry == "plgpu.kernel"])
    for entry in ("pl.kernel", "plgpu.kernel")
    for name, body, fails in [
        ("input-to-output", [_copy("x_ref", "out")], (True, True)),
        ("output-to-input", [_copy("out", "x_ref")], (True, True)),
        ("input-into-itself", [_copy("x_ref", "x_ref")], (False, True)),
        ("output-into-itself", [_FILL_OUT, _copy("out", "out")], (False, False)),
        ("fill-input", [{"op": "fill", "dst": "x_ref", "value": 1.0}], (True, True)),
        ("fill-output", [_FILL_OUT], (False, False)),
        (
            "input-plus-output",
            [{"op": "add", "dst": "out", "lhs": "x_ref", "rhs": "out"}],
            (True, True),
        ),
        (
            "compute-input",
            [{"op": "compute", "dst": "out", "value": "x_ref[...] + 1.0"}],
            (True, True),
        ),
    ]
}


@pytest.fixture(scope="module")
def jax_hlo_global() -> dict[str, dict[str, Any]]:
    return answers(
        {k: d for k, (d, _) in HLO_GLOBAL.items()}, ("build", "trace", "gpu-lower", "interpret")
    )


@pytest.mark.parametrize("name", list(HLO_GLOBAL))
def test_hlo_interpreter_limit_on_global_arrays_is_noted(name: str, jax_hlo_global) -> None:
    from mpmd_lab.diagnostics import interpreter_limit, verdict

    scenario, fails = HLO_GLOBAL[name]
    jax = jax_hlo_global[name]
    assert (jax["stage"] == "interpret") == fails, jax
    diags = check(load_scenario(copy.deepcopy(scenario)))
    assert verdict(diags) == "valid"
    assert any(interpreter_limit(d) for d in diags) == fails, diags


def _plgpu_hlo(body: list[dict[str, Any]], entry: str = "plgpu.kernel") -> dict[str, Any]:
    """``o`` (128 int32) through ``body`` under JAX's HLO interpreter, over 2 devices."""
    return {
        "name": "plgpu-hlo",
        "device_mesh": {"x": 2},
        "buffers": {"x": {"shape": [256], "dtype": "int32", "init": "iota"}},
        "call": {
            "entry": entry,
            "args": [{"buffer": "x", "param": "x_ref"}],
            "outputs": {"o": {"shape": [128], "dtype": "int32"}},
            "programs": [{"mesh": {"grid": {"b": 1}}, "body": body}],
        },
        "run": {"interpret": "hlo", "detect_races": False},
    }


def _value(value: str) -> dict[str, Any]:
    return {"op": "compute", "dst": "o", "value": value}


_IOTA = "lax.broadcasted_iota(jnp.int32, (128,), 0)"
#: JAX's HLO interpreter runs a plgpu.kernel's body outside its grid: pl.program_id
#: asserts (the check said "valid", no note); name -> (scenario, whether it fails)
PLGPU_HLO = {
    "program-id": (_plgpu_hlo([_value(f"{_IOTA} + pl.program_id(0)")]), True),
    "pid-view": (
        _plgpu_hlo(
            [
                {
                    "let": "d",
                    "ref": "o",
                    "transforms": [{"op": "at", "index": [{"pid": 0, "size": 128}]}],
                },
                {"op": "fill", "dst": "d", "value": 1},
            ]
        ),
        True,
    ),
    "program-id-condition": (
        _plgpu_hlo([{"op": "when", "cond": "program_id(0) == 0", "body": [_value(_IOTA)]}]),
        True,
    ),
    "num-programs": (_plgpu_hlo([_value(f"{_IOTA} + pl.num_programs(0)")]), False),
    "pl-kernel": (_plgpu_hlo([_value(f"{_IOTA} + pl.program_id(0)")], "pl.kernel"), False),
}


@pytest.fixture(scope="module")
def jax_plgpu_hlo() -> dict[str, dict[str, Any]]:
    return answers(
        {k: d for k, (d, _) in PLGPU_HLO.items()}, ("build", "trace", "gpu-lower", "interpret")
    )


@pytest.mark.parametrize("name", list(PLGPU_HLO))
def test_hlo_interpreter_program_id_under_plgpu_kernel_is_noted(name: str, jax_plgpu_hlo) -> None:
    from mpmd_lab.diagnostics import interpreter_limit, verdict

    scenario, fails = PLGPU_HLO[name]
    jax = jax_plgpu_hlo[name]
    assert (jax["stage"] == "interpret") == fails, jax
    diags = check(load_scenario(copy.deepcopy(scenario)))
    assert verdict(diags) == "valid"
    assert any(interpreter_limit(d) for d in diags) == fails, diags


def _lowered_global(
    body: list[dict[str, Any]],
    mesh: dict[str, int] | None = None,
    scratch: dict[str, Any] | None = None,
    shard_map: bool = False,
) -> dict[str, Any]:
    """A plgpu.kernel over ``mesh`` (default ``{"dev": 2}``), replicated ``x`` and
    ``out``, through ``body``, on the global arrays (or under shard_map)."""
    return {
        "name": "lowered-global",
        "device_mesh": mesh or {"dev": 2},
        "buffers": {"x": {"shape": [128], "dtype": "float32", "init": "iota"}},
        "call": {
            "entry": "plgpu.kernel",
            "args": [{"buffer": "x", "param": "x_ref", "spec": [None]}],
            "outputs": {"out": {"shape": [128], "dtype": "float32", "spec": [None]}},
            "scratch": scratch or {},
            "programs": [{"mesh": {"grid": {"b": 1}}, "body": body}],
        },
        "run": {"interpret": "gpu", "detect_races": False, "shard_map": shard_map},
    }


def _peer(dev: Any) -> list[dict[str, Any]]:
    return [
        {"let": "p", "ref": "out", "transforms": [{"op": "remote_ref", "device": dev}]},
        {"op": "fill", "dst": "p", "value": 1.0},
    ]


_SEMS = {"sems": {"kind": "semaphore", "shape": [1]}}
_SMEM = {"smem": {"shape": [128], "dtype": "float32", "memory_space": "SMEM"}}


def _signal(dev: Any) -> list[dict[str, Any]]:
    return [
        {"let": "s", "ref": "sems", "transforms": [{"op": "at", "index": [0]}]},
        {"op": "semaphore_signal", "sem": "s", "device": dev},
        {"op": "semaphore_wait", "sem": "s"},
    ]


_MULTICAST_COPY = [
    {"op": "copy", "src": "x_ref", "dst": "smem"},
    {"let": "m", "ref": "out", "transforms": [{"op": "multicast_ref", "axes": "dev"}]},
    {"op": "tma_store", "src": "smem", "dst": "m"},
]
_MULTIMEM = [
    {
        "op": "multimem_store",
        "value": "lax.broadcasted_iota(jnp.float32, (128,), 0)",
        "dst": "out",
        "axes": ["dev"],
    }
]
#: the Mosaic GPU lowering of a kernel called on the global arrays has no mesh context:
#: a device id is of a 0-D mesh, a collective has no device mesh (the check lowered them
#: against the scenario's device mesh: a race or deadlock, or "valid")
LOWERED_GLOBAL = {
    "peer-by-axis": _lowered_global(_peer({"dev": 0})),
    "peer-flat": _lowered_global(_peer(0)),
    "peer-by-axis-2d": _lowered_global(_peer({"x": 0}), {"x": 2, "y": 1}),
    "peer-flat-2d": _lowered_global(_peer(0), {"x": 2, "y": 1}),
    "signal-by-axis": _lowered_global(_signal({"dev": 0}), scratch=_SEMS),
    "signal-flat": _lowered_global(_signal(0), scratch=_SEMS),
    "signal-here": _lowered_global(_signal(None), scratch=_SEMS),
    "signal-multicast": _lowered_global(
        [
            {"let": "s", "ref": "sems", "transforms": [{"op": "at", "index": [0]}]},
            {"op": "semaphore_signal_multicast", "sem": "s", "axes": ["dev"]},
            {"op": "semaphore_wait", "sem": "s"},
        ],
        scratch=_SEMS,
    ),
    "multicast-copy": _lowered_global(_MULTICAST_COPY, scratch=_SMEM),
    "multicast-copy-shard-map": _lowered_global(_MULTICAST_COPY, scratch=_SMEM, shard_map=True),
    "multimem-store": _lowered_global(_MULTIMEM),
    "multimem-store-shard-map": _lowered_global(_MULTIMEM, shard_map=True),
    "multimem-load-reduce": _lowered_global(
        [
            {
                "op": "multimem_load_reduce",
                "src": "out",
                "dst": "smem",
                "axes": ["dev"],
                "reduction": "add",
            }
        ],
        scratch=_SMEM,
    ),
}


@pytest.fixture(scope="module")
def jax_lowered_global() -> dict[str, dict[str, Any]]:
    return answers(LOWERED_GLOBAL)


@pytest.mark.parametrize("name", list(LOWERED_GLOBAL))
def test_the_lowering_of_a_global_call_has_no_device_mesh(name: str, jax_lowered_global) -> None:
    _agrees(LOWERED_GLOBAL[name], jax_lowered_global[name])


def _sliced_global(value: str, index: Any) -> dict[str, Any]:
    """``x`` sharded on dim 0 over ``{"dev": 2}`` on the global arrays, ``s`` its view by
    ``index``, ``out = value``."""
    return {
        "name": "sliced-global",
        "device_mesh": {"dev": 2},
        "buffers": {"x": {"shape": [256], "dtype": "float32", "init": "iota"}},
        "call": {
            "entry": "pl.kernel",
            "args": [{"buffer": "x", "param": "x_ref", "spec": ["dev"]}],
            "outputs": {"out": {"shape": [128], "dtype": "float32", "spec": [None]}},
            "programs": [
                {
                    "mesh": {"grid": {"b": 1}},
                    "body": [
                        {
                            "let": "s",
                            "ref": "x_ref",
                            "transforms": [{"op": "at", "index": [index]}],
                        },
                        {"op": "compute", "dst": "out", "value": value},
                    ],
                }
            ],
        },
        "run": {"interpret": "gpu", "detect_races": False, "shard_map": False},
    }


#: a compute's value is evaluated left to right: a load of a sharded ref's slice (its
#: lazy SHARDED_REF_SLICE) before an axis name no shard_map binds raises first (the
#: check reported the name first, whatever the order)
EVAL_ORDER = {
    "load-then-axis": _sliced_global("s[...] + 1.0 * lax.axis_index('dev')", {"ds": [0, 128]}),
    "axis-then-load": _sliced_global("1.0 * lax.axis_index('dev') + s[...]", {"ds": [0, 128]}),
    "load-then-size": _sliced_global("s[...] * lax.axis_size('dev')", {"ds": [0, 128]}),
    "where-load-first": _sliced_global(
        "jnp.where(s[...] > 3, s[...], 1.0 * lax.axis_index('dev'))", {"ds": [0, 128]}
    ),
}


@pytest.fixture(scope="module")
def jax_eval_order() -> dict[str, dict[str, Any]]:
    return answers(EVAL_ORDER)


@pytest.mark.parametrize("name", list(EVAL_ORDER))
def test_a_values_loads_and_axis_names_raise_in_evaluation_order(name: str, jax_eval_order) -> None:
    _agrees(EVAL_ORDER[name], jax_eval_order[name])


def _two_sharded(
    xs: list[int],
    xspec: Any,
    ys: list[int],
    yspec: Any,
    out: list[int],
    mesh: dict[str, int],
    entry: str = "pl.kernel",
    as_ref: bool = False,
) -> dict[str, Any]:
    """``out = x_ref[...] + y_ref[...]`` on the global arrays, ``x`` and ``y`` by their
    specs (float32; ``as_ref``: both Refs)."""
    buffers = {
        n: {"shape": sh, "dtype": "float32", "init": "iota", "as_ref": as_ref}
        for n, sh in (("x", xs), ("y", ys))
    }
    return {
        "name": "two-sharded",
        "device_mesh": mesh,
        "buffers": buffers,
        "call": {
            "entry": entry,
            "args": [
                {"buffer": "x", "param": "x_ref", "spec": xspec},
                {"buffer": "y", "param": "y_ref", "spec": yspec},
            ],
            "outputs": {"out": {"shape": out, "dtype": "float32"}},
            "programs": [
                {
                    "mesh": {"grid": {"b": 1}},
                    "body": [{"op": "add", "dst": "out", "lhs": "x_ref", "rhs": "y_ref"}],
                }
            ],
        },
        "run": {"interpret": "gpu", "detect_races": False, "shard_map": False},
    }


_XY = {"x": 2, "y": 2}
#: loads of a global call's sharded inputs carry their sharding; their sum follows lax's
#: broadcasting sharding rule while the body traces, before MPMD_NOT_MANUAL (which the
#: check gave first)
VALUE_SHARDING = {
    "other-axes": _two_sharded([8, 16], ["x"], [8, 16], ["y"], [16, 16], _XY),
    "other-order": _two_sharded([4, 16], [["x", "y"]], [4, 16], [["y", "x"]], [16, 16], _XY),
    "one-axis-two-dims": _two_sharded(
        [4, 32], ["dev"], [8, 16], [None, "dev"], [8, 32], {"dev": 2}
    ),
    "plgpu-refs": _two_sharded([8, 16], ["x"], [8, 16], ["y"], [16, 16], _XY, "plgpu.kernel", True),
    "pl-refs": _two_sharded(
        [4, 32], ["dev"], [8, 16], [None, "dev"], [8, 32], {"dev": 2}, as_ref=True
    ),
    # no conflict: the operands' sharding is kept, MPMD_NOT_MANUAL as before
    "sharded-and-replicated": _two_sharded([4, 16], ["dev"], [8, 16], [None], [8, 16], {"dev": 2}),
    "same-sharding": _two_sharded([4, 16], ["dev"], [4, 16], ["dev"], [8, 16], {"dev": 2}),
}


@pytest.fixture(scope="module")
def jax_value_sharding() -> dict[str, dict[str, Any]]:
    return answers(VALUE_SHARDING)


@pytest.mark.parametrize("name", list(VALUE_SHARDING))
def test_a_sum_of_differently_sharded_loads_is_jaxs_sharding_error(
    name: str, jax_value_sharding
) -> None:
    _agrees(VALUE_SHARDING[name], jax_value_sharding[name])


def _computed(value: str, base: dict[str, Any], dtype: str = "float32") -> dict[str, Any]:
    """``base`` (a VALUE_SHARDING scenario) with ``out = value`` of ``dtype`` inputs."""
    d = copy.deepcopy(base)
    d["call"]["programs"][0]["body"] = [{"op": "compute", "dst": "out", "value": value}]
    for b in d["buffers"].values():
        b["dtype"] = dtype
    d["call"]["outputs"]["out"]["dtype"] = "bool" if "<" in value else dtype
    return d


#: the same rule in a compute's arithmetic: each primitive's operands as jax.numpy
#: promoted them (an int32 true division is float32's div), a scalar's sharding none
VALUE_SHARDING_COMPUTED = {
    f"{where}-{name}": _computed(value, VALUE_SHARDING[where], dtype)
    for where in ("other-axes", "one-axis-two-dims")
    for name, value, dtype in [
        ("mul", "x_ref[...] * y_ref[...]", "float32"),
        ("after-a-scalar", "(x_ref[...] + 1.0) * y_ref[...]", "float32"),
        ("negated", "-x_ref[...] + y_ref[...]", "float32"),
        ("compared", "x_ref[...] < y_ref[...]", "float32"),
        ("maximum", "jnp.maximum(x_ref[...], y_ref[...])", "float32"),
        ("int-division", "x_ref[...] / y_ref[...]", "int32"),
    ]
}


@pytest.fixture(scope="module")
def jax_value_sharding_computed() -> dict[str, dict[str, Any]]:
    return answers(VALUE_SHARDING_COMPUTED)


@pytest.mark.parametrize("name", list(VALUE_SHARDING_COMPUTED))
def test_computed_arithmetic_of_differently_sharded_loads(
    name: str, jax_value_sharding_computed
) -> None:
    _agrees(VALUE_SHARDING_COMPUTED[name], jax_value_sharding_computed[name])


def _ranked(xspec: Any, xs: list[int], value: str) -> dict[str, Any]:
    """``out = value`` of ``x`` (``xs`` by ``xspec``) and a 1-D ``y`` of 8 sharded over
    ``y``, on the global arrays over ``{"x": 2, "y": 2}``."""
    d = _two_sharded(xs, xspec, [8], ["y"], [16, 16], _XY)
    d["call"]["programs"][0]["body"] = [{"op": "compute", "dst": "out", "value": value}]
    return d


#: operands of fewer dims are ranked up on the left first (the check compared dims from
#: the left: a false VALUE_SHARDING for a 2-D value times a 1-D one)
VALUE_SHARDING_RANKS = {
    "leading-dim-apart": _ranked(["x"], [8, 16], "x_ref[...] * y_ref[...]"),
    "minor-dims-differ": _ranked([None, "x"], [16, 8], "x_ref[...] * y_ref[...]"),
    "minor-dims-agree": _ranked([None, "y"], [16, 8], "x_ref[...] * y_ref[...]"),
    "one-axis-twice": _ranked(["y"], [8, 16], "x_ref[...] * y_ref[...]"),
}


@pytest.fixture(scope="module")
def jax_value_sharding_ranks() -> dict[str, dict[str, Any]]:
    return answers(VALUE_SHARDING_RANKS)


@pytest.mark.parametrize("name", list(VALUE_SHARDING_RANKS))
def test_operands_of_fewer_dims_are_ranked_up_first(name: str, jax_value_sharding_ranks) -> None:
    _agrees(VALUE_SHARDING_RANKS[name], jax_value_sharding_ranks[name])
