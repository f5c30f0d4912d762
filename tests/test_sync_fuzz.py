"""The check's synchronisation verdict against the exhaustive schedule explorer
(``tests/sync_explorer.py``) on the kernels ``bench/fuzz_sync.py`` found them to
disagree on (each reduced by hand to its core), and on a fixed-seed sample of that
generator.

Each case is a kernel where the check once said less than every schedule allows:

- ``stores-in-flight``: two async SMEM -> GMEM copies of one thread in flight at once,
  onto the same GMEM (nothing orders two TMA stores: only ``wait_smem_to_gmem`` does);
- ``loads-in-flight``: two async GMEM -> SMEM copies of one thread onto one barrier of
  two arrivals, into the same SMEM;
- ``split-waits``: one warpgroup waits twice for 1 on a semaphore another warpgroup
  waits on too; if it takes the first signal, the other cannot ack the sender, which
  never sends the second (of 2 units) (the engine took the two waits for one wait of 2,
  which takes nothing until 2 came, and so never deadlocks);
- ``deadlock-or-leftover``: whichever warpgroup takes device 1's first signal, the
  schedule deadlocks or ends with a semaphore not zero (the ack adds 2, the wait takes
  1): the leftover of a schedule that ends was dropped once another deadlocked.

Each has its fixed variant, clean to both. And one the check does not judge (an order
of barrier arrivals it explores only one way), where it said valid: ``copy-and-arrivals``.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "sync_corpus")]

import make_corpus as mc  # noqa: E402
from sync_explorer import compile_scenario, explore  # noqa: E402

from bench import fuzz_sync  # noqa: E402

K = 128
SMEM = {"shape": [K], "dtype": "float32", "memory_space": "SMEM"}


def _kinds(s: dict[str, Any]) -> tuple[set[str], set[str]]:
    """The explorer's kinds and the check's, for one kernel."""
    import mpmd_lab

    truth = set(explore(compile_scenario(s)).label()["kinds"]) - {"clean"}
    said = {fuzz_sync.KIND_OF[d.code] for d in mpmd_lab.check(s) if d.code in fuzz_sync.KIND_OF}
    return truth, said


def stores_in_flight(wait_between: bool) -> dict[str, Any]:
    body: list[dict] = [
        {"op": "fill", "dst": "smem", "value": 1.0},
        {"op": "commit_smem"},
        {"op": "copy_smem_to_gmem", "src": "smem", "dst": "out"},
    ]
    if wait_between:
        body.append({"op": "wait_smem_to_gmem", "n": 0})
    body += [
        {"op": "copy_smem_to_gmem", "src": "smem", "dst": "out"},
        {"op": "wait_smem_to_gmem", "n": 0},
    ]
    return mc.scenario(
        f"stores-in-flight-{'wait' if wait_between else 'no-wait'}",
        "two TMA stores of one thread onto the same GMEM",
        None,
        {"x": [K]},
        [("x", "x_ref")],
        {"out": [K]},
        {"smem": SMEM},
        body,
    )


def loads_in_flight(overlap: bool) -> dict[str, Any]:
    second = "smem_hi" if not overlap else "smem_lo"
    return mc.scenario(
        f"loads-in-flight-{'overlap' if overlap else 'apart'}",
        "two TMA loads of one thread onto one barrier of two arrivals",
        None,
        {"x": [K]},
        [("x", "x_ref")],
        {"out": [2 * K]},
        {
            "smem": {**SMEM, "shape": [2 * K]},
            "bar": {"kind": "barrier", "num_arrivals": 2},
        },
        [
            mc.let("smem_lo", "smem", mc.at(mc.ds(0, K))),
            mc.let("smem_hi", "smem", mc.at(mc.ds(K, K))),
            {"op": "copy_gmem_to_smem", "src": "x_ref", "dst": "smem_lo", "barrier": "bar"},
            {"op": "copy_gmem_to_smem", "src": "x_ref", "dst": second, "barrier": "bar"},
            {"op": "barrier_wait", "barrier": "bar"},
            mc.copy_("smem", "out"),
        ],
    )


def split_waits(value_two: bool) -> dict[str, Any]:
    waits = [mc.wait("s", 2)] if value_two else [mc.wait("s"), mc.wait("s")]
    return mc.scenario(
        f"split-waits-{'one-wait-of-2' if value_two else 'two-waits-of-1'}",
        "two warpgroups of device 0 compete for device 1's signals",
        2,
        {"x": [K]},
        [("x", "x_ref")],
        {"out": [K]},
        {"sems": mc.sems(2)},
        [
            mc.let("s", "sems", mc.at(0)),
            mc.let("ack", "sems", mc.at(1)),
            mc.when(
                "(dev == 1) & (wg == 0)", mc.signal("s", 0), mc.wait("ack"), mc.signal("s", 0, 2)
            ),
            mc.when("(dev == 0) & (wg == 1)", mc.wait("s"), mc.signal("ack", 1)),
            mc.when("(dev == 0) & (wg == 0)", *waits),
        ],
        threads=2,
    )


def deadlock_or_leftover(ack_inc: int) -> dict[str, Any]:
    return mc.scenario(
        f"deadlock-or-leftover-ack-{ack_inc}",
        "two warpgroups of device 0 compete for device 1's first signal",
        2,
        {"x": [K]},
        [("x", "x_ref")],
        {"out": [K]},
        {"sems": mc.sems(2)},
        [
            mc.let("s", "sems", mc.at(0)),
            mc.let("ack", "sems", mc.at(1)),
            mc.when("(dev == 1) & (wg == 0)", mc.signal("s", 0), mc.wait("ack"), mc.signal("s", 0)),
            mc.when("(dev == 0) & (wg == 1)", mc.wait("s"), mc.signal("ack", 1, ack_inc)),
            mc.when("(dev == 0) & (wg == 0)", mc.wait("s")),
        ],
        threads=2,
    )


CASES = {
    "stores-in-flight": (stores_in_flight(False), {"race"}),
    "stores-waited": (stores_in_flight(True), set()),
    "loads-in-flight": (loads_in_flight(True), {"race"}),
    "loads-apart": (loads_in_flight(False), set()),
    "split-waits": (split_waits(False), {"deadlock"}),
    "one-wait-of-2": (split_waits(True), set()),
    "deadlock-or-leftover": (deadlock_or_leftover(2), {"deadlock", "imbalance"}),
    "deadlock-balanced": (deadlock_or_leftover(1), {"deadlock"}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_check_agrees_with_the_explorer(name: str) -> None:
    s, kinds = CASES[name]
    truth, said = _kinds(s)
    assert truth == kinds  # (the case is what it says)
    assert said == truth


def copy_and_arrivals() -> dict[str, Any]:
    """Warpgroup 1 arrives twice at a barrier of one arrival; warpgroup 0 waits for
    the first phase, loads into SMEM on the barrier, waits for the second phase and
    reads: if the second arrival completes that phase before the load's own arrival,
    the read meets the load in flight."""
    return mc.scenario(
        "copy-and-arrivals",
        "an async load and another warpgroup's arrivals on one barrier",
        None,
        {"x": [K]},
        [("x", "x_ref")],
        {"out": [K]},
        {"smem": SMEM, "bar": {"kind": "barrier", "num_arrivals": 1}},
        [
            mc.when(
                "wg == 0",
                {"op": "barrier_wait", "barrier": "bar"},
                {"op": "copy_gmem_to_smem", "src": "x_ref", "dst": "smem", "barrier": "bar"},
                {"op": "barrier_wait", "barrier": "bar"},
                mc.copy_("smem", "out"),
            ),
            mc.when(
                "wg == 1",
                {"op": "barrier_arrive", "barrier": "bar"},
                {"op": "barrier_arrive", "barrier": "bar"},
            ),
        ],
        threads=2,
    )


def test_an_order_the_check_does_not_explore_is_not_judged_valid() -> None:
    """Which phase a copy's arrival joins against another thread's explicit arrivals is
    explored only in the engine's order: the check says so (SYNC_NOT_CHECKED) rather
    than valid where the explorer finds a race (it said valid)."""
    import mpmd_lab

    s = copy_and_arrivals()
    truth, said = _kinds(s)
    assert truth == {"race"}
    codes = {d.code for d in mpmd_lab.check(s)}
    assert said == truth or "SYNC_NOT_CHECKED" in codes


def test_a_fixed_seed_sample_of_the_generator() -> None:
    """30 kernels of ``bench/fuzz_sync.py`` (mutants of the corpus families and random
    compositions): every one the explorer and the check both judge, they agree on."""
    rng = random.Random(2026)
    judged = 0
    for i in range(30):
        s = fuzz_sync.draw(rng)
        s["name"] = f"sample-{i}"
        j = fuzz_sync.judge(s)
        if "skip" in j or j["not_checked"]:
            continue
        judged += 1
        assert j["said"] == j["truth"], (fuzz_sync.classes(j), s)
    assert judged >= 20
