"""Hypothesis strategies: valid scenarios (as dicts) and malformed mutations of them.

``scenarios()`` draws dicts that ``load_scenario`` accepts by construction (names are
ASCII identifiers, sizes in range) but that JAX may well reject: the static check must
report, never raise. Names are drawn to collide with what generated code uses.
"""

from __future__ import annotations

import keyword
from typing import Any

from hypothesis import strategies as st
from mpmd_lab.dtypes import DTYPES

#: identifiers the exporter's own code uses, and near misses of them
TRICKY_NAMES = [
    "x", "y", "out", "jnp", "jnp_", "jax", "np", "lax", "pl", "plgpu", "P", "kernel",
    "kernel_", "call", "build", "main", "fn", "result", "outs", "inputs", "interp",
    "captured", "program0", "program1", "mesh0", "mesh1", "print", "int", "len", "os",
    "sys", "json", "host_array", "_x", "_x_", "x_", "__init__", "__builtins__", "self",
    "NUM_DEVICES", "DEVICE_MESH", "Ellipsis", "exec", "eval", "compile", "globals",
]  # fmt: skip


def _ok(name: str) -> bool:
    return (
        name.isidentifier()
        and name.isascii()
        and not keyword.iskeyword(name)
        and not keyword.issoftkeyword(name)
    )


names = st.one_of(
    st.sampled_from(TRICKY_NAMES),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True).filter(_ok),
)
dtypes = st.sampled_from(DTYPES)
shapes = st.lists(st.integers(1, 16), min_size=0, max_size=3)


@st.composite
def index_entry(draw: Any, axes: list[str]) -> Any:
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return None
    if kind == 1:
        return draw(st.integers(-4, 20))
    if kind == 2:
        return [draw(st.none() | st.integers(-4, 20)), draw(st.none() | st.integers(-4, 20))]
    if kind == 3:
        return {
            "ds": [draw(st.integers(-2, 16)), draw(st.integers(0, 16))]
        }  # (a negative size is no scenario)
    if kind == 4:
        entry = {
            "block": draw(st.sampled_from(axes) if axes else names),
            "size": draw(st.integers(1, 8)),
        }
        if draw(st.booleans()):
            entry["stride"] = draw(st.integers(1, 8))
        return entry
    return {"pid": draw(st.integers(0, 2)), "size": draw(st.integers(1, 8))}


@st.composite
def transform(draw: Any, kernel_axes: list[str], mesh_axes: list[str]) -> dict:
    op = draw(st.sampled_from(
        ["at", "bitcast", "reshape", "transpose", "remote_ref", "multicast_ref", "cluster_ref",
         "tiling", "swizzle"]
    ))  # fmt: skip
    axis = st.sampled_from(mesh_axes) if mesh_axes and draw(st.booleans()) else names
    if op == "at":
        return {"op": op, "index": draw(st.lists(index_entry(kernel_axes), max_size=3))}
    if op == "bitcast":
        return {"op": op, "dtype": draw(dtypes)}
    if op == "reshape":
        return {"op": op, "shape": draw(st.lists(st.integers(-1, 16), max_size=3))}
    if op == "transpose":
        perm = draw(
            st.permutations(range(draw(st.integers(0, 3))))
            | st.lists(st.integers(-3, 4), max_size=3)
        )
        return {
            "op": op,
            "perm": list(perm),
            "via": draw(st.sampled_from(["method", "transpose_ref"])),
        }
    if op == "remote_ref":
        value = st.integers(-4, 4) | st.builds(lambda k: {"offset": k}, st.integers(-4, 4))
        device = draw(st.integers(-4, 8) | st.dictionaries(axis, value, min_size=1, max_size=2))
        return {"op": op, "device": device}
    if op == "multicast_ref":
        return {"op": op, "axes": draw(axis | st.lists(axis, max_size=3))}
    if op == "cluster_ref":
        return {"op": op, "block": draw(st.dictionaries(names, st.integers(-2, 4), max_size=2))}
    if op == "tiling":
        return {"op": op, "tile": draw(st.lists(st.integers(1, 64), min_size=1, max_size=2))}
    return {"op": op, "bytes": draw(st.sampled_from([0, 32, 64, 128, 100]))}


