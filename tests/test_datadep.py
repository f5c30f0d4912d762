"""Data-dependent device ids and indices: ``ids_ref[0]`` (a scalar loaded from a ref)
and ``pl.semaphore_read(sem)`` in index expressions, held against real JAX.

The grammar and its printing; JAX's trace and GPU lowering (``jax.export`` for cuda) on
each kernel shape; the simulator against JAX's GPU interpreter bit for bit where it
runs, and against the values the kernel computes where it does not (peers); the static
check with the values the call is given, and what it says it did not check
(DATA_DEPENDENT, "valid where checked").
"""

from __future__ import annotations

import copy
import re
from typing import Any

import numpy as np
import pytest
from jaxprobe import probe_many
from mpmd_lab import codegen
from mpmd_lab import expr as E
from mpmd_lab.diagnostics import verdict
from mpmd_lab.report import format_diagnostics
from mpmd_lab.scenario import ScenarioError, load_scenario
from mpmd_lab.simulator import simulate
from mpmd_lab.validate import check, first_error
from simulate_support import run_in_jax, same_bits

ROWS = 128
PLGPU = "plgpu.kernel"


def _said(message: str) -> str:
    """A message as the check can know it: JAX's INDEX_DTYPE prints the MLIR value it
    was given, whose SSA numbers and memref type the check elides (the rest is JAX's)."""
    return re.sub(r"OpResult\(%[^=]*= (\S+)\(.*\) -> ", r"OpResult(\1 -> ", message)


#: the stages JAX's trace and lowering say something about
JAX_STAGES = ("schema", "build", "trace", "gpu-lower")
#: each device's table of peers: device d's first entry is the device it sends to
RING = [1, 2, 3, 0, 2, 3, 0, 1, 3, 0, 1, 2, 0, 1, 2, 3]


def _table_ring(ids: list[Any] = RING, dtype: str = "int32", device: str = "ids_ref[0]") -> dict:
    """4 devices: device d copies x into ``out`` on the device its table names, then
    signals it there and waits for its own signal."""
    return {
        "schema": "mpmd-lab/scenario@1",
        "name": "table-ring",
        "device_mesh": {"dev": 4},
        "buffers": {
            "x": {"shape": [ROWS], "dtype": "float32", "init": "iota"},
            "ids": {"shape": [4], "dtype": dtype, "init": ids},
        },
        "call": {
            "entry": "plgpu.kernel",
            "args": [{"buffer": "x", "param": "x_ref"}, {"buffer": "ids", "param": "ids_ref"}],
            "outputs": {"out": {"shape": [ROWS], "dtype": "float32"}},
            "scratch": {"sem": {"kind": "semaphore"}},
            "programs": [
                {
                    "mesh": {"grid": {}, "cluster": {}, "threads": None},
                    "body": [
                        {
                            "let": "p",
                            "ref": "out",
                            "transforms": [{"op": "remote_ref", "device": device}],
                        },
                        {"op": "copy", "src": "x_ref", "dst": "p"},
                        {"op": "semaphore_signal", "sem": "sem", "device": device},
                        {"op": "semaphore_wait", "sem": "sem"},
                    ],
                }
            ],
        },
    }


def _one_device(body: list[dict], off: list[int], name: str, entry: str = "pl.kernel") -> dict:
    """One device, x f32[4, 128], a table ``off`` int32[4] and an output f32[2, 128]."""
    return {
        "schema": "mpmd-lab/scenario@1",
        "name": name,
        "buffers": {
            "x": {"shape": [4, ROWS], "dtype": "float32", "init": "iota"},
            "off": {"shape": [4], "dtype": "int32", "init": off},
        },
        "call": {
            "entry": entry,
            "args": [{"buffer": "x", "param": "x_ref"}, {"buffer": "off", "param": "off_ref"}],
            "outputs": {"out": {"shape": [2, ROWS], "dtype": "float32"}},
            "programs": [
                {"mesh": {"grid": {"b": 2}, "cluster": {}, "threads": None}, "body": body}
            ],
        },
        "run": {"interpret": "gpu", "detect_races": False},
    }


def _row(ref: str, index: str, name: str) -> dict:
    return {"let": name, "ref": ref, "transforms": [{"op": "at", "index": [index]}]}


#: block b copies row off[b] of x into row b of out
GATHER = [
    _row("x_ref", "off_ref[b]", "src"),
    _row("out", "b", "dst"),
    {"op": "copy", "src": "src", "dst": "dst"},
]
#: block b writes row b; it doubles it if off[b] > 1; a loop of off[2] trips adds x[0]
WHEN_LOOP = [
    _row("x_ref", "b", "src"),
    _row("out", "b", "dst"),
    {"op": "copy", "src": "src", "dst": "dst"},
    {"op": "when", "cond": "off_ref[b] > 1", "body": [
        {"op": "add", "dst": "dst", "lhs": "dst", "rhs": "dst"},
    ]},
    {"op": "loop", "var": "i", "stop": "off_ref[2]", "body": [
        _row("x_ref", "i", "xi"),
        {"op": "add", "dst": "dst", "lhs": "dst", "rhs": "xi"},
    ]},
]  # fmt: skip


def _gather_scratch() -> dict:
    """GATHER with its table first copied into SMEM (a TMA load on a barrier), the index
    loaded from there: memory the kernel writes."""
    body = [
        {"op": "copy_gmem_to_smem", "src": "off_ref", "dst": "tbl", "barrier": "bar"},
        {"op": "barrier_wait", "barrier": "bar"},
        _row("x_ref", "tbl[b]", "src"),
        *GATHER[1:],
    ]
    s = _one_device(body, [3, 1, 0, 2], "gather-scratch", "plgpu.kernel")
    s["call"]["scratch"] = {
        "tbl": {"shape": [4], "dtype": "int32", "memory_space": "SMEM"},
        "bar": {"kind": "barrier"},
    }
    return s


#: a fori_loop of off[2] trips adding x's rows; the same as a pl.loop
LOOP = [*WHEN_LOOP[:3], WHEN_LOOP[4]]
PL_LOOP = [*WHEN_LOOP[:3], {**WHEN_LOOP[4], "via": "pl.loop"}]
#: block b doubles its row where off[b] is not zero (a float taken as a truth value)
WHEN_FLOAT = [*WHEN_LOOP[:3], {**WHEN_LOOP[3], "cond": "off_ref[b]"}]


def _typed(s: dict, dtype: str) -> dict:
    """``s`` with its table ``off`` of another dtype (its values converted)."""
    s["buffers"]["off"]["dtype"] = dtype
    cast = float if dtype.startswith("float") else int
    s["buffers"]["off"]["init"] = [cast(v) for v in s["buffers"]["off"]["init"]]
    return s


# ---------------------------------------------------------------- the grammar


@pytest.mark.parametrize(
    "text, source",
    [
        ("ids[0]", "ids[0]"),
        ("ids[dev, 1] + 1", "ids[lax.axis_index('dev'), 1] + 1"),
        ("n_ref[...]", "n_ref[...]"),
        ("(ids[(dev + 1) % 4] * 2) % axis_size(dev)",
         "ids[(lax.axis_index('dev') + 1) % 4] * 2 % lax.axis_size('dev')"),
        ("pl.semaphore_read(sem) > 0", "pl.semaphore_read(sem) > 0"),
    ],
)  # fmt: skip
def test_loads_parse_print_and_are_never_constants(text, source):
    e = E.parse(text)
    assert E.parse(e.label()) == e  # the label is a scenario's text again
    assert e.source(E.Writer()) == source
    assert E.reads_data(e) and not e.is_const and E.traced(e)
    with pytest.raises(E.ExprDataDependent):
        e.eval(E.Env({"dev": 0}, {"dev": 4}))


@pytest.mark.parametrize("text", ["ids[0:2]", "ids[0][1]()", "pl.semaphore_read(sems[0])"])
def test_loads_outside_the_grammar_are_refused(text):
    with pytest.raises(E.ExprError):
        E.parse(text)


def test_value_dtype_follows_jax_promotion():
    def dt(name: str) -> str:
        return {"i16": "int16", "f": "float32", "i": "int32"}[name]

    assert E.value_dtype(E.parse("i16[0] + 1"), dt) == "int16"  # a Python int is weak
    assert E.value_dtype(E.parse("i16[0] + dev"), dt) == "int32"
    assert E.value_dtype(E.parse("f[0] * 2"), dt) == "float32"
    assert E.value_dtype(E.parse("i[0] > 1"), dt) == "bool"
    assert E.value_dtype(E.parse("pl.semaphore_read(s)"), dt) == "int32"
    # a bool with a Python int is a (weak) int32; remainder and floor division of bools too
    assert E.value_dtype(E.parse("(i[0] > 1) * 1"), dt) == "int32"
    assert E.value_dtype(E.parse("(i[0] > 1) % (i[1] > 1)"), dt) == "int32"
    assert E.value_dtype(E.parse("(i[0] > 1) + (i[1] > 1)"), dt) == "bool"


def test_a_load_of_a_name_nothing_binds_is_an_unknown_name():
    s = _table_ring(device="idz[0]")
    d = first_error(check(load_scenario(s)))
    assert d.code == "XREF_UNKNOWN_NAME" and d.path.endswith("transforms[0].device")
    assert "'idz'" in d.message


