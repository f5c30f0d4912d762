"""The simulator's access log: who read or wrote which elements of which buffer, where.

An ``Access`` names its actor (program, device, block, thread), the statement that
made it (its index in the program's flat, pre-order statement list, as
:mod:`mpmd_lab.plan` numbers them, and its field path), the memory it touched
(``GMEM`` buffer of a device, ``SMEM`` of one block) and the elements, as ``[start,
stop)`` runs of indices into that buffer's flat (C-order) storage. A ``Race`` names two
accesses from different actors (or an async copy and its own thread) that touch the
same elements, at least one a write, with nothing ordering them (happens-before:
:mod:`mpmd_lab.engine`). Everything exports to plain JSON for the graph and the widgets.

The log is bounded: past ``limit`` accesses it keeps counting (per statement, buffer and
kind, in ``counts``) but stops keeping each access (``truncated`` says how many it
dropped); ``simulate(..., log="full")`` keeps them all.

Example::

    log = simulate(load_scenario("two-block-race")).log
    log.races[0].describe()
    # 'out on device 0: elements 0..127 written by device 0 block 0 thread 0
    #  (body[2] copy) and by device 0 block 1 thread 0 (body[2] copy)'
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Literal

import numpy as np
from mpmd_lab.record import Record

Kind = Literal["read", "write", "atomic"]

#: Accesses a log keeps in full by default (past it: counted, not kept).
DEFAULT_LIMIT = 50_000
#: Races a log keeps (past it: counted in ``race_count``).
MAX_RACES = 1_000

EMPTY_RUNS = np.zeros((0, 2), np.int64)


def unique_sorted(elements: np.ndarray) -> np.ndarray:
    """Sorted unique int64 indices (sort-based: numpy's hashing ``unique`` is far slower)."""
    e = np.asarray(elements, dtype=np.int64).reshape(-1)
    if e.size < 2 or bool(np.all(e[1:] > e[:-1])):
        return e
    e = np.sort(e)
    if e.size:
        e = e[np.concatenate([[True], e[1:] != e[:-1]])]
    return e


def runs_of(elements: np.ndarray) -> np.ndarray:
    """Sorted unique indices as an ``(n, 2)`` array of ``[start, stop)`` runs."""
    e = np.asarray(elements, dtype=np.int64).reshape(-1)
    if e.size == 0:
        return EMPTY_RUNS
    breaks = np.flatnonzero(np.diff(e) != 1)
    starts = np.concatenate([[0], breaks + 1])
    stops = np.concatenate([breaks, [e.size - 1]])
    return np.stack([e[starts], e[stops] + 1], axis=1)


def runs(elements: np.ndarray) -> list[list[int]]:
    """Sorted unique indices as ``[start, stop)`` runs: ``[0,1,2,5]`` -> ``[[0,3],[5,6]]``."""
    return runs_of(elements).tolist()


def expand(spans: np.ndarray | list[list[int]]) -> np.ndarray:
    """The indices of ``[start, stop)`` runs (the inverse of ``runs``)."""
    r = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    if not len(r):
        return np.zeros(0, np.int64)
    lengths = r[:, 1] - r[:, 0]
    total = int(lengths.sum())
    if len(r) == 1:
        return np.arange(r[0, 0], r[0, 1], dtype=np.int64)
    offsets = np.repeat(r[:, 0] - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return np.arange(total, dtype=np.int64) + offsets


def from_runs(spans: list[list[int]]) -> np.ndarray:
    """The inverse of ``runs``."""
    return expand(spans)


def _span_text(spans: np.ndarray) -> str:
    parts = [f"{a}" if b == a + 1 else f"{a}..{b - 1}" for a, b in np.asarray(spans).tolist()]
    if len(parts) > 4:
        parts = parts[:3] + [f"... ({len(parts) - 3} more runs)"]
    return ", ".join(parts)


class Actor(Record):
    """One thread of the call: device (linear mesh index), block (linear), warpgroup.

    ``block`` is linear over grid points then the blocks of a cluster (C order);
    ``grid`` and ``cluster`` are its coordinates. ``agent`` marks the copy engine
    (TMA) working for that thread: its async copies are its own actor.
    """

    __slots__ = (
        "program",
        "device",
        "block",
        "thread",
        "grid",
        "cluster",
        "device_coords",
        "agent",
    )

    def __init__(
        self,
        program: int,
        device: int,
        block: int,
        thread: int,
        grid: tuple[int, ...] = (),
        cluster: tuple[int, ...] = (),
        device_coords: tuple[int, ...] = (),
        agent: bool = False,
    ) -> None:
        self.program = program
        self.device = device
        self.block = block
        self.thread = thread
        self.grid = grid
        self.cluster = cluster
        self.device_coords = device_coords
        self.agent = agent

    def describe(self) -> str:
        prog = f"program {self.program} " if self.program else ""
        text = f"{prog}device {self.device} block {self.block} thread {self.thread}"
        return f"the async copies of {text}" if self.agent else text

    def coords(self, grid: list[str], cluster: list[str], thread: str | None) -> str:
        """``b=1, c=0`` style coordinates of the block (and thread)."""
        parts = [f"{a}={v}" for a, v in zip(grid, self.grid, strict=False)]
        parts += [f"{a}={v}" for a, v in zip(cluster, self.cluster, strict=False)]
        if thread:
            parts.append(f"{thread}={self.thread}")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "program": self.program,
            "device": self.device,
            "block": self.block,
            "thread": self.thread,
            "grid": list(self.grid),
            "cluster": list(self.cluster),
            "device_coords": list(self.device_coords),
            "agent": self.agent,
        }


class Location(Record):
    """A piece of memory: a buffer's storage on one device (and one block for SMEM/TMEM).

    ``kind`` keeps apart what may share a name: an input buffer ``out`` and an output
    ``out`` are two places (``"input"``, ``"output"``, ``"scratch"``).
    """

    __slots__ = ("memory", "buffer", "device", "block", "kind")

    def __init__(
        self, memory: str, buffer: str, device: int, block: int | None = None, kind: str = "input"
    ) -> None:
        self.memory = memory  # "GMEM", "SMEM", "TMEM"
        self.buffer = buffer  # buffer, output or scratch name
        self.device = device
        self.block = block  # the owning block for per-block memory
        self.kind = kind

    def describe(self) -> str:
        where = f"device {self.device}"
        if self.block is not None:
            where += f" block {self.block} ({self.memory})"
        name = self.buffer + (" (output)" if self.kind == "output" else "")
        return f"{name} on {where}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "memory": self.memory,
            "buffer": self.buffer,
            "device": self.device,
            "block": self.block,
            "kind": self.kind,
        }


