"""Every schedule that matters: the engine's runs, explored over the choices a GPU makes.

One run of the engine (:mod:`mpmd_lab.engine.core`) is one schedule. What a schedule
can change is only what synchronises: accesses are judged by happens-before
(vector clocks), which does not depend on the order of unordered steps, and what control
flow reads (a semaphore's value) is a choice too. So the explorer runs the engine in its
*exploring* mode, where every choice that decides happens-before is made by a :class:`Chooser`:

- **Which signals a semaphore wait saw.** A semaphore is a counter: a wait for ``v``
  goes on once the counter reaches ``v`` and is ordered after every signal that reached
  the counter before it (release/acquire on the counter; atomic adds continue the
  release sequence). Which ones did is the schedule's: the exploring mode makes every
  actor run as far as it can before any semaphore wait completes (a wait can always be
  slow), then a choice point picks one ready wait and the set of signals that had
  arrived: any *minimal* set closed under happens-before that holds the value (a
  larger set only adds order). Every minimal set is explored.
- **Which wait goes first.** Two waits on one semaphore compete for its value (both
  orders are explored; a wait that was ready too and then starved, never completing in
  the run, is tried first there as well). A wait completed before a signal to its
  semaphore that did not depend on it might have seen that signal had some other actor
  gone first: when the signal could change what the wait needs (it is in some minimal
  set), the explorer tries the other actor first at that choice point (dynamic
  partial-order reduction: the reversal is added only where a run showed the two as
  racing and not ordered).
- **Where a semaphore read falls.** A ``pl.semaphore_read`` is held like a wait (it
  reads nothing until the scheduler lets it): at its choice point it may have seen any
  set of the signals issued so far that is closed under happens-before and holds every
  one ordered before the reader, less what decrementing waits took: one set per value
  it can read is explored (the most first: what a run in the engine's order reads). A
  signal issued later that did not depend on the read, or a decrementing wait on its
  semaphore by another actor, might have come before it: the explorer tries that actor
  first there (a read commutes with another read and with a wait that takes nothing).
  A read takes nothing, and it is an acquire: Mosaic GPU lowers ``pl.semaphore_read``
  to ``ld.acquire.sys.u32`` and a signal to ``red.release.sys.global.add.u32``, so the
  reader is ordered after every signal of the set it saw (the release sequence of the
  adds), as a wait that saw them is. Sets of one value differ in what they order, so
  every closed set is explored, not one per value.
- **When async copies land.** Each barrier's copies have their own copy engine (its own
  clock), so a wait on one barrier says nothing about copies on another.

- **Which phase a barrier arrival joins.** A ``barrier_arrive`` is held like a wait and
  lands when the scheduler picks it, into the phase open then; two arrivals by different
  threads that joined different phases, the later not depending on the earlier, are
  explored in the other order too (within one phase the order does not matter).

Barrier waits complete as soon as their phase has. Async copies arrive when issued and
land together; copies by two threads onto one barrier in more than one phase without an
order between them are explored only in the engine's order (a barrier some thread waits
on: the result says so; one nobody waits on orders nothing).

A run's choices are its *schedule* (:class:`Schedule`): replaying them makes the same
run, with data too (``simulate(..., schedule=...)``). The explorer stops after
``max_runs`` runs or ``max_steps`` thread-steps over all runs (bounds that do not depend
on the machine or its load: the same scenario always gets the same verdict); the result
then says what was covered. ``max_seconds`` is a last-resort cancel, set far above what
the other bounds allow, and says it was time.
"""

from __future__ import annotations

import itertools
import time
from bisect import bisect_left, bisect_right
from typing import Any

import numpy as np
from mpmd_lab.engine.sync import (
    BarrierArrival,
    Cut,
    Semaphore,
    SemaphoreRead,
    SemaphoreWait,
    Token,
)

#: Minimal signal sets offered at one wait at most (beyond: the first ones, and said).
MAX_SETS = 32
#: Signals of a semaphore not yet seen that one choice point considers at most.
MAX_FREE = 16
#: Cuts of a semaphore's signals one read looks at to find the values it may see.
MAX_CUTS = 4096

SCHEMA = "mpmd-lab/schedule@1"


