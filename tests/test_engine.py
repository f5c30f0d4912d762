"""The simulation engine on the research corpus's kernels (tests/scenarios/sync: each a
scenario version of a kernel JAX traces and lowers for the GPU), their expected values
worked out here with numpy, and the GPU semantics piece by piece: semaphores, barriers,
async copies, atomics, happens-before, deadlocks, bounds."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from mpmd_lab import fixes, gallery
from mpmd_lab.engine.shadow import RunMap
from mpmd_lab.scenario import load_scenario
from mpmd_lab.simulator import simulate
from mpmd_lab.validate import check

from bench.simulate_scaling import ring  # the ring all-gather on any device count (one builder)

SYNC = Path(__file__).parent / "scenarios" / "sync"


def fixture(name: str) -> dict:
    return json.loads((SYNC / f"{name}.json").read_text())


def run(d: dict, **kw):
    return simulate(load_scenario(d), check=False, **kw)


def iota(*shape: int) -> np.ndarray:
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)


def _matmul_blocks() -> np.ndarray:
    from mpmd_lab.memory import host_value
    from mpmd_lab.scenario import Buffer

    lhs = host_value(Buffer(shape=[64, 64], dtype="float16", init="random", seed=1), 4)
    rhs = host_value(Buffer(shape=[64, 128], dtype="float16", init="random", seed=2), 4)
    out = []
    for d in range(4):
        rhs_d = rhs[d * 64 : (d + 1) * 64].astype(np.float32)
        out += [np.matmul(lhs[j * 64 : (j + 1) * 64].astype(np.float32), rhs_d) for j in range(4)]
    return np.concatenate(out)


D, S = 4, 256
#: corpus kernel -> (output, its expected global value): the corpus modules' ``expected``
EXPECTED = {
    "ring_all_gather": ("out", lambda: np.tile(iota(D * S), D)),
    "ring_reduce_scatter": ("out", lambda: iota(D, D, S).sum(axis=0).reshape(-1)),
    "exchange_shards": (
        "out",
        lambda: np.concatenate([np.split(iota(32, 128), 4)[(d + 1) % 4] for d in range(4)]),
    ),
    "exchange_tma_load": ("y", lambda: np.concatenate([iota(16, 128)[8:], iota(16, 128)[:8]])),
    "per_block_sems_grid": ("out", lambda: np.concatenate([iota(1024)[512:], iota(1024)[:512]])),
    "remote_atomic_add": (
        "out",
        lambda: np.concatenate(
            [iota(4, 256).sum(axis=0, dtype=np.float32), np.zeros(3 * 256, np.float32)]
        ),
    ),
    "cluster_exchange": ("out", lambda: iota(2, 64, 32)[::-1]),
    "device_barrier_sems": ("out", lambda: iota(1024)),
    "multimem_load_reduce": (
        "out",
        lambda: np.tile(iota(256, 32).reshape(4, 64, 32).sum(axis=0, dtype=np.float32), (4, 1)),
    ),
    "wait_value_nodec": ("y", lambda: np.ones((16, 128), np.float32)),
    "collective_matmul": ("out", _matmul_blocks),
    "ring_all_gather_pl_loop": ("out", lambda: np.tile(iota(D * S), D)),
    "mesh_2x2_dict_ids": ("out", lambda: np.concatenate(np.split(iota(32, 128), 4)[::-1])),
    "mesh_2x2_partial_dict": (  # (i, j) -> (1 - i, j): blocks 0,1 <-> 2,3
        "out",
        lambda: np.concatenate([np.split(iota(32, 128), 4)[k] for k in (2, 3, 0, 1)]),
    ),
    "multicast_copy": ("out", lambda: np.tile(iota(D * S)[:S], D)),  # device 0's x everywhere
    "dup_ref_plgpu_kernel": ("out", lambda: 2 * iota(S)),  # one device: acc + acc
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_kernel_gives_its_expected_value_race_free_and_balanced(name):
    r = run(fixture(name))
    assert r.ok, r.error
    out, want = EXPECTED[name]
    np.testing.assert_array_equal(r.outputs[out], want())
    assert r.races == [], [x.describe() for x in r.races[:3]]
    assert r.deadlock == [] and r.leftover == LEFT.get(name, [])
    assert [d.code for d in r.diagnostics()] == ["SEMAPHORE_IMBALANCE"] * len(r.leftover)


#: what a wait with decrement=False leaves on its semaphore (every device's ``done``: 4)
LEFT = {
    "multimem_load_reduce": [
        (f"done on device {d} block 0", 4, "call.programs[0].body[1]") for d in range(4)
    ]
}


def test_collective_matmul_is_the_all_gathered_product():
    """The fused ring gives concat_j(lhs_j) @ rhs_d on every device (float32 sums)."""
    from mpmd_lab.memory import host_value
    from mpmd_lab.scenario import Buffer

    r = run(fixture("collective_matmul"))
    lhs = host_value(Buffer(shape=[64, 64], dtype="float16", init="random", seed=1), 4)
    rhs = host_value(Buffer(shape=[64, 128], dtype="float16", init="random", seed=2), 4)
    for d in range(4):
        want = lhs.astype(np.float64) @ rhs[d * 64 : (d + 1) * 64].astype(np.float64)
        got = r.outputs["out"][d * 256 : (d + 1) * 256]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_outputs_are_in_out_type_order():
    r = run(fixture("ring_reduce_scatter"))
    assert list(r.outputs) == ["out", "recv"]


# ---------------------------------------------------------------- broken kernels


def test_ring_without_its_wait_races_on_every_device():
    """ring_no_wait: device d reads the chunk its left neighbour writes, and nothing
    orders the two (the signal orders the writes before it, only a wait the reads after)."""
    r = run(fixture("ring_no_wait"))
    assert r.ok and r.races
    devices = set()
    for race in r.races:
        w, rd = race.first, race.second
        assert (w.kind, rd.kind) == ("write", "read") and race.location.buffer == "out"
        assert w.actor.device == (rd.actor.device - 1) % 4 == race.location.device - 1 or (
            w.actor.device == 3 and rd.actor.device == 0
        )
        devices.add(rd.actor.device)
    assert devices == {0, 1, 2, 3}
    assert r.leftover  # three signals per device that nobody waits for
    codes = [d.code for d in r.diagnostics()]
    assert "RACE" in codes and "SEMAPHORE_IMBALANCE" in codes


def test_deadlocking_ring_is_reported_quickly_with_who_waits_for_what():
    t = time.perf_counter()
    r = run(fixture("ring_deadlock"))
    assert time.perf_counter() - t < 5
    assert r.status == "error" and r.error.code == "DEADLOCK_SEMAPHORE"
    assert r.error.path == "call.programs[0].body[3].body[6]"  # the wait on sems[s]
    m = r.error.message
    assert "devices 0, 1, 2, 3" in m and "sems[1] on device 0 block 0 to reach 1" in m
    assert "went elsewhere (sems[0] holds 1 there)" in m
    assert {b.actor.device for b in r.deadlock} == {0, 1, 2, 3}
    assert r.to_json()["deadlock"][0]["path"] == r.error.path


def test_a_wait_for_more_signals_than_come_is_a_deadlock():
    d = fixture("device_barrier_sems")
    d["call"]["programs"][0]["body"][1]["value"] = 4  # 3 peers signal
    r = run(d)
    assert r.error.code == "DEADLOCK_SEMAPHORE" and "(it is 3;" in r.error.message


def test_a_barrier_nobody_completes_is_a_deadlock():
    d = fixture("cluster_exchange")
    d["call"]["scratch"]["cbar"]["num_arrivals"] = 2  # each block arrives once
    r = run(d)
    assert r.error.code == "DEADLOCK_BARRIER"
    assert (
        "phase 0 of cbar[0]" in r.error.message
        and "(2 of its 4 arrival(s) came)" in r.error.message
    )


# ---------------------------------------------------------------- pieces


def _one_device(body: list, scratch: dict, threads: dict | None = None, out: int = 256) -> dict:
    return {
        "name": "piece",
        "buffers": {"x": {"shape": [256], "dtype": "float32", "init": "iota"}},
        "call": {
            "entry": "plgpu.kernel",
            "args": [{"buffer": "x", "param": "x_ref"}],
            "outputs": {"out": {"shape": [out], "dtype": "float32"}},
            "scratch": scratch,
            "programs": [{"mesh": {"grid": {}, "threads": threads}, "body": body}],
        },
    }


SMEM = {"smem": {"shape": [256], "dtype": "float32", "memory_space": "SMEM"}}
BAR = {"bar": {"kind": "barrier"}}


def test_reading_a_tma_load_before_its_barrier_wait_races_with_the_copy():
    load = {"op": "copy_gmem_to_smem", "src": "x_ref", "dst": "smem", "barrier": "bar"}
    use = {"op": "copy", "src": "smem", "dst": "out"}
    wait = {"op": "barrier_wait", "barrier": "bar"}
    ok = run(_one_device([load, wait, use], {**SMEM, **BAR}))
    assert ok.ok and ok.races == [] and (ok.outputs["out"] == iota(256)).all()
    bad = run(_one_device([load, use, wait], {**SMEM, **BAR}))
    (race,) = bad.races
    assert race.first.actor.agent and not race.second.actor.agent
    assert race.first.actor.device == race.second.actor.device
    assert "the async copies of device 0 block 0 thread 0" in race.describe()


def test_a_tma_store_sees_this_threads_smem_writes_only_after_commit_smem():
    fill = {"op": "copy", "src": "x_ref", "dst": "smem"}
    store = {"op": "copy_smem_to_gmem", "src": "smem", "dst": "out"}
    done = {"op": "wait_smem_to_gmem", "n": 0}
    commit = {"op": "commit_smem"}
    assert run(_one_device([fill, commit, store, done], SMEM)).races == []
    (race,) = run(_one_device([fill, store, done], SMEM)).races
    assert race.kind == "read-write" and race.second.actor.agent  # the copy engine's read


def test_smem_reused_before_its_store_completes_races():
    store = {"op": "copy_smem_to_gmem", "src": "smem", "dst": "out"}
    refill = {"op": "fill", "dst": "smem", "value": 1.0}
    base = [{"op": "copy", "src": "x_ref", "dst": "smem"}, {"op": "commit_smem"}, store]
    racy = run(_one_device([*base, refill, {"op": "wait_smem_to_gmem", "n": 0}], SMEM))
    assert [r.kind for r in racy.races] == ["read-write"]
    assert run(_one_device([*base, {"op": "wait_smem_to_gmem", "n": 0}, refill], SMEM)).races == []


def test_two_copies_on_one_barrier_land_in_one_phase():
    """FACTS.md: two copy_gmem_to_smem on one Barrier(num_arrivals=1), one wait: the
    bytes add up (the lowering accepts it and JAX's kernels rely on it)."""
    body = [
        {"let": "x0", "ref": "x_ref", "transforms": [{"op": "at", "index": [[0, 128]]}]},
        {"let": "x1", "ref": "x_ref", "transforms": [{"op": "at", "index": [[128, 256]]}]},
        {"let": "s0", "ref": "smem", "transforms": [{"op": "at", "index": [[0, 128]]}]},
        {"let": "s1", "ref": "smem", "transforms": [{"op": "at", "index": [[128, 256]]}]},
        {"op": "copy_gmem_to_smem", "src": "x0", "dst": "s0", "barrier": "bar"},
        {"op": "copy_gmem_to_smem", "src": "x1", "dst": "s1", "barrier": "bar"},
        {"op": "barrier_wait", "barrier": "bar"},
        {"op": "copy", "src": "smem", "dst": "out"},
    ]
    r = run(_one_device(body, {**SMEM, **BAR}))
    assert r.ok and r.races == [] and (r.outputs["out"] == iota(256)).all()


def test_warpgroups_ordered_by_a_barrier_do_not_race():
    produce = [
        {"op": "copy", "src": "x_ref", "dst": "smem"},
        {"op": "barrier_arrive", "barrier": "bar"},
    ]
    consume = [
        {"op": "barrier_wait", "barrier": "bar"},
        {"op": "copy", "src": "smem", "dst": "out"},
    ]
    body = [
        {"op": "when", "cond": "wg == 0", "body": produce},
        {"op": "when", "cond": "wg == 1", "body": consume},
    ]
    threads = {"name": "wg", "count": 2}
    r = run(_one_device(body, {**SMEM, **BAR}, threads))
    assert r.ok and r.races == [] and (r.outputs["out"] == iota(256)).all()
    consume.pop(0)  # no wait: the consumer reads what the producer may not have written
    assert run(_one_device(body, {**SMEM, **BAR}, threads)).races


def test_atomics_do_not_race_each_other_but_race_plain_accesses():
    d = fixture("remote_atomic_add")
    body = d["call"]["programs"][0]["body"]
    r = run(d)
    assert r.races == [] and r.log.counts  # four atomic updates of device 0's out
    assert sum(n for (_, _, b, k), n in r.log.counts.items() if k == "atomic") == 4
    body[2] = {"op": "semaphore_wait", "sem": "ready", "value": 0}  # device 0 zeroes meanwhile
    racy = run(d)
    assert {(x.first.kind, x.second.kind) for x in racy.races} == {("write", "atomic")}


def test_a_wait_takes_on_only_the_signals_it_consumes():
    """Two signals of one semaphore, one wait(1): it is ordered after the first signal
    (consumed), not the second."""
    d = fixture("device_barrier_sems")
    prog = d["call"]["programs"][0]
    # device 0 and 1 signal device 2, after writing out there; device 2 waits once, reads
    d["call"]["outputs"]["out"]["shape"] = [256]
    prog["body"] = [
        {"let": "peer", "ref": "out", "transforms": [{"op": "remote_ref", "device": 2}]},
        {
            "op": "when",
            "cond": "dev == 0",
            "body": [
                {"op": "copy", "src": "x_ref", "dst": "peer"},
                {"op": "semaphore_signal", "sem": "sem", "device": 2},
            ],
        },
        {
            "op": "when",
            "cond": "dev == 2",
            "body": [
                {"op": "semaphore_wait", "sem": "sem"},
                {"op": "copy", "src": "out", "dst": "out"},
            ],
        },
        {
            "op": "when",
            "cond": "dev == 1",
            "body": [
                {"op": "semaphore_signal", "sem": "sem", "device": 2},
                {"op": "fill", "dst": "peer", "value": 1.0},
            ],
        },
    ]
    r = run(d)
    # device 0's write is ordered before device 2's read (its signal came first); device 1's
    # fill is not ordered with device 2's read, nor with device 0's write
    pairs = {(x.first.actor.device, x.second.actor.device) for x in r.races}
    assert (0, 2) not in pairs and (2, 0) not in pairs
    assert pairs and all(1 in p for p in pairs)


def test_grid_points_run_one_after_another_when_nothing_blocks():
    """The order of today's simulator: the last block's write survives a race."""
    from mpmd_lab import gallery

    r = simulate(gallery.load("two-block-race"))
    assert r.races and np.array_equal(r.outputs["out"][:128], iota(256)[128:])


def test_an_input_and_an_output_of_one_name_are_two_places():
    """Issue 16: a buffer named like an output (out passed as x_ref, copied to out)."""
    s = {
        "name": "same-name",
        "buffers": {"out": {"shape": [256], "dtype": "float32", "init": "iota"}},
        "call": {
            "args": [{"buffer": "out", "param": "x_ref"}],
            "outputs": {"out": {"shape": [256], "dtype": "float32"}},
            "programs": [
                {"mesh": {"grid": {}}, "body": [{"op": "copy", "src": "x_ref", "dst": "out"}]}
            ],
        },
    }
    r = run(s)
    assert r.ok and np.array_equal(r.outputs["out"], iota(256))
    assert r.races == []
    s["buffers"]["out"]["as_ref"] = True
    assert list(run(s).outputs) == ["out", "out_ref"]  # the Ref's final value, renamed


def test_fill_past_2_63_keeps_jaxs_low_bits():
    s = _one_device([{"op": "fill", "dst": "out", "value": 2**64 - 1}], {})
    s["call"]["outputs"]["out"]["dtype"] = "int32"
    r = run(s)
    assert r.ok and (r.outputs["out"] == -1).all()


# ---------------------------------------------------------------- bounds and log


def test_the_log_is_bounded_and_counts_the_rest():
    r = run(fixture("ring_all_gather"), log=5)
    assert len(r.log.accesses) == 5 and r.log.total == 32 and r.log.truncated == 27
    assert any("log='full'" in n for n in r.notes)
    full = run(fixture("ring_all_gather"), log="full")
    assert len(full.log.accesses) == full.log.total == 32
    j = r.log.to_dict()
    assert j["truncated"] == 27 and sum(c["accesses"] for c in j["counts"]) == 32


def test_a_run_past_its_time_bound_stops_as_data():
    d = fixture("ring_all_gather")
    loop = d["call"]["programs"][0]["body"][3]
    loop["stop"] = "1000000 + dev"  # a dynamic bound: the step estimate cannot see it
    loop["body"] = [st for st in loop["body"] if st.get("op") != "semaphore_wait"]
    loop["body"] = [st for st in loop["body"] if "semaphore" not in st.get("op", "")]
    t = time.perf_counter()
    r = run(d, max_seconds=1.0)
    assert time.perf_counter() - t < 10
    assert r.error.code == "RUN_TIMEOUT" and "1 s" in r.error.message


def test_steps_and_memory_are_estimated_before_anything_runs():
    d = fixture("ring_all_gather")
    d["call"]["programs"][0]["body"][3]["stop"] = 10**6
    t = time.perf_counter()
    r = run(d)
    assert r.error.code == "SIM_TOO_LARGE" and "steps" in r.error.message
    d = fixture("device_barrier_sems")
    d["buffers"]["x"]["shape"] = d["call"]["outputs"]["out"]["shape"] = [2**30]
    r = run(d)
    assert r.error.code == "SIM_TOO_LARGE" and "GiB" in r.error.message
    assert time.perf_counter() - t < 2


# ---------------------------------------------------------------- the shadow memory


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 63), st.integers(1, 16), st.integers(-1, 5), st.booleans()),
        max_size=20,
    )
)
def test_runmap_matches_a_dense_array(ops):
    m, dense = RunMap(64), np.full(64, -1)
    for start, length, value, query in ops:
        spans = [(start, min(64, start + length))]
        if query:
            got = np.full(64, -1)
            for lo, hi, v in m.query(spans):
                got[lo:hi] = v
            want = np.full(64, -1)
            want[spans[0][0] : spans[0][1]] = dense[spans[0][0] : spans[0][1]]
            assert (got == want).all()
        else:
            m.assign(spans, value)
            dense[spans[0][0] : spans[0][1]] = value
    # and the segments stay canonical: no two neighbours hold one value
    assert all(a != b for a, b in zip(m.vals, m.vals[1:], strict=False))
    rebuilt = np.repeat(m.vals, np.diff(m.bounds))
    assert (rebuilt == dense).all()