class Access(Record):
    """One read, write or atomic update by one actor in one statement (equal only to
    itself)."""

    __slots__ = (
        "id", "kind", "actor", "statement", "op", "ref", "location", "spans", "path", "field"
    )  # fmt: skip
    _unshown = ("spans",)
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __init__(
        self,
        id: int,
        kind: Kind,
        actor: Actor,
        statement: int,
        op: str,
        ref: str,
        location: Location,
        spans: np.ndarray,
        path: str = "",
        field: str = "",
    ) -> None:
        self.id = id
        self.kind = kind
        self.actor = actor
        self.statement = statement  # index into the program's flat (pre-order) statement list
        self.op = op  # "copy", "add", "fill", "tma_store", "multimem_store", ...
        self.ref = ref  # the body name the statement used
        self.location = location
        self.spans = spans  # (n, 2) [start, stop) runs of flat indices
        self.path = path  # the statement's field path
        self.field = field  # the statement's field that named the ref (``src``, ``dst``)

    @property
    def elements(self) -> np.ndarray:
        """The flat indices (sorted, unique) this access touched."""
        return expand(self.spans)

    @property
    def count(self) -> int:
        return int((self.spans[:, 1] - self.spans[:, 0]).sum()) if len(self.spans) else 0

    @property
    def where(self) -> str:
        tail = self.path.split(".", 2)[-1] if self.path else f"body[{self.statement}]"
        return f"{tail} {self.op}"

    def describe(self) -> str:
        verb = {"read": "reads", "write": "writes", "atomic": "atomically updates"}[self.kind]
        return (
            f"{self.actor.describe()} {verb} {self.location.describe()} "
            f"[{_span_text(self.spans)}] ({self.where} via {self.ref})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "program": self.actor.program,
            "device": self.actor.device,  # who; ``location.device`` is whose memory
            "actor": self.actor.to_dict(),
            "statement": self.statement,
            "path": self.path,
            "field": self.field,
            "op": self.op,
            "ref": self.ref,
            "location": self.location.to_dict(),
            "elements": self.spans.tolist(),
            "count": self.count,
        }


