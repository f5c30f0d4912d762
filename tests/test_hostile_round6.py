"""Hostile inputs, sixth round: the day's new paths, each held to what it replaced or to
JAX's own verdict.

1. ``At.compiled`` (a let's ``.at`` view through a compiled affine fast path) and
   ``_Node.shared`` (one view per let for every thread where it reads no axis index):
   random scenarios of ``.at`` chains (negative ints, ``pl.ds`` at the edges and past
   them, loop variables, nested loops, ``when``, lets bound again in loops, peers) give
   the same check and the same simulation with both turned off.
2. The new codes' hostile variants against real JAX (slow tier): transposes of 0-D
   views in loops and conditions, gathers of several index arrays (shapes that
   broadcast, and shapes that do not: INDEX_BROADCAST_SHAPES), ``fori_loop`` bounds of
   bools, ints and floats, stepped, and a Python loop's (a bool or float bound:
   LOOP_PYTHON_NOT_INT).
3. ``Ctx.add``'s diagnostics shared by content: a check after another gives what it
   gives alone.
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mpmd_lab import fixes, gallery, recheck
from mpmd_lab.fixes import apply_fix
from mpmd_lab.scenario import ScenarioError, load_scenario
from mpmd_lab.simulator import simulate
from mpmd_lab.validate import check, first_error

sys.path.insert(0, str(Path(__file__).parent))
from test_jax_gaps import AT00, T0, _copy, _kernel, _loop, _view  # noqa: E402

# ------------------------------------------------ 1. random .at chains, fast path off


def _entry(rng: random.Random, loops: list[str]) -> Any:
    lv = rng.choice(loops) if loops else "0"
    c = rng.random()
    if c < 0.25:
        return rng.randint(-5, 5)
    if c < 0.4:
        return rng.choice(
            [lv, f"{lv} - 1", f"-{lv}", f"{lv} % 2", "dev", "axis_size(dev) - 1", "b", "wg", lv]
        )
    if c < 0.5:
        return None
    if c < 0.6:
        return [rng.randint(-3, 3), rng.randint(-3, 6)]
    start = rng.choice([rng.randint(-2, 5), lv, f"{lv} * 2", f"4 - {lv}", "dev", f"{lv} - 1"])
    return {"ds": [start, rng.choice([0, 1, 2, 2, 3, 4, 4])]}


def _let(rng: random.Random, name: str, loops: list[str], lets: list[str], rank: dict) -> dict:
    src = rng.choice(["x_ref", "out", "out", "smem", *lets])
    r = rank[src]
    transforms: list[dict[str, Any]] = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        if r == 0:
            break
        index = [_entry(rng, loops) for _ in range(rng.randint(0, r + 1))]
        if rng.random() < 0.8:
            index = index[:r]
        r -= sum(1 for e in index if isinstance(e, int | str))
        transforms.append({"op": "at", "index": index})
    if src != "smem" and rng.random() < 0.15:
        device = rng.choice(["(dev + 1) % axis_size(dev)", "0", "dev"])
        transforms.insert(0, {"op": "remote_ref", "device": device})
    elif src == "out" and rng.random() < 0.1:
        transforms.insert(0, {"op": "multicast_ref", "axes": ["dev"]})
    rank[name] = r
    return {"let": name, "ref": src, "transforms": transforms}


def _body(rng: random.Random, depth: int, loops: list[str], lets: list[str], rank: dict) -> list:
    out: list[dict[str, Any]] = []
    for _ in range(rng.randint(1, 5)):
        c = rng.random()
        if c < 0.45:  # a new let, or one bound again (in a loop: per trip)
            name = rng.choice([f"v{len(rank)}", rng.choice(lets) if lets else "v"])
            out.append(_let(rng, name, loops, lets, rank))
            lets = [*lets, name]
        elif c < 0.7 and lets:
            a, b = rng.choice(lets), rng.choice([*lets, "out", "smem"])
            out.append(
                rng.choice(
                    [
                        {"op": "add", "dst": a, "lhs": a, "rhs": a},  # (one shape: runs)
                        {"op": "add", "dst": a, "lhs": a, "rhs": a},
                        {"op": "copy", "src": a, "dst": b},
                        {"op": "fill", "dst": b, "value": 1.0},
                    ]
                )
            )
        elif c < 0.85 and depth < 2:
            var = f"i{depth}"
            loop = {
                "op": "loop",
                "var": var,
                "start": rng.randint(-1, 1),
                "stop": rng.randint(0, 4),
                "via": rng.choice(["fori_loop", "python"]),
                "step": rng.choice([1, 1, 2, 3]),
                "body": _body(rng, depth + 1, [*loops, var], lets, rank),
            }
            out.append(loop)
        elif depth < 2:
            lv = rng.choice(loops) if loops else "dev"
            cond = rng.choice([f"{lv} == 0", "dev == 1", f"{lv} < 2"])
            out.append(
                {"op": "when", "cond": cond, "body": _body(rng, depth + 1, loops, lets, rank)}
            )
    return out


def random_at_scenario(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    shape = rng.choice([[8], [4, 4], [2, 8], [6], [2, 2, 4]])
    rank = {"x_ref": len(shape), "out": len(shape), "smem": len(shape)}
    # (several blocks and threads: a let that reads no axis index is shared by them)
    mesh: dict[str, Any] = {"grid": {"b": rng.choice([1, 2])}}
    mesh["threads"] = {"name": "wg", "count": rng.choice([1, 2])}
    return {
        "name": f"at-chains-{seed}",
        "device_mesh": {"dev": rng.choice([1, 2, 2, 4])},
        "buffers": {"x": {"shape": shape, "dtype": "float32", "init": "iota"}},
        "call": {
            "entry": "plgpu.kernel",
            "args": [{"buffer": "x", "param": "x_ref"}],
            "outputs": {"out": {"shape": shape, "dtype": "float32"}},
            "scratch": {"smem": {"shape": shape, "dtype": "float32", "memory_space": "SMEM"}},
            "programs": [{"mesh": mesh, "body": _body(rng, 0, [], [], rank)}],
        },
        "run": {"interpret": "gpu", "detect_races": rng.random() < 0.5},
    }


def _outcome(s: dict[str, Any]) -> Any:
    """The check's diagnostics and a simulation past them (values, races, error)."""
    recheck.clear_cache()
    fixes.clear_cache()
    try:
        diags = [d.model_dump(mode="json") for d in check(json.loads(json.dumps(s)))]
    except ScenarioError as e:
        return str(e)
    r = simulate(json.loads(json.dumps(s)), check=False, max_seconds=20)
    memory = {str(k): repr(np.asarray(v.value()).tolist()) for k, v in r.memory.items()}
    error = None if r.error is None else r.error.model_dump(mode="json")
    return diags, r.status, error, memory, str(r.races), _race_runs(load_scenario(s))