# ---------------------------------------------------------------- against JAX


@pytest.mark.slow
def test_jax_traces_and_lowers_what_the_check_accepts_and_refuses_what_it_refuses():
    """Every kernel shape through JAX's trace and Mosaic GPU lowering (jax.export for
    cuda): the check's first error is JAX's, code and message."""
    cases = {
        "ring-int32": _table_ring(),
        "ring-float32": _table_ring([float(v) for v in RING], "float32"),
        "ring-int16": _table_ring(dtype="int16"),
        "ring-uint32": _table_ring(dtype="uint32"),
        "ring-dict": _table_ring(device={"dev": "ids_ref[0]"}),
        "ring-dict-float": _table_ring([float(v) for v in RING], "float32", {"dev": "ids_ref[0]"}),
        "ring-indexed-by-dev": _table_ring([1, 2, 3, 0], device="ids_ref[dev]"),
        "gather": _one_device(GATHER, [3, 1, 0, 2], "gather", "plgpu.kernel"),
        "when-loop": _one_device(WHEN_LOOP, [0, 3, 2, 0], "when-loop", "plgpu.kernel"),
        "gather-scratch": _gather_scratch(),
        "gather-float32": _typed(_one_device(GATHER, [3, 1, 0, 2], "g", PLGPU), "float32"),
        "loop-float32": _typed(_one_device(LOOP, [0, 0, 2, 0], "l", PLGPU), "float32"),
        "loop-int16": _typed(_one_device(LOOP, [0, 0, 2, 0], "l", PLGPU), "int16"),
        "pl-loop-float32": _typed(_one_device(PL_LOOP, [0, 0, 2, 0], "l", PLGPU), "float32"),
        "when-float32": _typed(_one_device(WHEN_FLOAT, [0, 1.5, 0, 0], "w", PLGPU), "float32"),
    }
    scenarios = {k: load_scenario(v) for k, v in cases.items()}
    jax = probe_many(list(scenarios.values()), ("build", "trace", "gpu-lower"))
    for (name, s), got in zip(scenarios.items(), jax, strict=True):
        diags = check(s)
        assert verdict(diags) != "invalid" or first_error(diags).stage in JAX_STAGES, name
        d = first_error([d for d in diags if d.stage in JAX_STAGES])
        mine = None if d is None else (d.code, d.stage, _said(d.jax.message if d.jax else ""))
        theirs = (
            None if got["stage"] is None else (got["code"], got["stage"], _said(got["message"]))
        )
        assert mine == theirs, name
    assert first_error(check(scenarios["ring-int16"])).message == (
        "`device_id`s must be an int32 value, but got int16"
    )
    codes = {k: getattr(first_error(check(s)), "code", None) for k, s in scenarios.items()}
    assert codes == {
        **dict.fromkeys(scenarios, None),
        **dict.fromkeys(["ring-float32", "ring-int16", "ring-uint32"], "DEVICE_ID_DTYPE"),
        "ring-dict-float": "DEVICE_ID_DTYPE",
        "gather-float32": "INDEX_DTYPE",
        "loop-float32": "LOOP_BOUND_DTYPE",
        # pl.loop takes float bounds, and counts in floats: its index is no index
        "pl-loop-float32": "INDEX_DTYPE",
    }


@pytest.mark.slow
def test_loaded_indices_simulate_bit_for_bit_as_jax_interprets_them():
    scenarios = [
        load_scenario(_one_device(GATHER, [3, 1, 0, 2], "gather")),
        load_scenario(_one_device(GATHER, [0, 0, 2, 2], "gather-same")),
        load_scenario(_one_device(WHEN_LOOP, [0, 3, 2, 0], "when-loop")),
        load_scenario(_one_device(WHEN_LOOP, [2, 0, 0, 0], "when-loop-none")),
        load_scenario(_typed(_one_device(WHEN_FLOAT, [0, 0.5, 0, 0], "when-float"), "float32")),
        load_scenario(_typed(_one_device(LOOP, [0, 0, 3, 0], "loop-int16"), "int16")),
    ]
    got = run_in_jax(scenarios)
    x = np.arange(4 * ROWS, dtype=np.float32).reshape(4, ROWS)
    for s, theirs in zip(scenarios, got, strict=True):
        assert not isinstance(theirs, str), (s.name, theirs)
        sim = simulate(s, check=False)
        assert sim.ok, (s.name, sim.error)
        assert same_bits(sim.outputs["out"], theirs["out"], flushed=True), s.name
    off = [3, 1, 0, 2]
    np.testing.assert_array_equal(
        simulate(scenarios[0]).outputs["out"], np.stack([x[off[0]], x[off[1]]])
    )
    # block 1 (off[1] = 3 > 1) doubles its row; both add x[0] and x[1] (off[2] = 2 trips)
    want = np.stack([x[0], 2 * x[1]]) + x[0] + x[1]
    np.testing.assert_array_equal(simulate(scenarios[2]).outputs["out"], want)


# ---------------------------------------------------------------- simulate and check


def test_a_peer_loaded_from_a_table_simulates_to_the_values_the_kernel_computes():
    s = load_scenario(_table_ring())
    r = simulate(s)
    assert r.ok, r.error
    x = np.arange(4 * ROWS, dtype=np.float32).reshape(4, ROWS)
    table = np.array(RING).reshape(4, 4)
    want = np.zeros((4, ROWS), np.float32)
    for d in range(4):
        want[table[d, 0]] = x[d]
    np.testing.assert_array_equal(r.outputs["out"].reshape(4, ROWS), want)


def test_the_check_follows_the_table_on_every_device():
    """Checked with the values the call is given (a note), on every device: a table
    that is a ring is valid; one that sends two devices to one peer races and
    deadlocks; one that names device 7 is out of the mesh, on the device that loads it."""
    ok = check(load_scenario(_table_ring()))
    assert verdict(ok) == "valid"
    notes = [d for d in ok if d.code == "DATA_DEPENDENT"]
    assert [d.severity for d in notes] == ["info"]
    assert "checked on every device with the values the call is given" in notes[0].message

    twice = copy.deepcopy(RING)
    twice[12] = 1  # device 3 sends to device 1 too: nobody sends to device 0
    codes = {d.code for d in check(load_scenario(_table_ring(twice))) if d.is_error}
    assert {"RACE_DETECTED", "DEADLOCK_SEMAPHORE"} <= codes

    outside = copy.deepcopy(RING)
    outside[12] = 7
    d = first_error(check(load_scenario(_table_ring(outside))))
    assert d.code == "REMOTE_DEVICE_OOB"
    assert "device id ids_ref[0] is 7 on device 3" in d.message


def test_a_loaded_index_outside_its_ref_is_found():
    body = [_row("x_ref", "off_ref[b] + 2", "src"), _row("out", "b", "dst")]
    body.append({"op": "copy", "src": "src", "dst": "dst"})
    diags = check(load_scenario(_one_device(body, [0, 3, 0, 0], "gather-oob")))
    assert first_error(diags).code in ("OOB_INDEX", "OOB_READ"), [d.one_line() for d in diags]


def test_a_load_the_kernel_computes_is_followed_with_its_values(monkeypatch):
    """An index loaded from scratch the kernel writes (a TMA copy of the table, waited
    on): the check follows the values the kernel computes over every schedule it
    explores, and says so (a note: "valid"); without the wait, the load races the copy
    and the check says that. Where it cannot follow them (here: past its bound), it stops
    at the load, says what it did not check, and the verdict is "valid where checked"."""
    from mpmd_lab.validate import sync

    sc = load_scenario(_gather_scratch())
    diags = check(sc)
    assert verdict(diags) == "valid", [d.one_line() for d in diags]
    (d,) = [d for d in diags if d.code == "DATA_DEPENDENT"]
    assert d.severity == "info" and "load from tbl" in d.message
    assert "which the kernel writes: checked with the values it computes" in d.message

    racy = _gather_scratch()
    del racy["call"]["programs"][0]["body"][1]  # the barrier_wait
    first = first_error(check(load_scenario(racy)))
    assert first.code.startswith("RACE") and "tbl" in first.message, first.one_line()

    monkeypatch.setattr(sync, "MAX_FOLLOWED", 0)
    diags = check(load_scenario({**_gather_scratch(), "name": "gather-scratch-unfollowed"}))
    assert verdict(diags) == "valid where checked", [d.one_line() for d in diags]
    (d,) = [d for d in diags if d.code == "DATA_DEPENDENT"]
    assert d.severity == "warning" and "tbl is scratch" in d.message
    assert "not checked" in d.message
    assert "valid where checked" in format_diagnostics(sc.name, diags).splitlines()[-1]
    r = simulate(sc, check=False)
    assert r.ok, r.error
    x = np.arange(4 * ROWS, dtype=np.float32).reshape(4, ROWS)
    np.testing.assert_array_equal(r.outputs["out"], np.stack([x[3], x[1]]))


