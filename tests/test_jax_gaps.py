"""Three places where the static check once disagreed with real JAX 0.12, held against
JAX (one probe, child processes; no mocks): a load or store through a transposed 0-D
view (JAX's GPU lowering segfaults: TRANSPOSE_0D_CRASH), integer index entries of
different shapes (``x_ref.at[ids_ref[...], 0]``: GPU_INDEX_BROADCAST) and
``lax.fori_loop`` over two bool bounds (LOOP_BOUND_BOOL). Each case's verdict, stage,
exception type and message are JAX's; each fix offered leaves JAX accepting the call. A
loop with a step other than 1 is written as a trip count: its bounds' dtypes meet there,
and the generated code computes the trips the check and the simulator count."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
from mpmd_lab.fixes import apply_fix
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import check, first_error

sys.path.insert(0, str(Path(__file__).parent))
from jaxprobe import probe_many  # noqa: E402

pytestmark = pytest.mark.slow  # real JAX in child processes


def _kernel(
    body: list[dict[str, Any]],
    out: list[int],
    entry: str = "pl.kernel",
    x: list[int] | None = None,
    grid: int = 1,
) -> dict[str, Any]:
    return {
        "name": "gap",
        "buffers": {
            "x": {"shape": [8, 128] if x is None else x, "dtype": "float32", "init": "iota"},
            "ids": {"shape": [4], "dtype": "int32", "init": [1, 2, 3, 0]},
        },
        "call": {
            "entry": entry,
            "args": [{"buffer": "x", "param": "x_ref"}, {"buffer": "ids", "param": "ids_ref"}],
            "outputs": {"out": {"shape": out, "dtype": "float32"}},
            "programs": [{"mesh": {"grid": {"b": grid}}, "body": body}],
        },
    }


def _view(ref: str, *transforms: dict[str, Any]) -> dict[str, Any]:
    return {"let": "v", "ref": ref, "transforms": list(transforms)}


def _copy(src: str, dst: str) -> dict[str, Any]:
    return {"op": "copy", "src": src, "dst": dst}


CRASH = "TRANSPOSE_0D_CRASH"
AT00 = {"op": "at", "index": [0, 0]}
T0 = {"op": "transpose", "perm": []}


def _loop(start: Any, stop: Any, via: str = "fori_loop", step: int = 1) -> dict[str, Any]:
    """A grid of 2 blocks, each adding its row of x to its row of out from start to stop."""
    at_b = {"op": "at", "index": ["b"]}
    return _kernel(
        [
            {"let": "src", "ref": "x_ref", "transforms": [at_b]},
            {"let": "dst", "ref": "out", "transforms": [at_b]},
            _copy("src", "dst"),
            {
                "op": "loop",
                "var": "i",
                "start": start,
                "stop": stop,
                "via": via,
                "step": step,
                "body": [{"op": "add", "dst": "dst", "lhs": "dst", "rhs": "src"}],
            },
        ],
        out=[2, 128],
        entry="plgpu.kernel",
        x=[4, 128],
        grid=2,
    )


#: name -> (scenario, the static check's first error: code or None)
CASES: dict[str, tuple[dict[str, Any], str | None]] = {
    "transpose-0d-load": (_kernel([_view("x_ref", AT00, T0), _copy("v", "out")], []), CRASH),
    "transpose-0d-scalar-ref": (
        _kernel([_view("x_ref", T0), _copy("v", "out")], [], x=[]),
        CRASH,
    ),
    "transpose-ref-0d": (
        _kernel([_view("x_ref", AT00, {**T0, "via": "transpose_ref"}), _copy("v", "out")], []),
        CRASH,
    ),
    "transpose-0d-store": (
        _kernel(
            [_view("out", T0), {"let": "s", "ref": "x_ref", "transforms": [AT00]}, _copy("s", "v")],
            [],
            entry="plgpu.kernel",
        ),
        CRASH,
    ),
    "transpose-0d-unused": (
        _kernel(
            [_view("x_ref", AT00, T0), {"let": "s", "ref": "x_ref", "transforms": [AT00]}]
            + [_copy("s", "out")],
            [],
        ),
        None,
    ),
    "gather-array-scalar": (
        _kernel(
            [_view("x_ref", {"op": "at", "index": ["ids_ref[...]", 0]}), _copy("v", "out")], [4]
        ),
        "GPU_INDEX_BROADCAST",
    ),
    "gather-scalar-array": (
        _kernel(
            [_view("x_ref", {"op": "at", "index": [0, "ids_ref[...]"]}), _copy("v", "out")],
            [4],
            entry="plgpu.kernel",
        ),
        "GPU_INDEX_BROADCAST",
    ),
    "gather-unused": (
        _kernel([_view("x_ref", {"op": "at", "index": ["ids_ref[...]", "b"]})], [4]),
        "GPU_INDEX_BROADCAST",
    ),
    "gather-array-only": (
        _kernel(
            [_view("x_ref", {"op": "at", "index": ["ids_ref[...]"]}), _copy("v", "out")], [4, 128]
        ),
        "GPU_GATHER_LOAD",
    ),
    "gather-two-arrays": (
        _kernel(
            [_view("x_ref", {"op": "at", "index": ["ids_ref[...]", "ids_ref[...]"]})]
            + [_copy("v", "out")],
            [4],
        ),
        "GPU_GATHER_LOAD",
    ),
    "loop-bool-bounds": (_loop("b > 0", "b > 1"), "LOOP_BOUND_BOOL"),
    "loop-bool-sum": (_loop("(b > 0) + (b > 1)", "b < 1"), "LOOP_BOUND_BOOL"),
    "loop-const-and-traced-bool": (_loop("0 > 1", "b > 1"), "LOOP_BOUND_BOOL"),
    "loop-const-bools": (_loop("0 > 1", "1 > 0"), None),
    "loop-bool-pl-loop": (_loop("b > 0", "b > 1", via="pl.loop"), None),
    # a step other than 1: lax.fori_loop(0, ((stop) - (start) + step - 1) // step, ...)
    "loop-step-bool-bounds": (_loop("b > 0", "b > 1", step=2), "VALUE_DTYPE"),
    "loop-step-int-and-bool": (_loop(0, "b > 0", step=2), None),
    "loop-step-float-start": (_loop("x_ref[0, 0]", 3, step=2), "LOOP_BOUND_DTYPE"),
    "loop-step-float-and-bool": (_loop("x_ref[0, 0]", "b > 0", step=2), "LOOP_BOUND_DTYPE"),
}
for _name, (_s, _) in CASES.items():
    _s["name"] = _name

NAMES = sorted(CASES)
#: JAX lists the dtypes accepted in the order of a set: it varies from run to run
_KINDS = re.compile(r"subtypes of [a-z, ]+\.$")


@pytest.fixture(scope="module")
def jax() -> dict[str, dict[str, Any]]:
    """What JAX does with each case, and with each case's fixed scenario (``NAME+fix``)."""
    scenarios: dict[str, Any] = {n: CASES[n][0] for n in NAMES}
    for n in NAMES:
        d = first_error(check(load_scenario(CASES[n][0])))
        if d is not None and d.fix is not None:
            scenarios[f"{n}+fix"] = apply_fix(load_scenario(CASES[n][0]), d.fix)
    names = sorted(scenarios)
    results = probe_many([scenarios[n] for n in names])
    return dict(zip(names, results, strict=True))


