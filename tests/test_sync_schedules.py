"""Race and deadlock verdicts over every schedule (issue 28): the five patterns one
lockstep schedule missed (tests/scenarios/schedules, each reported valid before), their
witnesses replayed in the simulator, and correct variants still valid."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mpmd_lab import gallery
from mpmd_lab.scenario import load_scenario
from mpmd_lab.simulator import simulate
from mpmd_lab.validate import check

HERE = Path(__file__).parent / "scenarios" / "schedules"

#: scenario -> the code the check must give (every one was missed by the lockstep run)
EXPECTED = {
    "partial_wait_reads_first_signallers_half": "RACE_DETECTED",
    "partial_wait_reads_second_signallers_half": "RACE_DETECTED",
    "semaphore_reused_across_rounds": "RACE_DETECTED",
    "competing_waiters": "DEADLOCK_SEMAPHORE",
    # the rival reaches its wait only after another wait: a reversal a run showed
    "competing_waiters_late": "DEADLOCK_SEMAPHORE",
    "loads_complete_out_of_order": "RACE_DETECTED",
    "keep_wait_leaves_more": "SEMAPHORE_IMBALANCE",
    # a barrier of one arrival: whichever warpgroup arrives first completes phase 0
    "barrier_arrivals_in_either_phase": "RACE_DETECTED",
}


def _scenario(name: str):
    return load_scenario(json.loads((HERE / f"{name}.json").read_text()))


def _found(name: str, code: str):
    diags = check(_scenario(name))
    hits = [d for d in diags if d.code == code]
    assert hits, [(d.code, d.message) for d in diags]
    assert not any(d.code == "SYNC_NOT_CHECKED" for d in diags)
    return hits[0]


@pytest.mark.parametrize("name", list(EXPECTED))
def test_every_schedule_dependent_pattern_is_found(name):
    _found(name, EXPECTED[name])


def test_a_partial_wait_race_is_said_in_the_buffers_terms_with_the_missing_edge():
    d = _found("partial_wait_reads_first_signallers_half", "RACE_DETECTED")
    w = d.witness
    assert w["kind"] == "race"
    assert w["race"]["kind"] == "read-write"
    assert w["race"]["region"] == "out[0:128]"
    assert w["race"]["first"]["actor"].startswith("device 0")
    assert w["race"]["second"]["actor"].startswith("device 2")
    # the wait before the read saw only device 1's signal: that is the missing edge
    assert "saw only the signal(s) of device 1" in w["race"]["missing_edge"]
    assert "out[0:128]" in d.message


@pytest.mark.parametrize(
    "name",
    [
        "partial_wait_reads_first_signallers_half",
        "semaphore_reused_across_rounds",
        "loads_complete_out_of_order",
        "barrier_arrivals_in_either_phase",
    ],
)
def test_a_race_witness_replays_in_the_simulator(name):
    d = _found(name, "RACE_DETECTED")
    res = simulate(_scenario(name), schedule=d.witness)
    race = d.witness["race"]
    shown = {(r.first.where, r.second.where) for r in res.races}
    assert (race["first"]["at"], race["second"]["at"]) in shown, shown
    assert not any("does not fit" in n for n in res.notes)


def test_a_deadlock_witness_has_the_wait_for_cycle_and_replays():
    d = _found("competing_waiters", "DEADLOCK_SEMAPHORE")
    w = d.witness
    assert w["kind"] == "deadlock"
    assert len(w["wait_for"]) == 2
    assert {c["actor"] for c in w["wait_for"]} == {
        "device 0 block 0 thread 0",
        "device 0 block 0 thread 1",
    }
    res = simulate(_scenario("competing_waiters"), schedule=w)
    assert res.status == "error" and res.error.code == "DEADLOCK_SEMAPHORE"
    # the default schedule (thread 0 takes the signal) finishes: the witness is what hangs
    assert simulate(_scenario("competing_waiters"), check=False).status == "ok"


def test_a_lone_blocked_thread_is_said_as_such():
    d = _found("competing_waiters_late", "DEADLOCK_SEMAPHORE")
    assert [c["actor"] for c in d.witness["wait_for"]] == ["device 0 block 0 thread 0"]
    assert "no thread is left to send" in d.witness["explain"]
    res = simulate(_scenario("competing_waiters_late"), schedule=d.witness)
    assert res.status == "error" and res.error.code == "DEADLOCK_SEMAPHORE"


def test_waiting_for_both_signals_is_valid_in_every_schedule():
    """The correct variant of the partial wait: one wait for value 2 before both reads."""
    data = json.loads((HERE / "partial_wait_reads_first_signallers_half.json").read_text())
    body = data["call"]["programs"][0]["body"]
    reader = body[-1]["body"]
    reader[:] = [{"op": "semaphore_wait", "sem": "s", "value": 2}, reader[1], reader[3]]
    diags = check(load_scenario(data))
    assert not [d for d in diags if d.code.startswith(("RACE", "DEADLOCK", "SYNC_NOT", "SEMA"))]


def test_a_semaphore_per_round_is_valid_in_every_schedule():
    """The correct variant of the reused semaphore: round 1 signals its own semaphore."""
    data = json.loads((HERE / "semaphore_reused_across_rounds.json").read_text())
    body = data["call"]["programs"][0]["body"]
    body[7]["sem"] = body[8]["sem"] = "t"
    data["call"]["scratch"]["t"] = {"kind": "semaphore"}
    diags = check(load_scenario(data))
    assert not [d for d in diags if d.code.startswith(("RACE", "DEADLOCK", "SYNC_NOT", "SEMA"))]


def test_waiting_on_both_barriers_is_valid():
    data = json.loads((HERE / "loads_complete_out_of_order.json").read_text())
    body = data["call"]["programs"][0]["body"]
    body.insert(8, {"op": "barrier_wait", "barrier": "b0"})
    diags = check(load_scenario(data))
    assert not [d for d in diags if d.code.startswith(("RACE", "SYNC_NOT"))]


@pytest.mark.parametrize(
    "name", ["ring-all-gather", "ring-reduce-scatter", "collective-matmul", "exchange-shards"]
)
def test_the_gallery_collectives_get_the_all_schedule_verdict(name):
    diags = check(gallery.load(name))
    assert not [d for d in diags if d.code in ("SYNC_NOT_CHECKED",) or d.code.startswith("RACE")]


def test_run_replays_a_witness_file(tmp_path):
    name = "partial_wait_reads_first_signallers_half"
    d = _found(name, "RACE_DETECTED")
    sched = tmp_path / "w.json"
    sched.write_text(json.dumps(d.witness))
    cmd = [sys.executable, "-m", "mpmd_lab.cli", "run", str(HERE / f"{name}.json")]
    out = subprocess.run(
        [*cmd, "--backend", "simulate", "--schedule", str(sched)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "race: out (output) on device 2: elements 0..127" in out.stdout, out.stdout + out.stderr
    assert "run in the given schedule" in out.stdout


def test_a_schedule_that_does_not_fit_is_said():
    s = _scenario("competing_waiters")
    res = simulate(s, schedule={"schema": "mpmd-lab/schedule@1", "choices": [{"actor": 7}]})
    assert any("does not fit" in n for n in res.notes)


def test_a_witness_draws_as_a_timeline_with_the_race_marked():
    from mpmd_lab.timeline import plot_witness, witness_png

    d = _found("partial_wait_reads_first_signallers_half", "RACE_DETECTED")
    fig = plot_witness(d.witness)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "device 0 block 0 thread 0",
        "device 1 block 0 thread 0",
        "device 2 block 0 thread 0",
    ]
    texts = [t.get_text() for t in ax.texts]
    assert "write body[5].body[0]" in texts and "read body[11].body[1]" in texts
    assert "saw device 1" in texts  # the wait's choice that lets the race happen
    assert witness_png(d.witness).startswith(b"\x89PNG")


def test_the_lab_shows_a_witness_timeline_from_the_problems_panel():
    """The race's card has a toggle; clicking it draws the witness (mpmd_lab.timeline's
    PNG, the same bytes the library gives), clicking again hides it."""
    from mpmd_lab.session import Session
    from mpmd_lab.timeline import witness_png
    from mpmd_lab.widgets.problems import ProblemsView
    from mpmd_lab.widgets.testing import find, find_all

    view = ProblemsView(Session(_scenario("partial_wait_reads_first_signallers_half")))
    card = find(view, "mpl-diag-RACE_DETECTED")
    toggle = find(card, "mpl-witness-toggle")
    assert find_all(card, "mpl-witness-timeline") == []  # drawn only when asked
    toggle.set_state({"value": True})
    (image,) = find_all(card, "mpl-witness-timeline")
    d = _found("partial_wait_reads_first_signallers_half", "RACE_DETECTED")
    png = bytes(image.value)
    assert png.startswith(b"\x89PNG") and png == witness_png(d.witness)
    toggle.set_state({"value": False})
    assert find_all(card, "mpl-witness-timeline") == []
    clean = ProblemsView(Session(gallery.load("ring-all-gather")))
    assert find_all(clean, "mpl-witness-toggle") == []


def _explore(name: str, **bounds):
    from mpmd_lab.engine import Engine, Limits
    from mpmd_lab.engine.explore import explore

    s = _scenario(name)
    return explore(
        lambda ch: Engine(s, data=False, limits=Limits(max_steps=20_000), log_limit=0, chooser=ch),
        **bounds,
    )


def test_the_exploration_is_bounded_by_schedules_and_steps_not_by_the_clock():
    """The same scenario always gets the same verdict, whatever the machine's load: the
    bounds are runs and thread-steps; the clock only cancels (and says it was time)."""
    whole = _explore("competing_waiters", max_runs=500)
    assert whole.complete and whole.runs > 1 and whole.deadlock is not None
    for _ in range(2):
        cut = _explore("competing_waiters", max_runs=500, max_steps=1)
        assert (cut.complete, cut.runs) == (False, 1)
        assert cut.why.startswith("stopped at its bound of 1 thread-steps over all schedules")
        assert "not yet tried" in cut.why
    late = _explore("competing_waiters", max_runs=500, max_seconds=0.0)
    assert not late.complete and late.why.startswith("cancelled after")
    assert "its time bound (a last resort" in late.why


def test_which_phase_a_barrier_arrival_joins_is_explored():
    """Warpgroup 1's arrival may come first and complete phase 0 alone (the lockstep
    order has warpgroup 0's first, and was only said not checked); with a barrier of two
    arrivals the phase holds both whichever comes first, and the kernel is clean."""
    d = _found("barrier_arrivals_in_either_phase", "RACE_DETECTED")
    assert d.witness["race"]["region"] == "smem[0:128]"
    edge = d.witness["race"]["missing_edge"]
    assert "device 0 block 0 thread 1's arrival at call.programs[0].body[1].body[0] joined " in edge
    assert "phase 0 of bar of device 0 block 0" in edge
    diags = check(_scenario("barrier_arrivals_in_one_phase"))
    assert not [d for d in diags if d.code.startswith(("RACE", "DEADLOCK", "SYNC_NOT", "SEMA"))]


def test_the_barrier_scenarios_are_kernels_jax_lowers():
    """Both barrier scenarios build, trace and lower for the GPU in real JAX (the race is
    the schedule's, not a rule JAX applies)."""
    from mpmd_lab import probe

    names = ["barrier_arrivals_in_either_phase", "barrier_arrivals_in_one_phase"]
    results = probe.probe_many(
        [_scenario(n) for n in names], ("build", "trace", "gpu-lower"), timeout=300
    )
    assert [r.ok for r in results] == [True, True], [r.message for r in results]


def _minimal_cuts_by_definition(units: dict[int, list[int]], need: int) -> list[dict[int, int]]:
    """Every cut (a prefix per signaller; signallers independent) holding ``need``
    units from which dropping any signaller's last signal leaves too little."""
    import itertools

    lanes = sorted(units)
    out = []
    for ks in itertools.product(*(range(len(units[b]) + 1) for b in lanes)):
        total = sum(sum(units[b][:k]) for b, k in zip(lanes, ks, strict=True))
        if total < need:
            continue
        if all(total - units[b][k - 1] < need for b, k in zip(lanes, ks, strict=True) if k):
            out.append({b: k for b, k in zip(lanes, ks, strict=True) if k})
    return out


@pytest.mark.parametrize("senders", [1, 2])
def test_a_wait_is_offered_exactly_the_minimal_signal_sets(senders):
    """``minimal_sets`` against its definition, on semaphores signalled by one actor
    (program order: one minimal set, the shortest prefix) and by two independent ones
    (every minimal pair of prefixes), for every value waited for."""
    import random

    import numpy as np
    from mpmd_lab.engine.explore import minimal_sets
    from mpmd_lab.engine.sync import Semaphore

    rng = random.Random(7)
    for _ in range(60):
        units = {b: [rng.randint(1, 3) for _ in range(rng.randint(1, 5))] for b in range(senders)}
        sem = Semaphore("s")
        clocks = {b: 0 for b in units}
        order = [b for b in units for _ in units[b]]
        rng.shuffle(order)
        sent = {b: 0 for b in units}
        for b in order:
            clocks[b] += 1
            vc = np.zeros(senders + 1, np.int64)
            vc[b] = clocks[b]
            sem.signal(units[b][sent[b]], vc, f"actor {b}", "p", actor=b, keep=True)
            sent[b] += 1
        waiter = np.zeros(senders + 1, np.int64)
        for value in range(1, sum(map(sum, units.values())) + 2):
            got, cut = minimal_sets(sem, waiter, value)
            want = _minimal_cuts_by_definition(units, value)
            assert not cut
            assert sorted(sorted(c.items()) for c in got) == sorted(
                sorted(c.items()) for c in want
            ), (units, value)


def _starving() -> dict:
    """3 blocks, one global semaphore, one signal (block 1). Block 0 writes the top third
    of ``out`` and then waits; block 2 waits and then writes it. Whichever wait takes
    the signal, the other starves (a deadlock); where block 2's wait takes it, its write
    races block 0's."""

    def third(let: str, ref: str) -> dict:
        return {"let": let, "ref": ref, "transforms": [{"op": "at", "index": [{"ds": [256, 128]}]}]}

    copy = [third("xs", "x_ref"), third("os", "out"), {"op": "copy", "src": "xs", "dst": "os"}]
    wait = {"op": "semaphore_wait", "sem": "sem"}
    return {
        "schema": "mpmd-lab/scenario@1",
        "name": "starving-wait",
        "buffers": {"x": {"shape": [384], "dtype": "float32", "init": "iota"}},
        "call": {
            "entry": "plgpu.kernel",
            "args": [{"buffer": "x", "param": "x_ref"}],
            "outputs": {"out": {"shape": [384], "dtype": "float32"}},
            "scratch": {"sem": {"kind": "semaphore", "alloc": "get_global"}},
            "programs": [
                {
                    "mesh": {"grid": {"b": 3}, "cluster": {}, "threads": None},
                    "body": [
                        {"op": "when", "cond": "b == 0", "body": [*copy, wait]},
                        {
                            "op": "when",
                            "cond": "b == 1",
                            "body": [{"op": "semaphore_signal", "sem": "sem"}],
                        },
                        {"op": "when", "cond": "b == 2", "body": [wait, *copy]},
                    ],
                }
            ],
        },
    }


def test_a_race_after_a_wait_that_starves_in_the_first_schedule_is_found():
    """The first schedule gives the signal to block 0 (block 2 starves: a deadlock); a
    wait ready at a choice point that never completes is tried first there too, so the
    race block 2's write makes when it wins is found, as the exhaustive explorer
    (tests/sync_explorer.py) finds it."""
    sys.path.insert(0, str(Path(__file__).parent))
    from sync_explorer import compile_scenario, explore

    raw = _starving()
    codes = {d.code for d in check(load_scenario(raw)) if d.is_error}
    assert codes == {"RACE_DETECTED", "DEADLOCK_SEMAPHORE"}
    assert set(explore(compile_scenario(raw)).label()["kinds"]) == {"race", "deadlock"}


def test_a_semaphores_label_is_said_from_its_key_when_asked():
    """The engine makes a semaphore without its label (only reports ask for it): the
    label said then is the one a report names (an array's element, a block's own or
    the program's shared one), and a label given is kept."""
    from mpmd_lab.engine.sync import Semaphore

    assert Semaphore("", ("sems", 1, 0, 2), indexed=True).label == "sems[1] on device 0 block 2"
    assert Semaphore("", ("sem", 0, 3, 5)).label == "sem on device 3 block 5"
    assert Semaphore("", ("g", 0, 1, -1), shared=True).label == "g on device 1"
    assert Semaphore("s").label == "s"