def test_a_semaphore_read_in_a_condition_is_checked_for_every_value_it_may_see():
    """The card's kernel: each block copies its half where its read saw block 1's
    signal. Each read is a choice point of the exploration (where it falls between the
    signals): every value was checked, so the verdict is plain valid, with a note."""
    from mpmd_lab.knowledge import card

    s = load_scenario(card("DATA_DEPENDENT").example.scenario)
    diags = check(s)
    assert verdict(diags) == "valid", [d.one_line() for d in diags]
    (d,) = [d for d in diags if d.code == "DATA_DEPENDENT"]
    assert d.severity == "info" and d.path.endswith("body[1].cond")
    assert "checked for every value each may see" in d.message
    r = simulate(s, check=False)
    assert r.ok, r.error
    x = np.arange(256, dtype=np.float32)
    out = r.outputs["out"]
    # block 0 runs its read before block 1 signals in the simulator's lockstep order:
    # its half stays as JAX's GPU interpreter leaves unwritten memory; block 1 copies
    assert np.isnan(out[:128]).all() and np.array_equal(out[128:], x[128:])


def _half(let: str, ref: str, start: str) -> dict:
    """A view of ROWS elements of ``ref`` from ``start``."""
    return {"let": let, "ref": ref, "transforms": [{"op": "at", "index": [{"ds": [start, ROWS]}]}]}


def _copy(tag: str, start: str) -> list[dict]:
    """Copy ROWS elements of x from ``start`` into ``out`` there (views ``x{tag}``,
    ``o{tag}``)."""
    return [
        _half(f"x{tag}", "x_ref", start),
        _half(f"o{tag}", "out", start),
        {"op": "copy", "src": f"x{tag}", "dst": f"o{tag}"},
    ]


def _when(cond: str, *body: Any) -> dict:
    """``pl.when(cond)`` around ``body`` (statements, or lists of them)."""
    flat = [st for b in body for st in (b if isinstance(b, list) else [b])]
    return {"op": "when", "cond": cond, "body": flat}


SIGNAL = {"op": "semaphore_signal", "sem": "sem"}
WAIT = {"op": "semaphore_wait", "sem": "sem"}


def _read_guard(dst: str, name: str) -> dict:
    """2 blocks, a global semaphore: each block reads it first; block 0 copies x[dst]
    into out[dst] where its read saw a signal. Block 1 signals, then copies the upper
    half and takes its signal back. ``dst`` "128": block 0's copy races block 1's,
    but only where block 0 reads after block 1's signal (the lockstep order reads first);
    "0": block 0 writes its own half (safe whatever it reads)."""
    body = [
        _when("pl.semaphore_read(sem) > 0", _when("b == 0", _copy("s", dst))),
        _when("b == 1", SIGNAL, _copy("h", str(ROWS)), WAIT),
    ]
    return {
        "schema": "mpmd-lab/scenario@1",
        "name": name,
        "buffers": {"x": {"shape": [2 * ROWS], "dtype": "float32", "init": "iota"}},
        "call": {
            "entry": PLGPU,
            "args": [{"buffer": "x", "param": "x_ref"}],
            "outputs": {"out": {"shape": [2 * ROWS], "dtype": "float32"}},
            "scratch": {"sem": {"kind": "semaphore", "alloc": "get_global"}},
            "programs": [
                {"mesh": {"grid": {"b": 2}, "cluster": {}, "threads": None}, "body": body}
            ],
        },
    }


def test_a_write_guarded_by_a_read_that_races_only_after_the_signal_is_found():
    """The lockstep order runs block 0's read before block 1 signals (it reads 0 and
    writes nothing): simulate sees no race. The exploration lets the read fall after
    the signal too: block 0 then writes the half block 1 writes, unordered, and the
    witness schedule (the read's value among its choices) replays the race."""
    s = load_scenario(_read_guard(str(ROWS), "read-guard-racy"))
    assert simulate(s, check=False).races == []
    diags = check(s)
    d = first_error(diags)
    assert d is not None and d.code == "RACE_DETECTED", [x.one_line() for x in diags]
    assert "out[128:256]" in d.message
    assert "pl.semaphore_read at" in d.witness["race"]["missing_edge"]
    reads = [c for c in d.witness["schedule"]["choices"] if "reads" in c]
    assert any(c["value"] == 1 and "block 0" in c["who"] for c in reads), reads
    res = simulate(s, schedule=d.witness)
    race = d.witness["race"]
    shown = {(r.first.where, r.second.where) for r in res.races}
    assert (race["first"]["at"], race["second"]["at"]) in shown, shown
    assert not any("does not fit" in n for n in res.notes)
    # every value the read may see was explored: no DATA_DEPENDENT warning
    assert [x.severity for x in diags if x.code == "DATA_DEPENDENT"] == ["info"]


def test_the_same_kernel_made_safe_is_plainly_valid():
    diags = check(load_scenario(_read_guard("0", "read-guard-safe")))
    assert verdict(diags) == "valid", [x.one_line() for x in diags]
    assert [x.severity for x in diags if x.code == "DATA_DEPENDENT"] == ["info"]


def _reads_twice() -> dict:
    """Block 0 writes block 1's half only where its first read saw block 1's signal and
    its second (later in program order, with no wait between) did not."""
    s = _read_guard("0", "reads-monotone")
    s["call"]["programs"][0]["body"] = [
        _when(
            "pl.semaphore_read(sem) > 0",
            _when("b == 0", _when("pl.semaphore_read(sem) == 0", _copy("s", str(ROWS)))),
        ),
        _when("b == 1", SIGNAL, _copy("h", str(ROWS))),
        _when("b == 0", WAIT),
    ]
    return s


def test_a_threads_reads_never_go_back():
    """No schedule runs block 0's write of :func:`_reads_twice` (a counter's reads by
    one thread never lose a signal; its only decrement comes after both reads), so the
    kernel is valid, not the race a read seeing less would make."""
    diags = check(load_scenario(_reads_twice()))
    assert verdict(diags) == "valid", [d.one_line() for d in diags]


def _polls(n: int) -> dict:
    """Block 1 signals ``n`` times; both blocks read the semaphore ``n`` times, each
    copying its own half where the read saw more than the trip's index (safe)."""
    s = _read_guard("0", f"polls-{n}")
    s["call"]["programs"][0]["body"] = [
        _when("b == 1", {"op": "loop", "var": "i", "stop": str(n), "body": [SIGNAL]}),
        {
            "op": "loop",
            "var": "j",
            "stop": str(n),
            "body": [_when("pl.semaphore_read(sem) > j", _copy("s", "b * 128"))],
        },
        _when("b == 1", {**WAIT, "value": str(n)}),
    ]
    return s


def test_reads_past_the_exploration_bound_are_said_not_checked():
    """Two polls each: every value explored (plain valid). Four: the reads' values
    multiply past the exploration's bound of schedules: the read keeps its warning,
    naming the bound, and the verdict is "valid where checked"."""
    small = check(load_scenario(_polls(2)))
    assert verdict(small) == "valid", [x.one_line() for x in small]
    big = check(load_scenario(_polls(4)))
    assert verdict(big) == "valid where checked"
    (d,) = [x for x in big if x.code == "DATA_DEPENDENT"]
    assert d.severity == "warning" and d.path.endswith("body[1].body[0].cond")
    assert "not for every one it may see" in d.message and "bound of" in d.message


