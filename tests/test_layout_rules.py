"""``mpmd_lab.layout_rules`` held directly against real JAX.

Each rule function predicts, for a family of scenarios, the exception type, message,
stage and code JAX raises (or that it raises nothing); one warm JAX worker per device
count runs every scenario here once (``mpmd_lab.probe``) and each prediction is compared
with what JAX really did.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any

import pytest
from mpmd_lab import layout_rules as L
from mpmd_lab.catalogue import classify, unwrap

sys.path.insert(0, str(Path(__file__).parent / "agreement"))
from cases import S, T, at, ds, kernel, out, smem, tma, view  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from agreement_stacks import as_ops  # noqa: E402

pytestmark = pytest.mark.slow  # real JAX in child processes, or many runs: `make test` only

LOWER = ("build", "trace", "gpu-lower")
MPMD_SCRATCH = L.JaxError(
    "MPMD_GPU_SCRATCH",
    "NotImplementedError",
    "Scratch operands are not supported by the Mosaic GPU mpmd_map lowering",
    "gpu-lower",
)
#: the first words of every error ``view_lowering_error`` claims to predict
VIEW_RULE_MESSAGES = (
    "Unsupported index type:",
    "Expected slice start",
    "Non-slice indices are not supported",
    "Swizzled dims cannot be sliced",
    "Unfolding dimensions",
    "Folding tiled dimensions",
    "Cannot commute `UntilingTransform`",
    "Commuting a `UntilingTransform`",
    "Reshape shape",
    "Transforms are not yet implemented for warpgroup semantics",
    "<class 'jax._src.state.types.BitcastTransform'>",
    "(",
)


class Case:
    def __init__(self, name, scenario, predicted, *, stages=LOWER, detect=None, covers=False):
        self.name = name
        self.scenario = scenario
        self.predicted = predicted
        self.stages = stages
        self.detect = detect
        #: the rule speaks only where it predicts an error (later phases are not its own)
        self.covers = covers


def _scratch_cases() -> list[Case]:
    out_ = []
    dtypes = {"int32": 32, "float16": 16, "int8": 8}
    shapes = [[128, 128], [128, 32], [64, 64], [256], []]
    stacks = [
        [T(8, 32), S(128)],
        [T(8, 8), S(128)],
        [S(128), T(8, 32)],
        [T(8, 16), S(64)],
        [T(16, 64), S(128)],
        [S(32)],
        [S(64)],
        [T(64, 32)],
        [T(3, 32)],
        [S(16)],
        [T(8, 16, 64)],
    ]
    for i, (dt, shape, stack) in enumerate(itertools.product(dtypes, shapes, stacks)):
        if i % 2 and shape != [128, 128]:
            continue  # a sample of the product: every stack, every dtype, every shape
        for space, entry in (
            ("SMEM", "plgpu.kernel"),
            ("SMEM", "pl.kernel"),
            ("GMEM", "plgpu.kernel"),
        ):
            if space == "GMEM" and i % 3:
                continue
            if entry == "pl.kernel" and i % 4:
                continue
            spec = {"shape": shape, "dtype": dt, "memory_space": space, "transforms": stack}
            sc = kernel([], entry=entry, scratch={"s": spec})
            bits = dtypes[dt]
            pred = L.tiling_swizzle_error(shape, bits, space, as_ops(stack), entry=entry)
            if pred is None and entry == "pl.kernel":
                pred = MPMD_SCRATCH
            if pred is None:
                pred = L.gmem_scratch_error(entry, [(space, dt)])
            if pred is None:
                pred = L.smem_capacity_error([(shape, bits, as_ops(stack))])
            out_.append(Case(f"scratch-{space}-{entry}-{dt}-{shape}-{i}", sc, pred))
    # TMEM build rules
    for dt, packed, stack in [
        ("float32", None, [T(8, 32)]),
        ("float16", None, []),
        ("float16", True, []),
        ("int8", True, []),
        ("float32", None, [S(128)]),
    ]:
        spec = {"shape": [128, 128], "dtype": dt, "memory_space": "TMEM", "transforms": stack}
        if packed is not None:
            spec["packed"] = packed
        layout = as_ops(stack)
        pred = L.tiling_swizzle_error([128, 128], L.dtype_bits(dt), "TMEM", layout, packed=packed)
        out_.append(
            Case(f"scratch-TMEM-{dt}-{packed}-{len(stack)}", kernel([], scratch={"t": spec}), pred)
        )
    spec = {"shape": [128, 128], "dtype": "float32", "memory_space": "SMEM", "packed": True}
    pred = L.tiling_swizzle_error([128, 128], 32, "SMEM", [], packed=True)
    out_.append(Case("scratch-SMEM-packed", kernel([], scratch={"s": spec}), pred))
    return out_


def _view_cases() -> list[Case]:
    out_ = []
    rs = lambda *s: {"op": "reshape", "shape": list(s)}  # noqa: E731
    tr = lambda *p: {"op": "transpose", "perm": list(p)}  # noqa: E731
    bc = lambda d: {"op": "bitcast", "dtype": d}  # noqa: E731
    views = [
        [at(0)], [at(ds(4, 64))], [at(ds(8, 64))], [at(None, ds(0, 16))], [at(None, 0)],
        [at({"block": "b", "size": 60})], [at({"block": "b", "size": 64})], [at([0, 8])],
        [rs(2, 64, 128)], [rs(-1)], [rs(1, 128, 128)], [rs(128, 128, 1)], [rs(64, 256)],
        [tr(1, 0)], [tr(1, 0), at(ds(0, 64))], [tr(1, 0), rs(-1)], [bc("float32")],
        [bc("float32"), at(ds(0, 64))], [bc("float32"), tr(1, 0)], [at(0), rs(2, 64)],
        [at(None, {"block": "b", "size": 32})],
    ]  # fmt: skip
    bases = [
        ([128, 128], "int32", [T(8, 32), S(128)]),
        ([128, 128], "int32", [T(8, 32)]),
        ([128, 32], "int32", [S(128)]),
        ([64, 128], "float16", [T(8, 64), S(128)]),
        ([128, 64], "float32", [T(8), S(32)]),
        ([128, 128], "int32", []),
    ]
    for (shape, dt, stack), v in itertools.product(bases, views):
        for use in ("fill", "tma"):
            vs = _shape_after(shape, dt, v)
            if vs is None:
                continue
            body = [view("s", *v)]
            if use == "fill":
                body.append({"op": "fill", "dst": "v", "value": 1})
                outs = None
            else:
                body.append(tma("v"))
                outs = out(vs[0], vs[1])
            sc = kernel(body, scratch=smem(shape, dt, *stack), outputs=outs)
            access = "tma" if use == "tma" else "store"
            pred = L.view_lowering_error(shape, dt, as_ops(stack), as_ops(v), access)
            name = f"view-{dt}{shape}-{len(stack)}-{v}-{use}"
            out_.append(Case(name, sc, pred, covers=True))
    return out_


def _shape_after(shape, dtype, steps):
    sys.path.insert(0, str(Path(__file__).parent))
    import agreement_stacks as A

    cur, dt = shape, dtype
    for t in steps:
        cur, dt = A._view_shape(cur, dt, t)
        if cur is None:
            return None
    return cur, dt


def _tmem_cases() -> list[Case]:
    out_ = []
    views = [
        [],
        [{"op": "transpose", "perm": [1, 0]}],
        [{"op": "transpose", "perm": [0, 1]}],
        [at(ds(0, 64))],
        [at(None)],
        [at(0)],
        [{"op": "reshape", "shape": [-1]}],
        [{"op": "bitcast", "dtype": "int32"}],
    ]
    for (dt, packed), shape, v, use in itertools.product(
        [("float32", None), ("float16", True)], [[128, 128], [64, 128]], views, ["fill", "load"]
    ):
        vs = _shape_after(shape, dt, v)
        if vs is None:
            continue
        spec = {"shape": shape, "dtype": dt, "memory_space": "TMEM"}
        if packed:
            spec["packed"] = True
        body = [view("t", *v)] if v else []
        ref = "v" if v else "t"
        if use == "fill":
            body.append({"op": "fill", "dst": ref, "value": 1})
            outs = None
        else:
            body.append({"op": "copy", "src": ref, "dst": "out"})
            outs = out(vs[0], vs[1])
        sc = kernel(body, scratch={"t": spec}, outputs=outs)
        out_.append(Case(f"tmem-{dt}{shape}-{v}-{use}", sc, L.tmem_access_error(shape, as_ops(v))))
    return out_


def _transpose_view_cases() -> list[Case]:
    sys.path.insert(0, str(Path(__file__).parent / "agreement"))
    import cases as C

    out_ = []
    for kind, first in (("store", "store"), ("load", "load"), ("both", "load"), ("fill", "store")):
        out_.append(
            Case(f"transpose-view-{kind}", C._transpose_view(kind), L.transpose_view_error(first))
        )
    return out_


def _interpreter_cases() -> list[Case]:
    import cases as C

    all_ = ("build", "trace", "gpu-lower", "interpret")
    return [
        Case("multimem", C._multimem(), L.multimem_interpret_error(), stages=all_, detect=False),
        Case(
            "multimem-races", C._multimem(), L.multimem_interpret_error(), stages=all_, detect=True
        ),
        Case(
            "cluster-ref",
            C._gallery("cluster-exchange"),
            L.interpret_transform_error(L.cluster_ref_repr({"c": 1})),
            stages=all_,
            detect=True,
        ),
        Case(
            "race-on",
            C._two_block_race(True),
            L.race_report("store", True),
            stages=all_,
            detect=True,
        ),
        Case(
            "race-off",
            C._two_block_race(False),
            L.race_report("store", False),
            stages=all_,
            detect=False,
        ),
        Case(
            "race-tma-on",
            kernel(
                [{"op": "copy", "src": "x_ref", "dst": "s"}, tma("s", "out")],
                buffers={"x": {"shape": [256], "dtype": "float32", "init": "iota"}},
                args=[{"buffer": "x", "param": "x_ref"}],
                outputs=out([256], "float32"),
                scratch={"s": {"shape": [256], "dtype": "float32", "memory_space": "SMEM"}},
                mesh={"grid": {"b": 2}, "cluster": {}, "threads": None},
            ),
            L.race_report("tma", True),
            stages=all_,
            detect=True,
        ),
    ]


def _pick(cases: list[Case], n: int) -> list[Case]:
    """``n`` of ``cases``: one of each distinct prediction first, then a fixed sample."""
    import random

    seen: dict[Any, Case] = {}
    for c in cases:
        key = None if c.predicted is None else (c.predicted.code, c.predicted.message[:24])
        seen.setdefault(key, c)
    first = list(seen.values())
    rest = [c for c in cases if c not in first]
    return first + random.Random(18).sample(rest, max(0, min(len(rest), n - len(first))))


ALL_CASES = (
    _pick(_scratch_cases(), 45)
    + _pick(_view_cases(), 60)
    + _pick(_tmem_cases(), 20)
    + _transpose_view_cases()
    + _interpreter_cases()
)


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Any]:
    from mpmd_lab import probe
    from mpmd_lab.scenario import load_scenario

    got = {}
    for c in sorted(ALL_CASES, key=lambda c: "device_mesh" in c.scenario):
        r = probe.probe(load_scenario(c.scenario), c.stages, detect_races=c.detect, timeout=180)
        got[c.name] = r
    return got


def _agree(c: Case, r) -> str | None:
    """Why JAX's outcome ``r`` is not the rule's prediction (None: it is)."""
    p = c.predicted
    if r.ok:
        return None if p is None else f"JAX passes; the rule says {p}"
    t, m = unwrap(r.error_type or "", r.message or "")
    if p is None:
        if c.covers and any(m.startswith(w) for w in VIEW_RULE_MESSAGES):
            return f"the rule says nothing; JAX: {r.stage} {t}: {m[:160]}"
        return None if c.covers else f"the rule says nothing; JAX: {r.stage} {t}: {m[:160]}"
    if r.stage != p.stage or not p.matches(t, m):
        return f"rule {p}; JAX {r.stage} {t}: {m[:200]!r}"
    code = classify(r.error_type or "", r.message or "") or "JAX_UNKNOWN"
    if code != p.code:
        return f"rule code {p.code}; the catalogue classifies JAX's error as {code}"
    return None


@pytest.mark.parametrize("family", ["scratch", "view", "tmem", "transpose-view", "interpreter"])
def test_rule_family_agrees_with_jax(family: str, outcomes: dict[str, Any]) -> None:
    prefix = {"interpreter": ("multimem", "cluster", "race")}.get(family, (family + "-",))
    mine = [c for c in ALL_CASES if c.name.startswith(prefix)]
    assert len(mine) >= 4
    bad = [(c.name, why) for c in mine if (why := _agree(c, outcomes[c.name]))]
    assert not bad, bad


def test_view_rules_speak_where_jax_fails(outcomes: dict[str, Any]) -> None:
    """The view family is not vacuous: most cases predict an error, and JAX raises it."""
    views = [c for c in ALL_CASES if c.name.startswith("view-")]
    said = [c for c in views if c.predicted is not None]
    assert len(said) >= len(views) // 3


def test_scratch_rules_reach_every_outcome() -> None:
    scratch = [c for c in ALL_CASES if c.name.startswith("scratch-")]
    codes = {c.predicted.code if c.predicted else None for c in scratch}
    assert {None, "SWIZZLE_TRAILING_DIM", "SWIZZLE_VALUE", "JAX_ASSERTION"} <= codes
    assert {"TMEM_NO_TRANSFORMS", "TMEM_DTYPE_PACKED", "TMEM_ONLY_ARGS"} <= codes


def test_rank0_init_rule_and_jax() -> None:
    """A bare number is a rank-0 buffer's value; JAX takes such a buffer as an argument."""
    import cases as C
    from agreement_support import run_jax

    assert L.init_fits([], 3.0) and L.init_fits([], 7) and L.init_fits([], True)
    assert not L.init_fits([], [3.0]) and not L.init_fits([1], 3.0)
    assert L.init_fits([2, 2], [[1, 2], [3, 4]]) and not L.init_fits([2, 2], [[1, 2], [3]])
    rec = run_jax(C._rank0("arg", 3.0), ("build", "trace", "gpu-lower", "interpret"), False)
    assert rec["ok"], rec
    assert rec["outputs"]["out"] == [float(i) + 3.0 for i in range(128)]


def test_physical_shape_in_stack_order() -> None:
    assert L.physical_shape([128, 128], 32, as_ops([T(8, 32), S(128)])) == ((16, 4, 8, 32), None)
    shape, err = L.physical_shape([128, 128], 32, as_ops([S(128), T(8, 32)]))
    assert shape is None and err.code == "SWIZZLE_TRAILING_DIM"
    assert err.message.endswith("but got shape: (128, 128)")
    assert L.physical_shape([256], 16, as_ops([T(16, 64)])) == ((16, 16, 64), None)