def _race_runs(s: Any) -> Any:
    """What the race check's data-free runs record, whatever the rules say (as
    ``validate.sync`` runs them; tests/test_engine.py's ``_race_run``), in order and
    exploring."""
    from mpmd_lab.engine.core import Engine
    from mpmd_lab.engine.explore import Chooser

    out = []
    for chooser in (None, Chooser()):
        try:
            got = Engine(s, data=False, strict=False, log_limit=0, chooser=chooser).run()
        except ScenarioError as e:
            out.append(str(e))
            continue
        races = sorted(
            (r.kind, r.first.path, r.second.path, r.first.actor.device, r.second.actor.device)
            for r in got.log.races
        )
        deadlock = [(b.actor.device, b.path, b.what) for b in got.deadlock]
        findings = [(f.code, f.path, f.actor.device, f.values) for f in got.findings]
        out.append((got.steps, races, deadlock, findings, got.leftover, str(got.error)))
    return out


def _no_fast_path(monkeypatch: pytest.MonkeyPatch, compiled: bool) -> None:
    """Every let's view made per thread (``_Node.shared`` None), and, unless
    ``compiled``, through ``At.view`` (no ``At.compiled``)."""
    from mpmd_lab.engine import core
    from mpmd_lab.ops.views import At

    made = core.Engine._chain

    def own(self: Any, node: Any) -> Any:
        chain = made(self, node)
        node.shared = None
        return chain

    monkeypatch.setattr(core.Engine, "_chain", own)
    if not compiled:
        monkeypatch.setattr(At, "compiled", lambda self, path: None)