class Race(Record):
    """Two accesses not ordered by happens-before that touch the same elements (one a
    write), by different actors or by a thread and its own async copies (equal only to
    itself)."""

    __slots__ = ("kind", "first", "second", "spans")
    _unshown = ("spans",)
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __init__(
        self,
        kind: Literal["write-write", "read-write"],
        first: Access,
        second: Access,
        spans: np.ndarray,
    ) -> None:
        self.kind = kind
        self.first = first  # the earlier access in the simulator's order
        self.second = second
        self.spans = spans  # the overlap, as runs

    @property
    def elements(self) -> np.ndarray:
        return expand(self.spans)

    @property
    def location(self) -> Location:
        return self.second.location

    def describe(self) -> str:
        verb = {"write": "written", "read": "read", "atomic": "atomically updated"}
        return (
            f"{self.location.describe()}: elements {_span_text(self.spans)} "
            f"{verb[self.first.kind]} by {self.first.actor.describe()} ({self.first.where}) "
            f"and {verb[self.second.kind]} by {self.second.actor.describe()} "
            f"({self.second.where})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "location": self.location.to_dict(),
            "elements": self.spans.tolist(),
            "count": int((self.spans[:, 1] - self.spans[:, 0]).sum()),
            "first": self.first.to_dict(),
            "second": self.second.to_dict(),
            "message": self.describe(),
        }


class AccessLog:
    """The accesses of a simulated call, in the simulator's order (bounded), and its races.

    ``accesses`` holds the first ``limit`` accesses (``None``: all); every access is
    counted in ``counts`` (by program, statement, buffer, kind) and ``total``, past the
    limit too unless ``tally`` is False (the static check, which reads only the races).
    ``races`` holds the first ``MAX_RACES`` distinct races; ``race_count`` counts all.
    """

    def __init__(
        self, limit: int | None = DEFAULT_LIMIT, max_races: int = MAX_RACES, tally: bool = True
    ) -> None:
        self.limit = limit
        self.max_races = max_races
        self.tally = tally
        self.accesses: list[Access] = []
        self.races: list[Race] = []
        self.total = 0
        self.race_count = 0
        self.counts: Counter[tuple[int, int, str, str]] = Counter()
        self.elements_touched: Counter[tuple[int, int, str, str]] = Counter()

    @property
    def truncated(self) -> int:
        """Accesses counted but not kept."""
        return self.total - len(self.accesses)

    def add(self, access: Access) -> None:
        """Keep one access (past ``limit``: only count it)."""
        self.count(
            access.actor.program,
            access.statement,
            access.location.buffer,
            access.kind,
            access.count,
        )
        if self.limit is None or len(self.accesses) < self.limit:
            self.accesses.append(access)

    def count(self, program: int, statement: int, buffer: str, kind: str, elements: int) -> None:
        """Count one access (of ``elements`` elements) without keeping it."""
        self.total += 1
        key = (program, statement, buffer, kind)
        self.counts[key] += 1
        self.elements_touched[key] += elements

    def add_race(self, race: Race) -> None:
        self.race_count += 1
        if len(self.races) < self.max_races:
            self.races.append(race)

    @property
    def races_full(self) -> bool:
        """No more races are kept (they are only counted)."""
        return len(self.races) >= self.max_races

    # ------------------------------------------------------------ pickling

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled by column (the simulate worker sends its log back): each access's
        actor, location and strings as indices into lists of the distinct ones, its
        spans as one array. 50,000 accesses pickle and unpickle in milliseconds where
        one object each took ~1.7 s, which the caller's timeout had to cover."""
        acc = self.accesses
        pools: list[dict[Any, int]] = [{} for _ in _COLUMNS]
        keys: list[list[Any]] = [[] for _ in _COLUMNS]
        idx = np.empty((len(_COLUMNS), len(acc)), np.int64)
        nums = np.empty((2, len(acc)), np.int64)
        for i, a in enumerate(acc):
            for c, value in enumerate((a.actor, a.location, a.kind, a.op, a.ref, a.path, a.field)):
                pool = pools[c]
                # (actors and locations by identity: the engine shares them; strings by value)
                key = id(value) if c < 2 else value
                at = pool.get(key)
                if at is None:
                    at = pool[key] = len(keys[c])
                    keys[c].append(value)
                idx[c, i] = at
            nums[0, i] = a.id
            nums[1, i] = a.statement
        lengths = np.fromiter((len(a.spans) for a in acc), np.int64, len(acc))
        spans = np.concatenate([a.spans for a in acc]) if acc else EMPTY_RUNS
        # a race's accesses by position in ``accesses`` where they are kept (identity kept)
        where = {id(a): i for i, a in enumerate(acc)}
        races = [
            (r.kind, where.get(id(r.first), r.first), where.get(id(r.second), r.second), r.spans)
            for r in self.races
        ]
        head = (self.limit, self.max_races, self.tally, self.total, self.race_count)
        columns = (keys, idx, nums, lengths, spans.reshape(-1, 2))
        return _unpickle_log, (head, columns, races, self.counts, self.elements_touched)

    # ------------------------------------------------------------ queries

    @property
    def write_races(self) -> list[Race]:
        return [r for r in self.races if r.kind == "write-write"]

    def reads(self) -> list[Access]:
        return [a for a in self.accesses if a.kind == "read"]

    def writes(self) -> list[Access]:
        return [a for a in self.accesses if a.kind != "read"]

    def touching(self, buffer: str, device: int | None = None) -> list[Access]:
        """Accesses of one buffer (on one device, if given)."""
        return [
            a
            for a in self.accesses
            if a.location.buffer == buffer and (device is None or a.location.device == device)
        ]

    def summary(self) -> str:
        lines = [f"{self.total} accesses, {self.race_count} race(s)"]
        if self.truncated:
            lines[0] += f" ({self.truncated} accesses counted, not kept)"
        lines += [f"  race: {r.describe()}" for r in self.races[:10]]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "truncated": self.truncated,
            "accesses": [a.to_dict() for a in self.accesses],
            "races": [r.to_dict() for r in self.races],
            "race_count": self.race_count,
            "counts": [
                {
                    "program": p,
                    "statement": k,
                    "buffer": b,
                    "kind": kind,
                    "accesses": n,
                    "elements": self.elements_touched[(p, k, b, kind)],
                }
                for (p, k, b, kind), n in sorted(self.counts.items())
            ],
        }

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)


