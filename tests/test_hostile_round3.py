"""Hostile inputs, third round: the data-dependent constructs (loads in index
expressions, loop bounds, conditions and device ids; semaphore reads), each held to a
clear diagnostic from JAX's rules, never a "valid" for what was not checked."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import analyze

sys.path.insert(0, str(Path(__file__).parent))
from test_datadep import GATHER, LOOP, WHEN_LOOP, _one_device, _row, _table_ring  # noqa: E402


def _codes(s: dict) -> list[tuple[str, str, str]]:
    a = analyze(load_scenario(s))
    return [(d.code, d.severity, d.path) for d in a.diagnostics]


def _gather(index: str) -> dict:
    return _one_device([_row("x_ref", index, "src"), *GATHER[1:]], [3, 1, 0, 2], "gather")


def _loop(stop: str) -> dict:
    return _one_device([*LOOP[:3], {**LOOP[3], "stop": stop}], [3, 1, 0, 2], "loop")


def _when(cond: str) -> dict:
    return _one_device([*LOOP[:3], {**WHEN_LOOP[3], "cond": cond}], [3, 1, 0, 2], "when")


# ------------------------------------------- a load with more indices than dims

TOO_MANY = [
    (_gather("off_ref[b, 0]"), "body[0].transforms[0].index[0]"),
    (_gather("off_ref[1, 0]"), "body[0].transforms[0].index[0]"),
    (_loop("off_ref[2, 0]"), "body[3].stop"),
    (_when("off_ref[b, 0] > 1"), "body[3].cond"),
    (_table_ring(device="ids_ref[dev, 0]"), "body[0].transforms[0].device"),
]


@pytest.mark.parametrize("s, where", TOO_MANY)
def test_a_load_with_more_indices_than_dims_is_jaxs_trace_error(s, where):
    """``off_ref[b, 0]`` of a 1-D table: the engine could not load it, the check went
    on past it and said "valid" (a SYNC_NOT_CHECKED warning its only trace). JAX
    refuses it while tracing."""
    found = _codes(s)
    errors = [c for c in found if c[1] == "error"]
    assert errors and errors[0][0] == "AT_TOO_MANY_INDICES", found
    assert errors[0][2].endswith(where), errors


def test_jax_refuses_the_loads_with_more_indices_with_the_same_message():
    from jaxprobe import probe_many

    cases = [s for s, _ in TOO_MANY[:3]]
    got = probe_many(cases, ("build", "trace"))
    for s, r in zip(cases, got, strict=True):
        d = next(
            d for d in analyze(load_scenario(s)).diagnostics if d.code == "AT_TOO_MANY_INDICES"
        )
        assert r["stage"] == "trace" and r["code"] == "AT_TOO_MANY_INDICES", r
        assert r["message"].strip() == d.message, (r["message"], d.message)


# ------------------------------------------- semaphore reads in a polling loop


@pytest.mark.slow  # (23 s of CPU: the slow tier, which make test runs)
def test_a_polling_loop_of_1000_reads_is_checked_within_the_bound():
    """Each of 1000 reads is a choice point: 500 schedules of ~9000 thread-steps each
    ran to the 300 s time bound (every command that checks, the Lab's edits too, took
    minutes). The thread-step bound over all schedules now stops it in seconds, and the
    reads' warning says where it stopped."""
    from mpmd_lab.diagnostics import verdict
    from test_datadep import _polls

    # (the check's own CPU time: a machine busy with other work must not fail the bound)
    t0 = time.process_time()
    diags = analyze(load_scenario(_polls(1000))).diagnostics
    assert time.process_time() - t0 < 30
    assert verdict(diags) == "valid where checked"
    (d,) = [x for x in diags if x.code == "DATA_DEPENDENT"]
    assert d.severity == "warning" and "thread-steps over all schedules" in d.message


# ------------------------------------------- a rejected kernel whose retrace loops

RETRACE_LOOPS = """
import jax
import jax.numpy as jnp
from jax.experimental.pallas import mosaic_gpu as plgpu


def kernel(x_ref, o_ref):
    state = [0]
    state[0] = x_ref.at[0, 0, 0]  # JAX rejects it: the retrace leaves it out
    while state[0] == 0:  # ... and then this never ends
        pass
    o_ref[...] = x_ref[...]


def make():
    call = plgpu.kernel(kernel, out_type=jax.ShapeDtypeStruct((256,), jnp.float32))
    return jax.jit(call), (jnp.arange(256, dtype=jnp.float32),)
"""