@pytest.mark.parametrize("block", range(4))
def test_random_at_chains_check_and_simulate_as_without_the_fast_paths(block, monkeypatch):
    seeds = range(block * 60, block * 60 + 60)
    cases = [random_at_scenario(seed) for seed in seeds]
    fast = [_outcome(s) for s in cases]
    with monkeypatch.context() as m:
        _no_fast_path(m, compiled=True)
        assert [_outcome(s) for s in cases] == fast
    with monkeypatch.context() as m:
        _no_fast_path(m, compiled=False)
        assert [_outcome(s) for s in cases] == fast


def test_random_at_chains_reach_the_simulator():
    """(the generator is not only rejected scenarios: most simulate)"""
    ok = sum(_outcome(random_at_scenario(seed))[1] == "ok" for seed in range(60))
    assert ok >= 20


# --------------------------------------- 2. integer index arrays that do not broadcast


def _gather(index: list[Any], out: list[int], cols: list[int]) -> dict[str, Any]:
    s = _kernel([_view("x_ref", {"op": "at", "index": index}), _copy("v", "out")], out)
    s["buffers"]["cols"] = {"shape": cols, "dtype": "int32", "init": "zeros"}
    s["call"]["args"].append({"buffer": "cols", "param": "cols_ref"})
    return s


def _gather_load(cond: str) -> dict[str, Any]:
    s = _gather([0], [128], [2])
    s["call"]["programs"][0]["body"] = [
        {"op": "when", "cond": cond, "body": [_copy("x_ref", "out")]}
    ]
    s["call"]["outputs"]["out"]["shape"] = [8, 128]
    return s


BOTH = ["ids_ref[...]", "cols_ref[...]"]
UNBROADCASTABLE = "INDEX_BROADCAST_SHAPES"

