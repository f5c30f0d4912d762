"""Random transform stacks held against real JAX (test helper for issue 18).

``stack_scenarios()`` is a hypothesis strategy for one-program scenarios whose body makes
a view of one ref and uses it once. The ref is SMEM, TMEM or GMEM scratch (its
``transforms`` a tiling and/or swizzle, in either order), a GMEM argument or an output;
the view is a stack of ``at`` (ints, slices, ``pl.ds``), ``reshape``, ``transpose`` (the
method or ``plgpu.transpose_ref``) and ``bitcast`` steps in any order; the use is a load
(``copy`` out), a store (``fill``, ``copy`` in) or a TMA copy to GMEM. Shapes and dtypes
(8, 16 and 32 bits) are the ones where the layout rules bite: ``int32[128, 128]`` tiled
``(8, 32)`` then swizzled 128 is JAX's own default in its distributed tests.

``verdicts(scenarios)`` asks real JAX (build, trace, GPU lowering of the exported call:
``mpmd_lab.probe``, one warm worker for the whole batch) and the static check, and
``Tally`` counts verdict and first-code agreement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from mpmd_lab.ops import Transform
from pydantic import TypeAdapter

_TRANSFORM = TypeAdapter(Transform)


def as_ops(stack: list[dict[str, Any]]) -> list[Any]:
    """A transform stack in its JSON form as the op objects the rules take."""
    return [_TRANSFORM.validate_python(t) for t in stack]


BITS = {
    "int32": 32,
    "float32": 32,
    "float16": 16,
    "bfloat16": 16,
    "int16": 16,
    "int8": 8,
    "uint8": 8,
}
DTYPES = list(BITS)
#: base shapes: 2-D ones that tile, a 3-D one, a 1-D one
SHAPES = [
    [128, 128],
    [128, 128],
    [64, 128],
    [8, 128],
    [128, 64],
    [64, 32],
    [16, 256],
    [2, 64, 64],
    [256],
]
TILES = [1, 8, 16, 32, 64, 128]
SWIZZLES = [32, 64, 128]
#: the stages the property compares (the interpreters are not asked)
STAGES = ("build", "trace", "gpu-lower")
STATIC_STAGES = ("schema", "build", "trace", "gpu-lower")


def _elems(swizzle: int, dtype: str) -> int:
    return swizzle * 8 // BITS[dtype]


@st.composite
def scratch_transforms(draw: Any, shape: list[int], dtype: str) -> list[dict[str, Any]]:
    """0-2 of tiling / swizzle, in any order, biased to values that fit the shape."""
    n = draw(st.sampled_from([0, 1, 2, 2, 2]))
    out: list[dict[str, Any]] = []
    swz = draw(st.sampled_from(SWIZZLES))
    kinds = draw(st.permutations(["tiling", "swizzle"]))[:n]
    for kind in kinds:
        if kind == "swizzle":
            out.append({"op": "swizzle", "bytes": swz})
        else:
            rank = draw(st.sampled_from([2, 2, 2, 2, 1, 3]))
            fit = _elems(swz, dtype)
            minor = fit if draw(st.booleans()) else draw(st.sampled_from(TILES))
            tile = [draw(st.sampled_from([1, 8, 8, 16, 64])) for _ in range(rank - 1)] + [minor]
            out.append({"op": "tiling", "tile": tile})
    return out


def _index_entry(draw: Any, d: int) -> Any:
    kind = draw(st.sampled_from(["none", "int", "slice", "ds", "ds", "ds_tile", "block"]))
    if kind == "none":
        return None
    if kind == "int":
        return draw(st.integers(0, max(0, d - 1)) | st.sampled_from([d, -1]))
    if kind == "slice":
        a = draw(st.sampled_from([0, 0, d // 2, 1]))
        b = draw(st.sampled_from([d, d // 2 or 1, a + 1, None]))
        return [a, b]
    if kind == "block":  # a window at the kernel axis index (a dynamic start)
        return {"block": "b", "size": draw(st.sampled_from(sorted({1, 8, 60, 64, d})))}
    if kind == "ds":
        size = draw(st.sampled_from(sorted({1, d // 2 or 1, d, 8, 32})))
        start = draw(st.sampled_from(sorted({0, d - size if d >= size else 0, 1})))
        return {"ds": [start, size]}
    # tile-aligned windows: a multiple of 8 / 16 / 32 / 64 at an aligned start
    size = draw(st.sampled_from([8, 16, 32, 64]))
    size = min(size, d)
    start = draw(st.sampled_from([0, size])) if 2 * size <= d else 0
    return {"ds": [start, size]}


def _view_shape(shape: list[int] | None, dtype: str, t: dict[str, Any]):
    """(shape, dtype) after one view step, or (None, dtype) when the step is not valid
    (a rough model for drawing the next step and the other side of the use; never the
    verdict under test)."""
    if shape is None:
        return None, dtype
    op = t["op"]
    if op == "at":
        idx = t["index"]
        if len(idx) > len(shape):
            return None, dtype
        out: list[int] = []
        for k, d in enumerate(shape):
            e = idx[k] if k < len(idx) else None
            if e is None:
                out.append(d)
            elif isinstance(e, int):
                if not -d <= e < d:
                    return None, dtype
            elif isinstance(e, list):
                a, b, _ = slice(e[0], e[1]).indices(d)
                if a >= d:
                    return None, dtype
                out.append(max(0, b - a))
            elif "ds" in e:
                start, size = e["ds"]
                if start < 0 or start + size > d:
                    return None, dtype
                out.append(size)
            else:  # a block- or program-id-indexed window
                out.append(e["size"])
        return out, dtype
    if op == "reshape":
        target = list(t["shape"])
        n = math.prod(shape)
        if -1 in target:
            rest = math.prod(x for x in target if x != -1)
            if rest == 0 or n % rest:
                return None, dtype
            target = [n // rest if x == -1 else x for x in target]
        return (target, dtype) if math.prod(target) == n else (None, dtype)
    if op == "transpose":
        perm = t["perm"]
        if sorted(perm) != list(range(len(shape))):
            return None, dtype
        return [shape[p] for p in perm], dtype
    if op == "bitcast":
        new = t["dtype"]
        if len(shape) < 2:
            return None, new
        ob, nb = BITS[dtype], BITS[new]
        if (shape[-2] * ob) % nb:
            return None, new
        return [*shape[:-2], shape[-2] * ob // nb, shape[-1]], new
    return None, dtype


@st.composite
def view_step(draw: Any, shape: list[int] | None, dtype: str, memory: str) -> dict[str, Any]:
    cur = shape or [128, 128]
    rank = len(cur)
    op = draw(st.sampled_from(["at", "at", "reshape", "transpose", "transpose", "bitcast"]))
    if op == "at":
        n = draw(st.integers(1, rank)) if rank else 1
        if draw(st.integers(0, 19)) == 0:
            n = rank + 1  # too many indices, now and then
        idx = [_index_entry(draw, cur[k] if k < rank else 1) for k in range(n)]
        return {"op": "at", "index": idx}
    if op == "reshape":
        n = math.prod(cur)
        choices = [[-1], [1, *cur], [n // cur[-1], cur[-1]] if rank >= 2 else [2, -1]]
        if rank >= 1 and cur[0] % 2 == 0:
            choices.append([2, cur[0] // 2, *cur[1:]])
        if rank >= 3:
            choices.append([cur[0] * cur[1], *cur[2:]])
        if rank >= 2:
            choices.append([*cur[:-2], cur[-2] * cur[-1] // 2, 2])
        return {"op": "reshape", "shape": draw(st.sampled_from(choices))}
    if op == "transpose":
        if rank >= 2 and draw(st.booleans()):
            perm = [*range(rank - 2), rank - 1, rank - 2]
        else:
            perm = draw(st.permutations(range(max(rank, 1))))
        via = draw(st.sampled_from(["method", "method", "transpose_ref"]))
        return {"op": "transpose", "perm": list(perm), "via": via}
    return {"op": "bitcast", "dtype": draw(st.sampled_from([d for d in DTYPES if d != dtype]))}


def _base(name: str, entry: str) -> dict[str, Any]:
    return {
        "schema": "mpmd-lab/scenario@1",
        "name": name,
        "description": "",
        "buffers": {},
        "call": {
            "entry": entry,
            "args": [],
            "outputs": {},
            "scratch": {},
            "programs": [{"mesh": {"grid": {"b": 1}, "cluster": {}, "threads": None}, "body": []}],
        },
        "run": {"interpret": "gpu", "detect_races": False},
    }


@st.composite
def stack_scenarios(draw: Any, name: str = "stack") -> dict[str, Any]:
    """One scenario: a view stack over one ref, used once (see the module docstring)."""
    target = draw(st.sampled_from(["smem"] * 5 + ["tmem", "gmem", "arg", "arg", "out", "out"]))
    dtype = draw(st.sampled_from(DTYPES))
    shape = list(draw(st.sampled_from(SHAPES)))
    if target == "tmem":
        shape = draw(st.sampled_from([[128, 128], [128, 64], [128, 256], [64, 128]]))
    scratch_like = target in ("smem", "tmem", "gmem")
    entry = draw(
        st.sampled_from(
            ["plgpu.kernel"] * 4 + ["pl.kernel"] if scratch_like else ["pl.kernel", "plgpu.kernel"]
        )
    )
    s = _base(name, entry)
    c = s["call"]
    body = c["programs"][0]["body"]
    if scratch_like:
        spec: dict[str, Any] = {
            "shape": shape,
            "dtype": dtype,
            "memory_space": target.upper(),
            "transforms": [],
        }
        if target == "smem" or draw(st.integers(0, 5)) == 0:
            spec["transforms"] = draw(scratch_transforms(shape, dtype))
        if target == "tmem" and (BITS[dtype] != 32 or draw(st.booleans())):
            spec["packed"] = draw(st.sampled_from([True, True, False]))
        c["scratch"]["s"] = spec
        root = "s"
    elif target == "arg":
        s["buffers"]["x"] = {"shape": shape, "dtype": dtype, "init": "iota"}
        c["args"].append({"buffer": "x", "param": "x_ref"})
        root = "x_ref"
    else:
        c["outputs"]["o"] = {"shape": shape, "dtype": dtype}
        root = "o"
    # the view
    steps = []
    vshape: list[int] | None = shape
    vdtype = dtype
    for _ in range(draw(st.sampled_from([0, 1, 1, 2, 2, 3]))):
        t = draw(view_step(vshape, vdtype, target))
        steps.append(t)
        vshape, vdtype = _view_shape(vshape, vdtype, t)
    ref = root
    if steps:
        body.append({"let": "v", "ref": root, "transforms": steps})
        ref = "v"
    other = vshape if vshape is not None else shape
    other_dtype = vdtype
    uses = {
        "smem": ["fill", "copy_in", "copy_out", "tma", "tma"],
        "tmem": ["fill", "copy_in", "copy_out"],
        "gmem": ["fill", "copy_in", "copy_out"],
        "arg": ["copy_out"],
        "out": ["fill", "copy_in"],
    }[target]
    use = draw(st.sampled_from(uses))
    if use == "fill":
        body.append({"op": "fill", "dst": ref, "value": 1})
    elif use == "copy_in":
        s["buffers"]["y"] = {"shape": other, "dtype": other_dtype, "init": "iota"}
        c["args"].insert(0, {"buffer": "y", "param": "y_ref"})
        body.append({"op": "copy", "src": "y_ref", "dst": ref})
    else:  # copy_out / tma: into an output of the view's shape
        c["outputs"]["r"] = {"shape": other, "dtype": other_dtype}
        op = "tma_store" if use == "tma" else "copy"
        body.append({"op": op, "src": ref, "dst": "r"})
    if not c["outputs"]:
        # a kernel with no output: give it one (JAX wants an out_type), never touched
        c["outputs"]["r"] = {"shape": [128], "dtype": "float32"}
    return s


# ---------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Verdict:
    """Who says what about one scenario: the code of the first error (None: valid)."""

    code: str | None
    stage: str | None = None
    type: str | None = None
    message: str | None = None


def jax_verdicts(scenarios: list[dict[str, Any]], timeout: float = 120.0) -> list[Verdict]:
    """Real JAX (build, trace, GPU lowering) on each scenario: one warm worker process
    (``mpmd_lab.probe``) serves the whole batch."""
    from mpmd_lab import probe
    from mpmd_lab.scenario import load_scenario

    loaded = [load_scenario(d) for d in scenarios]
    out = []
    for r in probe.probe_many(loaded, STAGES, timeout=timeout):
        if r.ok:
            out.append(Verdict(None))
        else:
            out.append(Verdict(r.code, r.stage, r.error_type, r.message))
    return out


#: mpmd-lab codes that stand for JAX's "the code generator cannot write this call"
_CODEGEN_LIKE = {"CODEGEN", "SCRATCH_ONLY_TRANSFORM", "SCRATCH_TRANSFORM"}


def static_verdict(scenario: dict[str, Any]) -> Verdict:
    """The static check's first error JAX itself would raise before running."""
    from mpmd_lab.validate import check

    for d in check(scenario):
        if d.is_error and d.stage in STATIC_STAGES:
            code = "CODEGEN" if d.code in _CODEGEN_LIKE else d.code
            jt = d.jax.type if d.jax else None
            return Verdict(code, d.stage, jt, d.jax.message if d.jax else d.message)
    return Verdict(None)