def minimal_sets(sem: Semaphore, vc: Any, value: int) -> tuple[list[Cut], bool]:
    """The sets of ``sem``'s signals (as cuts: see :class:`~mpmd_lab.engine.sync.Lane`) a
    wait for ``value`` by an actor whose clock is ``vc`` may have seen: each holds every
    signal ordered before the waiter and every one an earlier wait saw, is closed under
    happens-before, holds the value, and is minimal (dropping a last signal leaves too
    little). Also whether the list was cut at :data:`MAX_SETS` or :data:`MAX_FREE`.

    Per wait it looks at each signaller's next :data:`MAX_FREE` signals only, not the
    whole history (a cut's prefix of every signaller is all it must know)."""
    base: Cut = {}
    have = -sem.taken
    only = -2  # the one signaller with signals not in ``base`` (-2: none; -3: several)
    units: list[int] = []  # (its lane's units, and how many of them ``base`` holds)
    seen = 0
    arrived = sem.arrived
    for b, lane in sem.lanes.items():  # (:func:`_must_see`, with its units and what is left)
        k = arrived.get(b, 0)
        if b >= 0:
            k = max(k, bisect_right(lane.times, int(vc[b])))
        if k:
            base[b] = k
            have += lane.units[k]
        if len(lane.indices) > k:
            if only == -2:
                only, units, seen = b, lane.units, k
            else:
                only = -3
    need = value - have
    if need <= 0:
        return [base], False
    if only >= 0:
        # one signaller has signals not yet seen: program order orders them, so every
        # set closed under happens-before is a prefix of them, and the shortest that
        # holds the value is the only minimal one (most often its next signal)
        left = len(units) - 1 - seen
        want = units[seen] + need
        if units[seen + 1] >= want:  # (its next signal: the signals needed are those sent)
            return [{**base, only: seen + 1}], left > MAX_FREE
        for n in range(seen + 2, seen + 1 + min(left, MAX_FREE)):
            if units[n] >= want:
                return [{**base, only: n}], left > MAX_FREE
        return [], left > MAX_FREE
    hist = sem.history
    # the signals not in ``base`` in the order they were issued: each lane's rest
    rest = sorted(
        i
        for b, lane in sem.lanes.items()
        for i in lane.indices[base.get(b, 0) : base.get(b, 0) + MAX_FREE + 1]
    )
    left = sum(len(lane.indices) - base.get(b, 0) for b, lane in sem.lanes.items())
    cut = left > MAX_FREE
    free = rest[:MAX_FREE]
    out: list[Cut] = []

    def minimal(chosen: list[int]) -> bool:
        units = sum(hist[i].units for i in chosen)
        for m in chosen:  # a last signal: nothing chosen comes after it
            if any(hist[m].before(hist[k]) for k in chosen if k != m):
                continue
            if units - hist[m].units >= need:
                return False
        return True

    senders = {hist[i].actor for i in free}
    if len(senders) == 1 and min(senders) >= 0:
        # one signaller: program order orders its signals, so every set closed under
        # happens-before is a prefix of them, and the shortest holding the value is the
        # only minimal one (what the walk below finds, without its pairs)
        held = 0
        for n, i in enumerate(free):
            held += hist[i].units
            if held >= need:
                if minimal(free[: n + 1]):
                    out.append({**base, hist[i].actor: base.get(hist[i].actor, 0) + n + 1})
                break
        return out, cut
    preds = {i: [j for j in free if j < i and hist[j].before(hist[i])] for i in free}

    def walk(k: int, chosen: list[int], units: int) -> None:
        nonlocal cut
        if len(out) >= MAX_SETS:
            cut = True
            return
        if units >= need:
            if minimal(chosen):
                more = dict(base)
                for i in chosen:  # (closed under program order: a prefix of each lane)
                    more[hist[i].actor] = more.get(hist[i].actor, 0) + 1
                out.append(more)
            return
        if k == len(free):
            return
        i = free[k]
        if all(j in chosen for j in preds[i]):
            walk(k + 1, [*chosen, i], units + hist[i].units)
        walk(k + 1, chosen, units)

    walk(0, [], 0)
    return out, cut


def _must_see(sem: Semaphore, vc: Any) -> Cut:
    """The signals an actor whose clock is ``vc`` sees in ``sem`` at least: those ordered
    before it and those an earlier wait saw."""
    base: Cut = {}
    for b, lane in sem.lanes.items():
        k = max(sem.arrived.get(b, 0), lane.known(int(vc[b])) if b >= 0 else 0)
        if k:
            base[b] = k
    return base