#: name -> (scenario, the static check's first error)
CASES: dict[str, tuple[dict[str, Any], str | None]] = {
    # transposes of 0-D views where the lowering meets them (or not)
    "t0-in-loop": (
        _kernel(
            [
                {
                    "op": "loop",
                    "var": "i",
                    "start": 0,
                    "stop": 2,
                    "via": "fori_loop",
                    "body": [_view("x_ref", AT00, T0), _copy("v", "out")],
                }
            ],
            [],
        ),
        "TRANSPOSE_0D_CRASH",
    ),
    "t0-in-when-never": (
        _kernel(
            [
                {
                    "op": "when",
                    "cond": "b > 5",
                    "body": [_view("x_ref", AT00, T0), _copy("v", "out")],
                }
            ],
            [],
        ),
        "TRANSPOSE_0D_CRASH",
    ),
    "t0-python-loop-no-trip": (
        _kernel(
            [
                {
                    "op": "loop",
                    "var": "i",
                    "start": 0,
                    "stop": 0,
                    "via": "python",
                    "body": [_view("x_ref", AT00, T0), _copy("v", "out")],
                },
                {"let": "s", "ref": "x_ref", "transforms": [AT00]},
                _copy("s", "out"),
            ],
            [],
        ),
        None,
    ),
    "t0-let-of-let": (
        _kernel(
            [_view("x_ref", AT00), {"let": "w", "ref": "v", "transforms": [T0]}, _copy("w", "out")],
            [],
        ),
        "TRANSPOSE_0D_CRASH",
    ),
    # several index arrays
    "gather-arrays-4-2": (_gather(BOTH, [4], [2]), UNBROADCASTABLE),
    "gather-arrays-4-2-unused": (
        {
            **_gather(BOTH, [4], [2]),
            "call": {
                **_gather(BOTH, [4], [2])["call"],
                "programs": [
                    {
                        "mesh": {"grid": {"b": 1}},
                        "body": [_view("x_ref", {"op": "at", "index": BOTH})],
                    }
                ],
            },
        },
        UNBROADCASTABLE,
    ),
    "gather-load-4-2-in-when": (
        _gather_load("x_ref[ids_ref[...], cols_ref[...]] > 0"),
        UNBROADCASTABLE,
    ),
    "gather-arrays-4-1": (_gather(BOTH, [4], [1]), "GPU_INDEX_BROADCAST"),
    "gather-arrays-4-4": (_gather(BOTH, [4], [4]), "GPU_GATHER_LOAD"),
    # numpy's broadcast: (4,) and (4, 1) are (4, 4) (the view's shape once read (4, 1):
    # SWAP_SHAPE_MISMATCH at trace); (4,) and (2, 2) do not broadcast
    "gather-arrays-4-4x1": (_gather(BOTH, [4, 4], [4, 1]), "GPU_INDEX_BROADCAST"),
    "gather-arrays-4-2x2": (_gather(BOTH, [4], [2, 2]), UNBROADCASTABLE),
    # a pl.ds start written as a constant expression: Python computes it, and JAX's
    # trace checks the int as any static start (the check once took it as traced)
    "ds-constant-expression-past-the-end": (
        _kernel(
            [_view("x_ref", {"op": "at", "index": [{"ds": ["4 + 4", 1]}]}), _copy("v", "out")],
            [1, 128],
        ),
        "AT_OOB_SLICE",
    ),
    "ds-constant-expression-overlapping-the-end": (
        _kernel(
            [_view("x_ref", {"op": "at", "index": [{"ds": ["3 * 2", 4]}]}), _copy("v", "out")],
            [4, 128],
        ),
        "AT_OOB_SLICE",
    ),
    "ds-constant-expression-inside": (
        _kernel(
            [_view("x_ref", {"op": "at", "index": [{"ds": ["2 * 2", 2]}]}), _copy("v", "out")],
            [2, 128],
        ),
        None,
    ),
    # loop bounds of mixed dtypes, stepped
    "loop-int-bool": (_loop(0, "b > 0"), "LOOP_BOUND_DTYPE"),
    "loop-float-int": (_loop("x_ref[0, 0]", 3), "LOOP_BOUND_DTYPE"),
    "loop-step2-bool-int": (_loop("b > 0", 5, step=2), None),
    "loop-step2-empty-range": (_loop(5, "b", step=2), None),
    "loop-step3-bools": (_loop("b > 0", "b < 1", step=3), "VALUE_DTYPE"),
    "loop-step4-int-float": (_loop(0, "x_ref[0, 0]", step=4), "LOOP_BOUND_DTYPE"),
    # an unrolled (Python) loop: range() asks start, then stop, for an integer index
    "python-loop-bool-int": (_loop("b > 0", 3, via="python"), "LOOP_PYTHON_NOT_INT"),
    "python-loop-int-bool": (_loop(0, "b > 0", via="python"), "LOOP_PYTHON_NOT_INT"),
    "python-loop-float-int": (_loop("x_ref[0, 0]", 3, via="python"), "LOOP_PYTHON_NOT_INT"),
    "python-loop-bools-step2": (
        _loop("b > 0", "b > 1", via="python", step=2),
        "LOOP_PYTHON_NOT_INT",
    ),
    "python-loop-traced-int-then-bool": (_loop("b", "b > 0", via="python"), "LOOP_PYTHON_TRACED"),
    "python-loop-constant-bool": (_loop("1 > 0", 3, via="python"), None),
    "pl-loop-bool-int": (_loop("b > 0", 3, via="pl.loop"), None),
    "pl-loop-float-int": (_loop("x_ref[0, 0]", 3, via="pl.loop"), None),
}
for _name, (_s, _) in CASES.items():
    _s["name"] = _name
NAMES = sorted(CASES)


@pytest.mark.parametrize("name", NAMES)
def test_the_static_verdicts(name: str) -> None:
    scenario, code = CASES[name]
    d = first_error(check(load_scenario(scenario)))
    assert (d and d.code) == code, d and d.one_line()
    if code == UNBROADCASTABLE:
        assert d is not None and d.stage == "trace" and d.jax is not None
        assert d.jax.type == "ValueError"
        assert d.message == "Cannot broadcast shapes for indexing: {indexer_shapes}"


#: JAX lists the dtypes accepted in the order of a set: it varies from run to run
_KINDS = re.compile(r"subtypes of [a-z, ]+\.$")