@pytest.mark.slow  # (it waits out the retrace's own 15 s bound: make test runs it)
def test_a_rejected_kernel_whose_retrace_never_ends_is_stopped_and_said(tmp_path):
    """Leaving out the statement JAX rejected made a later Python loop endless: the
    retrace ran the import's whole limit (120 s) and said nothing of it. It has its own
    bound now (a few times the first trace), and says it stopped, after JAX's error."""
    from mpmd_lab.importer import child

    mod = tmp_path / "retrace_loops.py"
    mod.write_text(RETRACE_LOOPS)
    t0 = time.monotonic()
    imp = child.run(f"{mod}:make", devices=1, timeout=120)
    took = time.monotonic() - t0
    assert imp.scenario is None
    codes = [d.code for d in imp.diagnostics]
    assert codes == ["AT_TOO_MANY_INDICES", "IMPORT_TIMEOUT"], codes
    assert "again without the statements JAX rejected" in imp.diagnostics[1].message
    assert took < 15 + 45, took  # JAX's start in the child + the retrace's 15 s


def test_the_retrace_budget():
    from mpmd_lab.importer.api import RETRACE_SECONDS, retrace_budget

    assert retrace_budget(0.5, None) == RETRACE_SECONDS
    assert retrace_budget(10.0, None) == 40.0
    assert retrace_budget(10.0, 7.0) == 7.0


# ------------------------------------------- fuzz: data-dependent expressions

EXTREMES = [0, 1, 2, 3, 4, -1, -4, 5, 2**20, 2**31 - 1, -(2**31)]


@st.composite
def data_exprs(draw: Any, depth: int = 3) -> str:
    """An index expression over the block index ``b``, loads of the table ``off_ref``
    (1-D, 4 entries: one index or two) and int32 extremes."""
    kind = draw(st.integers(0, 5 if depth > 0 else 2))
    if kind == 0:
        return str(draw(st.sampled_from(EXTREMES)))
    if kind == 1:
        return "b"
    if kind == 2:
        return f"off_ref[{draw(st.sampled_from(['0', '1', '2', '3', 'b', '-1']))}]"
    if kind == 3:  # (1 or 2 indices: ``off_ref[...]`` of the 1-D table is an open gap,
        # an array where a scalar is meant, which JAX refuses where it is used)
        n = draw(st.integers(1, 2))
        return f"off_ref[{', '.join(draw(data_exprs(depth - 1)) for _ in range(n))}]"
    op = draw(st.sampled_from(["+", "-", "*", "//", "%"] if kind == 4 else [">", "==", "<="]))
    return f"({draw(data_exprs(depth - 1))} {op} {draw(data_exprs(depth - 1))})"


@st.composite
def data_scenarios(draw: Any) -> dict:
    """GATHER, a loop bounded by a load, a ``when`` on one, or a ring's peer device id,
    with a drawn expression and table (int32 extremes, or a float table)."""
    e = draw(data_exprs())
    where = draw(st.sampled_from(["index", "stop", "cond", "device"]))
    if where == "device":  # (4 devices, the table ``ids`` read by ``dev``)
        s = _table_ring(device=e.replace("off_ref", "ids_ref").replace("b", "dev"))
        table_name, n = "ids", 16
    else:
        s = {"index": _gather, "stop": _loop, "cond": _when}[where](e)
        table_name, n = "off", 4
    table = [draw(st.sampled_from(EXTREMES)) for _ in range(n)]
    if draw(st.integers(0, 4)) == 0:
        s["buffers"][table_name]["dtype"] = "float32"
        table = [float(v) for v in table]
    s["buffers"][table_name]["init"] = table
    return s


@pytest.mark.fuzz
@settings(deadline=None)
@given(data_scenarios())
def test_data_dependent_expressions_are_judged_in_bounded_time(data):
    """Any drawn expression and table: it loads, or the loader names the field; the
    check answers in seconds with coded diagnostics; and where it finds no error,
    simulate finds none either (it may only say what it cannot simulate)."""
    from mpmd_lab import simulate
    from mpmd_lab.diagnostics import verdict
    from mpmd_lab.scenario import ScenarioError

    try:
        s = load_scenario(data)
    except ScenarioError as e:
        assert e.problems and all(p.startswith("call.programs[0].body[") for p, _ in e.problems)
        return
    t0 = time.perf_counter()
    diags = analyze(s).diagnostics
    assert time.perf_counter() - t0 < 30
    for d in diags:
        assert d.code and d.path is not None and (d.message or d.explanation), d
    if verdict(diags) != "invalid":  # then simulate fails only where it says it cannot
        res = simulate(s, check=False)
        assert res.error is None or res.error.code in CANNOT, (
            res.error,
            [d.one_line() for d in diags],
        )


#: simulate's errors that say what it cannot do, not what the kernel does wrong
CANNOT = {"SIM_TOO_LARGE", "SIM_UNSUPPORTED"}


# ------------------------------------------- a load indexed by a float


def _float_table(s: dict) -> dict:
    s["buffers"]["off"]["dtype"] = "float32"
    s["buffers"]["off"]["init"] = [0.0, 1.0, 0.0, 2.0]
    return s