def _closed(sem: Semaphore, cut: Cut) -> bool:
    """Whether ``cut`` holds every signal ordered before one it holds."""
    for b, k in cut.items():
        if k and b >= 0:
            tok = sem.history[sem.lanes[b].indices[k - 1]]
            for c, lane in sem.lanes.items():
                if c != b and c >= 0 and lane.known(int(tok.vc[c])) > cut.get(c, 0):
                    return False
    return True


def read_sets(sem: Semaphore, vc: Any, actor: int = -1) -> tuple[list[Cut], bool]:
    """The sets of signals (cuts) a ``pl.semaphore_read`` by ``actor`` (its clock
    ``vc``) may have seen now: every set closed under happens-before between what it
    must see (:func:`_must_see`, and what its own last read saw: a counter's reads by
    one thread never go back) and every signal issued so far. Each is explored: the
    value (its units less what decrementing waits took) and, the read being an acquire,
    the order (two sets of one value order the reader after different signals). The
    most first (all the signals: the engine's order), then by value. Also whether the
    sets were cut (past :data:`MAX_FREE` unseen signals of one signaller or
    :data:`MAX_CUTS` sets looked at)."""
    base = _must_see(sem, vc)
    for b, k in sem.read_by.get(actor, {}).items():
        if k > base.get(b, 0):
            base[b] = k
    full: Cut = {b: len(lane.indices) for b, lane in sem.lanes.items() if lane.indices}
    lanes = [(b, lane) for b, lane in sem.lanes.items() if len(lane.indices) > base.get(b, 0)]
    cut = False
    ranges = []
    for b, lane in lanes:
        left = len(lane.indices) - base.get(b, 0)
        cut = cut or left > MAX_FREE
        ranges.append(range(min(left, MAX_FREE) + 1))
    found: list[Cut] = [full]
    for n, more in enumerate(itertools.product(*ranges)):
        if n >= MAX_CUTS:
            cut = True
            break
        c = dict(base)
        for (b, _), k in zip(lanes, more, strict=True):
            if k:
                c[b] = base.get(b, 0) + k
        if c != full and _closed(sem, c):
            found.append(c)
    value = {id(c): sem.units_of(c) for c in found}
    return [found[0], *sorted(found[1:], key=lambda c: -value[id(c)])], cut


def complete_wait(w: SemaphoreWait, seen: Cut) -> None:
    """Complete a semaphore wait that saw the signals ``seen``: its actor is ordered
    after each of them (the semaphore keeps the join of what waits saw, so only the
    signals new to it are joined); a decrementing wait takes its value off."""
    sem = w.sem
    joined = sem.joined
    arrived = sem.arrived
    hist = sem.history
    for b, k in seen.items():
        start = arrived.get(b, 0)
        if k > start:
            for i in sem.lanes[b].indices[start:k]:
                vc = hist[i].vc
                joined = vc.copy() if joined is None else np.maximum(joined, vc, out=joined)
    sem.joined = joined
    sem.arrived = seen
    w.engine.clocks.join(w.a, joined)
    sem.drop(w.value, w.decrement)  # (the counter and its FIFO view, as a lockstep run)


def acquire(w: SemaphoreRead, seen: Cut) -> None:
    """A semaphore read that saw the signals ``seen`` (``ld.acquire.sys`` of the counter
    their ``red.release.sys`` adds reached): its actor is ordered after each of them.
    Nothing is taken and the semaphore's own record of what waits saw is left alone
    (another actor's read may see less)."""
    sem, clocks = w.sem, w.engine.clocks
    for b, k in seen.items():
        for i in sem.lanes[b].indices[:k]:
            clocks.join(w.a, sem.history[i].vc)


def new_signals(sem: Semaphore, base: Cut, seen: Cut) -> list[int]:
    """The signals (indices into ``history``) in ``seen`` and not in ``base``."""
    return sorted(i for b, k in seen.items() for i in sem.lanes[b].indices[base.get(b, 0) : k])