#: lines the tests print at the end of the session (tests/conftest.py shows them)
SUMMARY: list[str] = []


@dataclass
class Tally:
    """Agreement counts over many scenarios (verdict: valid or not; code: first code)."""

    total: int = 0
    verdict: int = 0
    code: int = 0
    misses: list[tuple[dict[str, Any], Verdict, Verdict]] = field(default_factory=list)
    rows: list[tuple[dict[str, Any], Verdict, Verdict]] = field(default_factory=list)

    def add(self, scenario: dict[str, Any], mine: Verdict, jax: Verdict) -> None:
        self.total += 1
        self.rows.append((scenario, mine, jax))
        same_verdict = (mine.code is None) == (jax.code is None)
        self.verdict += same_verdict
        self.code += mine.code == jax.code
        if mine.code != jax.code:
            self.misses.append((scenario, mine, jax))

    def rate(self) -> tuple[float, float]:
        n = max(self.total, 1)
        return self.verdict / n, self.code / n

    def summary(self) -> str:
        v, c = self.rate()
        return (
            f"transform-stack agreement with JAX: {self.total} scenarios, "
            f"verdict {self.verdict}/{self.total} ({100 * v:.1f} %), "
            f"first code {self.code}/{self.total} ({100 * c:.1f} %)"
        )

    def classes(self) -> dict[tuple[str | None, str | None], int]:
        """Disagreements grouped by (static code, JAX code)."""
        out: dict[tuple[str | None, str | None], int] = {}
        for _, mine, jax in self.misses:
            out[(mine.code, jax.code)] = out.get((mine.code, jax.code), 0) + 1
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def compare(scenarios: list[dict[str, Any]], tally: Tally | None = None) -> Tally:
    """Both verdicts of every scenario, counted."""
    tally = tally if tally is not None else Tally()
    for d, j in zip(scenarios, jax_verdicts(scenarios), strict=True):
        tally.add(d, static_verdict(d), j)
    return tally


