"""Scenarios of the collectives language for the agreement test (tests/test_collectives.py).

Each case is a small scenario that uses one construct, valid or not: semaphores
(signal, wait, multicast, device ids), barriers and TMA copies, loops and conditions,
and the compute ops (dot, multimem_load_reduce, atomic_add). The test runs every case
through real JAX (trace, then the Mosaic GPU lowering) and through the static rules, and
holds them to agree. What JAX says is measured there, never written here.
"""

from __future__ import annotations

from typing import Any

SEM = {"kind": "semaphore"}
SEMS = {"kind": "semaphore", "shape": [4]}
BAR = {"kind": "barrier"}
SM = {"shape": [256], "dtype": "float32", "memory_space": "SMEM"}
RING = "(dev + 1) % axis_size(dev)"
COPY = {"op": "copy", "src": "x_ref", "dst": "out"}
BAD = {"op": "semaphore_signal", "sem": "x_ref"}  # a trace error, where it is traced
CLUSTER = {"grid": {"b": 1}, "cluster": {"c": 2}, "threads": None}
THREADS = {"grid": {"b": 1}, "cluster": {}, "threads": {"name": "wg", "count": 2}}


def sc(
    body: list[Any],
    scratch: dict | None = None,
    buffers: dict | None = None,
    outputs: dict | None = None,
    args: list | None = None,
    mesh: dict | None = None,
    device_mesh: dict | None = None,
    no_mesh: bool = False,
) -> dict[str, Any]:
    d: dict[str, Any] = {
        "schema": "mpmd-lab/scenario@1",
        "name": "case",
        "buffers": buffers or {"x": {"shape": [256], "dtype": "float32", "init": "iota"}},
        "call": {
            "entry": "plgpu.kernel",
            "args": args or [{"buffer": "x", "param": "x_ref"}],
            "outputs": outputs or {"out": {"shape": [256], "dtype": "float32"}},
            "scratch": scratch or {},
            "programs": [
                {"mesh": mesh or {"grid": {"b": 1}, "cluster": {}, "threads": None}, "body": body}
            ],
        },
    }
    if not no_mesh:
        d["device_mesh"] = device_mesh or {"dev": 4}
    return d


def at(name: str, ref: str, *index: Any) -> dict[str, Any]:
    return {"let": name, "ref": ref, "transforms": [{"op": "at", "index": list(index)}]}


def view(name: str, ref: str, *transforms: dict) -> dict[str, Any]:
    return {"let": name, "ref": ref, "transforms": list(transforms)}


def signal(sem: str = "s", **kw: Any) -> dict[str, Any]:
    return {"op": "semaphore_signal", "sem": sem, **kw}


def wait(sem: str = "s", **kw: Any) -> dict[str, Any]:
    return {"op": "semaphore_wait", "sem": sem, **kw}


def load(src: str = "x_ref", dst: str = "smem", bar: str = "bar") -> list[dict[str, Any]]:
    return [
        {"op": "copy_gmem_to_smem", "src": src, "dst": dst, "barrier": bar},
        {"op": "barrier_wait", "barrier": bar},
    ]


def store(src: str = "smem", dst: str = "out") -> list[dict[str, Any]]:
    return [
        {"op": "commit_smem"},
        {"op": "copy_smem_to_gmem", "src": src, "dst": dst},
        {"op": "wait_smem_to_gmem", "n": 0},
    ]


def loop(body: list, stop: Any = 3, start: Any = 0, via: str = "fori_loop", **kw: Any) -> dict:
    return {"op": "loop", "var": kw.get("var", "i"), "start": start, "stop": stop, "via": via,
            "step": kw.get("step", 1), "body": body}  # fmt: skip


def when(cond: str, body: list) -> dict[str, Any]:
    return {"op": "when", "cond": cond, "body": body}


def smem(shape: list[int], dtype: str = "float16") -> dict[str, Any]:
    return {"shape": shape, "dtype": dtype, "memory_space": "SMEM"}


def dot(m: int = 64, k: int = 64, n: int = 128, dtype: str = "float16", **kw: Any) -> dict:
    """lhs [m, k] @ rhs [k, n] through SMEM (TMA-loaded) into a float32 output."""
    rdtype = kw.get("rdtype", dtype)
    bufs = {
        "a": {"shape": [m, k], "dtype": dtype, "init": "iota"},
        "b": {"shape": [k, n], "dtype": rdtype, "init": "iota"},
    }
    args = [{"buffer": "a", "param": "a_ref"}, {"buffer": "b", "param": "b_ref"}]
    scratch = {"a_s": smem([m, k], dtype), "b_s": smem([k, n], rdtype), "bar": BAR}
    lhs = "a_ref" if kw.get("lhs_gmem") else "a_s"
    body = [*load("a_ref", "a_s"), *load("b_ref", "b_s"), {"op": "dot", "dst": "out", "lhs": lhs,
            "rhs": "b_s"}]  # fmt: skip
    odt = kw.get("out_dtype", "float32")
    return sc(body, scratch, bufs, {"out": {"shape": [m, n], "dtype": odt}}, args)


