"""The simulator's access log: who read or wrote which elements of which buffer, where.

An ``Access`` names its actor (program, device, block, thread), the statement
that made it, the memory it touched (``GMEM`` buffer of a device, ``SMEM`` of one
block) and the elements, as indices into that buffer's flat (C-order) storage. A
``Race`` names two accesses from different actors that touch the same elements
without any ordering between them. Everything exports to plain JSON (element
sets as ``[start, stop)`` runs) for the graph and the widgets.

Example::

    log = simulate(load_scenario("two-block-race")).log
    log.races[0].describe()
    # 'out on device 0: elements 0..127 written by device 0 block 0 thread 0
    #  (body[2] copy) and by device 0 block 1 thread 0 (body[2] copy)'
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

Kind = Literal["read", "write"]


def unique_sorted(elements: np.ndarray) -> np.ndarray:
    """Sorted unique int64 indices (sort-based: numpy's hashing ``unique`` is far slower)."""
    e = np.asarray(elements, dtype=np.int64).reshape(-1)
    if e.size < 2 or bool(np.all(e[1:] > e[:-1])):
        return e
    e = np.sort(e)
    if e.size:
        e = e[np.concatenate([[True], e[1:] != e[:-1]])]
    return e


def runs(elements: np.ndarray) -> list[list[int]]:
    """Sorted unique indices as ``[start, stop)`` runs: ``[0,1,2,5]`` -> ``[[0,3],[5,6]]``."""
    e = np.asarray(elements, dtype=np.int64).reshape(-1)
    if e.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(e) != 1)
    starts = np.concatenate([[0], breaks + 1])
    stops = np.concatenate([breaks, [e.size - 1]])
    return [[int(e[a]), int(e[b]) + 1] for a, b in zip(starts, stops, strict=True)]


def from_runs(spans: list[list[int]]) -> np.ndarray:
    """The inverse of ``runs``."""
    if not spans:
        return np.zeros(0, np.int64)
    return np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in spans])


def _span_text(elements: np.ndarray) -> str:
    parts = [f"{a}" if b == a + 1 else f"{a}..{b - 1}" for a, b in runs(elements)]
    if len(parts) > 4:
        parts = parts[:3] + [f"... ({len(parts) - 3} more runs)"]
    return ", ".join(parts)


@dataclass(frozen=True)
class Actor:
    """One thread of the call: device (linear mesh index), block (linear), warpgroup.

    ``block`` is linear over grid points then the blocks of a cluster (C order);
    ``grid`` and ``cluster`` are its coordinates.
    """

    program: int
    device: int
    block: int
    thread: int
    grid: tuple[int, ...] = ()
    cluster: tuple[int, ...] = ()
    device_coords: tuple[int, ...] = ()

    def describe(self) -> str:
        prog = f"program {self.program} " if self.program else ""
        return f"{prog}device {self.device} block {self.block} thread {self.thread}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "program": self.program,
            "device": self.device,
            "block": self.block,
            "thread": self.thread,
            "grid": list(self.grid),
            "cluster": list(self.cluster),
            "device_coords": list(self.device_coords),
        }


@dataclass(frozen=True)
class Location:
    """A piece of memory: a buffer's storage on one device (and one block for SMEM/TMEM)."""

    memory: str  # "GMEM", "SMEM", "TMEM"
    buffer: str  # buffer, output or scratch name
    device: int
    block: int | None = None  # the owning block for per-block memory

    def describe(self) -> str:
        where = f"device {self.device}"
        if self.block is not None:
            where += f" block {self.block} ({self.memory})"
        return f"{self.buffer} on {where}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "memory": self.memory,
            "buffer": self.buffer,
            "device": self.device,
            "block": self.block,
        }


@dataclass(frozen=True, eq=False)
class Access:
    """One read or write by one actor in one statement."""

    id: int
    kind: Kind
    actor: Actor
    statement: int  # index into the program's body
    op: str  # "copy", "add", "fill", "tma_store", "multimem_store"
    ref: str  # the body name the statement used
    location: Location
    elements: np.ndarray = field(repr=False)  # sorted unique flat indices into the buffer

    @property
    def where(self) -> str:
        return f"body[{self.statement}] {self.op}"

    def describe(self) -> str:
        verb = "reads" if self.kind == "read" else "writes"
        return (
            f"{self.actor.describe()} {verb} {self.location.describe()} "
            f"[{_span_text(self.elements)}] ({self.where} via {self.ref})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "program": self.actor.program,
            "device": self.actor.device,  # who; ``location.device`` is whose memory
            "actor": self.actor.to_dict(),
            "statement": self.statement,
            "op": self.op,
            "ref": self.ref,
            "location": self.location.to_dict(),
            "elements": runs(self.elements),
            "count": int(self.elements.size),
        }


