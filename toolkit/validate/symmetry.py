"""Synchronisation verdicts for big meshes by symmetry (a cutoff argument).

The engine (:mod:`mpmd_lab.validate.sync`) runs every actor; past its step bound it would
have to give up. A ring or collective whose statements are *uniform in the device* —
every device id is ``(dev + c) % axis_size(dev)`` for a constant ``c``, no condition
singles out a device, no loop bound, semaphore count or modulus is a constant standing for
the mesh size — runs the same program at every device, shifted round the ring. Such a
kernel is judged on small rings of D' devices that keep its communication pattern (every
ring neighbour ``dev + c`` distinct from the others and from ``dev``, the loops that run
``axis_size(dev) - k`` times running at least twice, D' congruent to D modulo every constant
modulus), the way GPUVerify judges every pair of threads from two symbolic ones: the
engine's own verdict (races, deadlocks, semaphore balance) at two such sizes, which must
agree, is the verdict for D. Out-of-bounds indices and device ids are checked apart, at
the corners of the full mesh (exact for indices affine in the axes).

The argument is checked on the scenario before it is used, and the result says which
was used (``SYNC_BY_SYMMETRY``, a note). Where it does not hold the caller falls back to
its bounded exploration and says why (:func:`not_uniform` gives the reason).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from mpmd_lab import expr as E
from mpmd_lab.diagnostics import Diagnostic
from mpmd_lab.validate.context import Ctx

#: A device axis of fewer devices is run whole by the engine (no reduction is needed).
MIN_DEVICES = 8
#: The smallest ring judged: four devices (a device, both neighbours and one more).
SMALLEST = 4
#: The largest small ring judged (a pattern that needs more is not reduced).
MAX_RING = 32
#: A constant modulus past this is not reproduced on a small ring: no reduction.
MAX_MODULUS = 16

#: The verdict codes a reduced run gives for the whole mesh (out-of-bounds findings are
#: judged on the full mesh instead: an index's range depends on the mesh size).
VERDICT_CODES = frozenset(
    {
        "RACE",
        "RACE_DETECTED",
        "DEADLOCK_SEMAPHORE",
        "DEADLOCK_BARRIER",
        "SEMAPHORE_IMBALANCE",
        "SYNC_NOT_CHECKED",
    }
)
#: The out-of-bounds codes, which come from the corners of the full mesh.
BOUNDS_CODES = frozenset({"OOB_READ", "OOB_WRITE", "OOB_INDEX", "REMOTE_DEVICE_OOB"})


class Ring:
    """What the check of the argument found: the device axis, its size and what a
    reduced ring must keep (neighbour offsets, constant moduli)."""

    def __init__(
        self, axis: str, size: int, offsets: set[int], moduli: set[int], least: int = 0
    ) -> None:
        self.axis = axis
        self.size = size
        self.offsets = offsets
        self.moduli = moduli
        self.least = least

    def sizes(self) -> list[int]:
        """Two small ring sizes that keep the pattern: every offset distinct mod D' from
        the others and from 0 (D' > 2 max|c|); past every threshold a condition or a
        size-dependent loop bound sets (``least``: a constant ``c`` in a condition needs
        a ring of ``c + 4``, as ``i == 5`` needs a loop that reaches 5 and goes on twice
        more before its last step: a chunk skipped at step 5 is forwarded at step 6; a
        bound ``axis_size(dev) - k`` needs a loop of at least three steps); and D' = D
        modulo every constant modulus."""
        reach = max((abs(c) for c in self.offsets), default=0)
        low = max(SMALLEST, 2 * reach + 1, self.least)
        step = math.lcm(*self.moduli) if self.moduli else 1
        first = low + (self.size - low) % step
        return [d for d in (first, first + step) if d < self.size]


def _walk(body: list[Any]) -> Iterator[Any]:
    """Every statement and let of a body, and of the bodies inside it."""
    for st in body:
        yield st
        inner = getattr(st, "body", None)
        if isinstance(inner, list):
            yield from _walk(inner)


def _exprs(st: Any) -> Iterator[tuple[str, E.Expr]]:
    """The index expressions a statement or let evaluates (its own and its transforms')."""
    if hasattr(st, "exprs"):
        yield from st.exprs()
    for t in vars(st).get("transforms") or []:
        yield from t.exprs()


def _consts(e: E.Expr) -> Iterator[int]:
    if isinstance(e, E.Const):
        yield e.value
    for sub in ("a", "b"):
        if hasattr(e, sub):
            yield from _consts(getattr(e, sub))
    for x in getattr(e, "items", ()):
        yield from _consts(x)


def _moduli(e: E.Expr) -> Iterator[E.Expr]:
    """The right operands of every ``%`` and ``//`` in ``e``."""
    if isinstance(e, E.BinOp):
        if e.op in ("%", "//"):
            yield e.b
        yield from _moduli(e.a)
        yield from _moduli(e.b)
    for sub in ("a",):
        if not isinstance(e, E.BinOp) and hasattr(e, sub):
            yield from _moduli(getattr(e, sub))
    for x in getattr(e, "items", ()):
        yield from _moduli(x)


def _index_names(e: E.Expr) -> set[str]:
    """The axes and loop variables whose index ``e`` reads (not ``axis_size``'s axis)."""
    if isinstance(e, E.Name):
        return {e.id}
    out: set[str] = set()
    for sub in ("a", "b"):
        if hasattr(e, sub):
            out |= _index_names(getattr(e, sub))
    for x in getattr(e, "items", ()):
        out |= _index_names(x)
    return out


#: The fields that steer control or counts (not an index): a loop's bounds, a condition,
#: a semaphore's increment or awaited value.
_CONTROL = ("cond", "start", "stop", "inc", "value")


def _stands_for(v: int, n: int) -> bool:
    """A constant that may stand for a mesh size ``n`` (n - 1, n, n + 1 or a multiple)."""
    return n > 2 and (abs(v - n) <= 1 or (v >= n and v % n == 0))


def _offset(e: E.Expr, axis: str, n: int) -> int | None:
    """``c`` when the device id ``e`` is ``(dev + c) % n`` at every device, else None."""
    env = E.Env({axis: 0}, {axis: n})
    try:
        c = e.eval(env) % n
        for k in range(n):
            if e.eval(E.Env({axis: k}, {axis: n})) != (k + c) % n:
                return None
    except E.ExprError:
        return None
    return c if c <= n // 2 else c - n


def not_uniform(s: Any) -> Ring | str:
    """The ring the scenario is, or why it is not uniform in its device axis."""
    mesh = s.device_mesh or {}
    if len(mesh) != 1:
        return "the device mesh has more than one axis" if mesh else "there is one device"
    ((axis, size),) = mesh.items()
    if size < MIN_DEVICES:
        return f"the {size} devices are few enough to run every one"
    offsets: set[int] = set()
    least = 0  # the smallest ring every condition and size-dependent loop bound still sees
    moduli: set[int] = set()
    for p, prog in enumerate(s.call.programs):
        for st in _walk(list(prog.body)):
            where = f"call.programs[{p}]: {st.label()}"
            for field, e in _exprs(st):
                names = _index_names(e)
                if field.startswith("device"):
                    if names - {axis}:
                        return f"the device id at {where} depends on {sorted(names - {axis})[0]}"
                    if axis in names:
                        c = _offset(e, axis, size)
                        if c is None:
                            return (
                                f"the device id at {where} is not dev + c modulo the ring's "
                                "size (a fixed offset round the ring)"
                            )
                        offsets.add(c)
                    elif _stands_for(e.eval(E.Env({}, {axis: size})), size):
                        return f"the device id at {where} names a device near the ring's end"
                    continue
                if axis in names and field in _CONTROL:
                    return f"{where} depends on the device ({field} {e.label()})"
                for m in _moduli(e):
                    if m.is_const:
                        v = m.eval(E.Env({}, {}))
                        if v > MAX_MODULUS and axis in names:
                            return f"{where} takes a modulus {v} too large to keep on a small ring"
                        if abs(v) > 1:
                            moduli.add(abs(v))
                if field == "cond":
                    least = max([least, *(abs(v) + 4 for v in _consts(e))])
                elif field in ("start", "stop") and "axis_size" in e.calls():
                    least = max([least, *(abs(v) + 3 for v in _consts(e))])
                if field in _CONTROL:
                    bad = [v for v in _consts(e) if _stands_for(v, size)]
                    if bad:
                        return (
                            f"{where} has the constant {bad[0]} where the ring's size may be "
                            "meant (write axis_size(dev))"
                        )
            v = vars(st).get("value")
            if type(v) is int and _stands_for(v, size):
                return f"{where} waits for {v}, a count that may stand for the ring's size"
    if least > MAX_RING:
        return (
            f"a condition or loop bound needs a ring of {least} devices to keep its "
            f"pattern, more than the {MAX_RING} the reduction runs"
        )
    return Ring(axis, size, offsets, moduli, least)


#: A grid axis of fewer blocks is run whole.
MIN_BLOCKS = 4


def symmetric_blocks(s: Any) -> dict[int, list[str]] | str:
    """The grid axes of each program whose blocks are interchangeable, or why none are.

    A grid axis is reduced when its block index (the axis name or ``pl.program_id``)
    is read only by affine indices (``a * b + c``: two blocks' slices overlap exactly when
    two neighbouring blocks' do, so blocks 0 and 1 show it), never by a device id, a
    condition, a loop bound or a semaphore count, and no such field holds a constant that
    may stand for the axis's size. Blocks then meet only through memory (semaphores and
    barriers are each block's own, a signal goes to the same block on its device), which
    the engine judges between the blocks it keeps."""
    out: dict[int, list[str]] = {}
    why = "no grid axis has enough blocks to reduce"
    for p, prog in enumerate(s.call.programs):
        grid = prog.mesh.grid
        axes = [a for a, n in grid.items() if n >= MIN_BLOCKS]
        for st in _walk(list(prog.body)):
            for field, e in _exprs(st):
                reads = _index_names(e) & set(axes)
                if "program_id" in e.calls() or "num_programs" in e.calls():
                    # (by position: conservatively every axis)
                    reads |= set(axes) if "program_id" in e.calls() else set()
                for a in list(reads):
                    if field.startswith(("device", "block")) or field in _CONTROL:
                        why = f"{st.label()} uses the block index {a} in its {field}"
                        axes.remove(a)
                    elif nonaffine(e):
                        why = f"{st.label()} indexes by {a} with // or % ({e.label()})"
                        axes.remove(a)
                if field in _CONTROL:
                    for a in list(axes):
                        if any(_stands_for(v, grid[a]) for v in _consts(e)):
                            why = (
                                f"{st.label()} has a constant that may stand for the "
                                f"{grid[a]} blocks of {a} (write num_programs)"
                            )
                            axes.remove(a)
            v = vars(st).get("value")
            for a in list(axes):
                if type(v) is int and _stands_for(v, grid[a]):
                    why = f"{st.label()} waits for {v}, a count that may stand for the blocks"
                    axes.remove(a)
        if axes:
            out[p] = axes
    return out or why


def _reduced(s: Any, devices: int | None, blocks: dict[int, list[str]], n: int) -> Any:
    """The scenario on a ring of ``devices`` (None: as it is) with ``n`` blocks along each
    reduced grid axis (shapes as they are: no index of the small mesh reaches further
    than at full size)."""
    from mpmd_lab.scenario import load_scenario

    data = s.to_dict()
    if devices is not None:
        ((axis, _),) = s.device_mesh.items()
        data["device_mesh"] = {axis: devices}
    for p, axes in blocks.items():
        for a in axes:
            data["call"]["programs"][p]["mesh"]["grid"][a] = n
    return load_scenario(data)


def _verdict(diags: tuple[Diagnostic, ...]) -> set[tuple[str, str]]:
    return {(d.code, d.path) for d in diags if d.code in VERDICT_CODES}


def nonaffine(e: Any) -> bool:
    """Whether ``e`` uses // or %."""
    if isinstance(e, E.BinOp):
        return e.op in ("//", "%") or nonaffine(e.a) or nonaffine(e.b)
    for sub in ("a", "b"):
        if hasattr(e, sub) and nonaffine(getattr(e, sub)):
            return True
    return any(nonaffine(x) for x in getattr(e, "items", ()))


def affine(ctx: Ctx) -> bool:
    """No index expression uses // or % (corners then bound every actor's index)."""
    for prog in ctx.programs:
        for st in prog.stmts:
            exprs = list(st.node.exprs()) if hasattr(st.node, "exprs") else []
            for t in getattr(st.node, "transforms", []) or []:
                exprs.extend(t.exprs())
            if any(nonaffine(e) for _, e in exprs):
                return False
    return True


def judge(ctx: Ctx, steps: int) -> str | None:
    """Give the verdict of a call too big to run whole from small meshes (a ring of few
    devices, few blocks); None when done, else why symmetry does not hold (the caller
    then explores a bounded sample)."""

    s = ctx.s
    ring = not_uniform(s)
    blocks = symmetric_blocks(s)
    if isinstance(ring, str) and isinstance(blocks, str):
        return f"{ring}; {blocks}"
    sizes: list[int | None] = [None, None]
    used = []
    if isinstance(ring, Ring):
        found = ring.sizes()
        if len(found) < 2:
            return f"no two smaller rings keep its pattern ({ring.size} devices)"
        sizes = list(found)
        offsets = ", ".join(f"dev {'+' if c >= 0 else '-'} {abs(c)}" for c in sorted(ring.offsets))
        used.append(
            f"uniform in {ring.axis!r} (every device runs the same statements, talking only "
            f"to {offsets or 'itself'} round the ring): judged at D'={found[0]} and {found[1]} "
            f"for all {ring.size} devices"
        )
    reduced: dict[int, list[str]] = blocks if isinstance(blocks, dict) else {}
    for p, axes in reduced.items():
        grid = s.call.programs[p].mesh.grid
        names = ", ".join(f"{a} ({grid[a]} blocks)" for a in axes)
        used.append(
            f"symmetric blocks along {names}"
            f"{f' of program {p}' if len(s.call.programs) > 1 else ''}: judged on blocks "
            "0 and 1, then 0, 1 and 2"
        )
    if ctx.recheck is None:
        return "no rule runner to check the smaller meshes with"
    runs = [ctx.recheck(_reduced(s, sizes[k], reduced, 2 + k)) for k in (0, 1)]
    had = {d.code for d in ctx.diags if d.is_error}
    for run in runs:
        other = sorted({d.code for d in run if d.is_error} - VERDICT_CODES - BOUNDS_CODES - had)
        if other:  # the small mesh is not the same kernel to JAX's rules
            return f"the small mesh it reduces to gets {other[0]}, which the call does not"
        unchecked = next((d for d in run if d.code == "SYNC_NOT_CHECKED"), None)
        if unchecked is not None:
            return f"even the small mesh is too big to run whole ({unchecked.message})"
    if _verdict(runs[0]) != _verdict(runs[1]):
        return (
            "the two small meshes it reduces to get different verdicts, so the kernel is "
            "not symmetric in effect"
        )
    small = []
    if sizes[0] is not None and isinstance(ring, Ring):
        small.append(f"a ring of {sizes[0]} devices standing for all {ring.size}")
    if reduced:
        small.append("blocks 0 and 1 standing for every block")
    for d in runs[0]:
        if d.code in VERDICT_CODES:
            ctx.add(
                d.code,
                d.path,
                f"(on {' and '.join(small)}) {d.message}",
                jax_message=d.jax.message if d.jax else None,
                jax_type=d.jax.type if d.jax else None,
                severity=d.severity,
                stage=d.stage,
                fix=list(d.fixes) or None,
            )
    bounds = (
        "which bounds every index (all are affine in the axes)"
        if affine(ctx)
        else "and on the small meshes (an index with // or % only there)"
    )
    ctx.add(
        "SYNC_BY_SYMMETRY",
        "call.programs",
        f"this call runs about {steps:,} thread-steps; races, deadlocks and semaphore "
        f"balance judged by symmetry ({'; '.join(used)}; the same verdict at both sizes); "
        "out-of-bounds indices and device ids checked at the first two and last two "
        f"devices and blocks of the full mesh {bounds}",
        severity="info",
    )
    return None


__all__ = ["MIN_BLOCKS", "MIN_DEVICES", "Ring", "judge", "not_uniform", "symmetric_blocks"]