def reduce(axes: Any = ("dev",), red: str = "add", dtype: str = "float32", shape=(256,), **kw):
    axes = list(axes) if isinstance(axes, tuple) else axes
    body = [*kw.get("extra", []), {"op": "multimem_load_reduce", "src": kw.get("src", "x_ref"),
            "dst": "out", "axes": axes, "reduction": red}]  # fmt: skip
    return sc(
        body,
        buffers={"x": {"shape": list(shape), "dtype": dtype, "init": "iota"}},
        outputs={"out": {"shape": list(shape), "dtype": dtype}},
        device_mesh=kw.get("device_mesh"),
        no_mesh=kw.get("no_mesh", False),
    )


def _captured() -> dict[str, Any]:
    d = sc([signal("c")], buffers={"x": {"shape": [256], "dtype": "float32", "init": "iota"},
           "k": {"shape": [], "dtype": "int32", "init": "zeros"}})  # fmt: skip
    d["call"]["captures"] = [{"name": "c", "buffer": "k"}]
    return d


I16 = {"out": {"shape": [], "dtype": "int16"}}
I32 = {"out": {"shape": [], "dtype": "int32"}}
M2 = {"x": 2, "y": 2}
CASES: dict[str, dict[str, Any]] = {
    # semaphores: the ref, its shape, its dtype, its view
    "signal_wait": sc([signal(), wait(), COPY], {"s": SEM}),
    "signal_float_ref": sc([signal("x_ref")]),
    "wait_float_ref": sc([wait("x_ref")]),
    "signal_sem_array": sc([signal(), wait()], {"s": SEMS}),
    "signal_sem_index": sc([at("s1", "s", 1), signal("s1"), wait("s1")], {"s": SEMS}),
    "signal_sem_dynamic_index": sc(
        [at("s1", "s", "dev % 4"), signal("s1", device=RING), wait("s1")], {"s": SEMS}
    ),  # fmt: skip
    "signal_sem_slice": sc([at("s1", "s", [0, 2]), signal("s1")], {"s": SEMS}),
    "wait_sem_ds": sc([at("s1", "s", {"ds": [1, 2]}), wait("s1")], {"s": SEMS}),
    "sem_2d_index": sc(
        [at("s1", "s", 1, 0), signal("s1")], {"s": {"kind": "semaphore", "shape": [2, 3]}}
    ),  # fmt: skip
    "sem_reshape_index": sc(
        [
            view("s1", "s", {"op": "reshape", "shape": [2, 2]}, {"op": "at", "index": [0, 1]}),
            signal("s1"),
        ],
        {"s": SEMS},
    ),  # fmt: skip
    "sem_peer_view": sc(
        [view("p", "s", {"op": "remote_ref", "device": 1}), signal("p")], {"s": SEM}
    ),  # fmt: skip
    "signal_barrier": sc([signal("bar")], {"bar": BAR}),
    "wait_barrier": sc([wait("bar")], {"bar": BAR}),
    "signal_int16_output": sc([signal("out")], outputs=I16),
    "signal_int32_output": sc([signal("out")], outputs=I32),
    "signal_captured_array": _captured(),
    # device ids
    "signal_ring": sc([signal(device=RING), wait(), COPY], {"s": SEM}),
    "signal_no_mesh": sc([signal(device=0), wait()], {"s": SEM}, no_mesh=True),
    "signal_local_no_mesh": sc([signal(), wait()], {"s": SEM}, no_mesh=True),
    "signal_dict_unknown": sc([signal(device={"nope": 1})], {"s": SEM}),
    "signal_dict_unknown_expr": sc([signal(device={"nope": "dev"})], {"s": SEM}),
    "signal_dict": sc([signal(device={"dev": RING}), wait()], {"s": SEM}),
    "signal_offset": sc([signal(device={"dev": {"offset": 1}}), wait()], {"s": SEM}),
    "signal_grid_axis": sc([signal(device={"b": 0})], {"s": SEM}),
    "signal_2d_flat": sc([signal(device=1)], {"s": SEM}, device_mesh=M2),
    "signal_2d_partial": sc([signal(device={"x": "1 - x"}), wait()], {"s": SEM}, device_mesh=M2),
    "signal_unbound": sc([signal(device="(devs + 1) % 4")], {"s": SEM}),
    # increments and values
    "inc_traced": sc([signal(inc="dev + 1")], {"s": SEM}),
    "inc_static": sc([signal(inc="2 * 3"), wait(value=6)], {"s": SEM}),
    "inc_axis_size": sc([signal(inc="axis_size(dev)"), wait(value=4)], {"s": SEM}),
    "inc_num_programs": sc([signal(inc="num_programs(0)"), wait()], {"s": SEM}),
    "inc_fori_index": sc([loop([signal(inc="i + 1")])], {"s": SEM}),
    "inc_python_index": sc([loop([signal(inc="i + 1")], via="python")], {"s": SEM}),
    "wait_traced_value": sc([wait(value="dev + 1")], {"s": SEM}),
    "wait_keep": sc([wait(value=2, decrement=False)], {"s": SEM}),
    # multicast signals
    "multicast": sc(
        [{"op": "semaphore_signal_multicast", "sem": "s", "axes": "dev"}, wait(value=4)], {"s": SEM}
    ),  # fmt: skip
    "multicast_wrong_axis": sc(
        [{"op": "semaphore_signal_multicast", "sem": "s", "axes": "nope"}], {"s": SEM}
    ),  # fmt: skip
    "multicast_no_mesh": sc(
        [{"op": "semaphore_signal_multicast", "sem": "s", "axes": "dev"}], {"s": SEM}, no_mesh=True
    ),  # fmt: skip
    "multicast_array": sc(
        [{"op": "semaphore_signal_multicast", "sem": "s", "axes": "dev"}], {"s": SEMS}
    ),  # fmt: skip
    "multicast_traced_inc": sc(
        [{"op": "semaphore_signal_multicast", "sem": "s", "axes": "dev", "inc": "dev"}], {"s": SEM}
    ),  # fmt: skip
    "multicast_2d_subset": sc(
        [{"op": "semaphore_signal_multicast", "sem": "s", "axes": "x"}], {"s": SEM}, device_mesh=M2
    ),  # fmt: skip
    "semaphore_through_pl_kernel": {**sc([signal(), wait()], {"s": SEM})},
    # barriers and TMA loads
    "load": sc([*load(), {"op": "copy", "src": "smem", "dst": "out"}], {"smem": SM, "bar": BAR}),
    "load_store": sc([*load(), *store()], {"smem": SM, "bar": BAR}),
    "load_without_barrier": sc(
        [{"op": "copy_gmem_to_smem", "src": "x_ref", "dst": "smem"}], {"smem": SM}
    ),  # fmt: skip
    "load_from_smem": sc(load(src="smem2"), {"smem": SM, "smem2": SM, "bar": BAR}),
    "load_into_gmem": sc(load(dst="out"), {"bar": BAR}),
    "load_on_semaphore": sc(load(bar="s"), {"smem": SM, "s": SEM}),
    "load_on_smem_array": sc(load(bar="f"), {"smem": SM, "f": smem([], "float32")}),
    "load_dtype": sc(load(), {"smem": smem([256], "int32"), "bar": BAR}),
    "load_shape": sc(load(), {"smem": smem([128], "float32"), "bar": BAR}),
    "load_rank": sc(load(), {"smem": smem([2, 128], "float32"), "bar": BAR}),
    "barrier_array_unindexed": sc(
        [
            at("b0", "bar", 0),
            {"op": "copy_gmem_to_smem", "src": "x_ref", "dst": "smem", "barrier": "b0"},
            {"op": "barrier_wait", "barrier": "bar"},
        ],
        {"smem": SM, "bar": {"kind": "barrier", "num_barriers": 2}},
    ),  # fmt: skip
    "barrier_array_index": sc(
        [at("b1", "bar", "dev % 2"), *load(bar="b1")],
        {"smem": SM, "bar": {"kind": "barrier", "num_barriers": 2}},
    ),  # fmt: skip
    "barrier_reshape": sc(
        [
            view("b2", "bar", {"op": "reshape", "shape": [2, 2]}, {"op": "at", "index": [0, 1]}),
            *load(bar="b2"),
        ],
        {"smem": SM, "bar": {"kind": "barrier", "num_barriers": 4}},
    ),  # fmt: skip
    "wait_on_semaphore": sc([{"op": "barrier_wait", "barrier": "s"}], {"s": SEM}),
    "wait_on_gmem": sc([{"op": "barrier_wait", "barrier": "x_ref"}]),
    "wait_on_smem_array": sc(
        [{"op": "barrier_wait", "barrier": "f"}, COPY], {"f": smem([], "float32")}
    ),  # fmt: skip
    "arrive_on_smem_array": sc(
        [{"op": "barrier_arrive", "barrier": "f"}, COPY], {"f": smem([], "float32")}
    ),  # fmt: skip
    "arrive_wait": sc(
        [
            {"op": "barrier_arrive", "barrier": "bar"},
            {"op": "barrier_wait", "barrier": "bar"},
            COPY,
        ],
        {"bar": BAR},
    ),  # fmt: skip
    "cluster_barrier": sc(
        [{"op": "barrier_arrive", "barrier": "cb"}, {"op": "barrier_wait", "barrier": "cb"}, COPY],
        {"cb": {"kind": "cluster_barrier", "collective_axes": "c"}},
        mesh=CLUSTER,
    ),  # fmt: skip
    "cluster_barrier_no_cluster": sc(
        [{"op": "barrier_arrive", "barrier": "cb"}],
        {"cb": {"kind": "cluster_barrier", "collective_axes": "c"}},
    ),  # fmt: skip
    "cluster_barrier_unused_axis": sc(
        [COPY], {"cb": {"kind": "cluster_barrier", "collective_axes": "zz"}}, mesh=CLUSTER
    ),  # fmt: skip
    "load_from_peer": sc(
        [view("rx", "x_ref", {"op": "remote_ref", "device": RING}), *load(src="rx")],
        {"smem": SM, "bar": BAR},
    ),  # fmt: skip
    "load_through_multicast": sc(
        [view("rx", "x_ref", {"op": "multicast_ref", "axes": "dev"}), *load(src="rx")],
        {"smem": SM, "bar": BAR},
    ),  # fmt: skip
    "load_from_peer_no_mesh": sc(
        [view("rx", "x_ref", {"op": "remote_ref", "device": 0}), *load(src="rx")],
        {"smem": SM, "bar": BAR},
        no_mesh=True,
    ),  # fmt: skip
    "load_narrow": sc(
        load(),
        {"smem": smem([3], "int8"), "bar": BAR},
        {"x": {"shape": [3], "dtype": "int8", "init": "iota"}},
    ),  # fmt: skip
    "load_dynamic_slice": sc(
        [at("xs", "x_ref", {"ds": ["dev * 64", 128]}), *load(src="xs")],
        {"smem": smem([128], "float32"), "bar": BAR},
    ),  # fmt: skip
    "load_reshaped": sc(
        [view("t", "x_ref", {"op": "reshape", "shape": [2, 128]}), *load(src="t")],
        {"smem": smem([2, 128], "float32"), "bar": BAR},
    ),  # fmt: skip
    "load_into_cluster_peer": sc(
        [view("p", "smem", {"op": "cluster_ref", "block": {"c": 0}}), *load(dst="p")],
        {"smem": SM, "bar": BAR},
        mesh=CLUSTER,
    ),  # fmt: skip
    # TMA stores
    "store_from_gmem": sc(store(src="x_ref")),
    "store_into_smem": sc(store(dst="s2"), {"smem": SM, "s2": SM}),
    "store_dtype": sc(store(), {"smem": smem([256], "int32")}),
    "store_shape": sc(store(), {"smem": smem([128], "float32")}),
    "store_to_peer": sc(
        [
            {"op": "copy", "src": "x_ref", "dst": "smem"},
            view("p", "out", {"op": "remote_ref", "device": RING}),
            *store(dst="p"),
        ],
        {"smem": SM},
    ),  # fmt: skip
    "store_multicast": sc(
        [
            {"op": "copy", "src": "x_ref", "dst": "smem"},
            view("p", "out", {"op": "multicast_ref", "axes": "dev"}),
            *store(dst="p"),
        ],
        {"smem": SM},
    ),  # fmt: skip
    "store_multicast_subset": sc(
        [
            {"op": "copy", "src": "x_ref", "dst": "smem"},
            view("p", "out", {"op": "multicast_ref", "axes": "x"}),
            *store(dst="p"),
        ],
        {"smem": SM},
        device_mesh=M2,
    ),  # fmt: skip
    "store_from_cluster_peer": sc(
        [
            {"op": "copy", "src": "x_ref", "dst": "smem"},
            view("p", "smem", {"op": "cluster_ref", "block": {"c": 0}}),
            *store(src="p"),
        ],
        {"smem": SM},
        mesh=CLUSTER,
    ),  # fmt: skip
    "store_in_loop": sc(
        [
            {"op": "copy", "src": "x_ref", "dst": "smem"},
            loop(
                [
                    view("p", "out", {"op": "remote_ref", "device": "(dev + i + 1) % 4"}),
                    *store(dst="p"),
                ]
            ),
        ],
        {"smem": SM},
    ),  # fmt: skip
    # loops and conditions
    "when_device": sc([COPY, when("dev == 0", [COPY])]),
    "when_int": sc([COPY, when("dev", [COPY])]),
    "when_constant_int": sc([COPY, when("0", [COPY])]),
    "when_static_false": sc([COPY, when("0 == 1", [BAD])]),
    "when_static_true": sc([COPY, when("1 == 1", [BAD])]),
    "when_traced": sc([COPY, when("dev == 1", [BAD])]),
    "when_thread": sc([when("wg == 0", [COPY])], mesh=THREADS),
    "when_program_id": sc([when("program_id(0) == 0", [COPY])]),
    "when_and_not": sc([when("dev == 0 and not b", [COPY])]),
    "when_in_python_loop": sc([loop([when("i == 5", [BAD]), COPY], via="python")]),
    "loop_fori": sc([loop([COPY])]),
    "loop_pl": sc([loop([COPY], via="pl.loop")]),
    "loop_python": sc([loop([COPY], via="python")]),
    "loop_traced_stop": sc([loop([COPY], stop="dev + 1")]),
    "loop_pl_traced_step": sc([loop([COPY], stop="dev + 5", via="pl.loop", step=2)]),
    "loop_python_traced": sc([loop([COPY], stop="dev + 1", via="python")]),
    "loop_python_traced_start": sc([loop([COPY], start="dev", stop=4, via="python")]),
    "loop_python_static_size": sc([loop([COPY], stop="axis_size(dev)", via="python", step=2)]),
    "loop_empty_fori": sc([loop([BAD], start=3, stop=0)]),
    "loop_empty_python": sc([loop([BAD], start=3, stop=0, via="python")]),
    "loop_index_view": sc(
        [
            loop(
                [
                    at("v", "out", {"ds": ["i * 128", 128]}),
                    at("w", "x_ref", {"ds": ["i * 128", 128]}),
                    {"op": "copy", "src": "w", "dst": "v"},
                ],
                stop=2,
            )
        ]
    ),  # fmt: skip
    "nested_loops": sc([loop([loop([COPY], var="j", stop="i")])]),
    "loop_var_named_like_axis": sc(
        [
            loop(
                [
                    at("v", "out", {"ds": ["dev * 128", 128]}),
                    {"op": "copy", "src": "v", "dst": "v"},
                ],
                var="dev",
                stop=2,
            )
        ]
    ),  # fmt: skip
    "loop_unbound": sc([loop([COPY], stop="q")]),
    # a traced condition as JAX writes it: & and | of comparisons
    "when_bitwise_and_or": sc(
        [
            when("(dev == 0) | (dev == 2)", [COPY]),
            when("(dev != 0) & (dev != 2)", [COPY]),
        ]
    ),
    "when_bitwise_and_python": sc([loop([when("(i == 1) & (i < 3)", [BAD]), COPY], via="python")]),
    # semaphores and barriers hold no values: fill, add and copy refuse their dtype
    "fill_semaphore": sc([{"op": "fill", "dst": "s", "value": 0}, COPY], {"s": SEM}),
    "fill_semaphore_slot": sc(
        [at("s1", "s", 1), {"op": "fill", "dst": "s1", "value": 0}, COPY], {"s": SEMS}
    ),
    "fill_barrier": sc([{"op": "fill", "dst": "b", "value": 0}, COPY], {"b": BAR}),
    "add_semaphores": sc([{"op": "add", "dst": "s", "lhs": "s", "rhs": "s"}, COPY], {"s": SEM}),
    "add_array_and_semaphore": sc(
        [{"op": "add", "dst": "out", "lhs": "x_ref", "rhs": "s"}], {"s": SEM}
    ),
    "add_into_semaphores": sc(
        [{"op": "add", "dst": "s", "lhs": "x_ref", "rhs": "x_ref"}],
        {"s": {"kind": "semaphore", "shape": [256]}},
    ),
    "copy_semaphores_out": sc(
        [{"op": "copy", "src": "s", "dst": "out"}], {"s": {"kind": "semaphore", "shape": [256]}}
    ),
    "copy_into_semaphores": sc(
        [{"op": "copy", "src": "x_ref", "dst": "s"}], {"s": {"kind": "semaphore", "shape": [256]}}
    ),
    # without x64 an input is canonicalised (float64 -> float32), an out_type ref is not
    "float64_input_to_float32": sc(
        [COPY], {}, {"x": {"shape": [256], "dtype": "float64", "init": "iota"}}
    ),
    "float64_output": sc([COPY], {}, None, {"out": {"shape": [256], "dtype": "float64"}}),
    "fill_float64_output": sc(
        [{"op": "fill", "dst": "out", "value": 1.0}],
        {},
        None,
        {"out": {"shape": [256], "dtype": "float64"}},
    ),
    "int64_through": sc(
        [COPY],
        {},
        {"x": {"shape": [256], "dtype": "int64", "init": "iota"}},
        {"out": {"shape": [256], "dtype": "int64"}},
    ),
    "int64_into_int16": sc(
        [COPY],
        {},
        {"x": {"shape": [256], "dtype": "int64", "init": "iota"}},
        {"out": {"shape": [256], "dtype": "int16"}},
    ),
    # an unrolled loop's index is a Python int: JAX checks each iteration's slice at trace
    "loop_python_ds_out_of_bounds": sc(
        [
            loop(
                [
                    at("v", "x_ref", {"ds": ["i * 128", 128]}),
                    at("o", "out", {"ds": ["i * 128 % 256", 128]}),
                    {"op": "copy", "src": "v", "dst": "o"},
                ],
                via="python",
            )
        ]
    ),
    "loop_python_ds_in_bounds": sc(
        [
            loop(
                [
                    at("v", "x_ref", {"ds": ["i * 128", 128]}),
                    at("o", "out", {"ds": ["i * 128", 128]}),
                    {"op": "copy", "src": "v", "dst": "o"},
                ],
                via="python",
                stop=2,
            )
        ]
    ),
    "loop_fori_ds_not_checked_at_trace": sc(
        [
            loop(
                [
                    at("v", "x_ref", {"ds": ["i * 128", 128]}),
                    at("o", "out", {"ds": ["i * 128 % 256", 128]}),
                    {"op": "copy", "src": "v", "dst": "o"},
                ]
            )
        ]
    ),
    # dot
    "dot": dot(),
    "dot_bf16": dot(dtype="bfloat16"),
    "dot_f32": dot(dtype="float32"),
    "dot_fp8": dot(dtype="float8_e4m3fn"),
    "dot_int8": dot(dtype="int8"),
    "dot_mixed": dot(rdtype="bfloat16"),
    "dot_m32": dot(m=32),
    "dot_m128": dot(m=128),
    "dot_n8": dot(n=8),
    "dot_n256": dot(n=256),
    "dot_n512": dot(n=512),
    "dot_k32": dot(k=32),
    "dot_into_f16": dot(out_dtype="float16"),
    "dot_lhs_in_gmem": dot(lhs_gmem=True),
    "dot_k_mismatch": sc(
        [{"op": "dot", "dst": "out", "lhs": "a", "rhs": "b"}],
        {"a": smem([64, 32]), "b": smem([64, 128])},
        outputs={"out": {"shape": [64, 128], "dtype": "float32"}},
    ),  # fmt: skip
    "dot_vector_rhs": sc(
        [{"op": "dot", "dst": "out", "lhs": "a", "rhs": "b"}],
        {"a": smem([64, 64]), "b": smem([64])},
        outputs={"out": {"shape": [64, 128], "dtype": "float32"}},
    ),  # fmt: skip
    "dot_tiled_swizzled": sc(
        [{"op": "dot", "dst": "out", "lhs": "a", "rhs": "b"}],
        {
            "a": {
                **smem([64, 64]),
                "transforms": [{"op": "tiling", "tile": [8, 64]}, {"op": "swizzle", "bytes": 128}],
            },
            "b": {
                **smem([64, 128]),
                "transforms": [{"op": "tiling", "tile": [8, 64]}, {"op": "swizzle", "bytes": 128}],
            },
        },
        outputs={"out": {"shape": [64, 128], "dtype": "float32"}},
    ),  # fmt: skip
    # multimem_load_reduce
    "reduce": reduce(),
    "reduce_bare_axis": reduce(axes="dev"),
    "reduce_wrong_axis": reduce(axes=("nope",)),
    "reduce_no_mesh": reduce(no_mesh=True),
    "reduce_f32_max": reduce(red="max"),
    "reduce_f32_and": reduce(red="and"),
    "reduce_i32_xor": reduce(red="xor", dtype="int32"),
    "reduce_u32_min": reduce(red="min", dtype="uint32"),
    "reduce_f16": reduce(dtype="float16"),
    "reduce_i16": reduce(dtype="int16"),
    "reduce_64": reduce(shape=(64,)),
    "reduce_2d": reduce(shape=(8, 128)),
    "reduce_from_peer": reduce(
        src="p", extra=[view("p", "x_ref", {"op": "remote_ref", "device": 0})]
    ),  # fmt: skip
    "reduce_2d_mesh": reduce(axes=("x", "y"), device_mesh=M2),
    "reduce_2d_mesh_subset": reduce(axes=("x",), device_mesh=M2),
    # atomic_add
    "atomic": sc([{"op": "atomic_add", "dst": "out", "src": "x_ref"}]),
    "atomic_to_peer": sc(
        [
            view("p", "out", {"op": "remote_ref", "device": 0}),
            {"op": "atomic_add", "dst": "p", "src": "x_ref"},
        ]
    ),  # fmt: skip
    "atomic_dtype": sc(
        [{"op": "atomic_add", "dst": "out", "src": "x_ref"}],
        outputs={"out": {"shape": [256], "dtype": "int32"}},
    ),  # fmt: skip
    "atomic_shape": sc(
        [{"op": "atomic_add", "dst": "out", "src": "x_ref"}],
        outputs={"out": {"shape": [128], "dtype": "float32"}},
    ),  # fmt: skip
    "atomic_multicast": sc(
        [
            view("p", "out", {"op": "multicast_ref", "axes": "dev"}),
            {"op": "atomic_add", "dst": "p", "src": "x_ref"},
        ]
    ),  # fmt: skip
    "atomic_small": sc(
        [{"op": "atomic_add", "dst": "out", "src": "x_ref"}],
        {},
        {"x": {"shape": [64], "dtype": "float32", "init": "iota"}},
        {"out": {"shape": [64], "dtype": "float32"}},
    ),  # fmt: skip
    # multimem_store through a peer
    "multimem_store_to_peer": sc(
        [
            view("p", "out", {"op": "remote_ref", "device": RING}),
            {"op": "multimem_store", "src": "x_ref", "dst": "p", "axes": ["dev"]},
        ]
    ),  # fmt: skip
}
CASES["semaphore_through_pl_kernel"]["call"]["entry"] = "pl.kernel"

