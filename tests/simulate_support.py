"""Test support for the simulator: run many scenarios through JAX in one warm worker,
and hypothesis strategies for single-device scenarios JAX's CPU interpreters run.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import strategies as st
from mpmd_lab.scenario import Scenario


def run_in_jax(scenarios: list[Scenario], timeout: float = 120) -> list[dict[str, Any] | str]:
    """Each scenario's outputs from JAX's CPU interpreter, or its error as text.

    ``mpmd_lab.probe.probe_many``: one warm worker process runs the whole batch.
    """
    from mpmd_lab import probe

    results = probe.probe_many(scenarios, ("interpret",), timeout=timeout)
    return [
        dict(r.outputs or {}) if r.ok else f"{r.code} {r.error_type}: {r.message}" for r in results
    ]


def same_bits(a: np.ndarray, b: np.ndarray, flushed: bool = False) -> bool:
    """Equal shape, dtype and values, NaN where NaN; other floats compared bit for bit.

    ``flushed``: ``b`` comes from XLA's CPU backend, which runs with subnormal floats
    flushed to zero (float32, and bfloat16 through float32): a subnormal of ``a`` (the
    simulator keeps them, as a GPU's arithmetic does) agrees with a zero of ``b``."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "biu":
        return bool(np.array_equal(a, b))
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    nan_a, nan_b = np.isnan(fa), np.isnan(fb)
    if not np.array_equal(nan_a, nan_b):
        return False
    width = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    ia = np.ascontiguousarray(a).view(width)
    ib = np.ascontiguousarray(b).view(width)
    differ = (ia != ib) & ~nan_a
    if flushed and a.dtype.name in ("float32", "bfloat16"):
        import ml_dtypes

        tiny = float(ml_dtypes.finfo(a.dtype).smallest_normal)
        subnormal = (fa != 0) & (np.abs(fa) < tiny)
        differ &= ~(subnormal & (fb == 0))
    return not differ.any()


# ---------------------------------------------------------------- strategies

DTYPES = ["float32", "int32", "float16", "bfloat16", "int8", "uint8", "bool"]
SAME_WIDTH = {
    "float32": ["int32", "uint32"],
    "int32": ["float32"],
    "float16": ["bfloat16", "int16"],
    "bfloat16": ["float16", "uint16"],
    "int8": ["uint8"],
    "uint8": ["int8"],
}
WIDTH = {
    "float32": 4,
    "int32": 4,
    "uint32": 4,
    "float16": 2,
    "bfloat16": 2,
    "int16": 2,
    "uint16": 2,
    "int8": 1,
    "uint8": 1,
}


@st.composite
def _view(draw, target: list[int], mode: str, axes: dict[str, int], dtype: str, dst: bool):
    """(base shape, base dtype, transforms): a view of that base with shape ``target``.

    JAX's GPU interpreter fails writing through a negative int index (an AssertionError
    in its bounds check; the HLO interpreter wraps it): destinations get none there.
    """
    rank = len(target)
    shape_after_at = list(target)
    transforms: list[dict[str, Any]] = []
    base_dtype = dtype
    if mode == "gpu" and rank >= 2 and draw(st.booleans()):
        perm = draw(st.permutations(range(rank)))
        # view = at_view.transpose(perm): at_view's dim perm[i] is the view's dim i
        shape_after_at = [0] * rank
        for i, p in enumerate(perm):
            shape_after_at[p] = target[i]
        transforms.append({"op": "transpose", "perm": list(perm)})
    if mode == "hlo":
        choice = draw(st.sampled_from(["none", "reshape", "bitcast"]))
        if choice == "reshape" and math.prod(target) > 1:
            n = math.prod(target)
            divisors = [d for d in range(1, n + 1) if n % d == 0]
            first = draw(st.sampled_from(divisors))
            shape_after_at = [first, n // first] if draw(st.booleans()) else [n]
            transforms.append({"op": "reshape", "shape": list(target)})
        elif choice == "bitcast" and dtype in SAME_WIDTH and rank >= 2:
            # (JAX cannot bitcast a 1-D ref at all: BITCAST_1D_SAME_WIDTH_BUG)
            widths = SAME_WIDTH[dtype] + [
                d for d, w in WIDTH.items() if w != WIDTH[dtype] and d in DTYPES[:6]
            ]
            base_dtype = draw(st.sampled_from(widths))
            xs, ys = WIDTH[base_dtype], WIDTH[dtype]
            if xs != ys:
                m = target[-2]
                if xs < ys:
                    shape_after_at[-2] = m * (ys // xs)
                elif m * ys % xs == 0:
                    shape_after_at[-2] = m * ys // xs
                else:
                    base_dtype = dtype
            if base_dtype != dtype:
                transforms.append({"op": "bitcast", "dtype": dtype})
    # the `at` step: leading int-indexed dims, then one entry per remaining dim
    index: list[Any] = []
    base: list[int] = []
    for _ in range(draw(st.integers(0, 1 if len(shape_after_at) < 3 else 0))):
        n = draw(st.integers(1, 3))
        base.append(n)
        index.append(draw(st.integers(0 if dst and mode != "hlo" else -n, n - 1)))
    for dim in shape_after_at:
        kind = draw(st.sampled_from(["whole", "slice", "ds", "block", "pid"]))
        extra = draw(st.integers(0, 2))
        if kind == "slice":
            a = draw(st.integers(0, 2))
            base.append(a + dim + extra)
            # a stop past the end clamps: only when nothing lies past the slice
            index.append([a, a + dim + (draw(st.integers(0, 3)) if extra == 0 else 0)])
        elif kind == "ds":
            a = draw(st.integers(0, 2))
            base.append(a + dim + extra)
            index.append({"ds": [a, dim]})
        elif kind == "block" and mode == "gpu" and axes:
            axis = draw(st.sampled_from(sorted(axes)))
            stride = dim + draw(st.integers(0, 1))
            base.append((axes[axis] - 1) * stride + dim + extra)
            index.append({"block": axis, "size": dim, "stride": stride})
        elif kind == "pid" and axes:
            # GPU interpreter: program_id is 0; HLO interpreter: the grid coordinate
            nblocks = list(axes.values())[0]
            base.append(nblocks * dim + extra)
            index.append({"pid": 0, "size": dim})
        else:
            base.append(dim)
            index.append(None)
    while index and index[-1] is None and draw(st.booleans()):
        index.pop()
    at = [{"op": "at", "index": index}] if index else []
    return base, base_dtype, at + transforms


def _fill_value(draw, dtype: str):
    if dtype == "bool":
        return draw(st.booleans())
    if dtype.startswith("int") or dtype.startswith("uint"):
        return draw(st.integers(0 if dtype.startswith("u") else -3, 5))
    return draw(st.sampled_from([0.5, -1.25, 3.0, 2, 0.1]))


@st.composite
def interpretable_scenarios(draw) -> dict[str, Any]:
    """A scenario JAX's CPU interpreter runs (one device, or two that never touch each
    other's memory): copies, adds and fills
    through ``at`` views (ints, slices, pl.ds, block and pid entries), transposes
    (GPU interpreter) or reshapes and bitcasts (HLO interpreter), over 1-4 blocks."""
    mode = draw(st.sampled_from(["gpu", "gpu", "gpu", "hlo"]))
    grid = draw(st.sampled_from([{"b": 1}, {"b": 2}, {"b": 3}, {"b": 4}, {"b": 2, "g": 2}]))
    cluster: dict[str, int] = {}
    threads = None
    if mode == "gpu" and math.prod(grid.values()) <= 2:
        if draw(st.booleans()):
            cluster = {"c": 2}
        elif draw(st.booleans()):
            threads = {"name": "wg", "count": 2}
    # JAX's GPU interpreter runs kernels under shard_map that touch only their own
    # device: 2 devices (one warm worker), device axes usable in block-indexed views
    devices = draw(st.sampled_from([None, None, {"dev": 2}, {"x": 1, "y": 2}]))
    devices = devices if mode == "gpu" else None
    axes = dict(grid) if mode == "hlo" else {**grid, **cluster, **(devices or {})}
    if threads:
        axes["wg"] = 2
    buffers: dict[str, Any] = {}
    outputs: dict[str, Any] = {}
    args: list[dict[str, Any]] = []
    body: list[dict[str, Any]] = []
    scratch: dict[str, Any] = {}

    def new_input(shape: list[int], dtype: str, transforms: list[Any]) -> str:
        name = f"x{len(buffers)}"
        init = draw(st.sampled_from(["iota", "random", "ones", "zeros"]))
        buffers[name] = {"shape": shape, "dtype": dtype, "init": init, "seed": len(buffers)}
        args.append({"buffer": name, "param": f"{name}_ref"})
        return f"{name}_ref"

    for k in range(draw(st.integers(1, 3))):
        dtype = draw(st.sampled_from(DTYPES))
        target = draw(st.lists(st.integers(1, 5), min_size=1, max_size=2))
        if k > 0 and draw(st.booleans()):
            out = f"out{len(outputs) - 1}"  # write the previous output again
            oshape, dtype = outputs[out]["shape"], outputs[out]["dtype"]
            target = list(oshape)
            dst_name = out
            dt = []
        else:
            oshape, _, dt = draw(
                _view(target, "gpu" if mode == "gpu" else "none", axes, dtype, True)
            )
            out = f"out{len(outputs)}"
            outputs[out] = {"shape": oshape, "dtype": dtype}
            dst_name = f"d{k}"
            body.append({"let": dst_name, "ref": out, "transforms": dt})
        op = draw(st.sampled_from(["copy", "copy", "add", "fill"]))
        if op == "fill":
            body.append({"op": "fill", "dst": dst_name, "value": _fill_value(draw, dtype)})
            continue
        srcs = []
        for j in range(1 if op == "copy" else 2):
            bshape, bdtype, tr = draw(_view(target, mode, axes, dtype, False))
            param = new_input(bshape, bdtype, [])
            name = f"s{k}_{j}"
            body.append({"let": name, "ref": param, "transforms": tr})
            srcs.append(name)
        # JAX's GPU interpreter: "Transposed TMA destination not supported."
        transposed = any(t["op"] == "transpose" for t in dt)
        stagings = ["none", "none", "smem"] + ([] if transposed else ["tma"])
        staging = draw(st.sampled_from(stagings)) if mode == "gpu" else "none"
        if op == "copy" and staging != "none":
            # through per-block SMEM scratch; part of it may stay unwritten (NaN fill)
            sc = f"sc{len(scratch)}"
            scratch[sc] = {"shape": list(target), "dtype": dtype, "memory_space": "SMEM"}
            part = draw(st.integers(0, target[0] - 1)) if target[0] > 1 else 0
            body.append(
                {
                    "let": f"{sc}_part",
                    "ref": sc,
                    "transforms": [{"op": "at", "index": [[part, None]]}],
                }
            )
            body.append(
                {
                    "let": f"{srcs[0]}_part",
                    "ref": srcs[0],
                    "transforms": [{"op": "at", "index": [[part, None]]}],
                }
            )
            body.append({"op": "copy", "src": f"{srcs[0]}_part", "dst": f"{sc}_part"})
            final = "tma_store" if staging == "tma" else "copy"
            body.append({"op": final, "src": sc, "dst": dst_name})
        elif op == "copy":
            body.append({"op": "copy", "src": srcs[0], "dst": dst_name})
        else:
            body.append({"op": "add", "dst": dst_name, "lhs": srcs[0], "rhs": srcs[1]})
    mesh: dict[str, Any] = {"grid": grid, "cluster": cluster, "threads": threads}
    return {
        "schema": "mpmd-lab/scenario@1",
        "name": "generated",
        "device_mesh": devices,
        "buffers": buffers,
        "call": {
            "entry": "plgpu.kernel" if scratch else "pl.kernel",
            "args": args,
            "outputs": outputs,
            "scratch": scratch,
            "programs": [{"mesh": mesh, "body": body}],
        },
        "run": {"interpret": mode, "detect_races": False},
    }