class Point:
    """One choice point of a run: the runs whose semaphore waits were ready (``ready``;
    their actors: ``options``), the one chosen (``actor``; its wait's ``key`` and
    ``path``), the other ready actors whose wait had the same key (``rivals``) and the
    signal set it saw (``seen``: index ``choice`` of the ``nsets`` offered).

    What a point does not set keeps the class's value (a wait's point sets what a wait
    has, an arrival's or a read's what it has): nothing is stored that no one reads."""

    actor = -1
    key: tuple = ()
    path = ""
    choice = 0
    nsets = 1
    #: the signals it saw, and those earlier waits on its semaphore had (cuts: replaced,
    #: never changed, so one empty cut serves every point that saw none)
    seen: Cut = {}  # noqa: RUF012
    base: Cut = {}  # noqa: RUF012
    taken = 0
    value = 0
    done_time = 0
    vc: Any = None  # the waiter's clock before it completed
    phase = -1  # a barrier arrival's: the phase it joined (-1: a semaphore wait)
    read = False  # a semaphore read (``value``: what it read)
    decrement = False  # a semaphore wait that took its value off

    rivals: tuple[int, ...] | list[int] = ()
    #: a semaphore wait's (read's) semaphore and how many signals it had then (one
    #: issued later is in its ``history`` past that)
    sem: Semaphore | None = None
    heard = 0

    def __init__(self, ready: list[Any]) -> None:
        self.ready = ready

    @property
    def options(self) -> list[int]:
        """The actors ready here (read only where a reversal or a report needs them)."""
        return [r.a for r in self.ready]


class Chooser:
    """The choices of one exploring run: replays ``prefix`` (actor, set index) and then
    takes the first option; records every point (``points``; a signal is kept by its
    semaphore, in its ``history``)."""

    def __init__(self, prefix: list[tuple[int, int]] | None = None) -> None:
        self.prefix = list(prefix or [])
        self.points: list[Point] = []
        self.cut = False  # a choice point offered fewer sets than there are
        self.several: list[int] = []  # the points offered more than one set
        self.last: dict[tuple, int] = {}  # semaphore (barrier) key -> its last point
        self.mismatch = ""  # the replayed schedule does not fit this scenario

    def pick(self, frontier: list[Any]) -> tuple[Any, Cut]:
        """Choose a ready wait of ``frontier`` (runs parked at semaphore waits or barrier
        arrivals) and the signals it saw (none for an arrival)."""
        points = self.points
        k = len(points)
        at = choice = 0
        if k < len(self.prefix):
            actor, choice = self.prefix[k]
            at = next((n for n, r in enumerate(frontier) if r.a == actor), -1)
            if at < 0:
                self.mismatch = (
                    f"choice {k}: actor {actor} has no ready semaphore wait or barrier "
                    f"arrival there (ready: {[r.a for r in frontier]})"
                )
                at = choice = 0
        run = frontier[at]
        w = run.blocked
        pt = Point(frontier)
        pt.actor = actor = run.a
        pt.key = key = w.key
        pt.path = w.path
        self.last[key] = k
        if len(frontier) > 1:  # (ready on the same semaphore: they compete for it)
            pt.rivals = [r.a for r in frontier if r is not run and r.blocked.key == key]
        clocks = w.engine.clocks
        pt.vc = clocks.snapshot(actor)
        points.append(pt)
        if isinstance(w, BarrierArrival):  # (one way to land: now, in the open phase)
            pt.done_time = clocks.time[actor]  # (the time its arrival publishes)
            w.complete()
            pt.phase = w.phase
            return run, pt.seen
        pt.sem = sem = w.sem
        pt.heard = len(sem.history)
        read = isinstance(w, SemaphoreRead)
        sets, cut = read_sets(sem, pt.vc, actor) if read else minimal_sets(sem, pt.vc, w.value)
        if cut:
            self.cut = True
        if choice >= len(sets):
            self.mismatch = self.mismatch or f"choice {k}: set {choice} of {len(sets)}"
            choice = 0
        pt.choice = choice
        if len(sets) > 1:
            pt.nsets = len(sets)
            self.several.append(k)
        pt.seen = seen = sets[choice]
        pt.base = sem.arrived  # (a cut is replaced, never changed)
        pt.taken = sem.taken
        if read:  # (an acquire that takes nothing: ordered after what it saw)
            pt.read = True
            sem.read_by[actor] = seen
            pt.value = w.seen = sem.units_of(seen) - sem.taken
            acquire(w, seen)
        else:
            pt.value, pt.decrement = w.value, w.decrement
            complete_wait(w, seen)
        pt.done_time = clocks.time[actor]
        return run, seen


