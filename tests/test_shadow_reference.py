"""The race check's shadow memory against a straightforward reference.

The reference keeps, per element, the last plain write and per actor the last read
and the last atomic, and judges every element of every access on its own (the
discipline ``Shadow`` documents: a read against writes and other actors' atomics, a
plain write against all three and clearing reads and atomics, an atomic against
writes and reads). Over random sequences of accesses (actors, spans, kinds) and
clock operations (ticks, joins), the shadow must find exactly the reference's races:
which pair of accesses, which kind, which elements.
"""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given, settings
from mpmd_lab.accesslog import AccessLog, Actor, Location
from mpmd_lab.engine.clocks import Clocks
from mpmd_lab.engine.shadow import Shadow

N_ACTORS = 3
SIZE = 12


@st.composite
def _spans(draw: st.DrawFn) -> list[tuple[int, int]]:
    """Sorted, disjoint ``[start, stop)`` runs (neighbours may touch)."""
    cuts = sorted(set(draw(st.lists(st.integers(0, SIZE), min_size=2, max_size=6))))
    pairs = list(zip(cuts, cuts[1:], strict=False))
    keep = draw(st.lists(st.booleans(), min_size=len(pairs), max_size=len(pairs)))
    return [p for p, k in zip(pairs, keep, strict=True) if k]


_step = st.one_of(
    st.tuples(
        st.sampled_from(["read", "write", "atomic"]),
        st.integers(0, N_ACTORS - 1),
        st.integers(0, 1),  # location
        _spans(),
        st.integers(0, 2),  # statement (shared ones: races deduplicated per pair)
    ),
    st.tuples(st.just("tick"), st.integers(0, N_ACTORS - 1)),
    st.tuples(st.just("join"), st.integers(0, N_ACTORS - 1), st.integers(0, N_ACTORS - 1)),
)


def _clock_step(clocks: Clocks, step: tuple) -> bool:
    """Apply a ``tick`` or ``join`` step to ``clocks``; False for an access."""
    if step[0] == "tick":
        clocks.tick(step[1])
    elif step[0] == "join":
        clocks.join(step[1], clocks.snapshot(step[2]))
    else:
        return False
    return True


def _reference(steps: list[tuple]) -> set[tuple[str, int, int, frozenset[int]]]:
    """(kind, first access, second access, elements) of every racing pair."""
    clocks = Clocks(N_ACTORS)
    writes: dict[tuple[int, int], int] = {}
    reads: dict[tuple[int, int], dict[int, int]] = {}
    atomics: dict[tuple[int, int], dict[int, int]] = {}
    who: list[tuple[int, int]] = []  # per access: actor, time
    found: dict[tuple[str, int, int], set[int]] = {}
    for step in steps:
        if _clock_step(clocks, step):
            continue
        kind, a, loc, spans, _ = step
        if not spans:
            continue
        i = len(who)
        who.append((a, clocks.time[a]))
        vc = clocks.vc[a]

        def ordered(v: int, a: int = a, vc: object = vc) -> bool:
            pa, t = who[v]
            return pa == a or (vc is not None and vc[pa] >= t)  # type: ignore[index]

        for lo, hi in spans:
            for e in range(lo, hi):
                key = (loc, e)
                w = writes.get(key)
                rs = reads.setdefault(key, {})
                ats = atomics.setdefault(key, {})
                against: list[tuple[int, str]] = []
                if w is not None:
                    against.append((w, "write-write" if kind != "read" else "read-write"))
                if kind != "read":
                    against += [(v, "read-write") for r, v in rs.items() if r != a]
                if kind != "atomic":
                    rk = "read-write" if kind == "read" else "write-write"
                    against += [(v, rk) for r, v in ats.items() if r != a]
                for v, rk in against:
                    if not ordered(v):
                        found.setdefault((rk, v, i), set()).add(e)
                if kind == "read":
                    rs[a] = i
                elif kind == "atomic":
                    ats[a] = i
                else:
                    rs.clear()
                    ats.clear()
                    writes[key] = i
    return {(k, v, i, frozenset(es)) for (k, v, i), es in found.items()}


def _shadow(steps: list[tuple], unique: bool) -> tuple[list, set[tuple]]:
    """The shadow's races (each statement its own when ``unique``) and, per race, the
    pair of statements and actors it stands for."""
    clocks = Clocks(N_ACTORS)
    log = AccessLog(limit=0, max_races=10**6, tally=False)
    shadow = Shadow(clocks, log)
    actors = [Actor(0, 0, 0, t) for t in range(N_ACTORS)]
    locs = [Location("GMEM", f"b{k}", 0) for k in range(2)]
    n = 0
    for step in steps:
        if _clock_step(clocks, step):
            continue
        kind, a, loc, spans, stmt = step
        s = n if unique else stmt
        n += 1 if spans else 0
        shadow.access(
            kind, a, actors[a], (s, "copy", "x", "", "src"), locs[loc], (SIZE,), None, spans
        )
    keys = {
        (r.kind, r.first.actor.thread, r.first.statement, r.second.actor.thread)
        + (r.second.statement, r.first.location.buffer)
        for r in log.races
    }
    return log.races, keys


@settings(max_examples=300, deadline=None)
@given(st.lists(_step, max_size=30))
def test_shadow_finds_the_reference_races(steps: list[tuple]) -> None:
    races, _ = _shadow(steps, unique=True)
    got = {
        (
            r.kind,
            r.first.id,
            r.second.id,
            frozenset(e for lo, hi in r.spans.tolist() for e in range(lo, hi)),
        )
        for r in races
    }
    assert len(got) == len(races)
    assert got == _reference(steps)


@settings(max_examples=300, deadline=None)
@given(st.lists(_step, max_size=30))
def test_shadow_reports_each_pair_of_statements_once(steps: list[tuple]) -> None:
    races, keys = _shadow(steps, unique=False)
    assert len(keys) == len(races)  # (one race per pair of statements and actors)
    want = set()
    stmts = [s[4] for s in steps if s[0] in ("read", "write", "atomic") and s[3]]
    threads = [s[1] for s in steps if s[0] in ("read", "write", "atomic") and s[3]]
    locs = [s[2] for s in steps if s[0] in ("read", "write", "atomic") and s[3]]
    for kind, v, i, _ in _reference(steps):
        want.add((kind, threads[v], stmts[v], threads[i], stmts[i], f"b{locs[i]}"))
    assert keys == want