#: the columns ``AccessLog.__reduce__`` indexes: actor, location and the strings
_COLUMNS = ("actor", "location", "kind", "op", "ref", "path", "field")


def _unpickle_log(
    head: tuple[Any, ...],
    columns: tuple[Any, ...],
    races: list[tuple[Any, ...]],
    counts: Counter[tuple[int, int, str, str]],
    elements_touched: Counter[tuple[int, int, str, str]],
) -> AccessLog:
    """An ``AccessLog`` from ``AccessLog.__reduce__``'s columns."""
    limit, max_races, tally, total, race_count = head
    keys, idx, nums, lengths, spans = columns
    log = AccessLog(limit, max_races, tally)
    ends = np.cumsum(lengths).tolist()
    starts = [0, *ends[:-1]]
    cols = [[k[i] for i in row] for k, row in zip(keys, idx.tolist(), strict=True)]
    ids, stmts = nums.tolist()
    log.accesses = [
        Access(ids[i], kind, actor, stmts[i], op, ref, loc, spans[starts[i] : ends[i]], path, f)
        for i, (actor, loc, kind, op, ref, path, f) in enumerate(zip(*cols, strict=True))
    ]
    acc = log.accesses
    log.races = [
        Race(kind, acc[a] if isinstance(a, int) else a, acc[b] if isinstance(b, int) else b, s)
        for kind, a, b, s in races
    ]
    log.total, log.race_count = total, race_count
    log.counts, log.elements_touched = counts, elements_touched
    return log


__all__ = [
    "Access",
    "AccessLog",
    "Actor",
    "Location",
    "Race",
    "expand",
    "from_runs",
    "runs",
    "runs_of",
    "unique_sorted",
]