def test_the_check_agrees_with_the_exhaustive_explorer_on_read_guarded_kernels():
    """tests/sync_explorer.py, written apart from the engine, runs every interleaving of
    the statements, a read's branch included (the counter when it runs): its race and
    deadlock verdicts are the check's on each read-guarded kernel."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from mpmd_lab.knowledge import card
    from sync_explorer import compile_scenario, enumerate_traces, explore

    kinds_of = {
        "RACE_DETECTED": "race",
        "DEADLOCK_SEMAPHORE": "deadlock",
        "SEMAPHORE_IMBALANCE": "imbalance",
    }
    cases = {
        "racy": _read_guard(str(ROWS), "racy"),
        "safe": _read_guard("0", "safe"),
        "twice": _reads_twice(),
        "polls": _polls(2),
        "card": load_scenario(card("DATA_DEPENDENT").example.scenario).model_dump(mode="json"),
    }
    got, want = {}, {}
    for name, raw in cases.items():
        prog = compile_scenario(raw)
        label = explore(prog).label()
        assert enumerate_traces(prog)[0].label()["kinds"] == label["kinds"], name
        want[name] = label["kinds"]
        kinds = {kinds_of[d.code] for d in check(load_scenario(raw)) if d.code in kinds_of}
        got[name] = sorted(kinds) or ["clean"]
    assert got == want
    assert want["racy"] == ["race"] and want["safe"] == ["clean"]


def _random_read_kernel(rng: Any, n: int) -> dict:
    """2 or 3 blocks sharing a global semaphore, each a few random statements: a signal,
    a wait, a copy into one of three regions of ``out``, or a ``pl.when`` on
    ``pl.semaphore_read(sem) OP k`` around one or two of those."""

    def one(k: int) -> list[dict]:
        r = rng.random()
        if r < 0.25:
            return [SIGNAL]
        if r < 0.35:
            return [WAIT]
        return _copy(str(k), str(rng.randrange(3) * ROWS))

    body = []
    count = iter(range(1000))
    for b in range(rng.choice([2, 3])):
        stmts: list[dict] = []
        for _ in range(rng.randint(1, 4)):
            if rng.random() < 0.35:
                inner = [st for _ in range(rng.randint(1, 2)) for st in one(next(count))]
                op = rng.choice([">", "==", ">=", "<"])
                cond = f"pl.semaphore_read(sem) {op} {rng.randint(0, 2)}"
                stmts.append(_when(cond, inner))
            else:
                stmts += one(next(count))
        body.append(_when(f"b == {b}", stmts))
    s = _read_guard("0", f"random-{n}")
    s["buffers"]["x"]["shape"] = [3 * ROWS]
    s["call"]["outputs"]["out"]["shape"] = [3 * ROWS]
    s["call"]["programs"][0]["mesh"]["grid"] = {"b": len(body)}
    s["call"]["programs"][0]["body"] = body
    return s


@pytest.mark.slow
def test_the_check_misses_nothing_the_exhaustive_explorer_finds_in_random_kernels():
    """80 random read-guarded kernels against tests/sync_explorer.py (every interleaving;
    those where the check's bound stopped its exploration, said by a warning, aside): the
    check finds every race and imbalance the explorer finds (where neither deadlocks:
    a deadlock stops the explorer's runs and the check's differently), and says a kernel
    is clean only where the explorer does. Where neither deadlocks they agree exactly:
    a read is an acquire in both (Mosaic GPU's ``ld.acquire.sys.u32``), so a race the
    explorer's interleavings rule out is not reported (on main, where a read ordered
    nothing, kernel 47 was such a false race). The explorer's two forms agree too: its
    vector clocks (``enumerate_traces``) order a read's branch after the signals before
    it, as its interleavings do."""
    import random
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from sync_explorer import TooBig, compile_scenario, enumerate_traces, explore

    kinds_of = {
        "RACE": "race",
        "RACE_DETECTED": "race",
        "DEADLOCK_SEMAPHORE": "deadlock",
        "SEMAPHORE_IMBALANCE": "imbalance",
    }
    rng = random.Random(29)
    compared = agreed = 0
    for n in range(80):
        raw = _random_read_kernel(rng, n)
        prog = compile_scenario(raw)
        label = explore(prog).label()["kinds"]
        theirs = set(label)
        try:
            assert enumerate_traces(prog, max_traces=20_000)[0].label()["kinds"] == label, n
        except TooBig:
            pass  # (too many traces to list one by one: the memoised form alone judges)
        diags = check(load_scenario(raw))
        if [d for d in diags if d.code == "DATA_DEPENDENT" and d.severity == "warning"]:
            continue  # (its bound stopped the exploration, and it says so: not compared)
        mine = {kinds_of[d.code] for d in diags if d.code in kinds_of} or {"clean"}
        assert (mine == {"clean"}) == (theirs == {"clean"}), (n, mine, theirs)
        if "deadlock" not in theirs | mine:
            assert theirs == mine, (n, mine, theirs)
        compared += 1
        agreed += mine == theirs
    assert compared >= 75 and agreed >= compared - 4, (compared, agreed)


def test_the_check_and_the_engine_find_the_same_semaphore_reads():
    """The check hands the exploration the statements that read a semaphore (from its
    plan); the engine finds them itself where nobody does (a replayed schedule): both
    by the same flat statement index, nested ones included."""
    from mpmd_lab.engine.core import _sem_reads as engine_reads
    from mpmd_lab.engine.core import compile_body
    from mpmd_lab.knowledge import card
    from mpmd_lab.validate.context import Ctx
    from mpmd_lab.validate.sync import _sem_reads as check_reads

    cases = [
        _read_guard(str(ROWS), "racy"),
        _polls(3),
        card("DATA_DEPENDENT").example.scenario,
        _table_ring(),  # (loads, no semaphore read)
    ]
    found = []
    for raw in cases:
        s = load_scenario(raw)
        mine = [
            engine_reads(compile_body(list(p.body), f"call.programs[{i}].body", [0])[0])
            for i, p in enumerate(s.call.programs)
        ]
        theirs = check_reads(Ctx(s))
        assert theirs == mine, s.name
        found.append(mine)
    assert found == [[{0: ("sem",)}], [{4: ("sem",)}], [{2: ("sem",)}], [{}]]


@pytest.mark.slow
def test_jax_traces_and_lowers_the_read_guarded_kernels():
    """Both read-guarded kernels, the polls and the double read: JAX's trace and Mosaic GPU lowering
    (jax.export for cuda) accept them, as the check does."""
    scenarios = [
        load_scenario(_read_guard(str(ROWS), "read-guard-racy")),
        load_scenario(_read_guard("0", "read-guard-safe")),
        load_scenario(_polls(2)),
        load_scenario(_reads_twice()),
    ]
    got = probe_many(scenarios, ("build", "trace", "gpu-lower"))
    for s, g in zip(scenarios, got, strict=True):
        assert g["stage"] is None, (s.name, g)
        assert not [d for d in check(s) if d.stage in JAX_STAGES and d.is_error], s.name


def test_loads_are_exported_as_the_kernel_writes_them():
    src = codegen.generate(load_scenario(_table_ring()))
    assert "plgpu.remote_ref(out, ids_ref[0])" in src
    assert "pl.semaphore_signal(sem, device_id=ids_ref[0])" in src


def test_a_load_in_a_scenario_file_is_a_scenario_and_a_slice_is_not():
    bad = _table_ring(device="ids_ref[0:1]")
    with pytest.raises(ScenarioError):
        load_scenario(bad)


# ---------------------------------------------------------------- from_jax

#: kernels written as JAX's tests write them (tests/kernels/): each imports faithfully
#: and JAX lowers it; those with values simulate to them
KERNELS = [
    "datadep_ring_table",
    "datadep_smem_table",
    "datadep_gather_offset",
    "datadep_loop_bound",
    "sync_read_in_when",
]


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> dict[str, dict]:
    from test_importer import imported_all

    return imported_all(KERNELS, tmp_path_factory.mktemp("datadep"))


def _body(imp: Any) -> list[dict]:
    return [st.model_dump(exclude_defaults=True) for st in imp.scenario.call.programs[0].body]


@pytest.mark.slow
@pytest.mark.parametrize("name", KERNELS)
def test_the_kernel_imports_faithfully_and_simulates_to_its_values(imported, name):
    r = imported[name]
    imp = r["obj"]
    assert r["lowered"] == "ok"  # real JAX: the user's own function lowers for the GPU
    assert imp.faithful and imp.unsupported == [], imp.unsupported
    diags = check(imp.scenario)
    assert first_error(diags) is None, [d.one_line() for d in diags]
    if r["expected"] is None:
        return  # (its values depend on the order the blocks run: below)
    result = simulate(imp.scenario)
    assert result.ok, [d.one_line() for d in result.diagnostics()]
    got = imp.outputs(result.outputs)
    for g, e in zip(got, r["expected"], strict=True):
        np.testing.assert_array_equal(g, e)


@pytest.mark.slow
def test_the_import_writes_the_loads_as_the_kernel_does(imported):
    ring = _body(imported["datadep_ring_table"]["obj"])
    assert ring[0]["transforms"] == [{"op": "remote_ref", "device": "ids_ref[0]"}]
    assert ring[2] == {"op": "semaphore_signal", "sem": "sem", "device": "ids_ref[0]"}
    gather = _body(imported["datadep_gather_offset"]["obj"])
    assert gather[0]["transforms"] == [{"op": "at", "index": ["slot_ref[0]"]}]
    loop = _body(imported["datadep_loop_bound"]["obj"])
    assert loop[1]["op"] == "loop" and loop[1]["stop"] == "n_ref[0]"
    when = _body(imported["sync_read_in_when"]["obj"])
    assert when[1]["op"] == "when" and when[1]["cond"] == "pl.semaphore_read(sem) > 0"


@pytest.mark.slow
def test_what_the_check_made_of_each_imported_load(imported):
    """A table given as input: checked with its values (a note, "valid"); a table the
    kernel copies into SMEM: followed with the values it computes (a note, "valid"); a
    semaphore read: every value it may see explored (a note, "valid")."""
    verdicts = {}
    for name in KERNELS:
        diags = check(imported[name]["obj"].scenario)
        kinds = sorted({d.severity for d in diags if d.code == "DATA_DEPENDENT"})
        verdicts[name] = (verdict(diags), kinds)
    assert verdicts == {
        "datadep_ring_table": ("valid", ["info"]),
        "datadep_smem_table": ("valid", ["info"]),  # followed with the kernel's values
        "datadep_gather_offset": ("valid", ["info"]),
        "datadep_loop_bound": ("valid", ["info"]),
        "sync_read_in_when": ("valid", ["info"]),  # every value the read may see
    }


# ---------------------------------------------------------------- the verdict, everywhere


def test_every_front_end_says_valid_where_checked(tmp_path):
    """The CLI's last line and its JSON, the Session and the Lab's status: "valid where
    checked" where the check said what it did not check; plain "valid" where it checked
    everything (a table given as input)."""
    import json
    import subprocess
    import sys

    from mpmd_lab.session import Session
    from mpmd_lab.widgets.lab import Lab

    partial = tmp_path / "partial.json"

    # semaphore reads whose values multiply past the exploration's bound
    partial.write_text(json.dumps(_polls(4)))
    whole = tmp_path / "whole.json"
    whole.write_text(json.dumps(_table_ring()))
    cli = [sys.executable, "-m", "mpmd_lab.cli", "check"]
    r = subprocess.run([*cli, str(partial)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.splitlines()[-1].startswith(
        "polls-4: valid where checked ("
    ), r.stdout
    r = subprocess.run([*cli, str(partial), "--json"], capture_output=True, text=True, timeout=300)
    out = json.loads(r.stdout)
    assert out["valid"] is True and out["verdict"] == "valid where checked"
    r = subprocess.run([*cli, str(whole), "--json"], capture_output=True, text=True, timeout=300)
    assert json.loads(r.stdout)["verdict"] == "valid"

    assert Session(str(partial)).verdict == "valid where checked"
    assert Session(str(whole)).verdict == "valid"
    lab = Lab(str(partial), background=False, graph=False)
    assert "✔ valid where checked" in lab.title.value
    assert "✔ valid</span>" in Lab(str(whole), background=False, graph=False).title.value


def test_a_load_is_a_read_the_race_check_judges():
    """Block 1 overwrites the table block 0 loads its index from, with nothing ordering
    them: the check follows the values and reports the load and the write as a race,
    and so does simulate."""
    body = [
        {
            "op": "when",
            "cond": "b == 1",
            "body": [{"op": "copy", "src": "y_ref", "dst": "off_ref"}],
        },
        _row("x_ref", "off_ref[0]", "src"),
        _row("out", "b", "dst"),
        {"op": "copy", "src": "src", "dst": "dst"},
    ]
    s = _one_device(body, [1] * ROWS, "load-race", PLGPU)
    s["buffers"]["off"]["shape"] = [ROWS]
    s["buffers"]["y"] = {"shape": [ROWS], "dtype": "int32", "init": "zeros"}
    s["call"]["args"].append({"buffer": "y", "param": "y_ref"})
    sc = load_scenario(s)
    d = first_error(check(sc))
    assert d.code == "RACE" and d.stage == "gpu-run", d.one_line()
    assert d.message.startswith("Read/write race on off[0:1]")
    r = simulate(sc, check=False)
    assert r.ok, r.error
    (race,) = r.races
    assert {race.first.field, race.second.field} == {"load", "dst"}
    assert {race.first.kind, race.second.kind} == {"read", "write"}


def test_a_load_outside_its_ref_and_a_load_through_a_view():
    """An index of a load is checked on every device: ``ids_ref[dev + 1]`` reads past the
    table on device 3 (OOB_INDEX: JAX checks none); a negative one counts from the end,
    as a view's does. A load may name a ``let`` view (the table's row of this device)."""
    d = first_error(check(load_scenario(_table_ring(device="ids_ref[dev + 1]"))))
    assert d.code == "OOB_INDEX" and d.stage == "gpu-run"
    assert d.message.startswith("index 4 out of bounds for size 4 (a load of ids_ref)")
    s = _table_ring([1, 2, 3, 0], device="row[0]")
    row = {
        "let": "row",
        "ref": "ids_ref",
        "transforms": [{"op": "at", "index": [{"ds": ["dev", 1]}]}],
    }
    s["call"]["programs"][0]["body"].insert(0, row)
    sc = load_scenario(s)
    assert verdict(check(sc)) == "valid"
    x = np.arange(4 * ROWS, dtype=np.float32).reshape(4, ROWS)
    want = np.stack([x[(d - 1) % 4] for d in range(4)])
    np.testing.assert_array_equal(simulate(sc).outputs["out"].reshape(4, ROWS), want)
    wrapped = load_scenario(_table_ring([1, 2, 3, 0], device="ids_ref[dev - 4]"))
    assert verdict(check(wrapped)) == "valid"


def test_the_graph_draws_what_an_expression_loads():
    """A ``reads`` edge from the table to each statement and view whose expression loads
    it; the device traffic says the peer comes from data (no pair is drawn)."""
    from mpmd_lab.graph import build_graph, to_text

    g = build_graph(load_scenario(_table_ring()))
    loads = [(u, v) for u, v, e in g.edges(data=True) if e["label"] == "load ids_ref"]
    assert len(loads) == 2 and all(
        e["kind"] == "reads" for _, _, e in g.edges(data=True) if e["label"] == "load ids_ref"
    )
    text = to_text(g)
    assert "peer by data via call.programs[0].body[0].transforms[0].device: ids_ref[0]" in text
    assert "(no peer, multicast or signal traffic)" not in text


@pytest.mark.slow
def test_the_dtype_errors_fix_to_what_jax_accepts():
    """Each dtype error offers a verified fix (the loaded table held as int32), and JAX
    traces and lowers the fixed kernel."""
    from pathlib import Path

    from mpmd_lab.fixes import apply_fix

    codes = ("DEVICE_ID_DTYPE", "INDEX_DTYPE", "LOOP_BOUND_DTYPE")
    here = Path(__file__).parent / "scenarios" / "codes"
    fixed = []
    for code in codes:
        d = first_error(check(load_scenario(here / f"{code}.json")))
        assert d.code == code and d.fix is not None and d.fix.after == [], d.one_line()
        assert d.fix.description.startswith("hold ") and "as int32" in d.fix.description
        fixed.append(apply_fix(load_scenario(here / f"{code}.json"), d.fix))
    for s, got in zip(fixed, probe_many(fixed, ("build", "trace", "gpu-lower")), strict=True):
        assert got["stage"] is None, (s.name, got)


def test_an_arguments_view_loads_nothing_and_a_typed_index_may_load():
    """An argument's view is made by the caller, before the kernel runs: an index there
    that loads from a kernel's ref names nothing (the generated call would be Python's
    NameError). An index typed in the Lab may load (``pl.ds(off_ref[b] * 16, 16)``)."""
    s = _one_device(GATHER, [3, 1, 0, 2], "arg-load", "pl.kernel")
    s["buffers"]["x"]["as_ref"] = True
    s["call"]["args"][0]["transforms"] = [{"op": "at", "index": [{"ds": ["off_ref[0]", 2]}]}]
    d = first_error(check(load_scenario(s)))
    assert (d.code, d.path) == ("XREF_UNKNOWN_NAME", "call.args[0].transforms[0].index[0]")
    assert E.parse_index("pl.ds(off_ref[b] * 16, 16), ids[0]") == [
        {"ds": ["off_ref[b] * 16", 16]},
        "ids[0]",
    ]


# ---------------------------------------------------------------- too few indices


def _ds(ref: str, start: str, name: str) -> dict:
    return {"let": name, "ref": ref, "transforms": [{"op": "at", "index": [{"ds": [start, 1]}]}]}


def _shaped(s: dict, shape: list[int], init: list[Any]) -> dict:
    """``s`` with its table ``off`` of another shape."""
    s["buffers"]["off"].update(shape=shape, init=init)
    return s


def _short_loads() -> dict[str, dict]:
    """A load with fewer indices than its table has dims (an array, not a scalar) in
    each place a scalar is wanted: a device id (a peer view, a signal), a ``pl.ds``
    start, a loop bound (``fori_loop``, ``pl.loop``), a ``pl.when`` condition, a
    semaphore wait's value; and a load indexed by such an array (a gather)."""
    signal_only = _table_ring()
    signal_only["call"]["programs"][0]["body"][2]["device"] = "ids_ref[...]"
    cond = {**WHEN_LOOP[3], "cond": "off_ref[...] > 1"}
    wait_value = _table_ring()
    wait_value["call"]["programs"][0]["body"][3]["value"] = "ids_ref[...] * 0 + 1"
    gather_ds = _one_device(
        [_ds("x_ref", "off_ref[off_ref[...]]", "src"), _ds("out", "b", "dst"), GATHER[2]],
        [3, 1, 0, 2], "ds", PLGPU,
    )  # fmt: skip
    return {
        "wait-value": wait_value,
        "device-gather": _table_ring(device="ids_ref[ids_ref[...] * 0]"),
        "ds-gather": gather_ds,
        "device": _table_ring(device="ids_ref[...]"),
        "device-dict-plus": _table_ring(device={"dev": "(ids_ref[...] + 1) % 4"}),
        "device-signal": signal_only,
        "ds-start": _one_device(
            [_ds("x_ref", "off_ref[...]", "src"), _ds("out", "b", "dst"), GATHER[2]],
            [3, 1, 0, 2], "ds", PLGPU,
        ),
        "fori-stop": _one_device(
            [*LOOP[:3], {**LOOP[3], "stop": "off_ref[...]"}], [0, 0, 2, 0], "l", PLGPU
        ),
        "fori-stop-2d": _shaped(
            _one_device([*LOOP[:3], {**LOOP[3], "stop": "off_ref[...]"}], [0] * 4, "l", PLGPU),
            [2, 2], [[0, 3], [2, 0]],
        ),
        "pl-loop-stop": _one_device(
            [*PL_LOOP[:3], {**PL_LOOP[3], "stop": "off_ref[...]"}], [0, 0, 2, 0], "l", PLGPU
        ),
        "when": _one_device([*WHEN_LOOP[:3], cond], [0, 3, 2, 0], "w", PLGPU),
        "when-pl-kernel": _one_device([*WHEN_LOOP[:3], cond], [0, 3, 2, 0], "w", "pl.kernel"),
        "when-bare-float": _typed(
            _one_device([*WHEN_LOOP[:3], {**cond, "cond": "off_ref[...]"}], [0, 1, 0, 0], "w",
                        PLGPU),
            "float32",
        ),
        "when-gathered": _one_device(
            [*WHEN_LOOP[:3], {**cond, "cond": "off_ref[off_ref[...]] > 1"}], [0, 3, 2, 0], "w",
            PLGPU,
        ),
        "when-one-element": _shaped(
            _one_device([*WHEN_LOOP[:3], cond], [0] * 4, "w", PLGPU), [1], [3]
        ),
        "when-2d": _shaped(
            _one_device([*WHEN_LOOP[:3], cond], [0] * 4, "w", PLGPU), [2, 2], [[0, 3], [2, 0]]
        ),
        "when-row-of-2d": _shaped(
            _one_device([*WHEN_LOOP[:3], {**cond, "cond": "off_ref[b] > 1"}], [0] * 8, "w", PLGPU),
            [4, 2], [[0, 3], [2, 0], [1, 1], [0, 0]],
        ),
    }  # fmt: skip