@pytest.mark.parametrize("name", NAMES)
def test_the_check_says_what_jax_does(name: str, jax: dict[str, dict[str, Any]]) -> None:
    scenario, code = CASES[name]
    d = first_error(check(load_scenario(scenario)))
    r = jax[name]
    if code is None:
        assert d is None, d.one_line()
        assert r["stage"] is None, r
        return
    assert d is not None and d.code == code, d and d.one_line()
    assert d.stage == r["stage"], (d.one_line(), r)
    if code == CRASH:  # JAX raises nothing: the process dies
        assert r["type"] == "ChildProcessError" and "SIGSEGV" in r["message"], r
        assert d.jax is None and d.severity == "error"
        return
    assert d.jax is not None and (d.jax.type, r["code"]) == (r["type"], code), r
    assert _KINDS.sub("", d.message) == _KINDS.sub("", r["message"]), (d.message, r)


@pytest.mark.parametrize("name", [n for n in NAMES if CASES[n][1] is not None])
def test_a_fix_offered_makes_jax_accept_it(name: str, jax: dict[str, dict[str, Any]]) -> None:
    r = jax.get(f"{name}+fix")
    if r is None:
        pytest.skip("no fix offered (one element loaded makes a view of another shape)")
    assert r["stage"] is None, r


# ------------------------------------------------------------ from_jax of each kernel

