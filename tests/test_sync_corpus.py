"""The static check's race / deadlock / imbalance verdict against a labelled corpus.

The corpus (``tests/sync_corpus``, written by its ``make_corpus.py``) is mutations of
the gallery's collectives at 2-4 devices and the schedule-dependent patterns of issue
28; each file's label comes from ``tests/sync_explorer.py``, an exhaustive explorer of
every schedule written apart from the engine, itself held here to a naive enumerator of
every trace (races by happens-before instead of co-enabled accesses).
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "sync_corpus"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(CORPUS))

import make_corpus  # noqa: E402
from sync_explorer import (  # noqa: E402
    Unsupported,
    compile_scenario,
    enumerate_traces,
    explore,
    live_accesses,
    replay,
)

LABELS: dict[str, dict] = json.loads((CORPUS / "labels.json").read_text())

#: verdict codes of ``mpmd_lab.check`` -> the label's kind
KIND_OF = make_corpus.KIND_OF

#: every schedule is judged since sync-sound (the engine's exploration): nothing the
#: one-schedule engine missed is left unmarked, and none is marked any more
ONE_SCHEDULE: set[str] = set()

#: small enough for every trace to be enumerated (the naive cross-check)
SMALL = sorted(n for n, lab in LABELS.items() if lab["states"] <= 60)


def _load(name: str) -> dict:
    return json.loads((CORPUS / f"{name}.json").read_text())


@functools.cache
def check_kinds(name: str) -> frozenset[str]:
    """The kinds ``mpmd_lab.check`` reports for a corpus file ({"clean"} when none)."""
    import mpmd_lab

    kinds = {KIND_OF[d.code] for d in mpmd_lab.check(_load(name)) if d.code in KIND_OF}
    return frozenset(kinds or {"clean"})


def _mark(name: str) -> pytest.param:
    if name in ONE_SCHEDULE:
        return pytest.param(
            name, marks=pytest.mark.xfail(strict=True, reason="one-schedule engine")
        )
    return pytest.param(name)


def test_corpus_size_and_mix() -> None:
    kinds = [k for lab in LABELS.values() for k in lab["kinds"]]
    assert len(LABELS) >= 150
    for kind in ("clean", "race", "deadlock", "imbalance"):
        assert kinds.count(kind) >= 20, kind
    assert sum(lab["schedule_pattern"] for lab in LABELS.values()) >= 30
    assert ONE_SCHEDULE <= set(LABELS)


def test_committed_corpus_is_what_the_script_writes(tmp_path: Path) -> None:
    """The files and labels under tests/sync_corpus are make_corpus.py's output now:
    every label re-established by the explorer."""
    labels = make_corpus.write(tmp_path)
    assert labels == LABELS
    for name in labels:
        assert _load(name) == json.loads((tmp_path / f"{name}.json").read_text())


#: larger cases whose traces the naive enumerator still walks (2k-23k traces each)
MEDIUM = [
    "ag3-wait-2",
    "ag4-no-signal",
    "rs4-wait-2",
    "pw4-t3-each-012",
    "pw4-t3-each-210",
    "loads2-one-barrier-two-arrivals",
    "loads2-wait-none",
    "loads2-wait-second",
]


@pytest.mark.parametrize(
    "name", [*SMALL, *(pytest.param(n, marks=pytest.mark.slow) for n in MEDIUM)]
)
def test_explorer_agrees_with_naive_enumerator(name: str) -> None:
    prog = compile_scenario(CORPUS / f"{name}.json")
    memo = explore(prog)
    naive, traces = enumerate_traces(prog)
    assert traces >= 1
    assert naive.races == memo.races
    assert naive.deadlocks == memo.deadlocks
    assert naive.imbalance == memo.imbalance


def test_explorer_finds_the_issue_example_in_both_orders() -> None:
    """Issue 28's example: reading either half first races (the one-schedule engine
    sees only the second), waiting for both signals first is clean."""
    for name in ("pw3-t2-each-01", "pw3-t2-each-10"):
        races = explore(compile_scenario(CORPUS / f"{name}.json")).races
        assert len(races) == 1, name
        ((a, b),) = races
        assert a != b  # the sender's copy and the target's read
    assert not explore(compile_scenario(CORPUS / "pw3-t2-all-01.json")).races


@pytest.mark.parametrize(
    "name", sorted(n for n, lab in LABELS.items() if lab["kinds"] != ["clean"])
)
def test_every_witness_replays(name: str) -> None:
    """Each labelled race's schedule leads to a state where both accesses are next;
    each deadlock's to a state where nothing can move and those actors are blocked."""
    prog = compile_scenario(CORPUS / f"{name}.json")
    label = LABELS[name]
    assert len(label["witnesses"]) == len(label["races"]) + bool(label["deadlocks"])
    for key, w in label["witnesses"].items():
        state, possible = replay(prog, w["steps"])
        if key == "deadlock":
            assert possible == []
            assert set(w["blocked"]) <= set(label["deadlocks"])
        else:
            assert set(w["then"]) <= set(live_accesses(prog, state)) & set(possible)