@dataclass(frozen=True, eq=False)
class Race:
    """Two unordered accesses by different actors to the same elements (one is a write)."""

    kind: Literal["write-write", "read-write"]
    first: Access  # the earlier access in the simulator's order
    second: Access
    elements: np.ndarray = field(repr=False)  # the overlap

    @property
    def location(self) -> Location:
        return self.second.location

    def describe(self) -> str:
        verb = {"write": "written", "read": "read"}
        return (
            f"{self.location.describe()}: elements {_span_text(self.elements)} "
            f"{verb[self.first.kind]} by {self.first.actor.describe()} ({self.first.where}) "
            f"and {verb[self.second.kind]} by {self.second.actor.describe()} "
            f"({self.second.where})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "location": self.location.to_dict(),
            "elements": runs(self.elements),
            "count": int(self.elements.size),
            "first": self.first.to_dict(),
            "second": self.second.to_dict(),
            "message": self.describe(),
        }


class AccessLog:
    """Every access of a simulated call, in the simulator's order, and the races found.

    Race rule: an access conflicts with the last write (and a write with the last
    reads) of each element when those came from a different actor: nothing in a
    scenario orders two actors, so the result depends on timing. Writes by one
    actor are ordered by its program order and never race with each other.
    """

    def __init__(self) -> None:
        self.accesses: list[Access] = []
        self.races: list[Race] = []
        self._last_write: dict[Location, np.ndarray] = {}
        self._last_read: dict[Location, np.ndarray] = {}
        self._seen: set[tuple[int, int, str]] = set()

    # ------------------------------------------------------------ recording

    def record(
        self,
        kind: Kind,
        actor: Actor,
        statement: int,
        op: str,
        ref: str,
        location: Location,
        elements: np.ndarray,
        size: int,
    ) -> Access:
        """Log one access of ``elements`` (flat indices) of a buffer of ``size`` elements."""
        elements = unique_sorted(elements)
        acc = Access(len(self.accesses), kind, actor, statement, op, ref, location, elements)
        self.accesses.append(acc)
        last_w = self._last_write.setdefault(location, np.full(size, -1, np.int64))
        last_r = self._last_read.setdefault(location, np.full(size, -1, np.int64))
        self._conflicts(acc, last_w[elements], "write-write" if kind == "write" else "read-write")
        if kind == "write":
            self._conflicts(acc, last_r[elements], "read-write")
            last_w[elements] = acc.id
        else:
            last_r[elements] = acc.id
        return acc

    def _conflicts(self, acc: Access, previous: np.ndarray, kind: str) -> None:
        for pid in np.unique(previous[previous >= 0]).tolist():
            prev = self.accesses[pid]
            if prev.actor == acc.actor:
                continue
            key = (pid, acc.id, kind)
            if key in self._seen:
                continue
            self._seen.add(key)
            overlap = acc.elements[previous == pid]
            self.races.append(Race(kind, prev, acc, overlap))  # type: ignore[arg-type]

    # ------------------------------------------------------------ queries

    @property
    def write_races(self) -> list[Race]:
        return [r for r in self.races if r.kind == "write-write"]

    def reads(self) -> list[Access]:
        return [a for a in self.accesses if a.kind == "read"]

    def writes(self) -> list[Access]:
        return [a for a in self.accesses if a.kind == "write"]

    def touching(self, buffer: str, device: int | None = None) -> list[Access]:
        """Accesses of one buffer (on one device, if given)."""
        return [
            a
            for a in self.accesses
            if a.location.buffer == buffer and (device is None or a.location.device == device)
        ]

    def summary(self) -> str:
        lines = [f"{len(self.accesses)} accesses, {len(self.races)} race(s)"]
        lines += [f"  race: {r.describe()}" for r in self.races[:10]]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "accesses": [a.to_dict() for a in self.accesses],
            "races": [r.to_dict() for r in self.races],
        }

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)