FLOAT_INDEXED = [
    (_float_table(_when("off_ref[off_ref[0]]")), "body[3].cond"),
    (_float_table(_when("off_ref[b + off_ref[1]] > 0")), "body[3].cond"),
]


@pytest.mark.parametrize("s, where", FLOAT_INDEXED)
def test_a_load_indexed_by_a_float_is_index_dtype_in_check_and_simulate(s, where):
    """``off_ref[off_ref[0]]`` of a float table in a ``when``: simulate raised numpy's
    IndexError (a traceback) and the check said "valid" (the condition is no index
    field, so the load's own index went unchecked). JAX's lowering refuses it."""
    from mpmd_lab import simulate

    found = _codes(s)
    errors = [c for c in found if c[1] == "error"]
    assert errors and errors[0][0] == "INDEX_DTYPE" and errors[0][2].endswith(where), found
    res = simulate(load_scenario(s), check=False)
    assert res.error is not None and res.error.code == "INDEX_DTYPE", res.error


def test_jax_refuses_a_load_indexed_by_a_float_as_the_check_says():
    from jaxprobe import probe_many

    (r,) = probe_many([FLOAT_INDEXED[0][0]])
    d = next(
        d
        for d in analyze(load_scenario(FLOAT_INDEXED[0][0])).diagnostics
        if d.code == "INDEX_DTYPE"
    )
    assert r["stage"] == d.stage == "gpu-lower" and r["code"] == "INDEX_DTYPE", r
    assert r["message"].startswith("Unsupported index: OpResult(") and "-> f32)" in r["message"]


# ------------------------------------------- a loop bound loaded from a huge value


def test_a_loop_walking_past_any_size_gets_no_grown_shape_quickly(monkeypatch):
    """A loop of off[2] = 2**31 - 1 trips reads x's row i: the OOB fix grew x one row a
    recheck (each a whole check, to the step bound) 16 times, for a fix that never
    verifies (9 s on a loaded machine). At most GROW_ROUNDS rechecks now; the same
    diagnostics, no fix."""
    from mpmd_lab import repairs
    from mpmd_lab.validate import check

    calls = []
    real = repairs.checked
    monkeypatch.setattr(repairs, "checked", lambda *a, **k: calls.append(1) or real(*a, **k))
    diags = check(load_scenario(_one_device(LOOP, [3, 1, 2**31 - 1, 2], "loop")))
    (d,) = [x for x in diags if x.is_error]
    assert d.code == "OOB_READ" and d.fix is None, d
    assert 0 < len(calls) <= repairs.GROW_ROUNDS, len(calls)


# ------------------------------------------- fuzz: semaphore reads as choice points


@st.composite
def polling_scenarios(draw: Any) -> dict:
    """Block 1 signals ``n`` times (then takes ``n`` back); both blocks read the semaphore
    in a loop of ``m`` trips, copying their own half where a drawn condition on the read
    holds; the read may also bound a loop."""
    from test_datadep import SIGNAL, WAIT, _copy, _read_guard
    from test_datadep import _when as when

    n, m = draw(st.integers(0, 5)), draw(st.integers(0, 5))
    read = "pl.semaphore_read(sem)"
    cond = draw(
        st.sampled_from(
            [f"{read} > j", f"{read} == j", f"({read} * 2147483647) % 3 == 1", f"{read} - j"]
        )
    )
    inner: dict = when(cond, _copy("s", "b * 128"))
    if draw(st.booleans()):
        inner = {"op": "loop", "var": "k", "stop": read, "body": [inner]}
    s = _read_guard("0", "polls")
    s["call"]["programs"][0]["body"] = [
        when("b == 1", {"op": "loop", "var": "i", "stop": str(n), "body": [SIGNAL]}),
        {"op": "loop", "var": "j", "stop": str(m), "body": [inner]},
        when("b == 1", {**WAIT, "value": str(n)}),
    ]
    return s


@pytest.mark.fuzz
@settings(deadline=None, max_examples=15)
@given(polling_scenarios())
def test_semaphore_reads_in_polling_loops_are_judged_in_bounded_time(data):
    """Reads multiply the schedules: the check stays within its bounds (seconds), says
    where it stopped, and where it finds no error simulate finds none either."""
    from mpmd_lab import simulate
    from mpmd_lab.diagnostics import verdict

    s = load_scenario(data)
    t0 = time.perf_counter()
    diags = analyze(s).diagnostics
    assert time.perf_counter() - t0 < 30
    for d in diags:
        assert d.code and d.path is not None and (d.message or d.explanation), d
    if verdict(diags) != "invalid":
        res = simulate(s, check=False)
        assert res.error is None or res.error.code in CANNOT, (res.error, diags)