@st.composite
def scenarios(draw: Any, max_statements: int = 6) -> dict:
    """A loadable scenario dict (JAX may reject it; the loader must not)."""
    mesh = draw(st.none() | st.dictionaries(names, st.integers(1, 4), min_size=1, max_size=2))
    mesh_axes = list(mesh or {})
    buffers = draw(st.dictionaries(
        names,
        st.fixed_dictionaries(
            {"shape": shapes, "dtype": dtypes},
            optional={"init": st.sampled_from(["zeros", "ones", "iota", "random"]),
                      "seed": st.integers(0, 9), "as_ref": st.booleans()},
        ),
        min_size=1, max_size=3,
    ))  # fmt: skip
    bnames = list(buffers)
    kernel_axes: list[str] = []
    programs = []
    params = draw(st.lists(names, max_size=3, unique=True))
    outputs = draw(
        st.dictionaries(
            names, st.fixed_dictionaries({"shape": shapes, "dtype": dtypes}), max_size=2
        )
    )
    spaces = st.sampled_from(["SMEM", "GMEM", "TMEM"])
    scratch_spec = st.fixed_dictionaries({"shape": shapes, "dtype": dtypes, "memory_space": spaces})
    scratch = draw(st.dictionaries(names, scratch_spec, max_size=1))
    args = []
    for p in params:
        if draw(st.integers(0, 4)) == 0:
            leaves = draw(st.lists(st.sampled_from(bnames), min_size=1, max_size=2))
            args.append({"tuple": leaves, "param": p})
        else:
            arg: dict[str, Any] = {"buffer": draw(st.sampled_from(bnames)), "param": p}
            if draw(st.integers(0, 3)) == 0:
                arg["transforms"] = [draw(transform([], mesh_axes))]
            args.append(arg)
    for _ in range(draw(st.integers(1, 2))):
        grid = draw(st.dictionaries(names, st.integers(1, 4), max_size=2))
        cluster = draw(st.dictionaries(names, st.integers(1, 2), max_size=2))
        kernel_axes = list(grid) + list(cluster)
        threads = draw(st.none() | st.fixed_dictionaries(
            {"name": st.none() | names, "count": st.integers(1, 17)}
        ))  # fmt: skip
        refs = [*params, *outputs, *scratch]
        refs += [f"{a['param']}[{i}]" for a in args if "tuple" in a for i in range(len(a["tuple"]))]
        body: list[dict] = []
        for _ in range(draw(st.integers(0, max_statements))):
            ref = st.sampled_from(refs) if refs else names
            kind = draw(st.integers(0, 6))
            if kind <= 2:
                let = draw(names)
                stack = draw(st.lists(transform(kernel_axes, mesh_axes), max_size=4))
                body.append({"let": let, "ref": draw(ref), "transforms": stack})
                refs.append(let)
            elif kind == 3:
                body.append({"op": "copy", "src": draw(ref), "dst": draw(ref)})
            elif kind == 4:
                body.append({"op": "add", "dst": draw(ref), "lhs": draw(ref), "rhs": draw(ref)})
            elif kind == 5:
                value = draw(st.integers(-100, 100) | st.floats(-1e3, 1e3) | st.booleans())
                body.append({"op": "fill", "dst": draw(ref), "value": value})
            else:
                op = draw(st.sampled_from(["tma_store", "multimem_store", "return"]))
                stmt: dict[str, Any] = {"op": op, "src": draw(ref)}
                if op != "return":
                    stmt["dst"] = draw(ref)
                if op == "multimem_store":
                    stmt["axes"] = draw(st.sampled_from(mesh_axes) if mesh_axes else names)
                body.append(stmt)
        programs.append(
            {"mesh": {"grid": grid, "cluster": cluster, "threads": threads}, "body": body}
        )
    call: dict[str, Any] = {
        "entry": draw(st.sampled_from(["pl.kernel", "plgpu.kernel"])),
        "args": args,
        "outputs": outputs,
        "programs": programs,
    }
    if scratch:
        call["scratch"] = scratch
    if draw(st.booleans()):
        call["captures"] = [{"name": draw(names), "buffer": draw(st.sampled_from(bnames))}]
    data: dict[str, Any] = {
        "schema": "mpmd-lab/scenario@1",
        "name": draw(st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,12}", fullmatch=True)),
        "description": draw(st.text(max_size=40)),
        "buffers": buffers,
        "call": call,
        "run": {
            "interpret": draw(st.sampled_from(["gpu", "hlo"])),
            "detect_races": draw(st.booleans()),
        },
    }
    if mesh is not None:
        data["device_mesh"] = mesh
    return data


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def paths_of(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every location inside a JSON value (dict keys and list indices)."""
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += paths_of(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += paths_of(v, prefix + (i,))
    return out