def draw_batch(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` scenarios drawn by hypothesis from ``stack_scenarios``, reproducibly for a
    seed (hypothesis's generate phase only: the JAX verdicts come in one batch after)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed
    from mpmd_lab.scenario import ScenarioError, load_scenario

    out: list[dict[str, Any]] = []

    @hseed(seed)
    @settings(
        max_examples=n,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(stack_scenarios())
    def collect(d: dict[str, Any]) -> None:
        try:
            load_scenario(d)
        except ScenarioError:
            return
        d = dict(d, name=f"stack{seed}_{len(out)}")
        if d not in out:
            out.append(d)

    collect()
    return out


# ---------------------------------------------------------------- the rules on top


def rules_verdict(d: dict[str, Any]) -> Verdict:
    """What the check would say with ``mpmd_lab.layout_rules`` in it (an estimate for
    issue 18, on ``stack_scenarios`` only): the rules first where they speak, in JAX's
    stage order; today's check where they do not (minus its scratch-type rules, which
    ``tiling_swizzle_error`` replaces)."""
    from mpmd_lab import layout_rules as L
    from mpmd_lab.validate import check

    c = d["call"]
    entry = c["entry"]
    sc = c["scratch"].get("s")
    body = c["programs"][0]["body"]
    let = body[0] if body and "let" in body[0] else None
    use = body[-1]
    steps = let["transforms"] if let else []
    root = let["ref"] if let else None

    def v(e: Any) -> Verdict:
        return Verdict(e.code, e.stage, e.jax_type, e.message)

    replaced = {"SWIZZLE_TRAILING_DIM", "JAX_ASSERTION", "SWIZZLE_VALUE", "TMEM_NO_TRANSFORMS"}
    replaced |= {"GPU_WG_TRANSFORMS", "GPU_TRANSFORMS_UNSUPPORTED", "TRANSPOSE_REF_RAW_BUG"}
    static = [
        x for x in check(d) if x.is_error and x.stage in STATIC_STAGES and x.code not in replaced
    ]

    def static_at(stages: tuple[str, ...]) -> Verdict | None:
        for x in static:
            if x.stage in stages:
                code = "CODEGEN" if x.code in _CODEGEN_LIKE else x.code
                return Verdict(code, x.stage, x.jax.type if x.jax else None, x.message)
        return None

    if (first := static_at(("schema", "build"))) is not None:
        return first
    if sc is not None:
        bits = L.dtype_bits(sc["dtype"])
        e = L.tiling_swizzle_error(
            sc["shape"], bits, sc["memory_space"], as_ops(sc["transforms"]), entry=entry,
            packed=sc.get("packed"), collective=sc.get("collective"),
        )  # fmt: skip
        if e is not None:
            return v(e)
    # the view, at trace
    if let is not None:
        base = _root_spec(d, root)
        cur: list[int] | None = list(base[0]) if base else None
        dt = base[1] if base else "float32"
        for i, t in enumerate(steps):
            if cur is None:
                break
            if t["op"] == "at" and (e := L.index_bounds_error(cur, t["index"])) is not None:
                return v(e)
            if t["op"] == "transpose" and t.get("via") == "transpose_ref" and base:
                transformed = i > 0 or bool(sc and root == "s" and sc["transforms"])
                if not transformed:
                    return Verdict("TRANSPOSE_REF_RAW_BUG", "trace", "ValueError", "")
                if base[2] == "TMEM":
                    return v(L.tmem_transpose_ref_error(True, cur, dt))
            cur, dt = _view_shape(cur, dt, t)
    if (first := static_at(("trace",))) is not None:
        return first
    # the lowering
    if entry == "pl.kernel" and c["scratch"]:
        return Verdict("MPMD_GPU_SCRATCH", "gpu-lower")
    if sc is not None:
        e = L.gmem_scratch_error(entry, [(sc["memory_space"], sc["dtype"])])
        if e is None and sc["memory_space"] == "SMEM":
            layout = as_ops(sc["transforms"])
            e = L.smem_capacity_error([(sc["shape"], L.dtype_bits(sc["dtype"]), layout)])
        if e is not None:
            return v(e)
    accessed = use.get("src") if use["op"] in ("copy", "tma_store") else use.get("dst")
    refs = [(use.get("src"), "load"), (use.get("dst"), "store")]
    if use["op"] == "tma_store":
        refs = [(use.get("src"), "tma")]
    for ref, access in refs:
        if ref is None:
            continue
        name, stack = (root, steps) if ref == "v" else (ref, [])
        spec = _root_spec(d, name)
        if spec is None:
            continue
        shape, dtype, space, sstack = spec
        if space == "TMEM" and access != "tma":
            packed = bool(sc and sc.get("packed"))
            packing = 32 // L.dtype_bits(dtype) if packed else 1
            return v(L.tmem_access_error(shape, as_ops(stack), dtype, packing))
        e = L.view_lowering_error(shape, dtype, as_ops(sstack), as_ops(stack), access)
        if e is not None:
            return v(e)
    del accessed
    return static_at(("gpu-lower",)) or Verdict(None)


def _root_spec(d: dict[str, Any], name: str | None):
    """(shape, dtype, memory space, scratch stack) of a kernel parameter."""
    c = d["call"]
    if name in c["scratch"]:
        s = c["scratch"][name]
        return s["shape"], s["dtype"], s["memory_space"], s["transforms"]
    if name in c["outputs"]:
        o = c["outputs"][name]
        return o["shape"], o["dtype"], "GMEM", []
    for a in c["args"]:
        if a.get("param") == name:
            b = d["buffers"][a["buffer"]]
            return b["shape"], b["dtype"], "GMEM", []
    return None


def same(mine: Verdict, jax: Verdict) -> bool:
    """Agreement on the first code; for errors the catalogue cannot name yet
    (``JAX_UNKNOWN``), on the type and the message's start too."""
    if mine.code != jax.code:
        return False
    if mine.code != "JAX_UNKNOWN":
        return True
    from mpmd_lab.catalogue import unwrap

    t, m = unwrap(jax.type or "", jax.message or "")
    return mine.type == t and bool(mine.message) and m.startswith(mine.message[:40])
