"""Semaphores, barriers and async-copy groups as a GPU has them, with the clocks they carry.

- A **semaphore** is a counter per (device, block): ``semaphore_signal`` adds to it
  (here, on a peer device, or on every device along some axes), ``semaphore_wait``
  blocks until it reaches ``value`` and then takes ``value`` off (unless told not to).
  Each signal is a token of ``inc`` units carrying the signaller's vector clock; a wait
  consumes the first ``value`` units in arrival order and takes on their clocks (the
  signals it consumes happen before it).
- A **barrier** counts arrivals per phase: ``num_arrivals`` complete a phase (an async
  copy into SMEM arrives when it lands; ``barrier_arrive`` arrives at once). A thread's
  k-th ``barrier_wait`` on a barrier waits for its k-th phase and takes on the clocks
  of that phase's arrivals. A cluster barrier is one barrier for the blocks of a cluster
  along its axes: every block's arrival counts, ``num_arrivals`` times the blocks.
- A thread's **copy groups** (``copy_smem_to_gmem``) complete at ``wait_smem_to_gmem(n)``
  (all but the ``n`` most recent), which takes on their clocks.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from typing import Any

import numpy as np
from mpmd_lab.engine.clocks import join_all
from mpmd_lab.record import Record

#: Completed phases a barrier remembers (a waiter lagging further is not modelled).
KEEP_PHASES = 16


class Token(Record):
    """Signalled units of a semaphore, with the signaller's clock, who signalled (for
    deadlock reports) and where; ``actor``: the signaller's index (-1: not known),
    ``time``: its own time in ``vc`` (a later token whose clock has at least that
    entry is ordered after this one)."""

    __slots__ = ("units", "vc", "sender", "path", "actor", "time")

    def __init__(self, units: int, vc: np.ndarray, sender: str, path: str, actor: int = -1) -> None:
        self.units = units
        self.vc = vc
        self.sender = sender
        self.path = path
        self.actor = actor
        self.time = int(vc[actor]) if actor >= 0 else 0

    def before(self, other: Token) -> bool:
        """Whether this signal happens before ``other`` (its clock knows this one)."""
        return self.actor >= 0 and int(other.vc[self.actor]) >= self.time


class Lane:
    """One signaller's signals to one semaphore, in its program order (exploring mode):
    ``indices`` into the semaphore's ``history``, ``times`` (the signaller's own time at
    each) and ``units`` (``units[k]``: the units of its first ``k``). A set of signals
    closed under happens-before holds a prefix of every lane, so it is a *cut*: how many
    of each lane's first signals it holds. A lane starts with its first signal
    (``history[index]``: ``token``)."""

    __slots__ = ("indices", "times", "units")

    def __init__(self, index: int, token: Token) -> None:
        self.indices = [index]
        self.times = [token.time]
        self.units = [0, token.units]

    def add(self, index: int, token: Token) -> None:
        self.indices.append(index)
        self.times.append(token.time)
        self.units.append(self.units[-1] + token.units)

    def known(self, time: int) -> int:
        """How many of these signals happen before a clock whose entry for the
        signaller is ``time``."""
        return bisect_right(self.times, time)

    def position(self, index: int) -> int:
        """How many of these signals come before the one at ``history[index]``."""
        return bisect_left(self.indices, index)


#: A set of a semaphore's signals closed under happens-before: signaller -> how many of
#: its first signals (see :class:`Lane`).
Cut = dict[int, int]


class Semaphore:
    """One semaphore of one block on one device: ``label`` "sems[1] on device 0 block
    0", ``key`` (scratch name, element, device, block), ``received`` signals so far,
    ``kept``: the most a wait with decrement=False waited for (it left that much),
    ``senders``: the first few signallers.

    In the exploring mode (:mod:`mpmd_lab.engine.explore`) the semaphore is the
    counter a GPU has: ``history`` holds every signal in the order they were issued,
    ``arrived`` those a completed wait saw (a wait is ordered after every signal that
    reached the counter before it: the release sequence of atomic adds; a :data:`Cut`),
    ``joined`` the join of their clocks, ``lanes`` the history per signaller and
    ``taken`` the units decrementing waits took off, ``read_by`` what each actor's last
    ``pl.semaphore_read`` saw.

    A semaphore is one object per run, compared by identity; what starts the same for
    every one (the counts, and ``arrived``: a cut, replaced and never changed) is the
    class's until it changes."""

    value = 0
    received = 0
    kept = 0
    arrived: Cut = {}  # noqa: RUF012
    joined: np.ndarray | None = None
    taken = 0

    def __init__(
        self, label: str = "", key: tuple = (), indexed: bool = False, shared: bool = False
    ) -> None:
        #: (``label``) given, or said from ``key`` when first asked (only reports ask):
        #: ``indexed``, its scratch is an array; ``shared``, every block's (``get_global``)
        self._label = label
        self._indexed = indexed
        self._shared = shared
        self.key = key
        self.tokens: deque[Token] = deque()
        self.senders: list[str] = []
        self.history: list[Token] = []
        self.lanes: dict[int, Lane] = {}
        #: (exploring) actor -> the signals its last read saw (a later read sees them too)
        self.read_by: dict[int, Cut] = {}

    @property
    def shared(self) -> bool:
        """Every block's (``pl.get_global``), not one block's own."""
        return self._shared

    @property
    def label(self) -> str:
        if not self._label:
            name, e, dev, block = self.key
            what = f"{name}[{e}]" if self._indexed else name
            self._label = f"{what} on device {dev}" + ("" if self._shared else f" block {block}")
        return self._label

    def signal(
        self,
        units: int,
        vc: np.ndarray,
        sender: str,
        path: str,
        actor: int = -1,
        keep: bool = False,
    ) -> None:
        """``units`` more, from ``actor`` (``keep``: also in ``history``, for exploring)."""
        self.value += units
        self.received += 1
        if len(self.senders) < 4 and sender not in self.senders:
            self.senders.append(sender)
        token = Token(units, vc, sender, path, actor)
        self.tokens.append(token)
        if keep:
            lane = self.lanes.get(actor)
            if lane is None:
                self.lanes[actor] = Lane(len(self.history), token)
            else:
                lane.add(len(self.history), token)
            self.history.append(token)

    def units_of(self, cut: Cut) -> int:
        """The units the signals of ``cut`` added."""
        return sum(self.lanes[b].units[k] for b, k in cut.items())

    @property
    def unbalanced(self) -> int:
        """Units left at the end (a semaphore must end at zero; what a decrement=False
        wait left counts too: ``kept`` only says how much of it such a wait left)."""
        return max(self.value, 0)

    def take(self, value: int, decrement: bool) -> list[np.ndarray]:
        """The clocks of the first ``value`` units (consumed when ``decrement``)."""
        out: list[np.ndarray] = []
        need = value
        if not decrement:
            self.kept = max(self.kept, value)
            for t in self.tokens:
                if need <= 0:
                    break
                out.append(t.vc)
                need -= t.units
            return out
        self.value -= value
        while need > 0 and self.tokens:
            t = self.tokens[0]
            out.append(t.vc)
            if t.units <= need:
                need -= t.units
                self.tokens.popleft()
            else:
                t.units -= need
                need = 0
        return out

    def drop(self, value: int, decrement: bool) -> None:
        """What :meth:`take` does to the counter, without collecting the clocks (a wait
        the explorer orders itself: :func:`mpmd_lab.engine.explore.complete_wait`), and
        what it took counted in ``taken``."""
        if not decrement:
            if value > self.kept:
                self.kept = value
            return
        self.value -= value
        self.taken += value
        tokens = self.tokens
        while value > 0 and tokens:
            t = tokens[0]
            if t.units <= value:
                value -= t.units
                tokens.popleft()
            else:
                t.units -= value
                value = 0