def _useful(pt: Point, sem: Semaphore, idx: int) -> bool:
    """Whether a wait (at ``pt``) that completed before signal ``idx`` of its semaphore
    could need that signal: in the smallest set holding it, its ordered-before signals
    and what the wait had to see, the signal is not spare. (Per signaller: the longer of
    the prefix the wait had seen and the prefix ordered before the signal.)"""
    t = sem.history[idx]
    if pt.read:  # (any units change what a read sees)
        return t.units > 0
    have = -pt.taken
    for b, lane in sem.lanes.items():
        before = lane.position(idx) if b == t.actor else lane.known(int(t.vc[b])) if b >= 0 else 0
        have += lane.units[max(before, pt.base.get(b, 0))]
    return have < pt.value


class _Index:
    """A run's choice points from ``first`` on by semaphore (or barrier) and actor, so
    that each point looks only at the later waits and arrivals that could race with it
    (a point at or after ``first`` needs nothing earlier; its semaphore's signals are
    its lanes, by signaller already)."""

    def __init__(self, points: list[Point], first: int = 0) -> None:
        self.points = points
        self.first = first
        #: semaphore (barrier) key -> waiting (arriving) actor -> its points, in order
        self.waits: dict[tuple, dict[int, list[int]]] = {}
        for i in range(first, len(points)):
            pt = points[i]
            self.waits.setdefault(pt.key, {}).setdefault(pt.actor, []).append(i)
        self._chosen: dict[int, list[int]] | None = None

    def chosen(self) -> dict[int, list[int]]:
        """Actor -> the points where it was chosen (made when a reversal first asks)."""
        if self._chosen is None:
            self._chosen = {}
            for i in range(self.first, len(self.points)):
                self._chosen.setdefault(self.points[i].actor, []).append(i)
        return self._chosen


def _lead(points: list[Point], index: _Index, i: int, actor: int, vc: Any) -> set[int]:
    """Who should go first at point ``i`` for something by ``actor`` whose clock is
    ``vc`` to come before point ``i``'s wait: that actor if it is ready there, else the
    first ready one whose later wait led to it, else every other ready one."""
    pt = points[i]
    if actor in pt.options:
        return {actor}
    first = None  # (the first later point whose actor was ready at i and led to vc)
    for a in pt.options:
        if a == pt.actor:
            continue
        mine = index.chosen().get(a, [])
        k = bisect_right(mine, i)  # (a's first later wait: its later ones end later still)
        if k < len(mine) and int(vc[a]) >= points[mine[k]].done_time:
            if first is None or mine[k] < first[0]:
                first = (mine[k], a)
    if first is not None:
        return {first[1]}
    return {a for a in pt.options if a != pt.actor}


def _later(index: _Index, key: tuple, actor: int, i: int) -> bool:
    """Whether ``actor`` completed a wait (read, arrival) on ``key`` after point ``i``."""
    mine = index.waits.get(key, {}).get(actor, [])
    return bisect_right(mine, i) < len(mine)