KERNELS = Path(__file__).parent / "kernels"


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> dict[str, Any]:
    """``from_jax`` of tests/kernels/err_{transpose_0d,gather_mixed,loop_bool_bounds}.py,
    in a child (tests/importer_driver.py)."""
    import pickle
    import subprocess

    from mpmd_lab.importer import Imported
    from mpmd_lab.importer.child import child_env

    names = ["err_transpose_0d", "err_gather_mixed", "err_loop_bool_bounds"]
    target = tmp_path_factory.mktemp("imports") / "gaps.pickle"
    subprocess.run(
        [sys.executable, str(Path(__file__).parent / "importer_driver.py"), str(target)]
        + [str(KERNELS / f"{n}.py") for n in names],
        env=child_env(1),
        check=True,
        timeout=600,
        cwd=Path(__file__).parents[1],
    )
    raw = pickle.loads(target.read_bytes())
    for n in names:
        assert "error" not in raw[n], raw[n]["error"]
    return {n: Imported.from_json(raw[n]["imported"]) for n in names}


def _line(name: str, text: str) -> str:
    lines = (KERNELS / f"{name}.py").read_text().splitlines()
    return f"{KERNELS / name}.py:{next(i + 1 for i, x in enumerate(lines) if text in x)}"


def test_import_transpose_0d_keeps_the_view(imported: dict[str, Any]) -> None:
    """The view is imported as written (its ``let`` at the load that uses it, where the
    lowering dies); the check on it says the lowering crashes."""
    imp = imported["err_transpose_0d"]
    assert imp.scenario is not None and imp.unsupported == []
    let = imp.scenario.call.programs[0].body[0]
    assert [t.model_dump(exclude_defaults=True) for t in let.transforms] == [
        {"op": "at", "index": [0, 0]},
        {"op": "transpose", "perm": []},
    ]
    d = next(d for d in imp.diagnostics if d.is_error)
    assert d.code == CRASH and d.source == _line("err_transpose_0d", "o_ref[...] = v[...]")


def test_import_gather_mixed_is_not_imported_at_the_view(imported: dict[str, Any]) -> None:
    """A gather is not imported: said at the view's line, naming JAX's refusal."""
    imp = imported["err_gather_mixed"]
    d = next(d for d in imp.diagnostics if d.is_error)
    assert d.code == "IMPORT_UNSUPPORTED" and "GPU_INDEX_BROADCAST" in d.message
    assert d.source == _line("err_gather_mixed", "x_ref.at[ids_ref[...], 0]")


def test_import_loop_bool_bounds_is_jax_rejection(imported: dict[str, Any]) -> None:
    """JAX rejects the loop at trace: the import says so with JAX's code at its line."""
    imp = imported["err_loop_bool_bounds"]
    d = imp.diagnostics[0]
    assert d.code == "LOOP_BOUND_BOOL" and d.stage == "trace" and d.jax is not None
    assert d.jax.message.startswith("add does not accept dtype bool at position 0.")
    assert d.source == _line("err_loop_bool_bounds", "lax.fori_loop(b > 0, b > 1")


def test_a_stepped_loop_runs_the_trips_the_check_counts() -> None:
    """``for i in b + 1..6 step 2``: JAX (the exported code, in the GPU interpreter) runs
    range(b + 1, 6, 2) as the simulator does (the trip count once read ``6 - b + 1 + 1``:
    a trip too many on block 1)."""
    import numpy as np
    from mpmd_lab import runtime

    s = load_scenario({**_loop("b + 1", 6, step=2), "run": {"interpret": "gpu"}})
    sim, real = runtime.run(s, "simulate"), runtime.run(s, "interpret", timeout=300)
    assert sim.ok and real.ok, (sim, real)
    x = np.arange(4 * 128, dtype=np.float32).reshape(4, 128)[:2]
    want = x * np.array([[1 + len(range(b + 1, 6, 2))] for b in range(2)])
    np.testing.assert_array_equal(np.asarray(real.outputs["out"]), want)
    np.testing.assert_array_equal(np.asarray(sim.outputs["out"]), want)