# ---------------------------------------------------------------- scale


def test_ring_cost_is_linear_in_devices_times_steps():
    """Steps grow as devices x loop steps (D x (D-1)); time per step stays flat."""
    per_step = []
    for n in (8, 32):
        t = time.perf_counter()
        r = run(ring(n))
        dt = time.perf_counter() - t
        assert r.ok and r.races == []
        assert r.steps == n * (4 + 6 * (n - 1))  # 3 statements and the loop, 6 per step
        np.testing.assert_array_equal(r.outputs["out"], np.tile(iota(n * 128), n))
        per_step.append(dt / r.steps)
    assert per_step[1] < 3 * per_step[0]  # linear (not quadratic) in the steps


@pytest.mark.slow
def test_256_device_ring_all_gather_in_under_a_minute():
    t = time.perf_counter()
    r = run(ring(256))
    assert r.ok and r.races == [] and time.perf_counter() - t < 60
    np.testing.assert_array_equal(r.outputs["out"], np.tile(iota(256 * 128), 256))


@pytest.mark.parametrize("reduction", ["add", "min", "max", "and", "or", "xor"])
def test_multimem_load_reduce_reduces_over_every_device(reduction):
    d = fixture("multimem_load_reduce")
    d["buffers"]["x"]["dtype"] = d["call"]["outputs"]["out"]["dtype"] = "int32"
    d["call"]["programs"][0]["body"][0]["reduction"] = reduction
    r = run(d)
    assert r.ok, r.error
    x = np.arange(4 * 64 * 32, dtype=np.int32).reshape(4, 64, 32)
    fn = {
        "add": np.add,
        "min": np.minimum,
        "max": np.maximum,
        "and": np.bitwise_and,
        "or": np.bitwise_or,
        "xor": np.bitwise_xor,
    }[reduction]
    want = fn.reduce(x, axis=0).astype(np.int32)
    np.testing.assert_array_equal(r.outputs["out"], np.tile(want, (4, 1)))