def reversals(
    points: list[Point],
    unwatched: frozenset[tuple] = frozenset(),
    last: dict[tuple, int] | None = None,
) -> dict[int, set[int]]:
    """The choice points where another actor should go first (point -> actors): two
    waits on one semaphore by different actors, the later not depending on the earlier
    (both orders; the same for two arrivals at one barrier that joined different
    phases: the later could have joined the earlier's), and a wait completed before a
    signal to its semaphore that did not depend on it and that it could need (the actor
    whose wait, completed later, led to that signal). ``unwatched``: the barriers no
    thread waits on (which phase an arrival there joined cannot matter); ``last``: each
    key's last point (:attr:`Chooser.last`; None: found here).

    Near-linear: per point, each other actor's later waits (signals) on the same
    semaphore are looked at only up to the first that depends on the point's wait
    (program order makes every later one of that actor depend on it too)."""
    if last is None:
        last = {pt.key: i for i, pt in enumerate(points)}
    index: _Index | None = None
    out: dict[int, set[int]] = {}
    for i, pt in enumerate(points):
        key = pt.key
        # a point after which no wait (read, arrival) and no signal comes on its key,
        # with no rival ready, races with nothing
        if key in unwatched or (
            last[key] == i and (pt.sem is None or len(pt.sem.history) == pt.heard) and not pt.rivals
        ):
            continue
        if index is None:  # (from this point on: no earlier one needs it)
            index = _Index(points, i)
        for b in pt.rivals:
            # a wait ready here on the same semaphore that never completed after (the
            # chosen one took what it needed: it starved): the schedule where it went
            # first is another (its thread runs on, where here it deadlocked)
            if not _later(index, key, b, i):
                out.setdefault(i, set()).add(b)
        for b, mine in index.waits[key].items():
            if b == pt.actor:
                continue
            for j in range(bisect_right(mine, i), len(mine)):
                q = points[mine[j]]
                if int(q.vc[pt.actor]) >= pt.done_time:
                    break  # q's waiter came after this wait (and so do its later ones)
                if q.phase == pt.phase >= 0:
                    continue  # two arrivals in one phase: either order makes that phase
                if (pt.read and not q.decrement) or (q.read and not pt.decrement):
                    continue  # a read commutes with a read and a wait that takes nothing
                out.setdefault(i, set()).update(_lead(points, index, i, b, q.vc))
        sem = pt.sem
        if sem is None:
            continue  # (an arrival: no signals)
        for b, lane in sem.lanes.items():
            if b == pt.actor:
                continue
            mine = lane.indices  # (its signals to the semaphore, in ``history``)
            for j in range(bisect_left(mine, pt.heard), len(mine)):
                idx = mine[j]
                tok: Token = sem.history[idx]
                if int(tok.vc[pt.actor]) >= pt.done_time:
                    break  # it depends on this wait (and so do the signaller's later ones)
                if _useful(pt, sem, idx):
                    out.setdefault(i, set()).update(_lead(points, index, i, b, tok.vc))
    return out


class Schedule:
    """A replayable schedule: the choices of one exploring run (``choices``: actor and
    signal-set index per point) and, for people, what each choice was (``said``) and
    the statements in the order they ran (``steps``)."""

    def __init__(
        self,
        choices: list[tuple[int, int]],
        said: list[dict[str, Any]] | None = None,
        steps: list[dict[str, Any]] | None = None,
    ) -> None:
        self.choices = choices
        self.said = said or []
        self.steps = steps or []

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "choices": [
                {"actor": a, "set": c, **(self.said[k] if k < len(self.said) else {})}
                for k, (a, c) in enumerate(self.choices)
            ],
            "steps": self.steps,
        }

    @classmethod
    def from_json(cls, data: Any) -> Schedule:
        """A schedule from its JSON form (a dict, or a list of choices)."""
        if isinstance(data, Schedule):
            return data
        if isinstance(data, dict):
            if data.get("schema", SCHEMA) != SCHEMA:
                raise ValueError(f"not a schedule: schema {data.get('schema')!r}")
            items = data.get("choices", [])
        else:
            items = data
        choices = []
        for c in items:
            if isinstance(c, dict):
                choices.append((int(c["actor"]), int(c.get("set", 0))))
            else:
                a, k = c
                choices.append((int(a), int(k)))
        return cls(choices)


#: Statements a witness lists at most (its choices are what replays it).
MAX_TRAIL = 2000


def described(engine: Any, pts: list[Point]) -> Schedule:
    """A run's schedule with what each choice was (``saw``: the signals the wait saw
    that no earlier wait on its semaphore had: the ones it took) and the statements in
    order."""
    names = {a: actor.describe() for a, actor in engine.actors.items()}
    said = []
    for p in pts:
        if p.phase >= 0:
            said.append(
                {
                    "who": names.get(p.actor, str(p.actor)),
                    "arrives": p.path,
                    "barrier": engine.barriers[p.key].label,
                    "phase": p.phase,
                    "ready": [names.get(a, str(a)) for a in p.options],
                    "sets": 1,
                }
            )
            continue
        sem = _sem(engine, p.key)
        if p.read:
            said.append(
                {
                    "who": names.get(p.actor, str(p.actor)),
                    "reads": p.path,
                    "semaphore": sem.label,
                    "value": p.value,
                    "ready": [names.get(a, str(a)) for a in p.options],
                    "sets": p.nsets,
                }
            )
            continue
        saw = [
            f"{sem.history[i].sender} ({sem.history[i].path})"
            for i in new_signals(sem, p.base, p.seen)
        ]
        said.append(
            {
                "who": names.get(p.actor, str(p.actor)),
                "wait": p.path,
                "semaphore": sem.label,
                "saw": saw,
                "ready": [names.get(a, str(a)) for a in p.options],
                "sets": p.nsets,
            }
        )
    steps = [{"actor": names.get(a, str(a)), "at": path} for a, path in engine.trail[:MAX_TRAIL]]
    return Schedule([(p.actor, p.choice) for p in pts], said, steps)