class Barrier(Record):
    """One barrier (a block's, or a cluster's shared one).

    ``barrier_arrive`` arrivals complete a phase as soon as there are ``target`` of
    them. An async copy arrives too (``arrive_expect_tx``), but its phase completes only
    once its bytes land: the copies a thread issues back to back land together, so a
    phase they reach completes when a waiter looks (``settle``), with every copy issued
    into it by then (two copies on one ``Barrier(num_arrivals=1)`` and one wait: the
    bytes add up, as JAX's kernels rely on).
    """

    __slots__ = (
        "label",
        "target",
        "arrivals",
        "phase",
        "pending",
        "copies",
        "done",
        "arrivers",
        "last",
        "unordered",
        "waited",
        "issuers",
        "last_issuers",
    )

    def __init__(self, label: str, target: int) -> None:
        self.label = label
        self.target = target  # arrivals per phase
        self.arrivals = 0
        self.phase = 0  # phases completed
        self.pending: list[np.ndarray] = []  # this phase's clocks
        self.copies = 0  # copies in flight in this phase
        self.done: dict[int, np.ndarray | None] = {}
        #: this phase's and the last completed phase's arrivals: (actor, its time)
        self.arrivers: list[tuple[int, int]] = []
        self.last: list[tuple[int, int]] = []
        #: the threads that issued this phase's and the last completed phase's async
        #: copies: (thread, its time at the issue)
        self.issuers: list[tuple[int, int]] = []
        self.last_issuers: list[tuple[int, int]] = []
        #: a copy's arrival not ordered after an earlier phase's arrival by another
        #: thread: which phase each went to depended on the schedule
        self.unordered = False
        #: some thread waits on it (a barrier nobody waits on orders nothing, so which
        #: phase an arrival joined cannot matter)
        self.waited = False

    def arrive(
        self, vc: np.ndarray | None, copy: bool = False, actor: int = -1, issuer: int = -1
    ) -> None:
        if actor >= 0 and vc is not None:
            # (explicit arrivals are the explorer's choices: only copies are said, and
            # an explicit arrival that a copy of another thread could have come after:
            # the copy's arrival, at its issue, is no choice)
            if copy and self.last and any(b != actor and int(vc[b]) < t for b, t in self.last):
                self.unordered = True
            if not copy and any(b != actor and int(vc[b]) < t for b, t in self.last_issuers):
                self.unordered = True
            self.arrivers.append((actor, int(vc[actor])))
            if copy and issuer >= 0:
                self.issuers.append((issuer, int(vc[issuer])))
        self.arrivals += 1
        if vc is not None:
            self.pending.append(vc)
        if copy:
            self.copies += 1
        elif self.arrivals >= self.target and not self.copies:
            self._complete()

    @property
    def order_matters(self) -> bool:
        """Arrivals joined phases in an order the schedule chose, and a wait sees it."""
        return self.unordered and self.waited

    def settle(self) -> None:
        """Copies in flight have landed: complete the phase if it has its arrivals."""
        if self.copies and self.arrivals >= self.target:
            self._complete()

    def _complete(self) -> None:
        self.done[self.phase] = join_all(self.pending)
        if self.phase >= KEEP_PHASES:
            self.done.pop(self.phase - KEEP_PHASES, None)
        self.phase += 1
        self.arrivals = 0
        self.copies = 0
        self.pending = []
        self.last = self.arrivers
        self.arrivers = []
        self.last_issuers = self.issuers
        self.issuers = []