def test_view_runs_kept_across_runs_are_the_views_own_elements(monkeypatch):
    """The runs of a view's slicing are kept by what they are computed from (start,
    shape, strides, dtypes) for every run of the process: whichever run asked first,
    each view's runs are its own elements', in the race check's compact views and the
    simulator's bitcast ones alike."""
    from mpmd_lab import gallery
    from mpmd_lab.accesslog import runs_of
    from mpmd_lab.engine import core
    from mpmd_lab.validate import analyze

    seen: list[tuple[object, list[tuple[int, int]]]] = []
    spans = core.Engine.spans

    def recorded(self, view):
        got = spans(self, view)
        seen.append((view, got[1]))
        return got

    monkeypatch.setattr(core.Engine, "spans", recorded)
    core._AFFINE.clear()
    for _ in range(2):  # (the second time, every answer is one kept from the first)
        for name in gallery.names():
            analyze(gallery.load(name))
            run(gallery.load(name).model_dump(mode="json"))
    assert len(seen) > 500 and core._AFFINE
    for view, pairs in seen:
        assert pairs == [tuple(x) for x in runs_of(view.elements()).tolist()]


def _race_run(s, chooser=None):
    """What a data-free run of the race check records (as ``validate.sync`` runs it)."""
    from mpmd_lab.engine.core import Engine

    out = Engine(s, data=False, strict=False, log_limit=0, log_tally=False, chooser=chooser).run()
    races = sorted(
        (r.kind, r.first.path, r.second.path, r.first.actor.device, r.second.actor.device)
        for r in out.log.races
    )
    deadlock = [(b.actor.device, b.path, b.what) for b in out.deadlock]
    findings = [(f.code, f.path, f.actor.device, f.values) for f in out.findings]
    return out.steps, races, deadlock, findings, out.leftover, str(out.error)


