"""A global array's sharding (no shard_map), followed as JAX follows it.

Without ``jax.shard_map`` the kernel is called on the global arrays, whose types carry
their sharding over the device mesh (``float32[16@dev,128]``, by each argument's partition
spec). JAX follows it through the array methods applied before the call (lax.reshape's
and transpose's sharding rules), checks a sharded ref's views dim by dim (only whole
slices along a sharded dim), and raises MPMD_NOT_MANUAL only where an operand is sharded
(an array's at trace, a Ref's when the call is lowered). Each case is held against JAX's
trace and lowering; ``sharding.reshaped`` is held against JAX's own reshape rule.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxprobe import answers, assert_agrees
from mpmd_lab import sharding
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import check

RESHAPE = [{"op": "reshape", "shape": [-1]}]


def _global(
    arg: list[dict[str, Any]],
    body: list[dict[str, Any]],
    spec: list[Any] | None = None,
    as_ref: bool = False,
    entry: str = "pl.kernel",
    shape: list[int] = [8, 128],  # noqa: B006 - (read only)
) -> dict[str, Any]:
    """``x`` (``shape`` a device, over a 2-device mesh, no shard_map; ``spec``: its
    partition spec, ``as_ref``: passed as a Ref) through the array methods ``arg``, then
    ``v0 = x_ref`` through ``body``, copied onto itself."""
    return {
        "name": "global-sharding",
        "device_mesh": {"dev": 2},
        "run": {"shard_map": False},
        "buffers": {"x": {"shape": list(shape), "dtype": "float32", "as_ref": as_ref}},
        "call": {
            "entry": entry,
            "args": [{"buffer": "x", "param": "x_ref", "transforms": arg, "spec": spec}],
            "outputs": {"out": {"shape": [8, 128], "dtype": "float32"}},
            "programs": [
                {
                    "mesh": {"grid": {"b": 1}},
                    "body": [
                        {"let": "v0", "ref": "x_ref", "transforms": body},
                        {"op": "copy", "src": "v0", "dst": "v0"},
                    ],
                }
            ],
        },
    }


def _t(*perm: int) -> dict[str, Any]:
    return {"op": "transpose", "perm": list(perm)}


def _r(*shape: int) -> dict[str, Any]:
    return {"op": "reshape", "shape": list(shape)}


def _at(*index: Any) -> list[dict[str, Any]]:
    return [{"op": "at", "index": list(index)}]


#: (16, 128) sharded on dim 0 through the caller's array methods, then the kernel's
#: reshape (raises JAX's bare sharding error where the ref is still sharded)
ARRAY_METHODS = {
    "split-keeps-dim0": _global([_r(16, 2, 64)], RESHAPE),
    "flatten-merges-dim0": _global([_r(-1)], RESHAPE),
    "split-the-sharded-dim": _global([_r(2, 8, 128)], RESHAPE),
    "split-it-in-4": _global([_r(4, 4, 128)], RESHAPE),
    "neither-split-nor-merge": _global([_r(32, 64)], RESHAPE),
    "other-regrouping": _global([_r(128, 16)], RESHAPE),
    "transposed": _global([_t(1, 0)], RESHAPE),
    "transposed-twice": _global([_t(1, 0), _t(1, 0)], RESHAPE),
    "transposed-then-flattened": _global([_t(1, 0), _r(-1)], RESHAPE),
    "split-then-transposed": _global([_r(16, 2, 64), _t(2, 0, 1)], RESHAPE),
    "singleton-added": _global([_r(1, 16, 128)], RESHAPE),
    # the sharded dim moved: slices of it only whole, ints nowhere
    "transposed-whole-slice": _global([_t(1, 0)], _at([0, 8])),
    "transposed-sliced-on-sharded": _global([_t(1, 0)], _at([0, 128], [0, 8])),
    "transposed-int": _global([_t(1, 0)], _at(0)),
    # per-argument specs: dim 1 sharded, or nothing
    "dim1-sliced-dim0": _global([], _at([0, 4]), [None, "dev"]),
    "dim1-sliced-dim1": _global([], _at([0, 8], [0, 4]), [None, "dev"]),
    "dim1-reshaped": _global([], RESHAPE, [None, "dev"]),
    "dim1-transposed-then-sliced": _global([_t(1, 0)], _at([0, 4]), [None, "dev"]),
    "dim1-flattened": _global([_r(-1)], [], [None, "dev"]),
    "dim1-split": _global([_r(8, 2, 128)], _at([0, 4]), [None, "dev"]),
    "replicated": _global([], _at([0, 4]), [None, None]),
    "replicated-whole": _global([], [], [None, None]),
    # (a spec naming an axis the mesh lacks, then reshaped: the spec's error, no crash)
    "unknown-axis-reshaped": _global([_r(-1)], [], ["zz", None]),
    "axes-split-over-dims": _global([_r(2, 8, 128)], [], [["dev"], None]),
    # Refs: JAX asks their sharding when the call is lowered
    "ref-whole": _global([], [], as_ref=True),
    "ref-replicated": _global([], _at([0, 4]), [None, None], as_ref=True),
    "ref-sliced-on-sharded": _global([], _at([0, 4]), as_ref=True),
    "plgpu-transposed": _global([_t(1, 0)], RESHAPE, entry="plgpu.kernel"),
    "plgpu-ref-whole": _global([], [], as_ref=True, entry="plgpu.kernel"),
}


@pytest.fixture(scope="module")
def jax_global() -> dict[str, dict[str, Any]]:
    return answers(ARRAY_METHODS, ("build", "trace", "gpu-lower"))


@pytest.mark.parametrize("name", list(ARRAY_METHODS))
def test_a_global_arrays_sharding_is_followed_as_jax_does(name: str, jax_global) -> None:
    assert_agrees(load_scenario(copy.deepcopy(ARRAY_METHODS[name])), jax_global[name])


#: a plain array's methods are made by the caller: the kernel's ref is the new array,
#: whole (under shard_map: JAX lowers and runs each; the check said GPU_VERIFICATION for
#: the transposed one, and that the CPU interpreter cannot run the reshaped ones)
def _shard_mapped(arg: list[dict[str, Any]], out: list[int]) -> dict[str, Any]:
    d = _global(arg, [])
    d["run"]["shard_map"] = True
    d["call"]["outputs"]["out"]["shape"] = out
    d["call"]["programs"][0]["body"] = [{"op": "copy", "src": "x_ref", "dst": "out"}]
    return d


PLAIN_METHODS = {
    "transposed": _shard_mapped([_t(1, 0)], [128, 8]),
    "reshaped": _shard_mapped([_r(16, 64)], [16, 64]),
    "flattened": _shard_mapped([_r(-1)], [1024]),
}


@pytest.fixture(scope="module")
def jax_plain() -> dict[str, dict[str, Any]]:
    return answers(PLAIN_METHODS, ("build", "trace", "gpu-lower", "interpret"))


@pytest.mark.parametrize("name", list(PLAIN_METHODS))
def test_an_arrays_methods_are_not_views_of_the_kernels_ref(name: str, jax_plain) -> None:
    assert jax_plain[name]["stage"] is None, jax_plain[name]
    assert check(load_scenario(copy.deepcopy(PLAIN_METHODS[name]))) == []


# ---------------------------------------------------- the reshape rule, against JAX's own

_MESH = {"x": 2, "y": 2}
_dims = st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=4)
_part = st.sampled_from([None, "x", "y", ("x", "y"), ("y", "x")])


@st.composite
def _reshapes(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[Any, ...], tuple[int, ...]]:
    shape = tuple(draw(_dims))
    spec = tuple(draw(_part) for _ in shape)
    used = [n for p in spec for n in sharding.names_of(p)]
    if len(used) != len(set(used)):  # (an axis shards one dim at most)
        spec = (spec[0],) + (None,) * (len(shape) - 1)
    new = tuple(draw(st.permutations(list(shape) + [1] * draw(st.integers(0, 2)))))
    if draw(st.booleans()) and len(new) > 1:  # merge or split a pair
        i = draw(st.integers(0, len(new) - 2))
        new = new[:i] + (new[i] * new[i + 1],) + new[i + 2 :]
    return shape, spec, new


@settings(max_examples=300, deadline=None)
@given(_reshapes())
def test_reshaped_is_lax_reshapes_sharding_rule(case) -> None:
    import jax.numpy as jnp
    from jax._src import core
    from jax._src.lax import lax as jax_lax
    from jax.sharding import AbstractMesh, AxisType, NamedSharding, PartitionSpec

    shape, spec, new = case
    mesh = AbstractMesh((2, 2), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
    for d, p in zip(shape, spec, strict=True):  # (a dim is a multiple of its axes)
        if d % sharding.parts(sharding.names_of(p), _MESH):
            return
    placed = NamedSharding(mesh, PartitionSpec(*spec))
    operand = core.ShapedArray(shape, jnp.float32, sharding=placed)
    try:
        want: Any = jax_lax._reshape_sharding_rule(
            operand, new_sizes=new, dimensions=None, sharding=None
        ).spec
        want = tuple(want) + (None,) * (len(new) - len(want))
    except core.ShardingTypeError:
        want = "unsupported"
    except (AssertionError, IndexError):
        return  # (JAX's rule fails on its own: no answer to hold ours to)
    try:
        got: Any = sharding.reshaped(spec, shape, new, _MESH)
    except sharding.ReshapeUnsupported:
        got = "unsupported"
    assert got == want, (shape, spec, new)
