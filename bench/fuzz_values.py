"""Fuzz: values computed in registers (``compute {dst, value}``) against real JAX.

Run ``python -m bench.fuzz_values [SEED] [N]`` (default 0, 200). Draws ``N`` random
values of the value language (``mpmd_lab.ops.values``) over every dtype it names, on
operands whose shapes broadcast (or not), with edge data (negative integers for ``//``
and ``%``, zeros, the extremes of each integer dtype, floats that overflow a narrow
dtype or an integer), and holds each scenario against JAX on this CPU:

1. the check's first error at a JAX stage (build, trace, gpu-lower) against JAX's own
   (``tests/jaxprobe.py``): code and stage, and JAX's exact message where the check
   claims one; never valid where JAX fails;
2. where JAX's CPU interpreter runs the call (its ``interpret`` stage), the simulator's
   outputs against the interpreter's, bit for bit (NaN for NaN, a subnormal of the
   simulator for a zero of XLA's CPU backend, which flushes them).

Prints each disagreement with its class and the scenario's value, then the counts per
class. Slow (the JAX probe of each scenario twice), so it lives outside the test suite;
``tests/test_values_agreement.py`` holds the cases it found.
"""

from __future__ import annotations

import random
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import numpy as np  # noqa: E402
from jaxprobe import probe_many  # noqa: E402
from mpmd_lab import dtypes as D  # noqa: E402
from mpmd_lab.ops import values as V  # noqa: E402
from mpmd_lab.scenario import ScenarioError, load_scenario  # noqa: E402
from mpmd_lab.simulator import simulate  # noqa: E402
from mpmd_lab.validate import check, first_error  # noqa: E402
from simulate_support import same_bits  # noqa: E402

DTYPES = [
    "float32",
    "float16",
    "bfloat16",
    "int8",
    "int16",
    "int32",
    "uint8",
    "uint16",
    "uint32",
    "bool",
    "float8_e4m3fn",
    "float8_e5m2",
]
JAX_STAGES = ("build", "trace", "gpu-lower")

INT_EDGES = [0, 1, -1, 2, -2, 3, -3, 7, -7, 100, -100]
FLOAT_EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 7.0, -7.5, 127.5, -129.0, 300.0,
               65504.0, 1e5, -1e5, 3e9, -3e9, 1e30, -1e30, 1e-3, 1e-30]  # fmt: skip
INT_LITS = [0, 1, -1, 2, -3, 7, 255, 256, 300, 2**31 - 1, -(2**31)]
FLOAT_LITS = [0.0, -0.0, 0.5, -1.5, 3.0, 2.5e9, 1e30, 1e-3]


def _edges(dtype: str, n: int, rng: random.Random) -> list[Any]:
    """``n`` edge values for ``dtype`` (in its range, for integers; floats may overflow
    a narrow float to inf)."""
    if dtype == "bool":
        return [rng.random() < 0.5 for _ in range(n)]
    if D.is_float(dtype):
        return [rng.choice(FLOAT_EDGES) for _ in range(n)]
    info = np.iinfo(D.np_dtype(dtype))
    pool = [int(v) for v in INT_EDGES if info.min <= v <= info.max]
    pool += [int(info.max), int(info.min), int(info.max) - 1, int(info.min) + 1]
    return [rng.choice(pool) for _ in range(n)]