@pytest.mark.parametrize("name", gallery.names())
def test_shared_let_views_change_nothing(name, monkeypatch):
    """A let that reads no axis index makes one view for every thread (kept by the view
    it starts from and its loop variables' values: ``_Node.shared``): a run is step for
    step what it is with every thread making its own (races, deadlock, findings,
    leftover signals, error), exploring or not."""
    from mpmd_lab.engine import core
    from mpmd_lab.engine.explore import Chooser

    s = gallery.load(name)
    shared = [_race_run(s), _race_run(s, Chooser())]
    made = core.Engine._chain

    def own(self, node):
        chain = made(self, node)
        node.shared = None
        return chain

    monkeypatch.setattr(core.Engine, "_chain", own)
    assert [_race_run(s), _race_run(s, Chooser())] == shared


def test_a_let_of_a_loop_variable_is_made_once_for_every_thread():
    """The ring all-gather's ``sent = sems.at[i]`` and ``arrived = sems.at[i]`` are made
    once per trip (three) for the four devices' threads; its views by device (``mine``,
    ``chunk``...) are made per thread."""
    from mpmd_lab.engine.core import Engine

    eng = Engine(gallery.load("ring-all-gather"), data=False, strict=False)
    eng.run()
    lets = {k[0] for k in eng._shared}
    assert len(lets) == 2 and len(eng._shared) == 2 * 3


