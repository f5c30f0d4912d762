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
    """A value for every index of ``[0, size)``, as segments: ``bounds[i]`` starts
    segment ``i`` (to ``bounds[i+1]``, the last to ``size``) holding ``vals[i]``;
    ``-1`` means nothing. Plain lists and ``bisect``: the maps of a run are small (a
    few segments per writer), where numpy's per-call cost would dominate."""

    __slots__ = ("bounds", "empty", "size", "vals")

    def __init__(self, size: int) -> None:
        self.size = size
        self.bounds = [0]
        self.vals = [-1]
        #: nothing set (kept by ``assign``, the one change, for the many queries)
        self.empty = True

    def query(self, spans: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
        """``(start, stop, value)`` of the set segments inside ``spans``."""
        if self.empty:
            return []
        bounds, vals, size = self.bounds, self.vals, self.size
        n = len(bounds)
        out = []
        for a, b in spans:
            i = bisect_right(bounds, a) - 1
            while i < n and bounds[i] < b:
                v = vals[i]
                if v >= 0:
                    lo = bounds[i] if bounds[i] > a else a
                    hi = bounds[i + 1] if i + 1 < n else size
                    out.append((lo, hi if hi < b else b, v))
                i += 1
        return out

    def _split(self, x: int) -> int:
        """Make ``x`` a segment start; its index."""
        bounds = self.bounds
        i = bisect_right(bounds, x) - 1
        if bounds[i] == x:
            return i
        bounds.insert(i + 1, x)
        self.vals.insert(i + 1, self.vals[i])
        return i + 1

    def assign(self, spans: list[tuple[int, int]], value: int) -> None:
        """Set every index inside ``spans`` to ``value``."""
        if value < 0 and self.empty:
            return
        bounds, vals, size = self.bounds, self.vals, self.size
        for a, b in spans:
            i = bisect_right(bounds, a) - 1
            if bounds[i] == a and (bounds[i + 1] == b if i + 1 < len(bounds) else b == size):
                vals[i] = value  # [a, b) is segment i already (a thread reading it again)
            else:
                i = self._split(a)
                j = self._split(b) if b < size else len(bounds)
                bounds[i + 1 : j] = []
                vals[i:j] = [value]
            # merge with equal neighbours
            if i + 1 < len(bounds) and vals[i + 1] == value:
                del bounds[i + 1]
                del vals[i + 1]
            if i > 0 and vals[i - 1] == value:
                del bounds[i]
                del vals[i]
        self.empty = len(vals) == 1 and vals[0] < 0


class _Loc:
    __slots__ = ("atomics", "reads", "size", "writes")

    def __init__(self, size: int) -> None:
        self.size = size
        self.writes = RunMap(size)
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
        #: per access: (kind, Actor, statement info, Location)
        self._info: list[tuple[str, Any, tuple[int, str, str, str, str], Location]] = []
        self._kept: dict[int, Access] = {}
        self.locs: dict[Location, _Loc] = {}
        self._seen: set[tuple] = set()
        #: id(location) -> (location, its shadow): the place's state without hashing
        #: the location (kept alive, its id stays its own)
        self._places: dict[int, tuple[Location, _Loc]] = {}

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
        self._time.append(self.clocks.time[a])
        self._info.append((kind, actor, stmt, loc))
        if self._logs:
            self._keep(i, kind, actor, stmt, loc, spans, pyspans)
        place = self._places.get(id(loc))
        if place is None:
            found = self.locs.get(loc)
            if found is None:
                found = self.locs[loc] = _Loc(math.prod(shape))
            place = self._places[id(loc)] = (loc, found)
        sh = place[1]
        size = sh.size
        if kind == "read":
            writes = sh.writes
            if not writes.empty:
                self._check(i, a, writes, pyspans, "read-write", sh)
            for r, m in sh.atomics.items():
                if r != a:
                    self._check(i, a, m, pyspans, "read-write", sh)
            own = sh.reads.get(a)
            if own is None:
                own = sh.reads[a] = RunMap(size)
            own.assign(pyspans, i)
            return
        writes = sh.writes
        if not writes.empty:
            self._check(i, a, writes, pyspans, "write-write", sh)
        for r, m in sh.reads.items():
            if r != a:
                self._check(i, a, m, pyspans, "read-write", sh)
        if kind == "atomic":
            own = sh.atomics.get(a)
            if own is None:
                own = sh.atomics[a] = RunMap(size)
            own.assign(pyspans, i)
            return
        for r, m in sh.atomics.items():
            if r != a:
                self._check(i, a, m, pyspans, "write-write", sh)
        writes.assign(pyspans, i)
        for table in (sh.reads, sh.atomics):
            if table:
                for r in list(table):
                    m = table[r]
                    m.assign(pyspans, -1)
                    if m.empty:
                        del table[r]

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

    def _check(
        self, i: int, a: int, m: RunMap, spans: list[tuple[int, int]], kind: str, place: _Loc
    ) -> None:
        """Races of access ``i`` by ``a`` with the accesses ``m`` holds over ``spans`` at
        ``place`` (its location's state: one per location, it stands for it in the keys
        of the races seen, without hashing the location)."""
        hits = m.query(spans)
        if not hits:
            return
        vc = self.clocks.vc[a]
        actor, times = self._actor, self._time
        bad: dict[int, list[tuple[int, int]]] = {}
        for lo, hi, v in hits:
            pa = actor[v]
            if pa == a or (vc is not None and vc[pa] >= times[v]):
                continue
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


__all__ = ["RunMap", "Shadow"]