@pytest.mark.slow
def test_real_jax_agrees() -> None:
    from jaxprobe import probe_many

    results = probe_many([CASES[n][0] for n in NAMES])
    for name, r in zip(NAMES, results, strict=True):
        code = CASES[name][1]
        d = first_error(check(load_scenario(CASES[name][0])))
        if code is None:
            assert r["stage"] is None, (name, r)
            continue
        assert d is not None and d.stage == r["stage"], (name, r)
        if code == "TRANSPOSE_0D_CRASH":
            assert "SIGSEGV" in r["message"], (name, r)
            continue
        assert r["code"] == code and d.jax is not None and d.jax.type == r["type"], (name, r)
        # (a tracer's error goes on with where the value became one)
        assert _KINDS.sub("", r["message"]).startswith(_KINDS.sub("", d.message)), (name, r)


# ------------------------------------- 3. shared diagnostics never leak between checks

_ROOT = Path(__file__).parent
_FILES = sorted((_ROOT / "scenarios").rglob("*.json")) + sorted(
    (_ROOT / "fix_corpus").rglob("*.json")
)


def _loaders() -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = [
        (f"gallery:{n}", lambda n=n: gallery.load(n)) for n in gallery.names()
    ]
    out += [(str(p.relative_to(_ROOT)), lambda p=p: json.loads(p.read_text())) for p in _FILES]
    return out


def _checked(load: Any) -> Any:
    try:
        return [d.model_dump(mode="json") for d in check(load())]
    except ScenarioError as e:
        return str(e)


def _fresh(load: Any) -> Any:
    recheck.clear_cache()
    fixes.clear_cache()
    return _checked(load)


def test_a_check_after_another_is_the_check_alone() -> None:
    """Pairs that report the same codes (where a diagnostic kept by content is shared),
    and a scenario checked, its fixes checked, simulated (races' witnesses) and checked
    again: each report is the fresh one."""
    items = _loaders()
    fresh = {name: _fresh(load) for name, load in items}
    by_code: dict[str, list[tuple[str, Any]]] = {}
    for name, load in items:
        if not isinstance(fresh[name], str):
            for d in fresh[name]:
                by_code.setdefault(d["code"], []).append((name, load))
    for group in by_code.values():
        group = group[:4]
        for na, la in group:
            for nb, lb in group:
                if na != nb:
                    recheck.clear_cache()
                    fixes.clear_cache()
                    a, b = _checked(la), _checked(lb)
                    assert (a, b) == (fresh[na], fresh[nb]), (na, nb)
    for name, load in items:
        if isinstance(fresh[name], str):
            continue
        recheck.clear_cache()
        fixes.clear_cache()
        for d in check(load()):
            if d.fix is not None:
                check(apply_fix(load_scenario(load()), d.fix))
        simulate(load(), max_seconds=10)
        assert _checked(load) == fresh[name], name


# ------------------------------------------------------------ from_jax of three kernels

_IMPORTS = ["err_python_loop_bool", "err_gather_unbroadcastable", "err_transpose_0d_loop"]


@pytest.mark.slow
def test_from_jax_names_the_users_line(tmp_path: Path) -> None:
    """tests/kernels/err_{python_loop_bool,gather_unbroadcastable,transpose_0d_loop}.py
    imported in a child (tests/importer_driver.py): each error at the kernel's own line.
    JAX raises the unbroadcastable index's ValueError ``from`` numpy's, whose traceback
    is numpy's alone: the source once named numpy's ``_stride_tricks_impl.py``."""
    import pickle
    import subprocess

    from mpmd_lab.importer import Imported
    from mpmd_lab.importer.child import child_env

    kernels = _ROOT / "kernels"
    target = tmp_path / "imports.pickle"
    subprocess.run(
        [sys.executable, str(_ROOT / "importer_driver.py"), str(target)]
        + [str(kernels / f"{n}.py") for n in _IMPORTS],
        env=child_env(1),
        check=True,
        timeout=600,
        cwd=_ROOT.parent,
    )
    raw = pickle.loads(target.read_bytes())

    def line(name: str, text: str) -> str:
        lines = (kernels / f"{name}.py").read_text().splitlines()
        return f"{kernels / name}.py:{next(i + 1 for i, x in enumerate(lines) if text in x)}"

    want = {
        "err_python_loop_bool": ("LOOP_PYTHON_NOT_INT", "for _i in range(0, b > 0)"),
        "err_gather_unbroadcastable": (UNBROADCASTABLE, "x_ref.at[ids_ref[...], cols_ref[...]]"),
        "err_transpose_0d_loop": ("TRANSPOSE_0D_CRASH", "o_ref[...] = v[...]"),
    }
    for name, (code, text) in want.items():
        assert "error" not in raw[name], raw[name]["error"]
        imp = Imported.from_json(raw[name]["imported"])
        d = next(d for d in imp.diagnostics if d.is_error)
        assert (d.code, d.source) == (code, line(name, text)), d.one_line()