def _unreachable_after(work) -> int:
    """How many objects ``work()`` leaves that only the cycle collector frees (run with
    the collector off; what was garbage before it is collected first)."""
    import gc

    gc.collect()
    gc.disable()
    try:
        work()
        return gc.collect()
    finally:
        gc.enable()


#: the gallery scenarios the fast tier asks for cycles (a race and its fixes, a deadlock
#: and its fixes, collectives with TMA and WGMMA, multicast, clusters); the slow tier
#: asks every one (each is two whole-heap collections)
_CYCLE_FAST = (
    "two-block-race",
    "ring-all-gather-deadlock",
    "collective-matmul",
    "multicast-2d",
    "cluster-exchange",
)


@pytest.mark.parametrize(
    "name",
    [n if n in _CYCLE_FAST else pytest.param(n, marks=pytest.mark.slow) for n in gallery.names()],
)
def test_a_finished_check_or_simulation_leaves_nothing_for_the_cycle_collector(name):
    """A run's actors, their readers and body generators, and the helpers' walks hold no
    reference cycle once the run is over: a whole check (its rules, race check and
    candidate fixes' checks) and a simulation are freed by reference counting alone."""
    check(gallery.load(name))  # (first: what a process does once, its caches)
    fixes.clear_cache()  # (the candidates checked again, not taken from the cache)
    assert _unreachable_after(lambda: check(gallery.load(name))) == 0
    simulate(gallery.load(name))
    assert _unreachable_after(lambda: simulate(gallery.load(name))) == 0