class Wait:
    """A blocking statement: ``ready()`` says whether it can go on, ``complete()`` does
    what it does once it can, ``describe()`` says what it waits for."""

    def ready(self) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    def complete(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - interface
        raise NotImplementedError

    kind = "wait"
    path = ""


class SemaphoreWait(Wait):
    kind = "semaphore"

    def __init__(self, engine: Any, a: int, sem: Semaphore, value: int, decrement: bool, path: str):
        self.engine, self.a, self.sem, self.value, self.decrement, self.path = (
            engine,
            a,
            sem,
            value,
            decrement,
            path,
        )
        #: what it competes for with other choices: its semaphore
        self.key: tuple = sem.key

    def ready(self) -> bool:
        return self.sem.value >= self.value

    def complete(self) -> None:
        clocks = self.engine.clocks
        for vc in self.sem.take(self.value, self.decrement):
            clocks.join(self.a, vc)

    def describe(self) -> str:
        got = f"{self.sem.received} signal(s) so far"
        if self.sem.senders:
            got += f", from {', '.join(self.sem.senders)}"
        return f"waits for {self.sem.label} to reach {self.value} (it is {self.sem.value}; {got})"


class SemaphoreRead(Wait):
    """(Exploring mode) a ``pl.semaphore_read`` held until the scheduler lets it run:
    which of the signals issued so far it saw is the schedule's, so a read is a choice
    too (``seen``: the value it read, once chosen). An acquire: it takes nothing and is
    ordered after the signals it saw (:func:`mpmd_lab.engine.explore.acquire`)."""

    kind = "read"

    def __init__(self, engine: Any, a: int, sem: Semaphore, path: str) -> None:
        self.engine, self.a, self.sem, self.path = engine, a, sem, path
        self.seen: int | None = None
        #: what it depends on: its semaphore (its signals and decrementing waits)
        self.key: tuple = sem.key

    def ready(self) -> bool:
        return True

    def complete(self) -> None:
        """(The chooser sets ``seen``; nothing else changes.)"""

    def describe(self) -> str:
        return f"reads {self.sem.label}"


class BarrierArrival(Wait):
    """(Exploring mode) a ``barrier_arrive`` held until the scheduler lets it land: which
    phase an arrival joins is the schedule's, so arrivals are choices too (``phase``:
    the one it joined, once it has)."""

    kind = "arrive"

    def __init__(self, engine: Any, a: int, key: tuple, bar: Barrier, path: str) -> None:
        self.engine, self.a, self.key, self.bar, self.path = engine, a, key, bar, path
        self.phase = -1

    def ready(self) -> bool:
        return True

    def complete(self) -> None:
        clocks = self.engine.clocks
        self.phase = self.bar.phase
        self.bar.arrive(clocks.snapshot(self.a), actor=self.a)
        clocks.tick(self.a)

    def describe(self) -> str:
        return f"arrives at {self.bar.label} (phase {self.bar.phase})"


class BarrierWait(Wait):
    kind = "barrier"

    def __init__(self, engine: Any, a: int, bar: Barrier, phase: int, path: str):
        self.engine, self.a, self.bar, self.phase, self.path = engine, a, bar, phase, path

    def ready(self) -> bool:
        bar = self.bar
        if bar.phase > self.phase:
            return True
        bar.settle()
        return bar.phase > self.phase

    def complete(self) -> None:
        self.engine.clocks.join(self.a, self.bar.done.get(self.phase))

    def describe(self) -> str:
        return (
            f"waits for phase {self.phase} of {self.bar.label} "
            f"({self.bar.arrivals} of its {self.bar.target} arrival(s) came)"
        )


__all__ = [
    "Barrier",
    "BarrierWait",
    "Cut",
    "Lane",
    "Semaphore",
    "SemaphoreRead",
    "SemaphoreWait",
    "Token",
    "Wait",
]