# ---------------------------------------------------------------- JAX's own kernels
# (tests/../research corpus: the patterns of JAX's distributed Mosaic GPU tests and ops,
# written in the scenario language; all of them trace and lower)
OTHER = "1 - dev"
X8 = {"x": {"shape": [8, 128], "dtype": "float32", "init": "iota"}}
O8 = {"out": {"shape": [8, 128], "dtype": "float32"}}
KERNELS: dict[str, dict[str, Any]] = {
    "ring_shift": sc(
        [
            signal("ready", device="(dev + 3) % 4"),
            wait("ready"),
            view("p", "out", {"op": "remote_ref", "device": RING}),
            {"op": "copy", "src": "x_ref", "dst": "p"},
            signal("recv", device=RING),
            wait("recv"),
        ],
        {"ready": SEM, "recv": SEM},
    ),  # fmt: skip
    "exchange_two_devices": sc(
        [
            signal("ready", device=OTHER),
            wait("ready"),
            view("p", "out", {"op": "remote_ref", "device": OTHER}),
            {"op": "copy", "src": "x_ref", "dst": "p"},
            signal("recv", device=OTHER),
            wait("recv"),
        ],
        {"ready": SEM, "recv": SEM},
        X8,
        O8,
        device_mesh={"dev": 2},
    ),  # fmt: skip
    "exchange_by_tma_load": sc(
        [
            signal("ready", device=OTHER),
            wait("ready"),
            view("rx", "x_ref", {"op": "remote_ref", "device": OTHER}),
            *load("rx", "smem"),
            *store("smem", "out"),
            signal("done", device=OTHER),
            wait("done"),
        ],
        {"smem": smem([8, 128], "float32"), "bar": BAR, "ready": SEM, "done": SEM},
        X8,
        O8,
        device_mesh={"dev": 2},
    ),  # fmt: skip
    "device_barrier": sc(
        [
            loop([signal(device="(dev + k) % 4")], start=1, stop=4, via="python", var="k"),
            wait(value=3),
            COPY,
        ],
        {"s": SEM},
    ),  # fmt: skip
    "per_block_semaphores": sc(
        [
            signal("ready", device=OTHER),
            wait("ready"),
            view(
                "p",
                "out",
                {"op": "remote_ref", "device": OTHER},
                {"op": "at", "index": [{"block": "b", "size": 128}]},
            ),
            at("mine", "x_ref", {"block": "b", "size": 128}),
            {"op": "copy", "src": "mine", "dst": "p"},
            signal("recv", device=OTHER),
            wait("recv"),
        ],
        {"ready": SEM, "recv": SEM},
        mesh={"grid": {"b": 2}, "cluster": {}, "threads": None},
        device_mesh={"dev": 2},
    ),  # fmt: skip
    "remote_atomic_add": sc(
        [
            {"op": "fill", "dst": "out", "value": 0.0},
            when("dev == 0", [loop([signal("ready", device="d")], stop=4, via="python", var="d")]),
            wait("ready"),
            view("p", "out", {"op": "remote_ref", "device": 0}),
            {"op": "atomic_add", "dst": "p", "src": "x_ref"},
            signal("done", device=0),
            when("dev == 0", [wait("done", value=4)]),
        ],
        {"ready": SEM, "done": SEM},
    ),  # fmt: skip
    "multimem_all_gather": sc(
        [
            at("mine", "out", {"ds": ["dev * 256", 256]}),
            {"op": "multimem_store", "src": "x_ref", "dst": "mine", "axes": ["dev"]},
            {"op": "semaphore_signal_multicast", "sem": "s", "axes": "dev"},
            wait(value=4),  # (as JAX's test waits for the multicast signal: it decrements)
        ],
        {"s": SEM},
        outputs={"out": {"shape": [1024], "dtype": "float32"}},
    ),  # fmt: skip
    "multimem_all_reduce": reduce(),
    "signal_multicast_barrier": sc(
        [
            at("s0", "s", 0),
            {"op": "semaphore_signal_multicast", "sem": "s0", "axes": "dev"},
            wait("s0", value=4),
            COPY,
        ],
        {"s": {"kind": "semaphore", "shape": [2]}},
    ),  # fmt: skip
    "wait_value_no_decrement": sc(
        [
            signal(inc=2, device=OTHER),
            wait(decrement=False),
            wait(value=2, decrement=False),
            wait(value=2),
            COPY,
        ],
        {"s": SEM},
        X8,
        O8,
        device_mesh={"dev": 2},
    ),  # fmt: skip
    "remote_dma_in_loop": sc(
        [
            view("nb", "out", {"op": "remote_ref", "device": OTHER}),
            loop(
                [
                    at("yi", "out", 0, "i"),
                    at("xi", "x_ref", 0, "i"),
                    {"op": "copy", "src": "xi", "dst": "yi"},
                    signal("ready", device=OTHER),
                    wait("ready"),
                    {"let": "ni", "ref": "nb", "transforms": [{"op": "at", "index": [0, "i"]}]},
                    {"op": "copy", "src": "xi", "dst": "ni"},
                    signal("recv", device=OTHER),
                    wait("recv"),
                ],
                stop=128,
            ),
        ],
        {"ready": SEM, "recv": SEM},
        {"x": {"shape": [1, 128], "dtype": "float32", "init": "iota"}},  # the corpus's [1, 128]:
        {"out": {"shape": [1, 128], "dtype": "float32"}},  # each of its 128 steps writes one
        device_mesh={"dev": 2},
    ),  # fmt: skip
    "cluster_exchange": sc(
        [
            at("mine", "x_ref", {"block": "c", "size": 128}),
            *load("mine", "smem"),
            at("b0", "cb", 0),
            {"op": "barrier_arrive", "barrier": "b0"},
            {"op": "barrier_wait", "barrier": "b0"},
            view("partner", "smem", {"op": "cluster_ref", "block": {"c": "1 - c"}}),
            at("dst", "out", {"block": "c", "size": 128}),
            {"op": "copy", "src": "partner", "dst": "dst"},
            at("b1", "cb", 1),
            {"op": "barrier_arrive", "barrier": "b1"},
            {"op": "barrier_wait", "barrier": "b1"},
        ],
        {
            "smem": smem([128], "float32"),
            "bar": BAR,
            "cb": {"kind": "cluster_barrier", "collective_axes": ["c"], "num_barriers": 2},
        },
        mesh=CLUSTER,
        no_mesh=True,
    ),  # fmt: skip
    "warpgroups": sc(
        [
            when(
                "wg == 0",
                [
                    at("o0", "out", [0, 128]),
                    at("x0", "x_ref", [0, 128]),
                    {"op": "copy", "src": "x0", "dst": "o0"},
                ],
            ),
            when(
                "wg == 1",
                [
                    at("o1", "out", [128, 256]),
                    at("x1", "x_ref", [128, 256]),
                    {"op": "copy", "src": "x1", "dst": "o1"},
                ],
            ),
        ],
        mesh=THREADS,
        no_mesh=True,
    ),  # fmt: skip
    "dot_double_buffered": sc(
        [
            at("a1", "a_s", 1),
            at("b1", "bars", 1),
            *load("a_ref", "a1", "b1"),
            at("b0", "bars", 0),
            *load("b_ref", "b_s", "b0"),
            {"op": "dot", "dst": "out", "lhs": "a1", "rhs": "b_s"},
        ],
        {
            "a_s": smem([2, 64, 64]),
            "b_s": smem([64, 128]),
            "bars": {"kind": "barrier", "num_barriers": 2},
        },
        {
            "a": {"shape": [64, 64], "dtype": "float16", "init": "iota"},
            "b": {"shape": [64, 128], "dtype": "float16", "init": "iota"},
        },
        {"out": {"shape": [64, 128], "dtype": "float32"}},
        [{"buffer": "a", "param": "a_ref"}, {"buffer": "b", "param": "b_ref"}],
    ),  # fmt: skip
}