#: the code each short load is refused with
SHORT_CODES = {
    "wait-value": "WAIT_VALUE_SHAPE",
    "device-gather": "GPU_GATHER_LOAD",
    "ds-gather": "GPU_GATHER_LOAD",
    "device": "JAX_ASSERTION",
    "device-dict-plus": "JAX_ASSERTION",
    "device-signal": "JAX_ASSERTION",
    "ds-start": "INDEX_DTYPE",
    "fori-stop": "LOOP_BOUND_SHAPE",
    "fori-stop-2d": "LOOP_BOUND_SHAPE",
    "pl-loop-stop": "LOOP_BOUND_SHAPE",
    "when": "COND_PRED_SHAPE",
    "when-pl-kernel": "COND_PRED_SHAPE",
    "when-bare-float": "COND_PRED_SHAPE",
    "when-gathered": "COND_PRED_SHAPE",
    "when-one-element": "COND_PRED_SHAPE",
    "when-2d": "COND_PRED_SHAPE",
    "when-row-of-2d": "COND_PRED_SHAPE",
}


def _array_start() -> dict:
    """A fori_loop from an array (``off_ref[...]``) to one: its counter is an array, and
    JAX traces the body (whose error comes first) before the loop's condition."""
    loop = {**LOOP[3], "start": "off_ref[...]", "stop": "off_ref[...] + 1"}
    return _one_device([*LOOP[:3], loop], [0, 0, 2, 0], "l", PLGPU)


