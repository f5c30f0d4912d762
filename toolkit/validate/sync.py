"""Synchronisation, out-of-bounds views and device ids, judged by running the call
data-free through the simulation engine (:mod:`mpmd_lab.engine`).

Every actor (device x block x warpgroup) runs its statements with accesses only (no
buffer is allocated); happens-before (program order, signal -> wait, barriers, async
copies and their waits) orders them. Races and deadlocks are judged over every schedule
that matters (:mod:`mpmd_lab.engine.explore`: which signals each semaphore wait saw,
which of competing waits went first; its first run stands for the call), each found one
with its witness (``Diagnostic.witness``, :mod:`mpmd_lab.validate.witness`); where the
bound on schedules stops the exploration, SYNC_NOT_CHECKED says how far it went. What it
reports:

- RACE / RACE_DETECTED: two accesses to overlapping elements, at least one a write,
  that nothing orders (every source: plain stores and loads, TMA copies, multimem,
  multicast, cluster_ref, atomics against plain accesses), errors whatever
  ``detect_races`` says. RACE_DETECTED in a kernel that synchronises (the race a
  detector over happens-before finds: a missing wait) or when the scenario asks JAX's
  GPU interpreter to look (``detect_races``: its first race, with ``pl.program_id`` 0 as
  the interpreter has it, and JAX's message where it runs the call); RACE in a kernel
  that orders nothing;
- DEADLOCK_SEMAPHORE / DEADLOCK_BARRIER: every thread left is blocked and no signal
  or arrival can come (who waits for what, where the signals went);
- SEMAPHORE_IMBALANCE (warning): a semaphore not zero when the kernel ends;
- OOB_READ / OOB_WRITE (the GPU interpreter's codes and message, at the first failing
  access) or OOB_INDEX: an index (static, a block or program id, axis arithmetic, a
  loop variable) outside its ref; OOB_INDEX at ``gpu-run`` where only a GPU goes out
  (``pl.program_id``, which the GPU interpreter makes 0);
- REMOTE_DEVICE_OOB: a device id (``remote_ref``, ``semaphore_signal``) outside the mesh;
- SYNC_NOT_CHECKED (warning): a call too big to run every actor here (the limit is
  said) and not reduced by symmetry (why is said); out-of-bounds indices and device ids
  are then checked at the corners of the grid and the device mesh, exactly for indices
  affine in the axes;
- SYNC_BY_SYMMETRY (a note): a call too big to run whole whose devices or blocks stand
  for each other, judged on a small mesh (:mod:`mpmd_lab.validate.symmetry`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

from mpmd_lab import expr as E
from mpmd_lab.diagnostics import INTERP_CANNOT, Edit, Fix
from mpmd_lab.engine import (
    Engine,
    Limits,
    Outcome,
    SimError,
    deadlock_diagnostic,
    read_names,
    step_estimate,
    synchronises,
    written_buffers,
)
from mpmd_lab.engine.core import Prepared
from mpmd_lab.fields import format_path, get_path, parse_path, sub_path
from mpmd_lab.ops import Let, SemaphoreScratch, SemaphoreSignal, SemaphoreWait
from mpmd_lab.plan import Binding, Stmt, expr_fields
from mpmd_lab.validate.context import Ctx
from mpmd_lab.validate.symmetry import affine, judge

#: Steps (one statement of one thread) the static check runs at most: beyond, it says so.
MAX_STEPS = 20_000
#: View offsets it indexes the slow way at most (strided or copied views).
MAX_WORK = 1 << 24
#: Seconds one run may take at most: a last resort against a runaway run, far above
#: what the step bound allows (the bounds above are what decide, on any machine).
MAX_SECONDS = 120.0
#: Races reported per call (distinct pairs of statements).
MAX_RACES = 3
#: bytes of view offsets the data-free run may hold (it keeps one offset per element of
#: every buffer it touches); a call past it is not run, and says so
CHECK_MEMORY = 512 * 2**20
#: Elements of all buffers, outputs and scratch arrays together the check indexes at
#: most (it keeps an offset per element: a 4 GiB buffer took 8 GB and 45 s); beyond, it
#: says so.
MAX_ELEMENTS = 1 << 25


def check_sync(ctx: Ctx) -> None:
    """The engine-based rules (see the module docstring)."""
    s = ctx.s
    if ctx.build_failed or ctx.trace_failed or not s.call.programs:
        return
    if any(d.is_error and d.stage == "gpu-lower" for d in ctx.diags):
        return  # the kernel never runs on a GPU: what it would race on is not yet its problem
    names = _PlanNames(ctx)
    if not names.ok:
        return  # a name that does not resolve: the schema-stage error says it
    size = Footprint(s, names.bitcast)
    held = size.elements
    if held > MAX_ELEMENTS:
        ctx.add(
            "SYNC_NOT_CHECKED",
            "call.programs",
            f"the call's buffers, outputs and scratch hold {held:,} elements, more "
            f"than the {MAX_ELEMENTS:,} the static check indexes: races, deadlocks, "
            "semaphore balance and out-of-bounds indices and device ids are not checked "
            "(check a smaller model of the call: the same views over smaller shapes)",
            severity="warning",
        )
        return
    steps = step_estimate(s)
    interp_gpu = s.run.interpret == "gpu"
    if steps > MAX_STEPS:
        # uniform in the device: judged on small rings (None), else why not
        _sampled(ctx, steps, interp_gpu and _uses_pid(ctx), unlike=judge(ctx, steps))
        return
    # what every run of this check shares, its names read off the plan
    need = size.offsets
    if need > CHECK_MEMORY:
        ctx.add(
            "SYNC_NOT_CHECKED",
            "call.programs",
            f"the race check would hold about {need / 2**20:,.0f} MiB of element offsets for "
            f"this call's buffers, more than the {CHECK_MEMORY // 2**20} MiB it may take: "
            "races, deadlocks, semaphore balance and out-of-bounds indices are not checked "
            "(the same call with smaller buffers is checked; simulate has its own bound)",
            severity="warning",
        )
        return
    # what every run of this check shares, its names read off the plan
    prep = _guarded(lambda: Prepared(s, used=names.used, reads=names.reads, bitcast=names.bitcast))
    if prep is None:
        _not_run(ctx)
        return
    # every schedule that matters, its first run standing for the call (its findings,
    # balance); the races and deadlock of the others merged in, each with its witness
    ex = _explore(s, prep)
    gpu = ex.first if ex is not None else None
    if gpu is None:
        _not_run(ctx)
        return
    followed = False
    used_pid = gpu.used_pid
    if _stopped_on(gpu, "DATA_DEPENDENT") and held * s.num_devices <= MAX_FOLLOWED:
        # an index loaded from memory the kernel writes: the same schedules again,
        # following the values (where that run fails, the data-free one says what)
        valued = _explore(s, prep, data=True)
        first = valued.first if valued is not None else None
        if first is not None and first.error is None and not first.stopped:
            ex, gpu, followed = valued, first, True
            used_pid = used_pid or first.used_pid
    # JAX's GPU interpreter gives pl.program_id 0 in every block: a run as it makes it,
    # where a run read pl.program_id (else that run is the first's, step for step)
    pid_bug = interp_gpu and used_pid and _uses_pid(ctx)
    interp = _run(s, "zero", data=followed, prepared=prep) if pid_bug else gpu
    if interp is None:
        interp = gpu
    reported = _interp_findings(ctx, interp)
    _gpu_findings(ctx, gpu, reported, pid_bug)
    witnesses = _merge(s, gpu, ex)
    wait = _wait_fix(ctx, gpu)  # (what a race and a leftover signal both offer)
    _races(ctx, interp, gpu, wait, witnesses)
    _deadlock(ctx, gpu, witnesses)
    _leftover(ctx, gpu, wait)
    _data_reads(ctx, gpu, ex.runs if followed else 0, ex, names.loads)
    stopped_on_data = _stopped_on(gpu, "DATA_DEPENDENT") or _stopped_on(gpu, "OOB_INDEX")
    if not ex.complete and not gpu.stopped and not stopped_on_data:  # (DATA_DEPENDENT says)
        # a give-up point (sync-scale's hook: SYNC_NOT_CHECKED where exploring stops)
        ctx.add(
            "SYNC_NOT_CHECKED",
            "call.programs",
            f"races and deadlocks were judged over {ex.runs} schedule(s), not every one the "
            f"GPU allows: {ex.why}; a race or deadlock only the other schedules have is not "
            "checked",
            severity="warning",
        )
    if gpu.error is not None and gpu.error.code == "SIM_UNSUPPORTED":
        # (no rule says it, simulate refuses it: the check says it stopped there)
        ctx.add(
            "SYNC_NOT_CHECKED",
            gpu.error.path or "call.programs",
            f"the synchronisation check stopped at {gpu.error}, which the simulator does "
            "not model: races, deadlocks and out-of-bounds indices past that point are not "
            "checked",
            severity="warning",
        )
    if gpu.stopped:
        ctx.add(
            "SYNC_NOT_CHECKED",
            "call.programs",
            f"the synchronisation check {gpu.stopped.replace('simulator', 'check')}: races, "
            "deadlocks and out-of-bounds indices past that point are not checked",
            severity="warning",
        )


def _stopped_on(out: Outcome, code: str) -> bool:
    """The run stopped on an error of ``code``."""
    return out.error is not None and out.error.code == code


def _data_reads(
    ctx: Ctx, gpu: Outcome, followed: int = 0, ex: Any = None, loads: bool = True
) -> None:
    """DATA_DEPENDENT: what the check made of index expressions that read data. A load
    from an input the kernel never writes was checked with the values the call is given
    (a note: another table is another call); a semaphore read is a choice point of the
    exploration ``ex``, which tries every value it can see: where the exploration
    completed, every value was checked (a note), else what stopped it is said (a
    warning); a load of anything else is followed with the values the kernel computes
    in each explored schedule (``followed``: how many; a note: a load racing a write is
    reported, and without one every schedule loads the same), or where that could not
    run it stopped the check (a warning: what follows is not checked). ``loads``: False
    where no statement's expressions load or read (the plan's ``loads``)."""
    err = gpu.error
    if err is not None and err.code == "OOB_INDEX":  # (a load's index: the run stops there)
        ctx.add(
            "OOB_INDEX",
            err.path or "call.programs",
            f"{err}: JAX checks no index of a load inside a kernel, and on a GPU it "
            "reads memory outside the ref. The check stopped there: races, deadlocks and "
            "out-of-bounds indices past it are not checked",
            stage="gpu-run",
        )
    halted = err is not None and err.code in ("DATA_DEPENDENT", "OOB_INDEX")
    if err is not None and err.code == "DATA_DEPENDENT":
        ctx.add(
            "DATA_DEPENDENT",
            err.path or "call.programs",
            f"not checked past here: {err}. Races, deadlocks, out-of-bounds indices "
            "and device ids from this statement on are not checked for any value; simulate "
            "runs it with the values the kernel computes",
            severity="warning",
        )
    if not loads:
        return
    inputs: dict[str, list[str]] = {}
    computed: dict[str, list[str]] = {}
    sem_reads: dict[str, list[str]] = {}
    written = written_buffers(ctx.s) if followed else frozenset()
    for p in ctx.programs:
        for st in p.stmts:
            if not st.loads:  # (what its expressions load and read, bound by the plan)
                continue
            for field, e in expr_fields(st.node):
                reads = (
                    list(E.data_reads(e))
                    if "load" in e.calls() or ("semaphore_read" in e.calls())
                    else []
                )
                where = format_path(sub_path(st.path, field))
                for r in reads:
                    if isinstance(r, E.SemRead):
                        if ex is not None and ex.complete and not halted and not gpu.stopped:
                            sem_reads.setdefault(r.ref, []).append(where)
                            continue
                        why = (
                            f"the exploration stopped ({ex.why})"
                            if ex is not None and not ex.complete
                            else "the check stopped before it"
                            if halted or gpu.stopped
                            else "it was not explored"
                        )
                        ctx.add(
                            "DATA_DEPENDENT",
                            where,
                            f"{e.label()} reads the semaphore {r.ref}: checked only for the "
                            f"values it read in the {ex.runs if ex is not None else 0} "
                            f"schedule(s) explored, not for every one it may see: {why}. What "
                            "the kernel does with the other values is not checked",
                            severity="warning",
                        )
                        continue
                    b = st.loads.get(r.ref)
                    if b is None or halted:
                        continue
                    origin = ", ".join(o.split(":", 1)[-1] for o in b.origin) or r.ref
                    given = bool(b.origin) and all(o in ctx.s.buffers for o in b.origin)
                    if followed and not (given and not set(b.origin) & written):
                        computed.setdefault(origin, []).append(where)
                    else:
                        inputs.setdefault(origin, []).append(where)
    for origin, paths in inputs.items():
        ctx.add(
            "DATA_DEPENDENT",
            paths[0],
            f"index expressions load from {origin} (at {_some(paths)}): checked on every "
            "device with the values the call is given; other values are another call",
            severity="info",
        )
    for name, paths in sem_reads.items():
        ctx.add(
            "DATA_DEPENDENT",
            paths[0],
            f"reads of the semaphore {name} (at {_some(paths)}): checked for every value "
            f"each may see, over the {ex.runs} schedule(s) explored (each read a choice "
            "point: which of the signals issued so far it saw, less what waits took)",
            severity="info",
        )
    for origin, paths in computed.items():
        ctx.add(
            "DATA_DEPENDENT",
            paths[0],
            f"index expressions load from {origin} (at {_some(paths)}), which the kernel "
            f"writes: checked with the values it computes, in each of the {followed} "
            "schedule(s) explored; a load racing a write would be reported, and without one "
            "every schedule loads the same values",
            severity="info",
        )


def _some(paths: list[str]) -> str:
    """The first three paths (and ``...`` where there are more)."""
    return ", ".join(paths[:3]) + (", ..." if len(paths) > 3 else "")


class Footprint:
    """What the call's arrays hold, in one pass over its buffers, outputs and scratch:
    ``elements``, one device's elements of all of them, and ``offsets``, the bytes the
    data-free run holds at most for its views' offsets: one int32 (int64 past 2 GiB) per
    element of every buffer and output on every device, and of every scratch in every
    block (each its own memory), bytes of each element where a view bitcasts
    (``bitcast``)."""

    __slots__ = ("elements", "offsets")

    def __init__(self, s: Any, bitcast: bool) -> None:
        c = s.call
        held = gmem = scratch = 0
        for arrays in (s.buffers, c.outputs):
            for b in arrays.values():
                gmem += math.prod(b.shape)
        for sc in c.scratch.values():
            scratch += math.prod(sc.shape)
        held = gmem + scratch
        blocks = max(
            (
                math.prod(p.mesh.grid.values()) * math.prod(p.mesh.cluster.values())
                for p in c.programs
            ),
            default=1,
        )
        if bitcast or held >= 2**31:  # (bytes per element, or an int64 offset: per array)
            gmem, scratch = self._bytes(s, bitcast)
        else:
            gmem, scratch = 4 * gmem, 4 * scratch
        self.elements = held
        self.offsets = s.num_devices * (gmem + blocks * scratch)

    @staticmethod
    def _bytes(s: Any, bitcast: bool) -> tuple[int, int]:
        """The offsets' bytes of one device's buffers and outputs, and of one block's
        scratch, array by array."""
        from mpmd_lab import dtypes

        def cost(shape: Any, dtype: str) -> int:
            n = math.prod(shape) * (dtypes.bits(dtype) // 8 if bitcast else 1)
            return n * (4 if n < 2**31 else 8)

        c = s.call
        gmem = sum(cost(b.shape, b.dtype) for b in s.buffers.values())
        gmem += sum(cost(o.shape, o.dtype) for o in c.outputs.values())
        return gmem, sum(cost(sc.shape, sc.dtype) for sc in c.scratch.values())


def offsets_bytes(s: Any) -> int:
    """:attr:`Footprint.offsets` of the call (whether a view bitcasts: its bodies say)."""
    return Footprint(s, Prepared(s).bitcast).offsets


def elements(s: Any) -> int:
    """:attr:`Footprint.elements` of the call (one device's)."""
    return Footprint(s, False).elements


#: why the last ``_run`` gave no outcome, when it was not the engine's own SimError
_FAILED: list[str] = []


#: the bounds of every run of the check
_LIMITS = Limits(max_steps=MAX_STEPS, max_seconds=MAX_SECONDS, max_work=MAX_WORK)


def _engine(s: Any, pid: str, data: bool = False, **kw: Any) -> Engine:
    """The check's engine over the call (``pid``: how ``pl.program_id`` reads), data-free
    (``data``: following the values, for indices loaded from memory the kernel writes),
    recording what it finds, within the check's step, time and work bounds."""
    return Engine(
        s,
        data=data,
        strict=False,
        program_id=pid,
        limits=_LIMITS,
        log_limit=0,
        log_tally=False,
        max_races=16,
        **kw,
    )


def _guarded(work: Callable[[], Any]) -> Any:
    """``work()``, or None where the engine could not run it (``_FAILED`` says why when
    it was not the engine's own SimError: what it cannot make sense of, JAX's rules have
    said)."""
    _FAILED.clear()
    try:
        return work()
    except SimError:
        return None
    except MemoryError:
        _FAILED.append("it ran out of memory")
        return None
    except Exception as e:  # noqa: BLE001 - the check never fails on what it cannot judge
        _FAILED.append(f"it stopped on {type(e).__name__}")
        return None


def _run(s: Any, pid: str, **kw: Any) -> Outcome | None:
    """One run of the engine (the engine's own schedule)."""
    return _guarded(lambda: _engine(s, pid, **kw).run())


#: elements (over every device) the check follows values for at most, where an index is
#: loaded from memory the kernel writes (it then holds every buffer's values)
MAX_FOLLOWED = 1 << 22


#: Schedules the check explores at most, and thread-steps over all of them: the bounds
#: that decide how far it goes (the same on every machine, whatever its load).
MAX_SCHEDULES = 500
MAX_EXPLORE_STEPS = 100_000
#: Seconds the whole exploration may take: only a last resort (it says it was time).
EXPLORE_SECONDS = 300.0


def _explore(s: Any, prep: Prepared, data: bool = False) -> Any:
    """Every schedule that matters (:mod:`mpmd_lab.engine.explore`): which signals each
    semaphore wait saw, which of two competing waits went first, which phase each barrier
    arrival joined, where each semaphore read fell (``data``: following the values;
    ``prep``: the call as every run shares it). None where the engine could not run."""
    from mpmd_lab.engine.explore import explore

    return _guarded(
        lambda: explore(
            lambda chooser: _engine(s, "grid", data, chooser=chooser, prepared=prep),
            max_runs=MAX_SCHEDULES,
            max_steps=MAX_EXPLORE_STEPS,
            max_seconds=EXPLORE_SECONDS,
        )
    )


class _PlanNames:
    """What the check reads off its plan's statements in one pass: whether every name
    resolved (``ok``), per program the names its statements read refs by (``used``: a
    statement's refs, a view's source, what its expressions load) and the statements
    that read a semaphore (``reads``: by the plan's flat index, the engine's, with the
    names they read; None where the call has no semaphore), whether any statement's
    expressions load or read (``loads``) and whether a view bitcasts (``bitcast``: an
    argument's transform or a ``let``'s)."""

    __slots__ = ("ok", "used", "reads", "loads", "bitcast")

    def __init__(self, ctx: Ctx) -> None:
        self.ok = True
        self.loads = False
        self.used: list[set[str] | None] = []
        c = ctx.s.call
        sems = any(isinstance(v, SemaphoreScratch) for v in c.scratch.values())
        bitcast = any(t.REINTERPRETS for a in c.args for t in a.transforms)
        reads: list[dict[int, tuple[str, ...]]] = []
        for p in ctx.programs:
            used: set[str] = set()
            found: dict[int, tuple[str, ...]] = {}
            for st in p.stmts:
                if not st.ok:
                    self.ok = False
                if not bitcast and type(st.node) is Let:
                    bitcast = any(t.REINTERPRETS for t in st.node.transforms)
                for b in st.refs.values():
                    used.add(b.name)
                if st.loads:
                    self.loads = True
                    used.update(st.loads)
                if sems:
                    names = read_names(st.node, exprs=bool(st.loads))
                    if names:
                        found[st.index] = names
            self.used.append(used)
            reads.append(found)
        self.reads = reads if sems else None
        self.bitcast = bitcast


def _sem_reads(ctx: Ctx) -> list[dict[int, tuple[str, ...]]] | None:
    """Per program, its statements that read a semaphore (by the plan's flat index: the
    engine's) and the names they read: what the exploration makes choices of; None
    where the call has no semaphore (:class:`_PlanNames`)."""
    return _PlanNames(ctx).reads


def _merge(s: Any, gpu: Outcome, ex: Any) -> dict[int, Any]:
    """The races and deadlock every explored run found, into the first run's outcome
    ``gpu``; id(race or deadlock list) -> its witness."""
    if not ex.races and ex.deadlock is None and not ex.leftover:
        return {}  # (nothing found in any run: nothing to merge or witness)
    from mpmd_lab.validate.witness import deadlock_witness, race_witness

    out: dict[int, Any] = {}
    have = {(r.first.path, r.second.path): r for r in gpu.log.races}
    found = []
    for race, sched, _pts in ex.races:
        key = (race.first.path, race.second.path)
        if key in have or (key[1], key[0]) in have:
            old = have.get(key) or have[(key[1], key[0])]
            out[id(old)] = race_witness(race, sched, s)
            continue
        found.append(race)
        out[id(race)] = race_witness(race, sched, s)
    gpu.log.races[:0] = found  # (schedule-dependent races first: the first run missed them)
    if ex.deadlock is not None:
        dl_out, sched, _pts = ex.deadlock
        if not gpu.deadlock:
            gpu.deadlock = dl_out.deadlock
            gpu.signals = dl_out.signals
        out[id(gpu.deadlock)] = deadlock_witness(dl_out, sched)
    # (a schedule that ends with a semaphore not zero is an imbalance even where
    # another schedule deadlocks)
    seen = {(lab, path) for lab, _, path in gpu.leftover}
    for lab, v, path in ex.leftover:
        if (lab, path) not in seen:
            gpu.leftover.append((lab, v, path))
    return out


def _not_run(ctx: Ctx) -> None:
    """Say when the engine gave up on something other than a rule's error (never pass
    silently)."""
    if _FAILED:
        ctx.add(
            "SYNC_NOT_CHECKED",
            "call.programs",
            f"the synchronisation check could not run this call ({_FAILED[0]}): races, "
            "deadlocks and out-of-bounds indices are not checked",
            severity="warning",
        )


def _uses_pid(ctx: Ctx) -> bool:
    """Whether a program with more than one block evaluates pl.program_id."""
    for prog in ctx.programs:
        mesh = ctx.s.call.programs[prog.index].mesh
        if math.prod(mesh.grid.values()) <= 1:
            continue
        for st in prog.stmts:
            node = st.node
            exprs = list(node.exprs()) if hasattr(node, "exprs") else []
            for b in st.refs.values():
                # (once per view, from its source's answer: linear in a chain of views)
                if ctx.r.first_step(b, "program_id", _uses_program_id) is not None:
                    return True
            # (the model's own fields: a failing getattr goes through pydantic's
            # __getattr__ and raises, once per statement)
            if vars(node).get("transforms"):
                for t in node.transforms:
                    exprs.extend(t.exprs())
            if any("program_id" in e.calls() for _, e in exprs):
                return True
    return False


def _uses_program_id(t: Any) -> bool | None:
    """True where the transform evaluates ``pl.program_id`` (None: it does not)."""
    return True if t.uses_call("program_id") else None


# ---------------------------------------------------------------- lookups


#: the last check's statements by path: (its plan's programs, path -> statement), one
#: pair (read and replaced whole)
_BY_PATH: list[tuple[Any, dict]] = [(None, {})]


def _stmt(ctx: Ctx, path: str) -> Stmt | None:
    """The statement at ``path`` (the engine's text path)."""
    try:
        key = parse_path(path)
    except ValueError:
        return None
    programs, by_path = _BY_PATH[0]
    if programs is not ctx.programs:  # (indexed once per check: the plan's own list)
        by_path = {st.path: st for p in ctx.programs for st in p.stmts}
        _BY_PATH[0] = (ctx.programs, by_path)
    return by_path.get(key)


def _binding(ctx: Ctx, f: Any) -> Binding | None:
    st = _stmt(ctx, f.stmt)
    return None if st is None or not f.field else st.refs.get(f.field)


def _program_mesh(ctx: Ctx, path: str) -> Any:
    p = int(path.split("[", 1)[1].split("]", 1)[0]) if path.startswith("call.programs[") else 0
    return ctx.s.call.programs[p].mesh


# ---------------------------------------------------------------- out of bounds


def _box(region: Any, f: Any, sizes: dict[str, int]) -> list[tuple[int, int]]:
    """Each base dim's access range for the actor of a finding."""
    env = E.Env(f.values, sizes, f.pids)
    out = []
    for d in region:
        start = d.start
        if d.axis is not None:
            kind, name = d.axis
            if kind == "block":
                idx = f.values.get(name, 0)
            elif kind == "pid":
                idx = f.pids[name] if name < len(f.pids) else 0
            else:
                try:
                    idx = name.eval(env)
                except E.ExprError:
                    idx = 0
            start += idx * d.stride
        out.append((start, start + d.size * max(1, d.step)))
    return out


def _root(ctx: Ctx, b: Binding) -> list[int] | None:
    shape = ctx.root_shape(b)
    if shape is None:
        return None
    root = list(shape)
    o = b.origin[0] if b.origin else ""
    if (
        ctx.s.device_mesh
        and ctx.s.run.shard_map is False
        and root
        and not o.startswith(("out:", "scratch:"))
    ):
        root[0] *= ctx.s.num_devices  # no shard_map: the kernel sees the global array
    return root


def _interp_message(kind: str, box: list, info: Any, root: tuple[int, ...]) -> str:
    """The GPU interpreter's out-of-bounds message (its allocation key elided): the access
    range per base dim (an integer-indexed dim as its index), and the buffer's shape."""
    shown = set(info.view_dims) if info.view_dims is not None else set(range(len(box)))
    parts = [
        f"slice({lo}, {hi}, {max(1, r.step)})" if k in shown else str(lo)
        for k, ((lo, hi), r) in enumerate(zip(box, info.region, strict=True))
    ]
    rng = ", ".join(parts) + ("," if len(parts) == 1 else "")
    access = f"[Access(range=({rng}), permutation=None)]"
    if kind == "r":
        return (
            f"Out-of-bounds read of HostAllocationKey(...): reading {access} but buffer has "
            f"shape {root!r}."
        )
    return (
        f"Out-of-bounds swap of HostAllocationKey(...): swapping {access} but buffer has "
        f"shape {root!r} ."
    )


def _where(ctx: Ctx, f: Any) -> str:
    """``b=1, dev=2, s=3``: the coordinates (and loop variables) of a finding's actor."""
    mesh = _program_mesh(ctx, f.stmt)
    names = list(mesh.grid) + list(mesh.cluster)
    if mesh.threads is not None and mesh.threads.name:
        names.append(mesh.threads.name)
    if ctx.s.device_mesh and ctx.s.num_devices > 1:
        names += list(ctx.s.device_mesh)
    names += [k for k in f.values if k not in names and k not in (ctx.s.device_mesh or {})]
    shown = [f"{k}={f.values[k]}" for k in names if k in f.values]
    return ", ".join(shown) or "the only block"


def _oob_diag(ctx: Ctx, f: Any, stage_code: str, stage: str, note: str = "") -> None:
    """One out-of-bounds finding as today's diagnostics say it."""
    b = _binding(ctx, f)
    static = next(
        (n for n, p in ctx.deferred if n.code == "OOB_INDEX" and p == f.path), None
    )  # a static integer index: the view's own note
    message = f.message
    jax_message = None
    fix = None
    got = _access_box(ctx, f)
    if got is not None and b is not None and b.info is not None:
        box, root, region = got
        jax_message = _interp_message(f.access or "r", box, b.info, tuple(root))
        bad = next((k for k, (lo, hi) in enumerate(box) if lo < 0 or hi > root[k]), None)
        if static is not None:
            message = static.message
        elif bad is not None:
            what = "reads" if f.access == "r" else "writes"
            message = (
                f"in block {_where(ctx, f)} this view {what} elements "
                f"[{box[bad][0]}, {box[bad][1]}) of dimension {bad} of its ref, which has "
                f"only {root[bad]}; JAX does not check block-indexed slices inside a kernel"
            )
            mesh = _program_mesh(ctx, f.stmt)
            fix = _grid_fix(ctx, f.stmt, region[bad], root[bad], mesh)
    elif static is not None:
        message = static.message
    ctx.add(
        stage_code,
        f.path,
        message + note,
        jax_message=jax_message if stage_code in ("OOB_READ", "OOB_WRITE") else None,
        stage=stage,
        fix=fix,
    )


def _access_box(ctx: Ctx, f: Any) -> tuple[list[tuple[int, int]], list[int], Any] | None:
    """An out-of-bounds finding's access range per dim of its buffer (``_box``), the
    buffer's shape and its view's region, None where the region is not known (a
    gather, a bitcast)."""
    b = _binding(ctx, f)
    if b is None or b.info is None or b.info.region is None:
        return None
    root = _root(ctx, b)
    if root is None or len(root) != len(b.info.region):
        return None
    mesh = _program_mesh(ctx, f.stmt)
    sizes = {**(ctx.s.device_mesh or {}), **mesh.grid, **mesh.cluster}
    return _box(b.info.region, f, sizes), root, b.info.region


def _outside_buffer(ctx: Ctx, f: Any) -> bool:
    """Whether an out-of-bounds finding's access leaves its buffer, which JAX's GPU
    interpreter checks (not the view: an index outside a view that stays inside the
    buffer reads or writes the buffer's other elements there, and it raises nothing);
    True where the range is not known."""
    got = _access_box(ctx, f)
    if got is None:
        return True
    box, root, _ = got
    return any(lo < 0 or hi > n for (lo, hi), n in zip(box, root, strict=True))


def _grid_fix(ctx: Ctx, stmt_path: str, d: Any, extent: int, mesh: Any) -> Fix | None:
    """Size the grid axis to the data: as many blocks as fit in the dimension."""
    if d.axis is None or d.axis[0] not in ("block", "pid"):
        return None
    name = d.axis[1]
    if d.axis[0] == "pid":
        grid = list(mesh.grid)
        if not isinstance(name, int) or name >= len(grid):
            return None
        name = grid[name]
    if name not in mesh.grid or d.start != 0 or d.step != 1 or not d.stride:
        return None
    if d.stride < d.size:
        return None
    n = (extent - d.size) // d.stride + 1
    if n < 1 or n == mesh.grid[name]:
        return None
    prog = stmt_path.split(".body[")[0]
    return Fix(
        description=f"run {n} blocks along {name!r} (as many as fit in {extent} elements)",
        edits=[Edit(op="replace", path=f"{prog}.mesh.grid.{name}", value=n)],
    )


#: what an out-of-bounds finding inside its buffer adds in the GPU interpreter's mode
_INSIDE = (
    " (the access stays inside the buffer: JAX's GPU interpreter checks accesses against "
    "the buffer, not the view, so it runs the call and does not see this)"
)


def _interp_findings(ctx: Ctx, out: Outcome) -> set[str]:
    """Out-of-bounds accesses as JAX's interpreter meets them; the paths reported."""
    # (a semaphore's index is no access the interpreter checks: it cannot run semaphores)
    oob = [f for f in out.findings if f.code == "OOB_INDEX" and f.access]
    if not oob:
        return set()
    seen: set[str] = set()
    if ctx.s.run.interpret == "gpu":
        # the interpreter stops at the first access outside its buffer; one outside its
        # view but inside the buffer it runs (reading or writing the buffer there): as on
        # a GPU, an error of the kernel JAX does not see
        for f in oob:
            if _outside_buffer(ctx, f):
                _oob_diag(ctx, f, "OOB_READ" if f.access == "r" else "OOB_WRITE", "interpret")
                seen.add(f.path)
                break
            if f.path not in seen:
                seen.add(f.path)
                _oob_diag(ctx, f, "OOB_INDEX", "gpu-run", note=_INSIDE)
        return seen
    for f in oob:
        if f.path not in seen:
            seen.add(f.path)
            _oob_diag(ctx, f, "OOB_INDEX", "interpret")
    return seen


def _gpu_findings(ctx: Ctx, out: Outcome, reported: set[str], pid_bug: bool) -> None:
    seen = set(reported)
    for f in out.findings:
        if f.path in seen:
            continue
        seen.add(f.path)
        if f.code == "REMOTE_DEVICE_OOB":
            ctx.add("REMOTE_DEVICE_OOB", f.path, f.message)
        elif f.code == "OOB_INDEX" and not f.access:  # a semaphore index outside its array
            ctx.add(
                "OOB_INDEX",
                f.path,
                f"in {_where(ctx, f)}: {f.message}; JAX checks a semaphore index neither at "
                "trace nor in the lowering, and its interpreter cannot run semaphores: on a "
                "GPU the signal or wait goes to memory outside the semaphore array",
                stage="gpu-run",
            )
        elif f.code == "OOB_INDEX" and pid_bug:
            _oob_diag(
                ctx,
                f,
                "OOB_INDEX",
                "gpu-run",
                note=" (on a GPU: JAX's GPU interpreter gives pl.program_id 0 in every block, "
                "so it does not see this)",
            )


# ---------------------------------------------------------------- races


def _who(a: Any, b: Any, ctx: Ctx) -> tuple[str, str]:
    """The two actors of a race named by what tells them apart: ``device 3`` and
    ``device 0``, ``b=1`` and ``b=0``, a thread and its own async copies."""
    mesh = ctx.s.call.programs[a.program].mesh
    grid, cluster = list(mesh.grid), list(mesh.cluster)
    tname = mesh.threads.name if mesh.threads else None
    pa: list[str] = []
    pb: list[str] = []
    if a.device != b.device:
        pa.append(f"device {a.device}")
        pb.append(f"device {b.device}")
    for names, va, vb in ((grid, a.grid, b.grid), (cluster, a.cluster, b.cluster)):
        for n, x, y in zip(names, va, vb, strict=False):
            if x != y:
                pa.append(f"block {n}={x}")
                pb.append(f"block {n}={y}")
    if a.thread != b.thread:
        pa.append(f"thread {tname or 'thread'}={a.thread}")
        pb.append(f"thread {tname or 'thread'}={b.thread}")
    if a.agent != b.agent:
        copies, thread = ("its async copies", "the thread") if not pa else ("", "")
        pa.append(copies if a.agent else thread)
        pb.append(copies if b.agent else thread)
    one, two = ", ".join(x for x in pa if x), ", ".join(x for x in pb if x)
    return one or "one executor", two or "another"


#: how a race's access is said (``Access.kind``)
_VERB = {"write": "writes", "read": "reads", "atomic": "atomically updates"}


def _race_diag(
    ctx: Ctx, race: Any, code: str, interpreter: bool, fix: Fix | None, witness: Any = None
) -> None:
    from mpmd_lab.validate.witness import region

    first, second = race.first, race.second
    p1 = f"{first.path}.{first.field}" if first.field else first.path
    p2 = f"{second.path}.{second.field}" if second.field else second.path
    a, b = _who(first.actor, second.actor, ctx)
    kind = "Write/write" if race.kind == "write-write" else "Read/write"
    loc = race.location
    where = region(ctx.s, loc.buffer, race.spans)
    on = loc.describe().partition(" on ")[2]
    msg = (
        f"{kind} race on {where}{' (output)' if loc.kind == 'output' else ''} on {on}: "
        f"{a} {_VERB[first.kind]} it ({first.where}) and {b} {_VERB[second.kind]} it "
        f"({second.where}) with nothing ordering them"
        f"{f' (through {p2})' if p1 == p2 else f' ({p1} and {p2})'}"
    )
    if witness is not None:
        msg += f". {witness['explain']}"
    if interpreter:  # JAX's GPU interpreter runs the call with detect_races: it says so
        ctx.add(code, p2, msg, jax_message="RACE DETECTED", jax_type="RuntimeError", fix=fix)
    else:
        ctx.add(code, p2, msg, stage="gpu-run", fix=fix)
    _attach(ctx, witness)


def _attach(ctx: Ctx, witness: Any) -> None:
    """Give the last diagnostic its witness (the schedule that shows it, as data)."""
    if witness is not None:
        ctx.diags[-1] = ctx.diags[-1].model_copy(update={"witness": witness})


def _threads_only(a: Any, b: Any) -> bool:
    """Two actors of one block of one device (warpgroups, or a thread and its copy)."""
    return (a.device, a.grid, a.cluster) == (b.device, b.grid, b.cluster)


def _races(
    ctx: Ctx, interp: Outcome, gpu: Outcome, fix: Fix | None, witnesses: dict | None = None
) -> None:
    """Races as errors, whatever ``detect_races`` says (a race is the kernel's).

    RACE_DETECTED: what a race detector over happens-before finds in a kernel that
    synchronises (semaphores, barriers, async copies and their waits), or whenever the
    scenario asks JAX's GPU interpreter to look (``detect_races``: the interpreter's first
    race, with pl.program_id 0 as it has it; JAX's own message where it runs the call).
    RACE: overlapping accesses in a kernel that orders nothing at all."""
    if not gpu.log.races and not interp.log.races:
        return  # (nothing to say: the fix and the code are for races)
    s = ctx.s
    code = "RACE_DETECTED" if synchronises(s) else "RACE"
    done: set[tuple[str, str]] = set()
    if s.run.detect_races and s.run.interpret == "gpu" and interp.log.races:
        r = interp.log.races[0]
        runs = not any(d.code in INTERP_CANNOT for d in ctx.diags)
        _race_diag(ctx, r, "RACE_DETECTED", runs, fix)
        done.add((r.first.path, r.second.path))
        code = "RACE_DETECTED"
    # a pair of blocks or devices before a pair that differs only in the warpgroup: more
    # writers never hide the race the blocks have
    for r in sorted(gpu.log.races, key=lambda r: _threads_only(r.first.actor, r.second.actor)):
        key = (r.first.path, r.second.path)
        if key in done or (key[1], key[0]) in done:
            continue
        if len(done) >= MAX_RACES:
            break
        done.add(key)
        _race_diag(ctx, r, code, False, fix, (witnesses or {}).get(id(r)))


def _wait_fix(ctx: Ctx, out: Outcome) -> Fix | None:
    """A signal nobody waits for: wait for it right after sending it (the ring idiom:
    each device waits on its own semaphore, which its neighbour signals)."""
    for _label, _value, path in out.leftover:
        st = _stmt(ctx, path)
        if st is None or not isinstance(st.node, SemaphoreSignal):
            continue
        base = st.refs.get("sem")
        name = base.origin[0].split(":", 1)[-1] if base is not None and base.origin else ""
        if out.waits.get(name):
            continue  # it is waited for: the values, not a missing wait, are wrong
        parent, _, idx = path.rpartition("[")
        at = f"{parent}[{int(idx[:-1]) + 1}]"
        wait: dict[str, Any] = {"op": "semaphore_wait", "sem": st.node.sem}
        inc = st.node.inc
        if inc != 1:
            wait["value"] = inc
        return Fix(
            description=f"wait for {st.node.sem} after signalling it (at {path}): the signal "
            "orders the writes before it, but only a wait orders the reads after it",
            edits=[Edit(op="add", path=at, value=wait)],
        )
    return None


# ---------------------------------------------------------------- deadlocks, balance


def _deadlock(ctx: Ctx, out: Outcome, witnesses: dict | None = None) -> None:
    if not out.deadlock:
        return
    d = deadlock_diagnostic(out.deadlock, stage="gpu-run")
    witness = (witnesses or {}).get(id(out.deadlock))
    msg = d.message if witness is None else f"{d.message}. {witness['explain']}"
    ctx.add(d.code, d.path, msg, fix=_signal_fix(ctx, out))
    _attach(ctx, witness)


def _signal_fix(ctx: Ctx, out: Outcome) -> Fix | None:
    """A wait whose signals went to another semaphore of the same array: signal the one
    it waits on (when that view is in scope at the signal)."""
    blocked = next((b for b in out.deadlock if b.kind == "semaphore" and b.sem), None)
    if blocked is None:
        return None
    wait = _stmt(ctx, blocked.path)
    if wait is None:
        return None
    want = wait.node.sem
    bw = wait.refs.get("sem")
    for path in sorted(out.signals.get(blocked.sem, ())):
        sig = _stmt(ctx, path)
        if sig is None or sig.node.sem == want:
            continue
        if bw is not None and bw.kind == "view":
            body = bw.path[:-1]
            if not (sig.path[: len(body)] == body and bw.stmt < sig.index):
                fix = _signal_view_fix(ctx, sig, bw, blocked.path)
                if fix is None:
                    continue
                return fix
        return Fix(
            description=f"signal {want} (what {blocked.path} waits on), not {sig.node.sem}",
            edits=[Edit(op="replace", path=f"{path}.sem", value=want)],
        )
    return None


def _signal_view_fix(ctx: Ctx, sig: Stmt, bw: Binding, wait_path: str) -> Fix | None:
    """The wait's view is named only after the signal (``sent = sems.at[0]`` signalled,
    then ``arrived = sems.at[i]`` waited on): give the signal's own view the transforms
    of the wait's (when both are views of the same semaphore array, named in one body)."""
    bs = sig.refs.get("sem")
    if bs is None or bs.kind != "view" or bs.origin != bw.origin:
        return None
    if bs.path[:-1] != bw.path[:-1]:
        return None  # a view named in another body may not see the wait's loop variables
    waited, sent = get_path(ctx.s, bw.path), get_path(ctx.s, bs.path)
    if waited.transforms == sent.transforms:
        return None
    # (the wait's transforms in their JSON form, as the scenario's ``to_dict`` has them)
    want = [t.model_dump(mode="json", by_alias=True, exclude_none=False) for t in waited.transforms]
    return Fix(
        description=f"signal what {wait_path} waits on: {bs.name} = "
        f"{_view_text(waited)} (was {_view_text(sent)}), the same view as {bw.name}",
        edits=[Edit(op="replace", path=format_path((*bs.path, "transforms")), value=want)],
    )


def _view_text(let: Any) -> str:
    """A let's view as its label reads (``sems.at[i]``)."""
    return ".".join([let.ref, *(t.label() for t in let.transforms)])


def _leftover(ctx: Ctx, out: Outcome, fix: Fix | None) -> None:
    if not out.leftover:
        return
    groups: dict[str, list[tuple[str, int]]] = {}
    for label, value, path in out.leftover:
        groups.setdefault(path, []).append((label, value))
    keeping = _keeping_waits(ctx)
    kept = (
        f" (a semaphore_wait with decrement=False, as at {keeping[0]}, takes nothing off: "
        "what it waited for stays on the semaphore)"
        if keeping
        else ""
    )
    for path, items in list(groups.items())[:3]:
        shown = ", ".join(f"{lab} = {v}" for lab, v in items[:3])
        more = f" and {len(items) - 3} more" if len(items) > 3 else ""
        ctx.add(
            "SEMAPHORE_IMBALANCE",
            path or "call.scratch",
            f"semaphores are not zero when the kernel ends ({shown}{more}): the signals "
            f"sent at {path} outnumber the waits that take them off{kept}",
            severity="warning",
            fix=fix,
        )


def _keeping_waits(ctx: Ctx) -> list[str]:
    """The semaphore waits with decrement=False (they leave their value on the semaphore)."""
    return [
        format_path(st.path)
        for prog in ctx.programs
        for st in prog.stmts
        if isinstance(st.node, SemaphoreWait) and not st.node.decrement
    ]


# ---------------------------------------------------------------- big launches


def _corners(n: int) -> list[int]:
    """The first two and last two indices of an axis of ``n`` (closed form: any ``n``)."""
    return sorted({k for k in (0, 1, n - 2, n - 1) if 0 <= k < n})


def _sampled(ctx: Ctx, steps: int, pid_bug: bool, unlike: str | None = "") -> None:
    """Too big to run every actor: run the corners for indices and device ids, say so.

    ``unlike``: None when symmetry gave the synchronisation verdict (only the indices are
    then checked here), else why it could not (said in the warning)."""
    s = ctx.s
    sample: dict[int, list[tuple[int, ...]]] = {}
    for p, prog in enumerate(s.call.programs):
        shape = tuple(prog.mesh.grid.values())
        sample[p] = list(itertools.product(*(_corners(n) for n in shape)))[:256]
    devices = list(range(s.num_devices))
    if s.device_mesh:
        sizes = list(s.device_mesh.values())
        coords = itertools.product(*(_corners(n) for n in sizes))
        devices = []
        for c in coords:
            flat = 0
            for v, n in zip(c, sizes, strict=True):
                flat = flat * n + v
            devices.append(flat)
        devices = sorted(set(devices))[:64]
    gpu = _run(s, "grid", sample=sample, sample_devices=devices)
    failed = list(_FAILED)
    interp = _run(s, "zero", sample=sample, sample_devices=devices) if pid_bug else gpu
    plain = not synchronises(s)
    if gpu is not None:
        reported = _interp_findings(ctx, interp or gpu)
        _gpu_findings(ctx, gpu, reported, pid_bug)
        if plain and unlike is not None:  # nothing orders threads: a sampled race is one
            _races(ctx, interp or gpu, gpu, _wait_fix(ctx, gpu))
    exact = affine(ctx) and gpu is not None
    if failed:
        _FAILED[:] = failed
        _not_run(ctx)
    if unlike is None:
        return
    unchecked = (
        "races are checked only among those blocks and devices"
        if plain
        else "races, deadlocks and semaphore balance are not checked"
    )
    if gpu is not None and gpu.stopped:  # (a loop of 2**31 trips: the corners did not finish)
        unchecked += (
            f"; the run of those blocks and devices {gpu.stopped.replace('simulator', 'check')}"
            ": what comes after that point is not checked at all"
        )
    ctx.add(
        "SYNC_NOT_CHECKED",
        "call.programs",
        f"this call runs about {steps} thread-steps, more than the {MAX_STEPS} the static "
        "check runs; indices and device ids were checked at the first two and last two "
        "blocks and devices of every axis"
        + (
            ", which bounds them all (every index is affine in the axes)"
            if exact
            else " (an index with // or % may still go out of bounds in between)"
        )
        + f"; {unchecked} (simulate a smaller model of the call to check them all)"
        + (f"; symmetry does not reduce it: {unlike}" if unlike else ""),
        severity="warning",
    )


__all__ = ["MAX_ELEMENTS", "MAX_STEPS", "Footprint", "check_sync", "elements"]