# ------------------------------------ a stepped loop's trip count, in int32 as JAX's

#: (start, stop, step, via) -> block 0's and block 1's trips, as JAX runs them (read
#: from JAX 0.12's GPU interpreter): a traced bound makes the generated count
#: ``(stop - start + step - 1) // step`` (pl.loop's cdiv likewise) int32 arithmetic,
#: which wraps past 2**31 - 1 to a negative count: no trip. Python ints do not wrap.
STEPPED: list[tuple[Any, Any, int, str, list[int]]] = [
    (0, "b * 2147483647", 2147483647, "fori_loop", [0, 0]),
    ("b", "b + 2147483640", 2147483647, "fori_loop", [0, 0]),
    (0, "b * 2147483647", 2147483647, "pl.loop", [0, 0]),
    (0, 3, 2147483647, "fori_loop", [1, 1]),
    ("0 - b", 3, 2, "fori_loop", [2, 2]),
    ("b + 1", 6, 2, "fori_loop", [3, 2]),
]


@pytest.mark.parametrize("case", STEPPED, ids=lambda c: f"{c[0]}..{c[1]}/{c[2]}-{c[3]}")
def test_a_stepped_loop_runs_the_trips_jax_counts(case) -> None:
    start, stop, step, via, trips = case
    s = load_scenario({**_loop(start, stop, via=via, step=step), "run": {"interpret": "gpu"}})
    r = simulate(s)
    assert r.ok, r.error and r.error.one_line()
    x = np.arange(4 * 128, dtype=np.float32).reshape(4, 128)[:2]
    want = x * np.array([[1 + trips[0]], [1 + trips[1]]])
    np.testing.assert_array_equal(np.asarray(r.outputs["out"]), want)


@pytest.mark.slow
def test_stepped_trip_counts_are_jax_s() -> None:
    from mpmd_lab import runtime

    for start, stop, step, via, trips in STEPPED:
        s = load_scenario({**_loop(start, stop, via=via, step=step), "run": {"interpret": "gpu"}})
        real = runtime.run(s, "interpret", timeout=300)
        assert real.ok, real.error and real.error.one_line()
        x = np.arange(4 * 128, dtype=np.float32).reshape(4, 128)[:2]
        want = x * np.array([[1 + trips[0]], [1 + trips[1]]])
        np.testing.assert_array_equal(np.asarray(real.outputs["out"]), want)


