"""Vector clocks over the actors of a run: happens-before, as the race check needs it.

Every actor (a thread: device x block x warpgroup, and the copy engine working for it)
has its own time, ``now(a)``, which advances at each release (a signal, a barrier
arrival, an async copy issued). An actor's vector clock says, per actor, up to which
time of that actor everything happens before what it does next; it grows by ``join``
(a wait takes on the clocks of the signals it consumes, a barrier wait those of its
phase). Clocks are materialised only once an actor synchronises: until then it knows
only itself, and costs nothing.
"""

from __future__ import annotations

import numpy as np

#: a thread's accesses are ordered after all of its own earlier ones
ALWAYS = 1 << 62


class Clocks:
    """``n`` actors' times and (lazily) vector clocks."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.time = [1] * n
        self.vc: list[np.ndarray | None] = [None] * n
        self.materialised = 0
        #: per actor, up to which of its own times its next access is ordered after its
        #: earlier ones: a thread's, all of them (program order); a copy engine's, only
        #: those of its earlier copies that the thread issuing the copy now had waited
        #: for (two copies in flight at once are not ordered with each other)
        self.own = [ALWAYS] * n

    def now(self, a: int) -> int:
        return self.time[a]

    def _vc(self, a: int) -> np.ndarray:
        v = self.vc[a]
        if v is None:
            v = self.vc[a] = np.zeros(self.n, np.int32)
            v[a] = self.time[a]
            self.materialised += 1
        return v

    def tick(self, a: int) -> None:
        """A release by ``a``: what it does from now on is not covered by what it published."""
        self.time[a] += 1
        v = self.vc[a]
        if v is not None:
            v[a] = self.time[a]

    def snapshot(self, a: int) -> np.ndarray:
        """``a``'s vector clock now (a copy to hand to a semaphore, barrier or copy)."""
        v = self.vc[a]
        if v is None:
            out = np.zeros(self.n, np.int32)
            out[a] = self.time[a]
            return out
        return v.copy()

    def issue(self, agent: int, issuer: int) -> None:
        """A copy engine starts a copy for ``issuer``: it is ordered after the engine's
        earlier copies only as far as the issuer knows them (waited for them)."""
        v = self.vc[issuer]
        self.own[agent] = 0 if v is None else int(v[agent])

    def join(self, a: int, other: np.ndarray | None) -> None:
        """``a`` now knows everything ``other`` knew (an acquire)."""
        if other is None:
            return
        v = self._vc(a)
        np.maximum(v, other, out=v)
        v[a] = self.time[a]

    def knows(self, a: int, actors: np.ndarray, times: np.ndarray) -> np.ndarray:
        """For each past access (actor, time): does it happen before ``a``'s next step?"""
        v = self.vc[a]
        if v is None:
            return actors == a
        return (actors == a) | (v[actors] >= times)


def join_all(vcs: list[np.ndarray]) -> np.ndarray | None:
    """The join of several clocks (None for none)."""
    if not vcs:
        return None
    out = vcs[0].copy()
    for v in vcs[1:]:
        np.maximum(out, v, out=out)
    return out


__all__ = ["Clocks", "join_all"]