def test_a_load_with_too_few_indices_is_an_array_and_each_scalar_use_refuses_it():
    """Not "valid where checked": the check stops where JAX does, at the field, with a
    fix that loads one element (every use of the table indexed: a ring's peer view and
    its signal both), verified to leave no error of that kind."""
    for name, raw in _short_loads().items():
        diags = check(load_scenario(raw))
        d = first_error(diags)
        assert verdict(diags) == "invalid" and d.code == SHORT_CODES[name], (name, d)
        assert d.fix is not None and d.fix.description.startswith("load one element"), name
        assert d.code not in d.fix.after, (name, d.fix.after)
    d = first_error(check(load_scenario(_short_loads()["device"])))
    assert d.path == "call.programs[0].body[0].transforms[0].device"
    assert [(e.path, e.value) for e in d.fix.edits] == [
        ("call.programs[0].body[0].transforms[0].device", "ids_ref[0]"),
        ("call.programs[0].body[2].device", "ids_ref[0]"),
    ]
    assert d.fix.after == []  # the ring is a ring again
    # a loop from an array: not followed (JAX's error is the body's), and said so
    diags = check(load_scenario(_array_start()))
    assert verdict(diags) == "valid where checked" and first_error(diags) is None
    assert E.value_shape(E.parse("t[t[...]] + 1"), lambda r: (4,)) == (4,)
    assert E.value_shape(E.parse("(ids[...] + 1) % 4 > 0"), lambda r: (4,)) == (4,)
    assert E.value_shape(E.parse("t[b] > 1"), lambda r: (4, 2)) == (2,)
    assert E.value_shape(E.parse("t[b, 0] + t[0, 1]"), lambda r: (4, 2)) == ()


@pytest.mark.slow
def test_a_load_with_too_few_indices_is_refused_as_jax_refuses_it():
    """JAX's trace and Mosaic GPU lowering (jax.export for cuda) on each short load:
    the check's first error is JAX's (code, stage, message); each fix, applied, is a
    kernel JAX traces and lowers."""
    from mpmd_lab.fixes import apply_fix

    scenarios = {k: load_scenario(v) for k, v in _short_loads().items()}
    diags = {k: check(s) for k, s in scenarios.items()}
    fixed = [apply_fix(scenarios[k], first_error(d).fix) for k, d in diags.items()]
    jax = probe_many([*scenarios.values(), *fixed], ("build", "trace", "gpu-lower"))
    for name, got in zip(scenarios, jax, strict=False):
        d = first_error([x for x in diags[name] if x.stage in JAX_STAGES])
        mine = (d.code, d.stage, _said(d.jax.message if d.jax else ""))
        assert mine == (got["code"], got["stage"], _said(got["message"])), name
    for s, got in zip(fixed, jax[len(scenarios) :], strict=True):
        assert got["stage"] is None, (s.name, got)
    (array_start,) = probe_many([load_scenario(_array_start())], ("build", "trace"))
    assert array_start["stage"] == "trace" and array_start["code"] != "LOOP_BOUND_SHAPE"


SHORT_KERNELS = ["datadep_short_peer", "datadep_short_ds"]


@pytest.mark.slow
def test_a_kernel_loading_too_few_indices_imports_as_written_and_is_refused_as_jax_lowers_it(
    tmp_path,
):
    """Kernels that load ``ids_ref[...]`` / ``off_ref[...]`` of a 1-element table where
    a scalar is wanted: JAX traces them and its real Mosaic GPU lowering of the user's
    own function refuses them. The import is faithful (the load as the kernel writes
    it), and the check's first error is the code of JAX's lowering error, at the user's
    line, with the fix that loads one element."""
    from mpmd_lab.catalogue import classify
    from mpmd_lab.fixes import apply_fix
    from test_importer import KERNELS as HERE_KERNELS
    from test_importer import imported_all

    got = imported_all(SHORT_KERNELS, tmp_path)
    for name in SHORT_KERNELS:
        imp = got[name]["obj"]
        assert imp.faithful and imp.unsupported == [], (name, imp.unsupported)
        jax_type, _, jax_message = got[name]["lowered"].partition(": ")
        d = first_error(imp.diagnostics)  # (the import's check, at the user's lines)
        assert d.code == first_error(check(imp.scenario)).code
        assert d.code == classify(jax_type, jax_message) and d.stage == "gpu-lower", (name, d)
        assert _said(d.message) == _said(jax_message), name
        assert d.source is not None and d.source.startswith(str(HERE_KERNELS / f"{name}.py"))
        fixed = check(apply_fix(imp.scenario, d.fix))
        assert d.code not in {x.code for x in fixed if x.is_error}, name
    peer = _body(got["datadep_short_peer"]["obj"])
    assert peer[0]["transforms"] == [{"op": "remote_ref", "device": "ids_ref[...]"}]
    ds = _body(got["datadep_short_ds"]["obj"])
    assert ds[0]["transforms"] == [{"op": "at", "index": [{"ds": ["off_ref[...]", 1]}]}]


#: arithmetic on truth values, as a device id and (on the whole table) as a condition
BOOL_ARITH = [
    "(ids_ref[0] > 0) * 1",
    "(ids_ref[0] > 0) + (ids_ref[1] > 0)",
    "(ids_ref[0] > 0) % (ids_ref[1] > 0)",
    "((ids_ref[0] > 0) * 1 + dev) % 4",
    "((ids_ref[0] > dev) > 2) + 0",
]


@pytest.mark.slow
def test_arithmetic_on_truth_values_is_typed_as_jax_numpy_types_it():
    """A bool with a Python int is a weak int32 (a device id JAX takes; printed
    ``~int32`` in lax.cond's message), remainder of bools an int32, a sum of bools a
    bool (a device id JAX refuses): the check's first error is JAX's, message included."""
    cases = []
    for e in BOOL_ARITH:
        cases.append(load_scenario(_table_ring(device=e)))
        cond = e.replace("ids_ref[0]", "off_ref[...]").replace("ids_ref[1]", "off_ref[...]")
        when = {**WHEN_LOOP[3], "cond": cond.replace("dev", "b")}
        cases.append(load_scenario(_one_device([*WHEN_LOOP[:3], when], [0, 3, 2, 0], "w", PLGPU)))
    for s, got in zip(cases, probe_many(cases), strict=True):
        d = first_error([x for x in check(s) if x.stage in JAX_STAGES])
        mine = None if d is None else (d.code, d.stage, _said(d.jax.message if d.jax else ""))
        theirs = got["stage"] and (got["code"], got["stage"], _said(got["message"]))
        assert mine == theirs, (s.name, mine, theirs)


