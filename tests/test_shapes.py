"""mpmd_lab.shapes: shape, dtype and flags after every transform step, checked against
real JAX (one child process traces every stack inside a pl.kernel body)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mpmd_lab.scenario import Scenario, load_scenario
from mpmd_lab.shapes import base_info, propagate

ROOT = Path(__file__).resolve().parents[1]

#: (base shape, dtype, transforms)
STACKS = [
    ([8, 128], "float32", [{"op": "at", "index": [[0, 4]]}]),
    ([8, 128], "float32", [{"op": "at", "index": [1]}]),
    ([8, 128], "float32", [{"op": "at", "index": [None, {"ds": [64, 64]}]}]),
    ([8, 128], "float32", [{"op": "at", "index": [[2, 99]]}]),
    ([8, 128], "float32", [{"op": "at", "index": [[-3, None]]}]),
    ([8, 128], "float32", [{"op": "at", "index": [{"block": "b", "size": 4}]}]),
    ([8, 128], "float32", [{"op": "bitcast", "dtype": "int32"}]),
    ([8, 128], "float32", [{"op": "bitcast", "dtype": "float16"}]),
    ([8, 128], "float16", [{"op": "bitcast", "dtype": "float32"}]),
    ([8, 128], "int8", [{"op": "bitcast", "dtype": "float32"}]),
    ([2, 8, 128], "float32", [{"op": "bitcast", "dtype": "int8"}]),
    ([8, 128], "float32", [{"op": "reshape", "shape": [-1]}]),
    ([8, 128], "float32", [{"op": "reshape", "shape": [4, -1, 16]}]),
    ([8, 128], "float32", [{"op": "transpose", "perm": [1, 0]}]),
    ([2, 8, 128], "float32", [{"op": "transpose", "perm": [2, 0, 1]}]),
    (
        [8, 128],
        "float32",
        [
            {"op": "at", "index": [[0, 8]]},
            {"op": "transpose", "perm": [1, 0], "via": "transpose_ref"},
        ],
    ),
    ([8, 128], "float32", [{"op": "transpose", "perm": [1, 0]}, {"op": "at", "index": [[0, 64]]}]),
    ([8, 128], "float32", [{"op": "at", "index": [3]}, {"op": "reshape", "shape": [2, 64]}]),
    (
        [8, 128],
        "float32",
        [{"op": "remote_ref", "device": {"dev": 1}}, {"op": "at", "index": [[0, 2]]}],
    ),
    ([8, 128], "float32", [{"op": "multicast_ref", "axes": "dev"}, {"op": "at", "index": [0]}]),
    ([8, 128], "float32", [{"op": "at", "index": [0, 0, 0]}]),
    ([8, 128], "float32", [{"op": "at", "index": [[8, 9]]}]),
    ([8, 128], "float32", [{"op": "reshape", "shape": [-1, -1]}]),
    ([8, 128], "float32", [{"op": "reshape", "shape": [3, -1]}]),
    ([8, 128], "float32", [{"op": "reshape", "shape": [3, 5]}]),
    ([128], "float32", [{"op": "bitcast", "dtype": "float16"}, {"op": "at", "index": [[0, 2]]}]),
    ([128], "float32", [{"op": "bitcast", "dtype": "int32"}, {"op": "reshape", "shape": [2, 64]}]),
    ([3, 128], "int8", [{"op": "bitcast", "dtype": "float32"}, {"op": "at", "index": [0]}]),
    ([8, 128], "float32", [{"op": "transpose", "perm": [0]}, {"op": "at", "index": [0]}]),
    ([8, 128], "float32", [{"op": "transpose", "perm": [0, 1], "via": "transpose_ref"}]),
]


def _scenario(shape, dtype, transforms) -> Scenario:
    return load_scenario(
        {
            "name": "s",
            "device_mesh": {"dev": 2},
            "buffers": {"x": {"shape": shape, "dtype": dtype}},
            "call": {
                "args": [{"buffer": "x", "param": "x_ref"}],
                "outputs": {"out": {"shape": [128], "dtype": "float32"}},
                "programs": [
                    {
                        "mesh": {"grid": {"b": 2}},
                        "body": [{"let": "v", "ref": "x_ref", "transforms": transforms}],
                    }
                ],
            },
        }
    )


_CHILD = r"""
import json, os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
import jax, jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu
from jax.sharding import PartitionSpec as P
from mpmd_lab.codegen import transform_expr
from mpmd_lab.scenario import load_scenario
out = []
mesh = jax.make_mesh((2,), ("dev",))
for item in json.loads(sys.stdin.read()):
    s = load_scenario(item)
    ts = s.call.programs[0].body[0].transforms
    rec = []
    def body(x_ref, o_ref):
        v = x_ref
        for t in ts:
            try:
                v = eval(transform_expr("v", t, s, ""), {"v": v, "pl": pl, "plgpu": plgpu,
                                                          "lax": lax, "jnp": jnp})
                ty = jax.typeof(v) if not hasattr(v, "transforms") else v.type
                rec.append({"shape": list(ty.shape), "dtype": str(ty.dtype)})
            except Exception as e:
                rec.append({"error": type(e).__name__, "message": str(e)})
                return
    k = pl.kernel(body, out_type=jax.ShapeDtypeStruct((128,), jnp.float32),
                  mesh=plgpu.Mesh(grid=(2,), grid_names=("b",)))
    x = jax.ShapeDtypeStruct(
        (s.buffers["x"].shape[0] * 2, *s.buffers["x"].shape[1:]),
        jnp.dtype(s.buffers["x"].dtype),
        sharding=jax.sharding.NamedSharding(mesh, P("dev")),
    )
    f = jax.jit(jax.shard_map(k, mesh=mesh, in_specs=P("dev"), out_specs=P("dev"),
                              check_vma=False))
    try:
        f.trace(x)
    except Exception:
        pass
    out.append(rec)
