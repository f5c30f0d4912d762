"""Hostile inputs made in the test, each held to a bound in time and memory (issue 16):
the counts a scenario may name (loops of 2**31 steps, grids of 2**31 blocks, 4096
devices) cost the static check, the graph and the views what is drawn or needed, never
one object per step, block or device."""

from __future__ import annotations

import copy
import re
import time
import tracemalloc

import pytest
from mpmd_lab import gallery, graph
from mpmd_lab.scenario import MAX_BLOCKS, load_scenario
from mpmd_lab.validate import analyze

RS = gallery.load("ring-shift").to_dict()


def _bounded(fn, seconds: float, mib: float):
    tracemalloc.start()
    try:
        t0 = time.perf_counter()
        out = fn()
        took = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert took < seconds, f"{took:.2f} s"
    assert peak < mib * 2**20, f"{peak / 2**20:.1f} MiB"
    return out


def _in_loops(data: dict, stop, via: str, nest: int = 1) -> dict:
    data = copy.deepcopy(data)
    prog = data["call"]["programs"][0]
    body = prog["body"]
    for k in range(nest):
        body = [{"op": "loop", "var": f"i{k}", "stop": stop, "via": via, "body": body}]
    prog["body"] = body
    return data


@pytest.mark.parametrize("via", ["python", "fori_loop", "pl.loop"])
def test_a_loop_of_2_31_steps_is_checked_and_drawn_without_enumerating_it(via):
    """An unrolled loop of 2**31 - 1 steps made the trace rule list every step (5 GB, then
    killed); the graph's loop steps did the same. Both count the steps first."""
    s = load_scenario(_in_loops(RS, MAX_BLOCKS, via, nest=2))
    a = _bounded(lambda: analyze(s), 20.0, 64)
    codes = {d.code for d in a.diagnostics}
    assert "SYNC_NOT_CHECKED" in codes, codes  # said, not silently passed
    g = _bounded(lambda: graph.build_graph(s, analysis=a), 20.0, 64)
    loops = [n for n, d in g.nodes(data=True) if d.get("control") == "loop"]
    assert loops, "the loops are drawn"


def test_a_loop_bound_of_huge_constants_is_counted_not_overflowed():
    """``len(range(...))`` past 2**63 raises OverflowError: the graph's trip count printed a
    traceback for a bound such as ``axis_size(dev) * M**3`` (constants are int32, not the
    expression)."""
    stop = f"axis_size(dev) * {MAX_BLOCKS} * {MAX_BLOCKS} * {MAX_BLOCKS}"
    s = load_scenario(_in_loops(RS, stop, "fori_loop"))
    g = _bounded(lambda: graph.build_graph(s), 20.0, 64)
    (trips,) = [d["trips"] for _, d in g.nodes(data=True) if d.get("control") == "loop"]
    assert trips == 4 * MAX_BLOCKS**3


def test_the_signals_of_a_ring_over_4096_devices_are_said_not_drawn_not_enumerated():
    """The graph evaluated every (device, loop step) pair of each signal: 4096 devices x
    4095 steps of a ring all-gather ran past a minute. Past a bound the statement is
    marked and the text says so."""
    data = gallery.load("ring-all-gather").to_dict()
    data["device_mesh"] = {"dev": 4096}
    data["call"]["scratch"]["sems"]["shape"] = [4095]
    data["call"]["outputs"]["out"]["shape"] = [256 * 4096]
    s = load_scenario(data)
    a = analyze(s)
    g = _bounded(lambda: graph.build_graph(s, analysis=a), 20.0, 256)
    signal, wait = "call.programs[0].body[3].body[4]", "call.programs[0].body[3].body[6]"
    assert g.graph["signals_not_drawn"] == [signal, wait]
    assert f"(signals of {signal} not drawn" in graph.to_text(g)


def test_a_buffer_too_big_to_index_is_said_not_checked_not_run_out_of_memory():
    """The data-free check keeps an offset per element: a (32768, 32768) float32 buffer
    took 8 GB and 45 s (and passed silently where memory ran out). Past MAX_ELEMENTS it
    says what it did not check."""
    from mpmd_lab.validate.sync import MAX_ELEMENTS

    data = copy.deepcopy(RS)
    data["buffers"]["x"]["shape"] = [32768, 32768]
    data["call"]["outputs"]["out"]["shape"] = [32768, 32768]
    a = _bounded(lambda: analyze(load_scenario(data)), 20.0, 64)
    (msg,) = [d.message for d in a.diagnostics if d.code == "SYNC_NOT_CHECKED"]
    assert f"hold {2 * 32768**2:,} elements, more than the {MAX_ELEMENTS:,}" in msg
    assert not [d for d in a.diagnostics if d.is_error]
    # at the bound the check still runs and still finds what it finds
    race = gallery.load("two-block-race").to_dict()
    n = MAX_ELEMENTS // 2
    race["buffers"]["x"]["shape"] = [n]
    race["call"]["outputs"]["out"]["shape"] = [n]
    body = race["call"]["programs"][0]["body"]
    body[0]["transforms"] = [{"op": "at", "index": [{"block": "b", "size": n // 2}]}]
    body[1]["transforms"] = [{"op": "at", "index": [[0, n // 2]]}]
    found = analyze(load_scenario(race))
    assert {"RACE", "RACE_DETECTED"} & {d.code for d in found.diagnostics}


@pytest.mark.serial  # a timing bound: run with the machine to itself
def test_simulate_is_refused_up_front_or_stopped_within_its_timeout():
    """A loop bound of axis sizes and huge constants is counted in closed form (it ran
    to the timeout); a bound only the devices know runs, and the answer comes back within
    the caller's timeout, which the message names (the engine stops early enough to send
    its log back), the worker's start said apart."""
    from mpmd_lab import runtime

    big = _in_loops(RS, f"axis_size(dev) * {MAX_BLOCKS} * {MAX_BLOCKS}", "fori_loop")
    refused = runtime.run(load_scenario(big), "simulate", timeout=30)
    assert refused.error.code == "SIM_TOO_LARGE" and refused.seconds < 2.0, refused.to_json()
    # 4 devices x (the loop + its 2 statements x 4 * M**2 trips)
    assert f"{4 * (1 + 2 * 4 * MAX_BLOCKS**2)} steps" in refused.error.message
    endless = _in_loops(RS, "10000000 + dev", "fori_loop")
    t0 = time.perf_counter()
    slow = runtime.run(load_scenario(endless), "simulate", timeout=6)
    took = time.perf_counter() - t0
    # (the static check's time comes off the timeout: the simulation had what was left)
    assert slow.error.code == "RUN_TIMEOUT", slow.to_json()
    m = re.search(r"did not finish in (\d+(?:\.\d+)?) s", slow.error.message)
    assert m and abs(float(m.group(1)) + slow.check_seconds - 6) < 0.02, slow.to_json()
    assert slow.seconds < 6 + 2.5 and took < slow.startup_seconds + 6 + 8, slow.to_json()
