"""Hostile inputs made in the test, each held to a bound in time and memory (issue 16):
the counts a scenario may name (loops of 2**31 steps, grids of 2**31 blocks, 4096
devices) cost the static check, the graph and the views what is drawn or needed, never
one object per step, block or device."""

from __future__ import annotations

import copy
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