class _Ctx:
    """The ``ViewContext`` an ``at`` asks (the engine's answers: an expression evaluated
    for one actor's values, a failure as SimError, numpy's basic indexing)."""

    mesh: dict[str, int] = {}
    cluster_sizes: dict[str, int] = {}

    def __init__(self, values: dict[str, int]) -> None:
        from mpmd_lab import expr as E

        self.env = E.Env(values, {})

    def eval(self, e, run, path, sub=""):
        return e.eval(self.env)

    def fail(self, code, path, message):
        from mpmd_lab.diagnostics import SimError

        raise SimError(code, path, message)

    def sliced(self, offsets, index):
        return offsets[index]


class _Who:
    def describe(self) -> str:
        return "device 0"


_ENTRY = st.one_of(
    st.none(),
    st.integers(-6, 6),
    st.just("i"),
    st.tuples(st.integers(-6, 6), st.integers(-6, 8)).map(list),
    st.tuples(st.one_of(st.integers(0, 5), st.just("i")), st.integers(0, 5)).map(
        lambda t: {"ds": list(t)}
    ),
)


class _Values:
    """An actor as a compiled ``at`` asks it: its values."""

    def __init__(self, values: dict[str, int]) -> None:
        from mpmd_lab import expr as E

        self.env = E.Env(values, {})

    def describe(self) -> str:
        return "device 0"