def _nest(flat: list[Any], shape: list[int]) -> Any:
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return flat[: shape[0]]
    step = int(np.prod(shape[1:]))
    return [_nest(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


class Gen:
    """One scenario's value: operands of a base shape and shapes that broadcast to it."""

    def __init__(self, rng: random.Random, index: int) -> None:
        self.rng = rng
        self.index = index
        self.base = rng.choice([[8, 128], [256], [2, 128], [4, 8, 128], [128]])
        self.buffers: dict[str, dict[str, Any]] = {}

    def shape(self) -> list[int]:
        r = self.rng.random()
        base = self.base
        if r < 0.6:
            return list(base)
        if r < 0.7:
            return []
        if r < 0.8 and len(base) > 1:
            return list(base[1:])  # a lower rank: ranked up
        if r < 0.9:
            i = self.rng.randrange(len(base))
            return [1 if j == i else d for j, d in enumerate(base)]
        return [d // 2 if d > 1 else d for d in base]  # does not broadcast

    def buffer(self) -> str:
        """A new input buffer (or one drawn before)."""
        if self.buffers and self.rng.random() < 0.4:
            return self.rng.choice(list(self.buffers))
        name = "abcd"[len(self.buffers)] if len(self.buffers) < 4 else "a"
        if name in self.buffers:
            return name
        dtype = self.rng.choice(DTYPES)
        shape = self.shape()
        r = self.rng.random()
        size = int(np.prod(shape)) if shape else 1
        if r < 0.5:
            init: Any = _nest(_edges(dtype, size, self.rng), shape)
        elif r < 0.8:
            init = "random"
        else:
            init = "iota"
        self.buffers[name] = {"shape": shape, "dtype": dtype, "init": init, "seed": self.index}
        return name

    def leaf(self) -> str:
        r = self.rng.random()
        if r < 0.7:
            return f"{self.buffer()}_ref[...]"
        if r < 0.85:
            kind = self.rng.random()
            if kind < 0.45:
                return repr(self.rng.choice(INT_LITS))
            if kind < 0.9:
                return repr(self.rng.choice(FLOAT_LITS))
            return repr(self.rng.random() < 0.5)
        if r < 0.95:
            dt = self.rng.choice([d for d in DTYPES if d != "bool"])
            shape = tuple(self.base)
            return f"lax.broadcasted_iota(jnp.{dt}, {shape!r}, {self.rng.randrange(len(shape))})"
        return "pl.program_id(0)"

    def value(self, depth: int) -> str:
        rng = self.rng
        if depth <= 0 or rng.random() < 0.2:
            return self.leaf()
        r = rng.random()
        d = depth - 1
        if r < 0.4:
            op = rng.choice(["+", "-", "*", "/", "//", "%", "//", "%"])
            return f"({self.value(d)} {op} {self.value(d)})"
        if r < 0.5:
            op = rng.choice(["==", "!=", "<", "<=", ">", ">="])
            return f"({self.value(d)} {op} {self.value(d)})"
        if r < 0.6:
            return f"jnp.{rng.choice(['maximum', 'minimum'])}({self.value(d)}, {self.value(d)})"
        if r < 0.65:
            return f"(-{self.value(d)})"
        if r < 0.78:
            inner = self.value(d)
            if _is_number(inner):  # (a Python number has no .astype)
                inner = f"{self.buffer()}_ref[...]"
            return f"({inner}).astype(jnp.{rng.choice(DTYPES)})"
        if r < 0.86:
            return f"lax.bitcast_convert_type({self.value(d)}, jnp.{rng.choice(DTYPES)})"
        if r < 0.93:
            return f"jnp.where({self.value(d)}, {self.value(d)}, {self.value(d)})"
        fn = rng.choice(["sum", "max", "min"])
        rank = len(self.base)
        kw = []
        if rng.random() < 0.6:
            axis: Any = rng.choice([None, 0, -1, rank - 1, tuple(range(rank)), (0, 0), rank])
            kw.append(f"axis={axis!r}")
        if rng.random() < 0.4:
            kw.append("keepdims=True")
        return f"jnp.{fn}({', '.join([self.value(d), *kw])})"


def _is_number(text: str) -> bool:
    """Whether ``text`` is a Python number (a literal)."""
    try:
        return isinstance(V.parse(text), V.Lit)
    except V.ValueSyntaxError:
        return False


def _refs(buffers: dict[str, dict[str, Any]]) -> dict[str, tuple[tuple[int, ...], str]]:
    return {f"{n}_ref": (tuple(b["shape"]), b["dtype"]) for n, b in buffers.items()}


def draw(rng: random.Random, index: int) -> dict[str, Any]:
    """A scenario: a few input buffers and one ``compute`` into output ``o``."""
    g = Gen(rng, index)
    text = g.value(rng.choice([1, 2, 2, 3, 3, 4]))
    if text.startswith("(") and text.endswith(")"):
        try:
            V.parse(text[1:-1])
            text = text[1:-1]
        except V.ValueSyntaxError:
            pass
    if not g.buffers:
        g.buffer()
    out_shape, out_dtype = list(g.base), "float32"
    try:
        ty = V.parse(text).typed(_refs(g.buffers))
        out_shape, out_dtype = list(ty.shape), ty.dtype
    except (V.ValueTypeError, V.ValueSyntaxError, KeyError):
        pass
    if rng.random() < 0.05:  # a store of another dtype
        out_dtype = rng.choice(DTYPES)
    names = sorted(g.buffers)
    return {
        "schema": "mpmd-lab/scenario@1",
        "name": f"value-{index}",
        "buffers": g.buffers,
        "call": {
            "entry": "pl.kernel",
            "args": [{"buffer": n, "param": f"{n}_ref"} for n in names],
            "outputs": {"o": {"shape": out_shape, "dtype": out_dtype}},
            "programs": [
                {
                    "mesh": {"grid": {"blocks": 1}, "cluster": {}, "threads": None},
                    "body": [{"op": "compute", "dst": "o", "value": text}],
                }
            ],
        },
        "run": {"interpret": rng.choice(["gpu", "hlo"]), "detect_races": False},
    }


def _static(d: dict[str, Any]) -> Any:
    """The check's first error at a JAX stage (None: none)."""
    e = first_error(check(load_scenario(d)))
    return e if e is not None and e.stage in JAX_STAGES else None


def verdict_class(d: dict[str, Any], jax: dict[str, Any]) -> str | None:
    """How the check's first error disagrees with JAX's (None: it agrees)."""
    e = _static(d)
    if jax["stage"] is None:
        return None if e is None else f"verdict: check {e.code}@{e.stage}, JAX valid"
    if e is None:
        return f"verdict: check valid, JAX {jax['code']}@{jax['stage']}"
    same = (e.code, e.stage) == (jax["code"], jax["stage"])
    # (an axis out of bounds: numpy's words, which the catalogue files under a transpose's
    # code; the check knows the value reduces and says VALUE_AXIS: see its card)
    alias = (e.code, jax["code"]) == ("VALUE_AXIS", "TRANSPOSE_BAD_AXIS")
    if not same and not (alias and e.jax is not None and e.jax.message == jax["message"]):
        return f"verdict: check {e.code}@{e.stage}, JAX {jax['code']}@{jax['stage']}"
    if e.jax is not None and _ordered(e.jax.message).split(" at <")[0] not in _ordered(
        jax["message"]
    ):
        head = e.jax.message.split(" Accepted dtypes")[0].rstrip()
        if not jax["message"].startswith(head):
            return f"message: {e.code}"
    return None


def _ordered(message: str) -> str:
    """A TypePromotionError's two dtypes sorted (JAX names them in the order of a set of
    dtypes, which for ml_dtypes' dtypes changes from one process to the next)."""
    m = re.match(r"Input dtypes \('(\w+)', '(\w+)'\)", message)
    if not m:
        return message
    a, b = sorted(m.groups())
    return f"Input dtypes ('{a}', '{b}')" + message[m.end() :]


def value_class(d: dict[str, Any], got: dict[str, Any]) -> tuple[str | None, str]:
    """How the simulator's output disagrees with JAX's interpreter's (None: it agrees)."""
    sim = simulate(load_scenario(d), check=False)
    if not sim.ok:
        return f"simulate fails: {sim.error}"[:80], ""
    a, b = np.asarray(sim.outputs["o"]), np.asarray(got["o"])
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"output type: sim {a.dtype}{a.shape}, JAX {b.dtype}{b.shape}", ""
    if same_bits(a, b, flushed=True):
        return None, ""
    bad = np.argwhere(~_equal(a, b))
    at = tuple(bad[0])
    detail = f"first at {at}: sim {a[at]!r} JAX {b[at]!r} ({len(bad)} of {a.size})"
    return f"values: {a.dtype}", detail


def _equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "biu":
        return np.asarray(a == b)
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    return np.asarray((fa == fb) & (np.signbit(fa) == np.signbit(fb))) | (
        np.isnan(fa) & np.isnan(fb)
    )


def _bufs(d: dict[str, Any]) -> str:
    """The scenario's operands and output, short."""
    out = d["call"]["outputs"]["o"]
    bufs = " ".join(
        f"{n}:{b['dtype']}{b['shape']}{'' if isinstance(b['init'], str) else '=edges'}"
        for n, b in d["buffers"].items()
    )
    return f"{bufs} -> {out['dtype']}{out['shape']} ({d['run']['interpret']}, {d['name']})"


def compare(scenarios: list[dict[str, Any]], show: bool = True) -> Counter:
    """Classes of disagreement (and ``agree``) over ``scenarios``."""
    tally: Counter = Counter()
    static = probe_many(scenarios, JAX_STAGES)
    interp_idx = [i for i, r in enumerate(static) if r["stage"] in (None, "gpu-lower")]
    from mpmd_lab import probe

    loaded = [load_scenario(scenarios[i]) for i in interp_idx]
    outs = probe.probe_many(loaded, ("interpret",), timeout=120)
    outputs = dict(zip(interp_idx, outs, strict=True))
    for i, (d, jax) in enumerate(zip(scenarios, static, strict=True)):
        value = d["call"]["programs"][0]["body"][0]["value"]
        cls = verdict_class(d, jax)
        if cls is not None:
            tally[cls] += 1
            if show:
                print(f"[{cls}] {value}  {_bufs(d)}\n    JAX: {(jax.get('message') or '')[:200]}")
            continue
        if i not in outputs:
            tally["agree (JAX fails at trace)"] += 1
            continue
        r = outputs[i]
        if not r.ok:
            tally[f"agree (interpreter fails: {r.code})"] += 1
            continue
        vcls, detail = value_class(d, dict(r.outputs or {}))
        if vcls is None:
            tally["agree (values)"] += 1
            continue
        tally[vcls] += 1
        if show:
            print(f"[{vcls}] {value}  {_bufs(d)}\n    {detail}")
    return tally


def main(seed: int = 0, n: int = 200) -> int:
    rng = random.Random(seed)
    scenarios: list[dict[str, Any]] = []
    schema = 0
    while len(scenarios) < n:
        d = draw(rng, len(scenarios))
        try:
            load_scenario(d)
        except ScenarioError:
            schema += 1
            continue
        scenarios.append(d)
    tally = compare(scenarios)
    print(f"seed {seed}: {n} scenarios ({schema} drawn outside the grammar, redrawn)")
    for cls, count in tally.most_common():
        print(f"  {count:4d}  {cls}")
    agree = sum(c for k, c in tally.items() if k.startswith("agree"))
    print(f"agree {agree} of {n}")
    return 0 if agree == n else 1


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    sys.exit(main(*args))