print("@@" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def jax_steps() -> list[list[dict]]:
    payload = json.dumps([_scenario(*s).to_dict() for s in STACKS])
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    p = subprocess.run(
        [sys.executable, "-c", _CHILD],
        input=payload,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
    assert "@@" in p.stdout, p.stderr[-3000:]
    return json.loads(p.stdout.split("@@", 1)[1])


@pytest.mark.slow
@pytest.mark.parametrize("k", range(len(STACKS)))
def test_steps_match_jax(k: int, jax_steps: list[list[dict]]) -> None:
    """After each step JAX computes the type: shape, dtype, or the error it raises then."""
    s = _scenario(*STACKS[k])
    shape, dtype, _ = STACKS[k]
    steps = propagate(base_info(shape, dtype), s.call.programs[0].body[0].transforms)
    got = jax_steps[k]
    pending = None
    for i, st in enumerate(steps):
        j = got[i]
        err = st.error if st.after is None else st.after.pending or pending
        pending = st.after.pending if st.after is not None else None
        if "error" in j:
            assert err is not None, (i, j, st)
            assert err.jax_type == j["error"] and err.message == j["message"], (i, j, err)
            return
        assert err is None, (i, j, err)
        assert list(st.after.shape) == j["shape"] and st.after.dtype == j["dtype"], (i, j)
    assert len(got) == len(steps)


def test_flags_and_regions() -> None:
    ref = base_info([4, 256], "float32", "GMEM", "x")
    s = _scenario([4, 256], "float32", [])
    del s
    from mpmd_lab.ops import At, MulticastRef, RemoteRef

    steps = propagate(
        ref,
        [
            At(op="at", index=[[1, 3], {"ds": [128, 128]}]),
            RemoteRef(op="remote_ref", device={"dev": 1}),
        ],
    )
    after = steps[-1].after
    assert after.shape == (2, 128) and after.peer and not after.multicast
    assert [(d.start, d.size) for d in after.region] == [(1, 2), (128, 128)]
    step = propagate(after, [MulticastRef(op="multicast_ref", axes="dev")])[0]
    assert step.error.code == "REF_PEER_TO_MULTICAST"
    assert step.error.message == "Can't make a peer reference into a multicast reference."
    assert "f32[2,128] GMEM peer" == after.describe()


def test_sharded_regrouping_leaves_no_dim0_view() -> None:
    """A sharded ref's reshape, bitcast or transpose (even one that keeps every dim)
    raises before it makes a view, and its lazy error leaves ``view_dims`` None: so
    NDIndexer's sharding check (``At.typed``'s ``sharded0``) needs no record of the
    regrouping steps; the next index raises the waiting error, not a sharding one."""
    from mpmd_lab.ops import At, Bitcast, Reshape, Transpose

    ref = base_info([8, 128], "float32", "GMEM", "x", "dev")
    for t in [
        Reshape(op="reshape", shape=[8, 128]),
        Bitcast(op="bitcast", dtype="int32"),
        Transpose(op="transpose", perm=[0, 1]),
    ]:
        first, second = propagate(ref, [t, At(op="at", index=[0])])
        assert first.error is not None and first.error.code == "MPMD_GPU_MESH_NOT_COMBINABLE"
        assert first.after is not None and first.after.view_dims is None
        assert second.error is first.error and second.after is None
    # unsharded, a same-shape reshape keeps where the view sits
    plain = base_info([8, 128], "float32", "GMEM", "x")
    (step,) = propagate(plain, [Reshape(op="reshape", shape=[8, 128])])
    assert step.after is not None and step.after.transformed
    assert (step.after.region, step.after.view_dims) == (plain.region, plain.view_dims)


def test_unbound_is_the_least_name_not_bound() -> None:
    """``Expr.unbound``, answered from each node's parts, is the least of its names
    (``names()``) that ``bound`` lacks, on random expressions of every node kind."""
    import random

    from mpmd_lab import expr as E

    names = ["a", "b", "dev", "i", "x"]
    rnd = random.Random(17)

    def text(depth: int) -> str:
        r = rnd.random()
        if depth > 3 or r < 0.25:
            leaves = [str(rnd.randint(0, 9)), rnd.choice(names), "program_id(0)"]
            return rnd.choice([*leaves, f"axis_size({rnd.choice(names)})"])
        a, b = text(depth + 1), text(depth + 1)
        if r < 0.5:
            return f"({a} {rnd.choice(['+', '-', '*', '//', '%'])} {b})"
        if r < 0.6:
            return f"-{a}"
        if r < 0.7:
            return f"({a} {rnd.choice(['==', '<', '>='])} {b})"
        if r < 0.8:
            return f"(({a} < 1) {rnd.choice(['and', 'or'])} ({b} == 2))"
        if r < 0.9:
            return f"(not {a})"
        return f"(({a} == 1) & ({b} > 0))"

    for _ in range(2000):
        t = text(0)
        if len(t) > E.MAX_TEXT:
            continue
        e = E.parse(t)
        every = e.names()
        for _ in range(3):
            bound = set(rnd.sample(names, rnd.randint(0, len(names))))
            want = min((n for n in every if n not in bound), default=None)
            assert e.unbound(bound) == e.unbound(frozenset(bound)) == want


def test_every_refinfo_maker_sets_every_field() -> None:
    """base_info, view_info and replace make a RefInfo with every field set, equal to
    the RefInfo its __init__ makes of the same values, and replace changes only the
    fields it is given."""
    from mpmd_lab.shapes import RefInfo, replace, view_info

    ref = base_info([4, 256], "float32", "SMEM", "x", "dev")
    made = [ref, view_info(ref, (4, 256), ref.region, ref.view_dims), replace(ref, peer=True)]
    for info in made:
        values = [getattr(info, name) for name in RefInfo.__slots__]  # (none unset)
        assert RefInfo(*values) == info
    assert replace(ref, peer=True) == RefInfo(
        *[True if n == "peer" else getattr(ref, n) for n in RefInfo.__slots__]
    )