@pytest.mark.slow
def test_a_comparison_as_a_fori_loop_bound_is_a_bool_as_jax_types_it():
    """``lax.fori_loop(0, off_ref[b] > 1, ...)``: the stop is a bool and the Python int
    start an int32, which fori_loop refuses (LOOP_BOUND_DTYPE), as JAX says."""
    s = load_scenario(
        _one_device([*LOOP[:3], {**LOOP[3], "stop": "off_ref[b] > 1"}], [0, 3, 2, 0], "l", PLGPU)
    )
    d = first_error(check(s))
    (got,) = probe_many([s], ("build", "trace"))
    assert (d.code, d.stage, d.message) == (got["code"], got["stage"], got["message"])
    assert d.code == "LOOP_BOUND_DTYPE"


#: device ids and fori_loop stops whose dtype is not int32 without loading a bool:
#: comparisons that load nothing, and a weak int32 (a bool times 1) with an int16 load
TRUTH_KINDS = {
    "device-eq": _table_ring(device="dev == 0"),
    "device-sum-of-bools": _table_ring(device="(dev > 1) + (dev > 2)"),
    "device-weak-int32": _table_ring(device="(dev > 1) * 1"),
    "device-weak-int32-plus-int16": _table_ring(dtype="int16", device="(dev > 1) * 1 + ids_ref[0]"),
    "device-loaded-weak-plus-int16": _table_ring(
        dtype="int16", device="(ids_ref[0] > 1) * 1 + ids_ref[1]"
    ),
    "fori-stop-compare": _one_device(
        [*LOOP[:3], {**LOOP[3], "stop": "b > 0"}], [0, 3, 2, 0], "l", PLGPU
    ),
    "fori-stop-equal": _one_device(
        [*LOOP[:3], {**LOOP[3], "stop": "b == 0"}], [0, 3, 2, 0], "l", PLGPU
    ),
    "fori-stop-python-bool": _one_device(
        [*LOOP[:3], {**LOOP[3], "stop": "(2 > 0) > 0"}], [0, 3, 2, 0], "l", PLGPU
    ),
    "fori-stop-python-int": _one_device(
        [*LOOP[:3], {**LOOP[3], "stop": "(2 > 0) + 1"}], [0, 3, 2, 0], "l", PLGPU
    ),
    "pl-loop-stop-compare": _one_device(
        [*PL_LOOP[:3], {**PL_LOOP[3], "stop": "b > 0"}], [0, 3, 2, 0], "l", PLGPU
    ),
}


def test_value_type_carries_a_weak_int32_as_jax_numpy_promotes_it():
    """A bool with a Python int is a weak int32, which takes a strong operand's dtype
    (an int16 load), as a Python int does; a comparison that loads nothing is a bool."""
    dt = {"i": "int32", "h": "int16", "f": "float32"}.__getitem__
    assert E.value_type(E.parse("(i[0] > 1) * 1"), dt) == ("int32", True)
    assert E.value_type(E.parse("(i[0] > 1) * 1 + h[0]"), dt) == ("int16", False)
    assert E.value_type(E.parse("h[0] + (dev > 1) * 1"), dt) == ("int16", False)
    assert E.value_type(E.parse("(i[0] > 1) * 1 + (i[1] > 1)"), dt) == ("int32", True)
    assert E.value_type(E.parse("(i[0] > 1) * 1 + f[0]"), dt) == ("float32", False)
    assert E.value_type(E.parse("((i[0] > 1) * 1) % (i[1] > 1)"), dt) == ("int32", True)
    assert E.value_type(E.parse("dev == 0"), dt) == ("bool", False)
    assert E.value_type(E.parse("3"), dt) == (None, True)
    # what loads nothing and names nothing Python computes: True + 1 is an int
    assert E.value_type(E.parse("(2 > 0) > 0"), dt) == ("bool", True)
    assert E.value_type(E.parse("(2 > 0) + 1"), dt) == (None, True)
    assert E.value_dtype(E.parse("(dev > 1) + (dev > 2)"), dt) == "bool"


@pytest.mark.slow
def test_every_device_id_and_loop_bound_is_typed_as_jax_types_it():
    """Not only the ones that load: ``dev == 0`` as a device id, ``b > 0`` as a
    fori_loop stop are bools JAX refuses (DEVICE_ID_DTYPE, LOOP_BOUND_DTYPE), ``(dev > 1)
    * 1 + ids_ref[0]`` of an int16 table an int16: the check's first error is JAX's
    (code, stage, message), and each fix, applied, is a kernel JAX traces and lowers."""
    from mpmd_lab.fixes import apply_fix

    scenarios = {k: load_scenario(v) for k, v in TRUTH_KINDS.items()}
    diags = {k: check(s) for k, s in scenarios.items()}
    firsts = {k: first_error([x for x in d if x.stage in JAX_STAGES]) for k, d in diags.items()}
    fixed = [apply_fix(scenarios[k], d.fix) for k, d in firsts.items() if d is not None]
    jax = probe_many([*scenarios.values(), *fixed], ("build", "trace", "gpu-lower"))
    for name, got in zip(scenarios, jax, strict=False):
        d = firsts[name]
        mine = None if d is None else (d.code, d.stage, _said(d.jax.message if d.jax else ""))
        theirs = got["stage"] and (got["code"], got["stage"], _said(got["message"]))
        assert mine == theirs, (name, mine, theirs)
    assert [k for k, d in firsts.items() if d is not None] == [
        "device-eq", "device-sum-of-bools", "device-weak-int32-plus-int16",
        "device-loaded-weak-plus-int16", "fori-stop-compare", "fori-stop-equal",
        "fori-stop-python-bool",
    ]  # fmt: skip
    for s, got in zip(fixed, jax[len(scenarios) :], strict=True):
        assert got["stage"] is None, (s.name, got)
    d = firsts["device-eq"]
    assert d.fix.description == "count dev == 0 as an int32 (times 1)", d.fix.description
    assert [(e.path, e.value) for e in d.fix.edits] == [
        ("call.programs[0].body[0].transforms[0].device", "(dev == 0) * 1"),
        ("call.programs[0].body[2].device", "(dev == 0) * 1"),
    ]
    assert "DEVICE_ID_DTYPE" not in d.fix.after
    d = firsts["fori-stop-compare"]
    assert [(e.path, e.value) for e in d.fix.edits] == [
        ("call.programs[0].body[3].stop", "(b > 0) * 1")
    ] and d.fix.after == []
    assert firsts["device-weak-int32-plus-int16"].fix.edits[0].path == "buffers.ids.dtype"


def _random_index(rng: Any, atoms: list[str], depth: int = 0) -> str:
    if depth >= 2 or rng.random() < 0.3:
        return rng.choice(atoms)
    op = rng.choice(["+", "*", "%", ">", "==", "+", "*"])
    a = _random_index(rng, atoms, depth + 1)
    b = rng.choice(["4", "3"]) if op == "%" else _random_index(rng, atoms, depth + 1)
    return f"({a} {op} {b})"


@pytest.mark.slow
def test_random_device_ids_and_loop_stops_agree_with_jax():
    """Random expressions of axis indices, loads of int32/int16/uint32/float32 tables,
    Python ints, comparisons and arithmetic as a ring's device id and a fori_loop's
    stop: the check's first error is JAX's (code, stage, message) on every one (main
    before this check: 320 of 350 over seeds 0 and 1, each miss a false valid)."""
    import random

    rng = random.Random(7)
    cases = []
    for k in range(120):
        if k % 2:
            dt = rng.choice(["int32", "int16", "uint32", "float32"])
            e = _random_index(rng, ["dev", "ids_ref[0]", "ids_ref[1]", "1", "2", "0"])
            raw = _table_ring(dtype=dt, device=e)
            cast = float if dt == "float32" else int
            raw["buffers"]["ids"]["init"] = [cast(v) for v in raw["buffers"]["ids"]["init"]]
        else:
            dt = rng.choice(["int32", "int16", "float32"])
            e = _random_index(rng, ["b", "off_ref[b]", "off_ref[0]", "1", "2", "0"])
            raw = _typed(
                _one_device([*LOOP[:3], {**LOOP[3], "stop": e}], [0, 3, 2, 0], "l", PLGPU), dt
            )
        cases.append((e, dt, load_scenario(raw)))
    refused = 0
    for (e, dt, s), got in zip(cases, probe_many([s for _, _, s in cases]), strict=True):
        d = first_error([x for x in check(s) if x.stage in JAX_STAGES])
        mine = None if d is None else (d.code, d.stage, _said(d.jax.message if d.jax else ""))
        theirs = got["stage"] and (got["code"], got["stage"], _said(got["message"]))
        assert mine == theirs, (e, dt, mine, theirs)
        refused += theirs is not None
    assert 10 <= refused <= 110, refused  # (both kinds drawn)