def _sem(engine: Any, key: tuple) -> Semaphore:
    return engine.semaphores[key]


class Explored:
    """What exploring found: one outcome per kind of finding with the schedule that
    shows it (``races``: (race, schedule, points), ``deadlock``: (outcome, schedule,
    points)), the union of balance warnings, runs made, and whether every schedule that
    matters was covered (``complete``; else ``why``)."""

    def __init__(self) -> None:
        self.races: list[tuple[Any, Schedule, list[Point]]] = []
        self.deadlock: tuple[Any, Schedule, list[Point]] | None = None
        self.leftover: list[tuple[str, int, str]] = []
        self.first: Any = None
        self.runs = 0
        self.points = 0
        self.complete = True
        self.why = ""
        self.seconds = 0.0


def explore(
    make: Any,
    *,
    max_runs: int = 2000,
    max_steps: int | None = None,
    max_seconds: float | None = None,
    max_races: int = 16,
) -> Explored:
    """Explore the schedules of the engine ``make(chooser)`` builds (stateless: each
    run replays a prefix of choices, depth first). Deadlocks, races and leftovers of
    every run are collected with the first schedule that shows each. Bounded by
    ``max_runs`` runs and ``max_steps`` thread-steps in all (deterministic);
    ``max_seconds`` (None: none) only cancels a runaway exploration. What the runs
    share (the call's compiled bodies: :class:`~mpmd_lab.engine.core.Prepared`) is
    ``make``'s to hand each engine."""
    res = Explored()
    start = time.perf_counter()
    path: list[tuple[int, int]] = []  # the choices (actor, set) the next run replays
    nodes: dict[int, _Node] = {}  # the points of ``path`` with something to try or tried
    seen_races: set[tuple] = set()
    seen_left: set[tuple[str, str]] = set()
    steps = 0
    while True:
        chooser = Chooser(path)
        engine = make(chooser)
        out = engine.run()
        res.runs += 1
        steps += out.steps
        if res.first is None:
            res.first = out
        if out.stopped or out.error is not None:
            res.complete = False
            res.why = out.stopped or str(out.error)
            if res.first is not out:
                res.first.stopped = res.first.stopped or out.stopped
            break
        pts = chooser.points
        res.points = max(res.points, len(pts))
        odd = sorted(b.label for b in engine.barriers.values() if b.order_matters)
        if odd and res.complete:
            res.complete = False
            res.why = (
                f"async copies issued by more than one thread land on {', '.join(odd[:3])} "
                "in more than one phase without an order between them: which phase each "
                "joined was explored only in the engine's order"
            )
        if chooser.cut:
            res.complete = False
            res.why = (
                f"a wait had more than {MAX_SETS} minimal sets of signals it may have seen "
                f"(or more than {MAX_FREE} unseen signals), or a semaphore read more than "
                f"{MAX_FREE} unseen signals of one signaller or {MAX_CUTS} sets to look at: "
                "the first ones were explored"
            )
        # (a run's schedule is made only for what it shows: a race or deadlock)
        if (out.log.races and len(res.races) < max_races) or (
            out.deadlock and res.deadlock is None
        ):
            sched = described(engine, pts)
        for r in out.log.races:
            key = (r.first.path, r.first.field, r.second.path, r.second.field)
            if key in seen_races or len(res.races) >= max_races:
                continue
            seen_races.add(key)
            res.races.append((r, sched, pts))
        if out.deadlock and res.deadlock is None:
            res.deadlock = (out, sched, pts)
        for item in out.leftover:
            k = (item[0], item[2])
            if k not in seen_left:
                seen_left.add(k)
                res.leftover.append(item)
        # the tree: the path this run took (the prefix it replayed, then its own points:
        # those are read from ``pts`` only when a later run needs them), the other
        # signal sets of its new points, the reversals it showed
        tail: list[Point] = []  # (the path's points past ``path``)
        if pts:  # (a run without choices has nothing to add or reverse)
            fit = len(path)
            for i in range(min(fit, len(pts))):
                p = pts[i]
                if path[i] != (p.actor, p.choice):
                    fit = -1  # (a replay that did not fit: the path is not extended)
                    break
            if fit >= 0:
                if 0 < fit <= len(pts):  # the point this run branched at: its actor's sets
                    p, node = pts[fit - 1], nodes[fit - 1]
                    if p.actor not in node.expanded:
                        node.expanded.add(p.actor)
                        node.todo.extend((p.actor, c) for c in range(1, p.nsets))
                if len(pts) > fit:
                    tail = pts
                    for i in chooser.several:
                        if i >= fit:
                            p = pts[i]
                            todo = [(p.actor, c) for c in range(1, p.nsets)]
                            nodes[i] = _Node((p.actor, p.choice), todo)
            depth = len(tail) or len(path)
            unwatched = frozenset(k for k, b in engine.barriers.items() if not b.waited)
            found = reversals(pts, unwatched, chooser.last)
            for i, actors in found.items():
                if i >= depth:
                    continue
                at = nodes.get(i)
                if at is None:
                    at = nodes[i] = _Node(_chosen(path, tail, i), [])
                for a in sorted(actors):
                    if (a, 0) not in at.done and (a, 0) not in at.todo:
                        at.todo.append((a, 0))
        # the next run: the deepest point with something left to try
        if not nodes:
            break
        deepest = max((i for i, n in nodes.items() if n.todo), default=-1)
        for i in [i for i in nodes if i > deepest]:
            del nodes[i]
        if deepest < 0:
            break
        why = _bound(res.runs, max_runs, steps, max_steps, time.perf_counter() - start, max_seconds)
        if why:
            res.complete = False
            left = sum(len(n.todo) for n in nodes.values())
            res.why = f"{why}, with {left} choice(s) at {deepest + 1} point(s) not yet tried"
            break
        node = nodes[deepest]
        nxt = node.todo.pop(0)
        node.done.add(nxt)
        path = [*(_chosen(path, tail, i) for i in range(deepest)), nxt]
    res.seconds = time.perf_counter() - start
    return res


