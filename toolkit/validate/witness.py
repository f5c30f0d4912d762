"""Witnesses of races and deadlocks: the schedule that shows one, said in the kernel's
terms (who did what in which order, the racing region in the buffer's coordinates,
the missing edge; for a deadlock, who waits on what, held by whom).

A witness is data (a dict, the ``witness`` of a Diagnostic): its ``schedule`` replays
the run step by step (``simulate(..., schedule=witness)``,
``mpmd-lab run FILE --backend simulate --schedule FILE.json``).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _shape(s: Any, name: str) -> tuple[int, ...] | None:
    for table in (s.call.outputs, s.buffers, s.call.scratch):
        item = table.get(name)
        if item is not None and getattr(item, "shape", None) is not None:
            return tuple(item.shape)
    return None


def region(s: Any, name: str, spans: Any) -> str:
    """The elements of runs ``spans`` as the buffer indexes them: ``out[0:128]``, or the
    ``[row, col]`` ranges that bound them (``within`` when they do not fill the box)."""
    spans = np.asarray(spans, np.int64).reshape(-1, 2)
    if not spans.size:
        return name
    lo, hi = int(spans[:, 0].min()), int(spans[:, 1].max())
    count = int((spans[:, 1] - spans[:, 0]).sum())
    shape = _shape(s, name)
    if not shape or len(shape) == 1:
        if count == hi - lo:
            return f"{name}[{lo}:{hi}]"
        return f"{name}[{lo}:{hi}] ({count} elements within)"
    if count <= 1 << 16:
        flat = np.concatenate([np.arange(x, y) for x, y in spans.tolist()])
    else:  # (a huge region: its runs' ends bound it)
        flat = np.concatenate([spans[:, 0], spans[:, 1] - 1])
    coords = np.unravel_index(flat, shape)
    box = []
    size = 1
    for c in coords:
        first, last = int(c.min()), int(c.max())
        box.append(f"{first}:{last + 1}")
        size *= last + 1 - first
    text = f"{name}[{', '.join(box)}]"
    return text if size == count else f"{text} ({count} elements within)"


def _waits_before(sched: Any, who: str, path: str) -> list[dict[str, Any]]:
    """The choices of ``who``'s semaphore waits that ran before its statement ``path``."""
    mine = [c for c in sched.said if c["who"] == who and "wait" in c]
    waits = {c["wait"] for c in mine}
    n = 0
    for step in sched.steps:
        if step["actor"] != who:
            continue
        if step["at"] == path:
            break
        if step["at"] in waits:
            n += 1
    return mine[:n]


def race_witness(race: Any, sched: Any, s: Any) -> dict[str, Any]:
    """A race as data: its kind, region, both statements and the schedule that shows
    it; ``explain``: the missing edge in words."""
    first, second = race.first, race.second
    a, b = first.actor.describe(), second.actor.describe()
    where = region(s, race.location.buffer, race.spans)
    edge = f"no signal orders {a}'s {first.kind} ({first.where}) before {b}'s {second.kind}"
    waited = _waits_before(sched, b, second.path)
    if waited:
        c = waited[-1]
        edge += (
            f": in the witness schedule {b}'s wait at {c['wait']} saw only the signal(s) of "
            f"{', '.join(c['saw']) or 'nobody'}"
        )
        if c["sets"] > 1:
            edge += f" (one of {c['sets']} sets of signals it may see)"
    elif first.actor.device == second.actor.device and first.actor.agent != second.actor.agent:
        edge += ": no wait completes that async copy before the access"
    arrivals = [c for c in sched.said if "arrives" in c]
    if arrivals:  # which phase each arrival joined is the schedule's
        edge += "; in the witness schedule " + ", then ".join(
            f"{c['who']}'s arrival at {c['arrives']} joined phase {c['phase']} of {c['barrier']}"
            for c in arrivals[:3]
        )
    reads = [c for c in sched.said if "reads" in c]
    if reads:  # where each semaphore read fell between the signals is the schedule's
        edge += "; in the witness schedule " + ", then ".join(
            f"{c['who']}'s pl.semaphore_read at {c['reads']} read {c['value']} from "
            f"{c['semaphore']}"
            + (f" (one of {c['sets']} sets of signals it may have seen)" if c["sets"] > 1 else "")
            for c in reads[:3]
        )
        edge += (
            " (pl.semaphore_read is an acquire load: it orders only the signals it saw "
            "before what follows it)"
        )
    explain = (
        f"{'write/write' if race.kind == 'write-write' else 'read/write'} race on {where}; "
        f"{edge} (witness: {len(sched.choices)} choice(s), replay with "
        "simulate(..., schedule=witness))"
    )
    return {
        "kind": "race",
        "race": {
            "kind": race.kind,
            "region": where,
            "first": {"actor": a, "access": first.kind, "at": first.where, "path": first.path},
            "second": {"actor": b, "access": second.kind, "at": second.where, "path": second.path},
            "missing_edge": edge,
        },
        "schedule": sched.to_json(),
        "explain": explain,
    }


def deadlock_witness(out: Any, sched: Any) -> dict[str, Any]:
    """A deadlock as data: the wait-for graph of the blocked threads (who waits on which
    semaphore or barrier, at which statement, and who could still signal it: only
    blocked threads are left) and the schedule that reaches it."""
    blocked = [b.actor.describe() for b in out.deadlock]
    cycle = []
    for b in out.deadlock:
        who = b.actor.describe()
        signallers = sorted(out.signals.get(b.sem, ())) if b.sem else []
        cycle.append(
            {
                "actor": who,
                "at": b.path,
                "waits": b.what,
                "on": b.sem or b.kind,
                "signalled_at": signallers,
                "held_by": [x for x in blocked if x != who],
            }
        )
    choices = len(sched.choices)
    took = ""
    waits = [c for c in sched.said if "wait" in c]  # (not the barrier arrivals)
    if waits:
        c = waits[-1]
        took = (
            f"; in it {c['who']}'s wait at {c['wait']} took the signal(s) of {', '.join(c['saw'])}"
        )
    chain = " -> ".join(f"{c['actor']} ({c['at']})" for c in cycle)
    if len(cycle) > 1:
        what = f"wait-for cycle: {chain}, each waiting for what only another blocked one could give"
    else:
        needs = (
            "an arrival no thread is left to make"
            if out.deadlock[0].kind == "barrier"
            else "a signal no thread is left to send"
        )
        what = f"{chain} waits for {needs} (the others finished)"
    explain = (
        f"{what} (witness: {choices} choice(s){took}; replay with simulate(..., schedule=witness))"
    )
    return {"kind": "deadlock", "wait_for": cycle, "schedule": sched.to_json(), "explain": explain}


__all__ = ["deadlock_witness", "race_witness", "region"]