def _view_or_error(f):
    from mpmd_lab.diagnostics import SimError

    try:
        v = f()
    except SimError as e:
        return (e.code, e.path, str(e))
    return (v.shape, v.oob, v.lay, v.offsets.tolist())


@settings(max_examples=200, deadline=None)
@given(
    shapes=st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=3), min_size=1, max_size=3),
    index=st.lists(_ENTRY, max_size=3),
    compact=st.booleans(),
)
def test_compiled_at_is_its_view(shapes, index, compact):
    """An ``at`` compiled once (``At.compiled``: its plan kept for the last shape, its
    entries' expressions called directly) gives what its ``view`` gives, for every
    actor's values and every shape it is asked in turn (the kept plan replaced when
    the shape changes back and forth): the view, its out-of-bounds mark, the failure."""
    from mpmd_lab.memory import Base, View
    from mpmd_lab.ops.views import At

    fresh = At.model_validate({"op": "at", "index": index})
    at = At.model_validate({"op": "at", "index": index})
    compiled = at.compiled("t")
    assert compiled is not None and at.compiled("t") is compiled  # (made once per path)
    sim = _Ctx({})
    for shape in [*shapes, *shapes]:
        base = Base("scratch", "x", "SMEM", np.dtype(np.float32), tuple(shape))
        v = View.whole(base, compact, affine=True)
        for i in range(-2, 6):
            who = _Values({"i": i})
            sim.env = who.env
            want = _view_or_error(lambda v=v, who=who: fresh.view(v, sim, who, "t"))
            assert _view_or_error(lambda v=v, who=who: compiled(at, v, sim, who)) == want


