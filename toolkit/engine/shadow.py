"""Shadow memory for the race check: who last touched each element, as runs.

Each memory location keeps, per element, the last plain write (an access id), and
per actor the last read and the last atomic update; they are held as
:class:`RunMap` s (sorted ``[start, stop)`` segments with one value each), so a
contiguous access costs a few numpy calls whatever its size, and a strided one no more
than per-element bookkeeping. An access is checked against the accesses it conflicts
with (a read against writes and atomics, a write against all three, an atomic against
writes and reads) that happens-before does not order before it
(:class:`~mpmd_lab.engine.clocks.Clocks`): each such pair is a race. This is the
FastTrack/DJIT+ discipline (a write clears the reads it is checked against).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from typing import Any

import numpy as np
from mpmd_lab.accesslog import Access, AccessLog, Location, Race


class RunMap:
    """A value for every index of ``[0, size)``, as segments: segment ``i`` is
    ``[bounds[i], bounds[i+1])`` holding ``vals[i]`` (``bounds`` ends with ``size``, so
    every segment has its end at hand); ``-1`` means nothing. Plain lists and
    ``bisect``: the maps of a run are small (a few segments per writer), where numpy's
    per-call cost would dominate."""

    __slots__ = ("bounds", "empty", "size", "vals")

    def __init__(self, size: int, spans: list[tuple[int, int]] | None = None, value: int = -1):
        """Nothing set, or ``value`` over ``spans`` (one span: its segments made at
        once; a thread's first read of a place, its first write)."""
        self.size = size
        if value >= 0 and spans is not None and len(spans) == 1:
            a, b = spans[0]
            bounds, vals = ([0, a], [-1, value]) if a else ([0], [value])
            if b < size:
                bounds.append(b)
                vals.append(-1)
            bounds.append(size)
            self.bounds, self.vals = bounds, vals
            self.empty = False
            return
        self.bounds = [0, size]
        self.vals = [-1]
        #: nothing set (kept by ``assign``, the one change, for the many queries)
        self.empty = True
        if spans:
            self.assign(spans, value)

    def query(self, spans: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
        """``(start, stop, value)`` of the set segments inside ``spans``."""
        if self.empty:
            return []
        bounds, vals = self.bounds, self.vals
        out = []
        for a, b in spans:
            i = bisect_right(bounds, a) - 1
            hi = bounds[i + 1]
            while hi < b:  # the segments that end inside the span
                v = vals[i]
                if v >= 0:
                    out.append((a, hi, v))
                a = hi
                i += 1
                hi = bounds[i + 1]
            v = vals[i]  # the one it ends in
            if v >= 0:
                out.append((a, b, v))
        return out

    def assign(self, spans: list[tuple[int, int]], value: int) -> None:
        """Set every index inside ``spans`` to ``value``."""
        bounds, vals = self.bounds, self.vals
        if value < 0:
            if self.empty:
                return
            if len(spans) == 1:  # one span over all that is set (a write after a read)
                a, b = spans[0]
                if a <= bounds[0 if vals[0] >= 0 else 1] and b >= (
                    bounds[-1] if vals[-1] >= 0 else bounds[-2]
                ):
                    self.bounds, self.vals, self.empty = [0, self.size], [-1], True
                    return
        for a, b in spans:
            i = bisect_right(bounds, a) - 1
            if bounds[i] != a:  # a segment starts at ``a``
                i += 1
                bounds.insert(i, a)
                vals.insert(i, vals[i - 1])
            if bounds[i + 1] == b:  # [a, b) is segment i already (a thread reading it again)
                vals[i] = value
            else:
                j = bisect_right(bounds, b, i) - 1
                if bounds[j] != b:  # one ends at ``b`` (``size`` is a bound already)
                    j += 1
                    bounds.insert(j, b)
                    vals.insert(j, vals[j - 1])
                del bounds[i + 1 : j]
                vals[i:j] = [value]
            # merge with equal neighbours
            if i + 1 < len(vals) and vals[i + 1] == value:
                del bounds[i + 1]
                del vals[i + 1]
            if i and vals[i - 1] == value:
                del bounds[i]
                del vals[i]
        if value < 0:
            self.empty = len(vals) == 1 and vals[0] < 0
        elif spans:
            self.empty = False


class _Loc:
    """One place's state: its plain writes (None until the first), and per actor its
    reads and atomics."""

    __slots__ = ("atomics", "reads", "size", "writes")

    def __init__(self, size: int) -> None:
        self.size = size
        self.writes: RunMap | None = None
        self.reads: dict[int, RunMap] = {}
        self.atomics: dict[int, RunMap] = {}


class Shadow:
    """Every access of a run, checked for races as it happens, and logged (bounded)."""

    def __init__(self, clocks: Any, log: AccessLog) -> None:
        self.clocks = clocks
        self.log = log
        #: whether the log keeps or counts anything (the race check's keeps nothing)
        self._logs = log.limit != 0 or log.tally
        self._actor: list[int] = []
        self._time: list[int] = []
        #: the clocks' times and vector clocks (lists they change in place)
        self._times = clocks.time
        self._vcs = clocks.vc
        self._own = clocks.own
        #: per access: (kind, Actor, statement info, Location)
        self._info: list[tuple[str, Any, tuple[int, str, str, str, str], Location]] = []
        self._kept: dict[int, Access] = {}
        self._seen: set[tuple] = set()
        #: id(location) -> its shadow: the place's state without hashing the location
        #: (one location object per place, as the engine makes them; each kept alive in
        #: ``_alive``: its id stays its own)
        self._places: dict[int, _Loc] = {}
        self._alive: list[Location] = []

    @property
    def count(self) -> int:
        return len(self._info)

    def _access(self, i: int, spans: np.ndarray) -> Access:
        acc = self._kept.get(i)
        if acc is not None:
            return acc
        kind, actor, (stmt, op, ref, path, fld), loc = self._info[i]
        return Access(i, kind, actor, stmt, op, ref, loc, spans, path, fld)  # type: ignore[arg-type]

    def access(
        self,
        kind: str,
        a: int,
        actor: Any,
        stmt: tuple[int, str, str, str, str],
        loc: Location,
        shape: tuple[int, ...],
        spans: np.ndarray | None,
        pyspans: list[tuple[int, int]],
    ) -> None:
        """Log one access by actor index ``a`` and check it against what came before
        (``shape``: the location's buffer's; ``loc``: one object per place, as the
        engine makes them)."""
        if not pyspans:
            return
        i = len(self._info)
        self._actor.append(a)
        self._time.append(self._times[a])
        self._info.append((kind, actor, stmt, loc))
        if self._logs:
            self._keep(i, kind, actor, stmt, loc, spans, pyspans)
        sh = self._places.get(id(loc))
        if sh is None:
            sh = self._place(loc, shape)
        vc = self._vcs[a]
        writes = sh.writes
        if kind == "read":
            if writes is not None:
                hits = self._unordered(writes, pyspans, a, vc)
                if hits:
                    self._report(i, a, hits, "read-write", sh)
            for r, m in sh.atomics.items():
                if r != a:
                    hits = self._unordered(m, pyspans, a, vc)
                    if hits:
                        self._report(i, a, hits, "read-write", sh)
            _remember(sh.reads, a, sh.size, pyspans, i)
            return
        if writes is not None:
            hits = self._unordered(writes, pyspans, a, vc)
            if hits:
                self._report(i, a, hits, "write-write", sh)
        plain = kind != "atomic"
        # a plain write clears the reads and atomics it is checked against (FastTrack):
        # those a map holds over its spans, found by the walk the check makes anyway
        if sh.reads:
            self._against(i, a, vc, sh.reads, pyspans, "read-write", sh, plain)
        if not plain:
            _remember(sh.atomics, a, sh.size, pyspans, i)
            return
        if sh.atomics:
            self._against(i, a, vc, sh.atomics, pyspans, "write-write", sh, True)
        if writes is None:
            sh.writes = RunMap(sh.size, pyspans, i)
        else:
            writes.assign(pyspans, i)

    def _place(self, loc: Location, shape: tuple[int, ...]) -> _Loc:
        """The state of ``loc``'s place, made at its first access (and found by the
        object's id from then on: the object is kept alive, its id stays its own; the
        engine makes one object per place, so an object never seen is a new place)."""
        found = self._places[id(loc)] = _Loc(math.prod(shape))
        self._alive.append(loc)
        return found

    def _against(
        self,
        i: int,
        a: int,
        vc: np.ndarray | None,
        table: dict[int, RunMap],
        spans: list[tuple[int, int]],
        kind: str,
        place: _Loc,
        clear: bool,
    ) -> None:
        """Check access ``i`` by ``a`` against each other actor's map in ``table`` (its
        reads, or its atomics); with ``clear``, a plain write's, what each map holds
        over ``spans`` is cleared (a map left empty dropped)."""
        own = self._own
        for r, m in list(table.items()) if clear else table.items():
            if r == a and own[a] >= self.clocks.time[a]:
                if clear:
                    m.assign(spans, -1)
                    if m.empty:
                        del table[r]
                continue
            hits = self._unordered(m, spans, a, vc)
            if hits is None:  # (nothing there)
                continue
            if hits:
                self._report(i, a, hits, kind, place)
            if clear:
                m.assign(spans, -1)
                if m.empty:
                    del table[r]

    def _unordered(
        self, m: RunMap, spans: list[tuple[int, int]], a: int, vc: np.ndarray | None
    ) -> list[tuple[int, int, int]] | None:
        """``(start, stop, access)`` of the accesses ``m`` holds inside ``spans`` that
        happens-before does not order before actor ``a``'s next step (its vector clock
        ``vc``): what races with it there; None when ``m`` holds nothing there. One walk
        of the segments (a :meth:`RunMap.query` judged as it goes)."""
        bounds, vals = m.bounds, m.vals
        actor, times = self._actor, self._time
        own = self._own
        out = None
        for lo, b in spans:
            i = bisect_right(bounds, lo) - 1
            while True:
                hi = bounds[i + 1]
                v = vals[i]
                if v >= 0:
                    if out is None:
                        out = []
                    pa = actor[v]
                    if pa != a:
                        if vc is None or vc[pa] < times[v]:
                            out.append((lo, hi if hi < b else b, v))
                    elif own[a] < times[v]:  # (a copy engine's earlier copy in flight)
                        out.append((lo, hi if hi < b else b, v))
                if hi >= b:
                    break
                lo = hi
                i += 1
        return out

    def _keep(
        self,
        i: int,
        kind: str,
        actor: Any,
        stmt: tuple[int, str, str, str, str],
        loc: Location,
        spans: np.ndarray | None,
        pyspans: list[tuple[int, int]],
    ) -> None:
        """Access ``i`` into the log (past its limit: counted, when it tallies)."""
        log = self.log
        if log.limit is None or len(log.accesses) < log.limit:
            if spans is None:
                spans = np.asarray(pyspans, np.int64).reshape(-1, 2)
            acc = Access(i, kind, actor, *stmt[:3], loc, spans, *stmt[3:])  # type: ignore[arg-type]
            self._kept[i] = acc
            log.add(acc)
        elif log.tally:
            n = 0
            for lo, hi in pyspans:
                n += hi - lo
            log.count(actor.program, stmt[0], loc.buffer, kind, n)

    def _report(
        self, i: int, a: int, hits: list[tuple[int, int, int]], kind: str, place: _Loc
    ) -> None:
        """The races of access ``i`` by ``a`` with the accesses ``hits`` names
        (``(start, stop, access)``, unordered before it) at ``place`` (its location's
        state: one per location, it stands for it in the keys of the races seen, without
        hashing the location): one per earlier access, each reported once per pair of
        statements and actors there."""
        actor = self._actor
        bad: dict[int, list[tuple[int, int]]] = {}
        for lo, hi, v in hits:
            bad.setdefault(v, []).append((lo, hi))
        for prev, segs in bad.items():
            pk, pactor, pstmt, _ = self._info[prev]
            key = (kind, actor[prev], pstmt, a, self._info[i][2], place)
            if key in self._seen:
                continue
            self._seen.add(key)
            if self.log.races_full:
                self.log.race_count += 1
                continue
            overlap = np.asarray(segs, np.int64).reshape(-1, 2)
            first = self._access(prev, overlap)
            second = self._access(i, overlap)
            self.log.add_race(Race(kind, first, second, overlap))  # type: ignore[arg-type]


def _remember(
    maps: dict[int, RunMap], actor: int, size: int, spans: list[tuple[int, int]], i: int
) -> None:
    """Actor ``actor``'s reads or atomics now cover ``spans`` (access ``i``): its map made
    at its first access, assigned to after."""
    own = maps.get(actor)
    if own is None:
        maps[actor] = RunMap(size, spans, i)
    else:
        own.assign(spans, i)


__all__ = ["RunMap", "Shadow"]
