"""Hypothesis strategies: loadable scenarios, valid or not, for the graph and plot tests.

Names come from small pools that mix defined and undefined names, buffers that exist
and ones that don't, device meshes with and without the axes the transforms name, so
the generated calls cover unknown names, missing buffers and odd transform stacks.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from mpmd_lab.scenario import ScenarioError, load_scenario

NAMES = ["a", "b", "x_ref", "out", "smem", "v0", "v1", "ghost", "acc"]
AXES = ["dev", "x", "y", "b", "c", "zz"]
DTYPES = ["float32", "int32", "bfloat16", "int8", "float64", "uint16"]

shapes = st.lists(st.integers(1, 64), min_size=0, max_size=3)
small = st.integers(-5, 70)


def index_entry() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        small,
        st.lists(st.one_of(st.none(), small), min_size=2, max_size=2),
        st.fixed_dictionaries({"ds": st.lists(small, min_size=2, max_size=2)}),
        st.fixed_dictionaries({"block": st.sampled_from(AXES), "size": st.integers(1, 64)}),
        st.fixed_dictionaries({"pid": st.integers(0, 2), "size": st.integers(1, 64)}),
    )


device_id = st.one_of(
    st.integers(-3, 9),
    st.dictionaries(
        st.sampled_from(AXES),
        st.one_of(st.integers(-3, 5), st.fixed_dictionaries({"offset": st.integers(-5, 5)})),
        min_size=1,
        max_size=2,
    ),
)
axes_names = st.one_of(
    st.sampled_from(AXES), st.lists(st.sampled_from(AXES), min_size=0, max_size=3)
)

transform = st.one_of(
    st.fixed_dictionaries(
        {"op": st.just("at"), "index": st.lists(index_entry(), min_size=0, max_size=4)}
    ),
    st.fixed_dictionaries({"op": st.just("bitcast"), "dtype": st.sampled_from(DTYPES)}),
    st.fixed_dictionaries(
        {"op": st.just("reshape"), "shape": st.lists(st.integers(-1, 64), max_size=3)}
    ),
    st.fixed_dictionaries(
        {"op": st.just("transpose"), "perm": st.lists(st.integers(-3, 3), max_size=3)}
    ),
    st.fixed_dictionaries({"op": st.just("remote_ref"), "device": device_id}),
    st.fixed_dictionaries({"op": st.just("multicast_ref"), "axes": axes_names}),
    st.fixed_dictionaries(
        {
            "op": st.just("cluster_ref"),
            "block": st.dictionaries(st.sampled_from(AXES), st.integers(-2, 3), max_size=2),
        }
    ),
    st.fixed_dictionaries(
        {"op": st.just("tiling"), "tile": st.lists(st.integers(1, 64), min_size=1, max_size=2)}
    ),
    st.fixed_dictionaries({"op": st.just("swizzle"), "bytes": st.sampled_from([0, 32, 128, 77])}),
)
transforms = st.lists(transform, max_size=4)
name = st.sampled_from(NAMES)


def statement() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.fixed_dictionaries({"let": name, "ref": name, "transforms": transforms}),
        st.fixed_dictionaries({"op": st.just("copy"), "src": name, "dst": name}),
        st.fixed_dictionaries({"op": st.just("add"), "dst": name, "lhs": name, "rhs": name}),
        st.fixed_dictionaries({"op": st.just("fill"), "dst": name, "value": st.integers(-3, 3)}),
        st.fixed_dictionaries({"op": st.just("tma_store"), "src": name, "dst": name}),
        st.fixed_dictionaries(
            {"op": st.just("multimem_store"), "src": name, "dst": name, "axes": axes_names}
        ),
        st.fixed_dictionaries({"op": st.just("return"), "src": name}),
    )


buffer = st.fixed_dictionaries(
    {"shape": shapes, "dtype": st.sampled_from(DTYPES), "as_ref": st.booleans()}
)
arg = st.one_of(
    st.fixed_dictionaries({"buffer": name, "param": name, "transforms": transforms}),
    st.fixed_dictionaries(
        {"tuple": st.lists(name, min_size=1, max_size=3), "param": name, "transforms": transforms}
    ),
)
mesh = st.fixed_dictionaries(
    {
        "grid": st.dictionaries(st.sampled_from(AXES), st.integers(1, 4), max_size=2),
        "cluster": st.dictionaries(st.sampled_from(AXES), st.integers(1, 2), max_size=4),
        "threads": st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {"name": st.one_of(st.none(), st.just("wg")), "count": st.integers(1, 17)}
            ),
        ),
    }
)
scenario_dicts = st.fixed_dictionaries(
    {
        "schema": st.just("mpmd-lab/scenario@1"),
        "name": st.just("fuzz"),
        "device_mesh": st.one_of(
            st.none(), st.dictionaries(st.sampled_from(AXES), st.integers(1, 5), max_size=3)
        ),
        "buffers": st.dictionaries(name, buffer, max_size=4),
        "call": st.fixed_dictionaries(
            {
                "entry": st.sampled_from(["pl.kernel", "plgpu.kernel"]),
                "args": st.lists(arg, max_size=4),
                "captures": st.lists(
                    st.fixed_dictionaries({"name": name, "buffer": name}), max_size=2
                ),
                "outputs": st.dictionaries(
                    name,
                    st.fixed_dictionaries({"shape": shapes, "dtype": st.just("float32")}),
                    max_size=2,
                ),  # fmt: skip
                "scratch": st.dictionaries(
                    name,
                    st.fixed_dictionaries(
                        {
                            "shape": shapes,
                            "dtype": st.just("float32"),
                            "memory_space": st.sampled_from(["SMEM", "GMEM", "TMEM"]),
                            "transforms": st.lists(transform, max_size=2),
                        }
                    ),
                    max_size=1,
                ),
                "programs": st.lists(
                    st.fixed_dictionaries(
                        {"mesh": mesh, "body": st.lists(statement(), max_size=6)}
                    ),
                    max_size=2,
                ),
            }
        ),
    }
)


def loadable(data: dict[str, Any]):
    """The scenario, or None when the generated dict is not a scenario (exit-2 input)."""
    try:
        return load_scenario(data)
    except ScenarioError:
        return None