GALLERY = HERE.parent / "toolkit" / "gallery"


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        ("ring-shift", {"clean"}),
        ("ring-all-gather", {"clean"}),
        ("ring-all-gather-no-wait", {"race", "imbalance"}),
        ("ring-all-gather-deadlock", {"deadlock"}),
        ("ring-reduce-scatter", {"clean"}),
        ("exchange-shards", {"clean"}),
        ("collective-matmul", {"clean"}),
    ],
)
def test_explorer_on_the_gallery_collectives(name: str, kinds: set[str]) -> None:
    """The gallery's 4-device collectives over every schedule: the explorer and the
    check agree on each."""
    label = explore(compile_scenario(GALLERY / f"{name}.json")).label()
    assert set(label["kinds"]) == kinds
    import mpmd_lab

    said = {KIND_OF[d.code] for d in mpmd_lab.check(name) if d.code in KIND_OF}
    assert (said or {"clean"}) == kinds


def test_explorer_refuses_what_it_does_not_model() -> None:
    """A cluster (cluster_ref) is outside the explorer's subset: no verdict, not a
    wrong one."""
    with pytest.raises(Unsupported, match="clusters"):
        compile_scenario(GALLERY / "cluster-exchange.json")


def test_replay_refuses_a_step_that_cannot_go() -> None:
    """Device 2 cannot pass its wait before anyone signals (issue 28's example)."""
    prog = compile_scenario(CORPUS / "pw3-t2-each-01.json")
    with pytest.raises(ValueError, match="cannot take"):
        replay(prog, ["device 2: call.programs[0].body[3].body[0]"])


def test_naive_enumerator_counts_every_interleaving() -> None:
    """Three independent devices of one copy each (shift3-right): 3! traces."""
    _, traces = enumerate_traces(compile_scenario(CORPUS / "shift3-right.json"))
    assert traces == 6


@pytest.mark.parametrize("name", [_mark(n) for n in sorted(LABELS)])
def test_check_agrees_with_label(name: str) -> None:
    assert check_kinds(name) == frozenset(LABELS[name]["kinds"])


def test_precision_and_recall(capsys: pytest.CaptureFixture[str]) -> None:
    """No false report today; every miss is one the marks above name."""
    lines = []
    misses: set[str] = set()
    for kind in ("race", "deadlock", "imbalance"):
        truth = {n for n, lab in LABELS.items() if kind in lab["kinds"]}
        said = {n for n in LABELS if kind in check_kinds(n)}
        tp = len(truth & said)
        precision = tp / len(said) if said else 1.0
        recall = tp / len(truth) if truth else 1.0
        lines.append(
            f"{kind}: precision {precision:.1%} ({tp}/{len(said)}), "
            f"recall {recall:.1%} ({tp}/{len(truth)}), misses {len(truth - said)}/{len(truth)}"
        )
        assert not said - truth, f"false {kind} reports: {sorted(said - truth)}"
        misses |= truth - said
    agree = sum(check_kinds(n) == frozenset(lab["kinds"]) for n, lab in LABELS.items())
    lines.append(f"verdict agrees on {agree}/{len(LABELS)} scenarios")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert misses <= ONE_SCHEDULE


#: one scenario of each family and kind of construct, asked of real JAX in the fast run
JAX_SAMPLE = [
    "ag4-correct",
    "rs3-slot-off-by-one",
    "ex2-no-done-wait",
    "shift4-all-to-0",
    "db3-no-ack",
    "cm3-no-store-wait",
    "pw4-t3-each-012",
    "rr3-2-reused",
    "cw-race",
    "cw-deadlock",
    "cw-deadlock-mirror",
    "loads2-wait-second",
    "hs-no-wait",
]


def _jax_rejects(names: list[str]) -> list[str]:
    import mpmd_lab
    from mpmd_lab.probe import probe_many

    scenarios = [mpmd_lab.load(_load(n)) for n in names]
    results = probe_many(scenarios, ("build", "trace", "gpu-lower"), timeout=120)
    return [
        f"{n}: {r.stage} {r.error_type}: {r.message}"
        for n, r in zip(names, results, strict=True)
        if not r.ok
    ]


def test_jax_traces_and_lowers_a_sample() -> None:
    """A corpus JAX would reject is useless: trace and Mosaic GPU lowering (jax.export
    for cuda, on this CPU) accept one scenario of each family."""
    assert _jax_rejects(JAX_SAMPLE) == []


@pytest.mark.slow
def test_jax_traces_and_lowers_every_scenario() -> None:
    assert _jax_rejects(sorted(LABELS)) == []