class _Node:
    """A point of the path being explored with more than its first choice: what is left
    to try there (``todo``: actor, set), what was (``done``) and the actors whose other
    signal sets are in ``todo`` already (``expanded``)."""

    __slots__ = ("todo", "done", "expanded")

    def __init__(self, chosen: tuple[int, int], todo: list[tuple[int, int]]) -> None:
        self.todo = todo
        self.done = {chosen}
        self.expanded = {chosen[0]}


def _chosen(path: list[tuple[int, int]], tail: list[Point], i: int) -> tuple[int, int]:
    """The choice at point ``i`` of the path: replayed (``path``), or a run's own."""
    if i < len(path):
        return path[i]
    p = tail[i]
    return (p.actor, p.choice)


def _bound(
    runs: int,
    max_runs: int,
    steps: int,
    max_steps: int | None,
    seconds: float,
    max_seconds: float | None,
) -> str:
    """Why exploring stops here ("" to go on): a bound on runs or thread-steps reached,
    or (a last resort, said as such) the time."""
    if runs >= max_runs:
        return f"stopped at its bound of {max_runs} schedules ({steps:,} thread-steps)"
    if max_steps is not None and steps >= max_steps:
        return (
            f"stopped at its bound of {max_steps:,} thread-steps over all schedules "
            f"(after {runs} schedules)"
        )
    if max_seconds is not None and seconds > max_seconds:
        return (
            f"cancelled after {seconds:.0f} s, its time bound (a last resort: this "
            f"machine was slow or loaded; {runs} schedules, {steps:,} thread-steps run)"
        )
    return ""


__all__ = [
    "SCHEMA",
    "Chooser",
    "Explored",
    "Point",
    "Schedule",
    "complete_wait",
    "explore",
    "minimal_sets",
    "read_sets",
    "reversals",
]