def _gather_view(entry: str, rows: int, dst_view: bool = False) -> dict:
    """Block b copies x viewed as ``x_ref.at[entry]`` into the whole of ``out`` (of
    ``rows`` rows); ``dst_view``: out viewed so instead, x whole the source."""
    view = {"op": "at", "index": [entry]}
    body = [
        {"let": "src", "ref": "x_ref", "transforms": [] if dst_view else [view]},
        {"let": "dst", "ref": "out", "transforms": [view] if dst_view else []},
        GATHER[2],
    ]
    s = _one_device(body, [3, 1, 0, 2], "gather-view", PLGPU)
    s["call"]["outputs"]["out"]["shape"] = [rows, ROWS]
    return s


def _gather_tma(n: int, dtype: str = "float32", index_in_smem: bool = False) -> dict:
    """A TMA copy (copy_gmem_to_smem) of ``x_ref.at[off_ref[...]]`` (``n`` indices, or
    the table first copied into SMEM and the indices loaded from there: ``tbl[...]``)
    into an SMEM scratch of ``n`` rows."""
    table = "tbl" if index_in_smem else "off_ref"
    body = [
        {"let": "src", "ref": "x_ref", "transforms": [{"op": "at", "index": [f"{table}[...]"]}]},
        {"op": "copy_gmem_to_smem", "src": "src", "dst": "buf", "barrier": "bar"},
        {"op": "barrier_wait", "barrier": "bar"},
    ]
    scratch: dict[str, Any] = {
        "buf": {"shape": [n, ROWS], "dtype": dtype, "memory_space": "SMEM"},
        "bar": {"kind": "barrier"},
    }
    if index_in_smem:
        body[:0] = [
            {"op": "copy_gmem_to_smem", "src": "off_ref", "dst": "tbl", "barrier": "tbl_bar"},
            {"op": "barrier_wait", "barrier": "tbl_bar"},
        ]
        scratch["tbl"] = {"shape": [n], "dtype": "int32", "memory_space": "SMEM"}
        scratch["tbl_bar"] = {"kind": "barrier"}
    s = _one_device(body, [0] * 4, "gather-tma", PLGPU)
    s["buffers"]["off"].update(shape=[n], init=[k % 4 for k in range(n)])
    s["buffers"]["x"]["dtype"] = dtype
    s["call"]["scratch"] = scratch
    return s


#: an array as an ``.at[...]`` entry: a gather view, of the loaded array's shape first
GATHER_VIEWS = {
    "tma-gmem-indices": _gather_tma(4),
    "tma-gmem-indices-64-bf16": _gather_tma(64, "bfloat16"),
    "tma-smem-indices": _gather_tma(8, index_in_smem=True),
    "src-shapes-agree": _gather_view("off_ref[...]", 4),
    "src-shapes-differ": _gather_view("off_ref[...]", 2),
    "src-arithmetic": _gather_view("(off_ref[...] + 1) % 4", 4),
    "dst-shapes-agree": _gather_view("off_ref[...]", 4, dst_view=True),
    "src-scalar": _gather_view("off_ref[b]", 1),
}


@pytest.mark.slow
def test_an_array_as_an_at_entry_is_a_gather_view_as_jax_makes_it():
    """``x_ref.at[off_ref[...]]`` is a view of shape (4, 128) to JAX (NDIndexer's
    int_indexer_shape first): copied into a (2, 128) ref it is SWAP_SHAPE_MISMATCH at
    trace with that shape, and where the shapes agree the Mosaic GPU lowering of its
    load or store refuses it (GPU_GATHER_LOAD); a TMA copy of it is a TMA gather, whose
    GMEM transfer is refused where its indices load from GMEM (GPU_GMEM_TRANSFER) and
    which JAX takes from SMEM. The check's first error is JAX's. No
    fix is offered for the gather: loading one element (``off_ref[0]``) makes a view of
    another shape, which the copy then refuses (the verification drops it)."""
    scenarios = {k: load_scenario(v) for k, v in GATHER_VIEWS.items()}
    firsts = {
        k: first_error([x for x in check(s) if x.stage in JAX_STAGES]) for k, s in scenarios.items()
    }
    jax = probe_many(list(scenarios.values()), ("build", "trace", "gpu-lower"))
    for name, got in zip(scenarios, jax, strict=True):
        d = firsts[name]
        mine = None if d is None else (d.code, d.stage, _said(d.jax.message if d.jax else ""))
        theirs = got["stage"] and (got["code"], got["stage"], _said(got["message"]))
        assert mine == theirs, (name, mine, theirs)
    gathers = [k for k, d in firsts.items() if d is not None and d.code == "GPU_GATHER_LOAD"]
    assert gathers == ["src-shapes-agree", "src-arithmetic", "dst-shapes-agree"], firsts
    assert all(firsts[k].fix is None for k in gathers)
    # a TMA gather: refused where its indices load from GMEM, taken from SMEM
    assert [firsts[k].code for k in ("tma-gmem-indices", "tma-gmem-indices-64-bf16")] == [
        "GPU_GMEM_TRANSFER"
    ] * 2
    assert firsts["tma-smem-indices"] is None
    assert firsts["src-shapes-agree"].path == "call.programs[0].body[2].src"
    assert firsts["dst-shapes-agree"].path == "call.programs[0].body[2].dst"
    d = firsts["src-shapes-differ"]
    assert d.code == "SWAP_SHAPE_MISMATCH" and "Value shape: (4, 128)" in d.message


#: ``.at[...]`` entries, scalar and array (a load with too few indices, arithmetic on one)
AT_ENTRIES = [
    "off_ref[...]", "off_ref[b]", "b", "off_ref[0]", "(off_ref[...] + 1) % 4",
    "off_ref[...] * 0", "(off_ref[b] + b) % 4", "3 - off_ref[...]",
]  # fmt: skip


def _elided(said: tuple | None) -> tuple | None:
    """JAX's message with its traced indexers elided, as the check prints them
    (``Transforms: (...)``, ``indices=(..)``)."""
    if not said:
        return said
    msg = re.sub(r"indices=\(.*\), shape", "indices=(..), shape", said[2])
    return (*said[:2], re.sub(r"Transforms: \(.*\)\. $", "Transforms: (...). ", msg))


@pytest.mark.slow
def test_random_at_entries_agree_with_jax():
    """Random ``.at[...]`` entries (scalars and arrays, with or without a ``pl.ds``) on
    a copy's source or destination, into refs of several shapes: the check's first
    error is JAX's (code, stage, message with its traced indexers elided) on every one
    (main before gather views: 145 of 300 over seeds 0 and 1; 25 false valids)."""
    import random

    rng = random.Random(11)
    cases = []
    for _ in range(80):
        entry, rows, dst_view = rng.choice(AT_ENTRIES), rng.choice([1, 2, 4, 0]), rng.random() < 0.3
        view = {"op": "at", "index": [entry, *([{"ds": [0, 64]}] if rng.random() < 0.3 else [])]}
        body = [
            {"let": "src", "ref": "x_ref", "transforms": [] if dst_view else [view]},
            {"let": "dst", "ref": "out", "transforms": [view] if dst_view else []},
            GATHER[2],
        ]
        raw = _one_device(body, [3, 1, 0, 2], "at-entry", rng.choice([PLGPU, "pl.kernel"]))
        raw["call"]["outputs"]["out"]["shape"] = [rows, ROWS] if rows else [ROWS]
        cases.append((entry, load_scenario(raw)))
    kinds = set()
    for (entry, s), got in zip(cases, probe_many([s for _, s in cases]), strict=True):
        d = first_error([x for x in check(s) if x.stage in JAX_STAGES])
        mine = None if d is None else (d.code, d.stage, _said(d.jax.message if d.jax else ""))
        theirs = got["stage"] and (got["code"], got["stage"], _said(got["message"]))
        assert _elided(mine) == _elided(theirs), (entry, mine, theirs)
        kinds.add(theirs and theirs[0])
    assert {None, "SWAP_SHAPE_MISMATCH", "GPU_GATHER_LOAD"} <= kinds, kinds


def test_a_gather_views_type_follows_its_table_in_a_plan_made_like_another():
    """A plan compiled like another (a fix's candidate) types a gather view from the
    table it loads now, not the one the other plan saw: ``x_ref.at[off_ref[...]]`` of an
    int32[8] table is (8, 128) where the like plan's int32[4] made (4, 128)."""
    from mpmd_lab.diagnostics import Edit
    from mpmd_lab.plan import compile as compile_plan
    from mpmd_lab.recheck import edited

    a = load_scenario(_gather_view("off_ref[...]", 4))
    b = edited(  # (its statements a's own objects, as a candidate fix's are)
        a,
        [
            Edit(op="replace", path="buffers.off.shape", value=[8]),
            Edit(op="replace", path="buffers.off.init", value=[0, 1, 2, 3] * 2),
        ],
    )
    assert b.call.programs[0].body[0] is a.call.programs[0].body[0]

    def view_shapes(plan: Any) -> list[tuple[int, ...]]:
        return [tuple(st.defines.info.shape) for st in plan.programs[0].stmts if st.defines]

    assert view_shapes(compile_plan(a))[0] == (4, ROWS)
    assert view_shapes(compile_plan(b, like=compile_plan(a))) == view_shapes(compile_plan(b))
    assert view_shapes(compile_plan(b))[0] == (8, ROWS)
    assert compile_plan(b).programs[0].stmts[0].defines.info.gathered == "GMEM"