def test_compiled_at_leaves_loads_to_the_engine():
    """An ``at`` whose entry loads (or reads ``pl.program_id``) has no compiled view:
    the engine's ``eval`` records those reads."""
    from mpmd_lab.ops.views import At

    assert At.model_validate({"op": "at", "index": ["ids[0]"]}).compiled("t") is None
    assert At.model_validate({"op": "at", "index": ["program_id(0)"]}).compiled("t") is None
    assert At.model_validate({"op": "at", "index": ["i + 1"]}).compiled("t") is not None


@settings(max_examples=300, deadline=None)
@example(  # an empty view past the end of its base: pl.ds(2, 0) of each dim
    shape=[2, 2], first=[{"ds": ["i", 0]}, {"ds": ["i", 0]}], second=[], i=2, compact=True
)
@given(
    shape=st.lists(st.integers(0, 5), min_size=1, max_size=3),
    first=st.lists(_ENTRY, max_size=3),
    second=st.lists(_ENTRY, max_size=2),
    i=st.integers(-2, 4),
    compact=st.booleans(),
)
def test_affine_at_is_numpy_indexing(shape, first, second, i, compact):
    """The data-free check's ``at`` on an affine view (start, shape and strides, no
    offsets array) gives what numpy's indexing of the whole's offsets gives, at every
    step of a stack: the offsets (made when asked), the out-of-bounds mark, the failure,
    and the runs the race check logs; then through a transpose and a reshape."""
    from mpmd_lab.diagnostics import SimError
    from mpmd_lab.memory import Base, View
    from mpmd_lab.ops.views import At

    base = Base("scratch", "x", "SMEM", np.dtype(np.float32), tuple(shape))
    sim, who = _Ctx({"i": i}), _Who()
    views = [View.whole(base, compact, affine=True), View.whole(base, compact)]
    for k, index in enumerate((first, second)):
        at = At.model_validate({"op": "at", "index": index})
        got = []
        for v in views:
            try:
                got.append(at.view(v, sim, who, f"t{k}"))
            except SimError as e:
                got.append((e.code, e.path, str(e)))
        lay, plain = got
        if isinstance(plain, tuple) or isinstance(lay, tuple):
            assert lay == plain
            return
        assert lay.shape == plain.shape and lay.oob == plain.oob
        assert lay.offsets.shape == plain.offsets.shape
        assert np.array_equal(lay.offsets, plain.offsets)
        views = [lay, plain]
    # a transpose (reversing the dims), then a reshape to one dim, of each
    from mpmd_lab.ops.views import Reshape, Transpose

    rank = len(views[0].shape)
    size = int(np.prod(views[0].shape))
    for k, t in enumerate(
        (
            Transpose.model_validate({"op": "transpose", "perm": list(range(rank))[::-1]}),
            Reshape.model_validate({"op": "reshape", "shape": [size]}),
        )
    ):
        views = [t.view(v, sim, who, f"s{k}") for v in views]
        assert views[0].shape == views[1].shape
        assert np.array_equal(views[0].offsets, views[1].offsets)
    lay, plain = views
    if lay.lay is not None:
        from mpmd_lab.engine.core import _lay_runs

        pairs = _lay_runs(lay.lay[1], list(zip(lay.lay[2], lay.lay[3], strict=True)))
        if pairs is not None:
            want = np.unique(plain.elements())
            assert [e for a, b in pairs for e in range(a, b)] == want.tolist()