@pytest.mark.slow  # (a 300,000-trip loop: 5 s)
def test_a_long_loop_keeps_a_bounded_number_of_shared_views(monkeypatch) -> None:
    """A let of a loop variable (``sems.at[i % 4]``) is kept for every thread per trip
    (``Engine._shared``, by the loop variable's value): a loop of 20,000 trips keeps at
    most MAX_SHARED, and runs as it does with none kept."""
    from mpmd_lab.engine import core

    s = load_scenario(
        {
            "name": "long-loop",
            "device_mesh": {"dev": 2},
            "buffers": {"x": {"shape": [8], "dtype": "float32", "init": "iota"}},
            "call": {
                "entry": "plgpu.kernel",
                "args": [{"buffer": "x", "param": "x_ref"}],
                "outputs": {"out": {"shape": [8], "dtype": "float32"}},
                "scratch": {"sems": {"kind": "semaphore", "shape": [4]}},
                "programs": [
                    {
                        "mesh": {"grid": {"b": 1}, "threads": {"name": "wg", "count": 2}},
                        "body": [
                            {
                                "op": "loop",
                                "var": "i",
                                "start": 0,
                                "stop": 20_000,
                                "via": "fori_loop",
                                "body": [
                                    {
                                        "let": "w",
                                        "ref": "sems",
                                        "transforms": [{"op": "at", "index": ["i % 4"]}],
                                    },
                                    {"op": "semaphore_signal", "sem": "w"},
                                    {"op": "semaphore_wait", "sem": "w"},
                                ],
                            }
                        ],
                    }
                ],
            },
        }
    )
    eng = core.Engine(s, data=False, strict=False, log_limit=0)
    out = eng.run()
    assert out.error is None and not out.deadlock
    assert 0 < len(eng._shared) <= core.MAX_SHARED
    kept = _race_runs(s)
    _no_fast_path(monkeypatch, compiled=True)
    assert _race_runs(s) == kept and kept[0][0] == out.steps


# ------------------------------------------------ a let re-bound in a nested body


@pytest.mark.slow
def test_a_let_rebound_in_a_when_body_after_reading_the_outer_one() -> None:
    """``v = out.at[0]``, then in a ``pl.when`` body ``w = v`` and ``v = out.at[1]``: the
    scenario reads the outer ``v`` first (the engine's scoping); the generated nested
    function once assigned ``v``, so Python made it local there and JAX's trace raised
    UnboundLocalError (JAX_UNKNOWN) where the check and the simulator said valid. The
    code writer now gives the inner let a fresh Python name."""
    from jaxprobe import probe_many

    at = {"op": "at", "index": [0]}
    body = [
        {"let": "v", "ref": "x_ref", "transforms": [at]},
        {
            "op": "when",
            "cond": "b == 0",
            "body": [
                {"let": "w", "ref": "v", "transforms": []},
                {"let": "v", "ref": "x_ref", "transforms": [{"op": "at", "index": [1]}]},
                _copy("w", "out"),
            ],
        },
    ]
    s = _kernel(body, [128])
    assert first_error(check(load_scenario(s))) is None
    [r] = probe_many([s])
    assert r["stage"] is None, r


SHADOWED = {
    "when": {"op": "when", "cond": "b == 0", "body": []},
    "python-for": {"op": "loop", "var": "i", "start": 0, "stop": 2, "via": "python", "body": []},
    "fori_loop": {"op": "loop", "var": "i", "start": 0, "stop": 2, "body": []},
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(SHADOWED))
def test_a_let_shadowing_an_outer_one_computes_what_the_simulator_does(kind: str) -> None:
    """A nested body (a condition's, an unrolled ``for``'s, a ``fori_loop``'s) re-binds
    ``v`` after reading the outer one, and the outer ``v`` is read after the body: the
    generated code, run in JAX's GPU interpreter, gives the simulator's outputs (a
    ``for`` once leaked its ``v`` past the loop; a function made it local)."""
    from mpmd_lab import runtime
    from mpmd_lab.codegen import generate

    nested = {
        **SHADOWED[kind],
        "body": [
            {"let": "w", "ref": "v", "transforms": []},
            {"let": "v", "ref": "x_ref", "transforms": [{"op": "at", "index": [1]}]},
            {"op": "add", "dst": "out", "lhs": "out", "rhs": "w"},
        ],
    }
    body = [
        {"let": "v", "ref": "x_ref", "transforms": [{"op": "at", "index": [0]}]},
        {"op": "fill", "dst": "out", "value": 0.0},
        nested,
        {"op": "add", "dst": "out", "lhs": "out", "rhs": "v"},
    ]
    s = load_scenario({**_kernel(body, [128]), "run": {"interpret": "gpu"}})
    assert first_error(check(s)) is None
    assert re.search(r"\b_let\d+_v = x_ref\.at\[1\]", generate(s)), generate(s)
    sim, real = runtime.run(s, "simulate"), runtime.run(s, "interpret", timeout=300)
    assert sim.ok and real.ok, (sim, real)
    np.testing.assert_array_equal(np.asarray(real.outputs["out"]), np.asarray(sim.outputs["out"]))
