"""The execution engine: every actor runs its program's statement tree; a deterministic
scheduler interleaves them; happens-before judges every access.

**Actors.** One per device x block (grid point x cluster block) x warpgroup, numbered
in that order within a grid point; each runs its program's body as a generator
(loops and ``when`` nested, ``let`` re-bound per iteration). A statement is one step;
a blocking statement (``semaphore_wait``, ``barrier_wait``) yields until it can go on.
Each actor has a copy engine (*agent*) of its own for its async copies.

**Scheduler.** Rounds in lockstep: every active actor that can go on does one step,
in actor order. Grid points are admitted one at a time in C order (programs one
after another): the next one when every active actor has finished or is blocked. So a
kernel that never blocks runs exactly as before (per grid point, statement by
statement over devices, blocks and threads); one that blocks lets every runnable actor
progress; when nothing can progress and nothing is left to admit, the blocked actors
are deadlocked (reported, never a hang).

**Happens-before.** Vector clocks (:mod:`mpmd_lab.engine.clocks`): program order;
a signal before the wait that consumes it; a barrier phase's arrivals (async copies
landing, ``barrier_arrive``) before the ``barrier_wait`` on it; an async copy's issue
before its accesses, its accesses before the wait that completes it
(``barrier_wait``, ``wait_smem_to_gmem``); two copies of one thread's copy engine are
ordered only where the thread waited for the first before it issued the second.
``copy_smem_to_gmem`` sees this thread's writes only up to its last ``commit_smem``.
Every access is checked against the shadow memory (:mod:`mpmd_lab.engine.shadow`).

**Modes.** ``data=True`` runs the values (numpy, bit for bit as JAX's interpreters
where they run); ``data=False`` runs accesses only (no buffer is allocated): the
static check's mode, which also records what it finds (out-of-bounds views, device ids
outside the mesh) and goes on. ``sample`` runs only some grid points and devices
(the static check's closed form for huge launches): waits never block there, and only
the per-actor findings count.
"""

from __future__ import annotations

import itertools
import math
import time
from bisect import insort
from collections.abc import Callable
from operator import attrgetter
from types import SimpleNamespace
from typing import Any, NoReturn

import numpy as np
from mpmd_lab import expr as E
from mpmd_lab import sharding
from mpmd_lab.accesslog import DEFAULT_LIMIT, MAX_RACES, AccessLog, Actor, Location, runs_of
from mpmd_lab.diagnostics import Diagnostic, SimError
from mpmd_lab.dtypes import canonical, np_dtype
from mpmd_lab.engine.clocks import Clocks
from mpmd_lab.engine.shadow import Shadow
from mpmd_lab.engine.sync import (
    Barrier,
    BarrierArrival,
    BarrierWait,
    Semaphore,
    SemaphoreRead,
    SemaphoreWait,
    Wait,
)
from mpmd_lab.memory import Abstract, Base, Lay, Storage, View, host_value, uninitialized
from mpmd_lab.ops import (
    SYNC,
    BarrierScratch,
    ClusterBarrierScratch,
    Compute,
    CopyGmemToSmem,
    CopySmemToGmem,
    Let,
    Return,
    SemaphoreScratch,
)
from mpmd_lab.ops.control import statements_run, trip_count
from mpmd_lab.record import Record
from mpmd_lab.scenario import BufferArg, Scenario, ref_result_keys

#: Steps (one statement of one actor) a run may take.
MAX_STEPS = 1 << 21
#: Lets' views kept for every thread (``Engine._shared``) before they are forgotten:
#: each loop trip keys its own, and a run of MAX_STEPS would keep them all
MAX_SHARED = 4096
#: Actors a run may have.
MAX_ACTORS = 1 << 20


def step_estimate(s: Scenario) -> int:
    """Steps a run takes at least: actors x statements (a loop with static bounds counts
    its trips; one with dynamic bounds once)."""
    ctx = SimpleNamespace(s=s)  # static_value reads the meshes' sizes from it

    total = 0
    for prog in s.call.programs:
        m = prog.mesh
        actors = (
            s.num_devices
            * math.prod(m.grid.values())
            * math.prod(m.cluster.values())
            * (m.threads.count if m.threads else 1)
        )
        total += actors * statements_run(prog.body, ctx)
    return total


def synchronises(s: Scenario) -> bool:
    """Whether the call orders anything (a semaphore, a barrier, an async copy): races in
    it are then what a detector over happens-before finds (RACE_DETECTED), else RACE."""
    return any(_orders(list(p.body)) for p in s.call.programs)


def _orders(body: list[Any]) -> bool:
    """Whether a statement of ``body`` (nested bodies included) synchronises (a module
    function: a recursive closure is a reference cycle, left to the cycle collector)."""
    for st in body:
        ref_fields = getattr(st, "ref_fields", None)
        if ref_fields is not None:
            for _, _, acc in ref_fields():
                if acc == SYNC:
                    return True
        if isinstance(st, (CopyGmemToSmem, CopySmemToGmem)):
            return True
        if getattr(st, "BODY", False) and _orders(st.body):
            return True
    return False


class _Skip(Exception):
    """Data-free mode: this actor's statement is skipped (its finding is recorded)."""


class Limits(Record):
    """What one run may take: steps, seconds (None: no bound), actors, and view offsets
    indexed the slow way (a strided or copied view; None: no bound)."""

    __slots__ = ("max_steps", "max_seconds", "max_actors", "max_work")

    def __init__(
        self,
        max_steps: int = MAX_STEPS,
        max_seconds: float | None = None,
        max_actors: int = MAX_ACTORS,
        max_work: int | None = None,
    ) -> None:
        self.max_steps = max_steps
        self.max_seconds = max_seconds
        self.max_actors = max_actors
        self.max_work = max_work


class Finding(Record):
    """What the data-free mode found for one actor (an out-of-bounds view, a device id
    outside the mesh): where, and the actor's coordinates then. ``path``: the field that
    placed it (an index entry, a device id); ``stmt``: the statement's path; ``field``:
    the statement's field accessing it ("" for a signal); ``access``: "r", "w" or "";
    ``values``: axis indices and loop variables."""

    __slots__ = ("code", "path", "message", "stmt", "field", "access", "actor", "values", "pids")

    def __init__(
        self,
        code: str,
        path: str,
        message: str,
        stmt: str,
        field: str,
        access: str,
        actor: Actor,
        values: dict[str, int],
        pids: tuple[int, ...],
    ) -> None:
        self.code = code
        self.path = path
        self.message = message
        self.stmt = stmt
        self.field = field
        self.access = access
        self.actor = actor
        self.values = values
        self.pids = pids


class Blocked(Record):
    """A deadlocked actor: who, at which statement, waiting for what (``kind``
    "semaphore" or "barrier"; ``what``: the wait's description; ``sem``: the semaphore
    scratch it waits on)."""

    __slots__ = ("actor", "path", "kind", "what", "sem")

    def __init__(self, actor: Actor, path: str, kind: str, what: str, sem: str = "") -> None:
        self.actor = actor
        self.path = path
        self.kind = kind
        self.what = what
        self.sem = sem


class Outcome(Record):
    """What a run produced. ``leftover``: semaphores not zero at the end (label, value,
    path of a signal); ``stopped``: why a data-free run stopped early ("" when it ran to
    the end); ``signals`` / ``waits``: semaphore scratch name -> paths of the statements
    that signalled it / waited on it."""

    __slots__ = (
        "outputs",
        "log",
        "findings",
        "deadlock",
        "leftover",
        "notes",
        "error",
        "steps",
        "stopped",
        "memory",
        "used_pid",
        "signals",
        "waits",
        "unordered",
    )
    _unshown = ("memory",)

    def __init__(
        self,
        outputs: dict[str, np.ndarray] | None = None,
        log: AccessLog | None = None,
        findings: list[Finding] | None = None,
        deadlock: list[Blocked] | None = None,
        leftover: list[tuple[str, int, str]] | None = None,
        notes: list[str] | None = None,
        error: SimError | None = None,
        steps: int = 0,
        stopped: str = "",
        memory: dict[Location, Storage] | None = None,
        used_pid: bool = False,
        signals: dict[str, set[str]] | None = None,
        waits: dict[str, set[str]] | None = None,
    ) -> None:
        self.outputs = {} if outputs is None else outputs
        self.log = AccessLog() if log is None else log
        self.findings = [] if findings is None else findings
        self.deadlock = [] if deadlock is None else deadlock
        self.leftover = [] if leftover is None else leftover
        self.notes = [] if notes is None else notes
        self.error = error
        self.steps = steps
        self.stopped = stopped
        self.memory = {} if memory is None else memory
        self.used_pid = used_pid
        self.signals = {} if signals is None else signals
        self.waits = {} if waits is None else waits
        #: barriers whose arrivals joined a phase in an order the schedule chose
        self.unordered: list[str] = []


#: what a compiled statement is, for the engine's dispatch
_LET, _LOOP, _WHEN, _STMT = "let", "loop", "when", "stmt"
#: (exploring mode) the semaphore reads of the statement that follows (:class:`_ReadNode`)
_READ = "read"


class _Node(Record):
    """One statement of a compiled body: its flat pre-order index (as
    mpmd_lab.plan numbers statements), path, op and nested statements; ``flavor``:
    ``"let"``, ``"loop"``, ``"when"`` or ``"stmt"`` (any other op); ``steps``: a let's
    transforms with their field paths; ``chain``: the same, each with its compiled
    view (``TransformOp.compiled``), and ``shared``: where every transform has one and
    their expressions read no axis index (loop variables at most), the names they read
    (the let's view is then the same for every thread: ``Engine._shared``), else None
    (both made at the let's first run)."""

    __slots__ = (
        "index",
        "path",
        "op",
        "children",
        "flavor",
        "steps",
        "chain",
        "shared",
        "int32",
    )

    def __init__(
        self,
        index: int,
        path: str,
        op: Any,
        children: tuple[_Node, ...] = (),
        python: frozenset[str] = frozenset(),
    ) -> None:
        self.index = index
        self.path = path
        self.op = op
        self.children = children
        self.steps: tuple[tuple[Any, str], ...] = ()
        self.chain: tuple[tuple[Any, Any, str], ...] | None = None
        self.shared: tuple[str, ...] | None = None
        if type(op) is Let:  # (no subclasses; a failing isinstance is a slow ABC check)
            self.flavor = _LET
            self.steps = _steps(op.transforms, path)
        else:
            kind = op.kind
            self.flavor = kind if kind in (_LOOP, _WHEN) else _STMT
        #: (a loop) whether JAX counts its trips in int32 (``Loop.counts_in_int32``;
        #: ``python``: the unrolled loops' variables around it)
        self.int32 = self.flavor is _LOOP and op.counts_in_int32(python)


class _ReadNode(_Node):
    """(Exploring mode) before a statement that reads semaphores: its reads (``names``),
    held as choices of the scheduler (``Engine._read_points``)."""

    __slots__ = ("names",)

    def __init__(self, node: _Node, names: tuple[str, ...]) -> None:
        super().__init__(node.index, node.path, node.op)
        self.flavor = _READ
        self.names = names


def _with_reads(nodes: tuple[_Node, ...], reads: dict[int, tuple[str, ...]]) -> tuple[_Node, ...]:
    """``nodes`` with a :class:`_ReadNode` before each statement that reads semaphores
    (``reads``: by flat index); the same nodes where none does."""
    out: list[_Node] = []
    for node in nodes:
        names = reads.get(node.index)
        if names:
            out.append(_ReadNode(node, names))
        if node.children:
            node.children = _with_reads(node.children, reads)
        out.append(node)
    return tuple(out)


def _steps(transforms: list[Any], path: str) -> tuple[tuple[Any, str], ...]:
    """A transform stack with each transform's field path."""
    return tuple((t, f"{path}.transforms[{i}]") for i, t in enumerate(transforms))


def compile_body(
    body: list[Any], base: str, counter: list[int], python: frozenset[str] = frozenset()
) -> tuple[tuple[_Node, ...], bool]:
    """The statement tree with resolve's flat indices; False once a ``return`` ends it.
    ``python``: the variables of the unrolled loops around ``body``."""
    out: list[_Node] = []
    for j, st in enumerate(body):
        path = f"{base}[{j}]"
        index = counter[0]
        counter[0] += 1
        children: tuple[_Node, ...] = ()
        going = True
        if getattr(st, "BODY", False):
            inner = python
            if st.kind == _LOOP:  # (its variable: a Python int in an unrolled loop only)
                inner = python | {st.var} if st.via == "python" else python - {st.var}
            children, going = compile_body(st.body, f"{path}.body", counter, inner)
        out.append(_Node(index, path, st, children, python))
        if isinstance(st, Return) or not going:
            return tuple(out), False
    return tuple(out), True


def _unravel(sizes: tuple[int, ...], d: int) -> tuple[int, ...]:
    """Device ``d``'s coordinates on a mesh of ``sizes`` (C order: the last axis varies
    fastest)."""
    if not sizes:
        return ()
    if not 0 <= d < math.prod(sizes):  # (numpy's error, as unravel_index raises it)
        return tuple(int(i) for i in np.unravel_index(d, sizes))
    out = []
    for n in reversed(sizes):
        d, i = divmod(d, n)
        out.append(i)
    return tuple(reversed(out))


class Prepared:
    """What every run over one scenario shares, made once: the parameters' bases and
    transform steps, each program's compiled body with its mesh, the names its
    statements read refs by (``used``: the data-free run makes only the views some
    statement names), its statements that read a semaphore (``reads``: each a choice of
    an exploring run), whether a transform bitcasts (``bitcast``), the devices'
    coordinates and the barriers. An :class:`Engine` makes its own where it is given
    none; the static check makes one per check and hands it to each of its runs, with
    ``used``, ``reads`` and ``bitcast`` read off its plan (None: found here; ``data``:
    only runs following values use it, which make every view: no names are gathered)."""

    __slots__ = (
        "s", "mesh", "ndev", "devices", "params", "inputs", "param_steps", "scratch",
        "programs", "used", "reads", "bitcast", "dev_coords", "nbars", "_infos",
    )  # fmt: skip

    def __init__(
        self,
        scenario: Scenario,
        used: list[set[str] | None] | None = None,
        reads: list[dict[int, tuple[str, ...]]] | None = None,
        bitcast: bool | None = None,
        data: bool = False,
    ) -> None:
        s, c = scenario, scenario.call
        self.s = s
        #: the device mesh (axis -> size), the number of devices and every device
        self.mesh = dict(s.device_mesh or {})
        self.ndev = ndev = s.num_devices
        self.devices = list(range(ndev))
        self._bind()
        self.scratch = dict(c.scratch)
        sems = any(isinstance(v, SemaphoreScratch) for v in c.scratch.values())
        #: per program: its mesh's facts and compiled body (``Engine._plan``'s info)
        self.programs: list[dict[str, Any]] = []
        # the names some statement reads a ref by: the data-free run skips the views
        # nobody names (each costs an offsets array per actor: 1,000 of them were most
        # of a check); what a view alone can raise is a trace error, which the rules
        # report and which stops the check before the run (following values, every
        # view is made: no names are needed)
        if used is None:
            used = [None if data else _names_used(p.body) for p in c.programs]
        self.used = used
        known = bitcast is not None
        if not known:
            bitcast = any(t.REINTERPRETS for a in c.args for t in a.transforms)
        for p, prog in enumerate(c.programs):
            m = prog.mesh
            grid, cluster = dict(m.grid), dict(m.cluster)
            nthreads = m.threads.count if m.threads else 1
            tname = m.threads.name if m.threads and m.threads.name else None
            sizes = {**self.mesh, **grid, **cluster}
            if tname:
                sizes[tname] = nthreads
            nodes, _ = compile_body(list(prog.body), f"call.programs[{p}].body", [0])
            if not known:
                bitcast = bitcast or _bitcasts(nodes)
            self.programs.append(
                {
                    "p": p,
                    "grid": grid,
                    "cluster": cluster,
                    "ncl": math.prod(cluster.values()),
                    "nthreads": nthreads,
                    "tname": tname,
                    "nodes": nodes,
                    "used": self.used[p],
                    "sizes": sizes,
                    "grid_shape": tuple(grid.values()),
                }
            )
        #: whether a view bitcasts (the data-free mode then keeps every byte of its views)
        self.bitcast = bool(bitcast)
        if not sems:
            self.reads: list[dict[int, tuple[str, ...]]] = [{} for _ in c.programs]
        elif reads is not None:
            self.reads = reads
        else:
            self.reads = [_sem_reads(info["nodes"]) for info in self.programs]
        axes = tuple(self.mesh.values())
        self.dev_coords = [_unravel(axes, d) for d in range(ndev)] if ndev <= 1 << 16 else None
        self.nbars = sum(
            sc.num_barriers for sc in c.scratch.values() if isinstance(sc, BarrierScratch)
        )
        self._infos: dict[tuple[bool, bool], list[dict[str, Any]]] = {}

    def _bind(self) -> None:
        """Every name the kernel is given: the arguments' buffers (with their
        transforms), the captures, the outputs and the scratch, each as its base."""
        s, c = self.s, self.s.call
        inputs: dict[str, Base] = {}
        params: dict[str, tuple[Base, list[Any], str]] = {}
        shard = s.device_mesh is not None and s.run.shard_map is not False
        dtypes_np: dict[str, Any] = {}  # dtype name -> numpy dtype, once per name

        def input_base(buf: str, path: str) -> Base:
            base = inputs.get(buf)
            if base is None:
                b = s.buffers.get(buf)
                if b is None:
                    raise SimError("XREF_UNKNOWN_BUFFER", path, f"no buffer {buf!r}")
                dt = dtypes_np.get(b.dtype)
                if dt is None:  # as jax.device_put makes it (no x64)
                    dt = dtypes_np[b.dtype] = np_dtype(canonical(b.dtype))
                # no shard_map: the kernel closes over the global value
                shape = tuple(b.shape) if shard else tuple(s.global_shape(buf))
                base = inputs[buf] = Base("input", buf, "GMEM", dt, shape)
            return base

        for i, a in enumerate(c.args):
            path = f"call.args[{i}]"
            if isinstance(a, BufferArg):
                params[a.param] = (input_base(a.buffer, path), a.transforms, path)
            else:
                for j, buf in enumerate(a.tuple):
                    params[f"{a.param}[{j}]"] = (input_base(buf, path), a.transforms, path)
        for i, cap in enumerate(c.captures):
            params[cap.name] = (input_base(cap.buffer, f"call.captures[{i}]"), [], "")
        self.inputs = inputs
        self.param_steps = {
            name: _steps(transforms, ppath) for name, (_, transforms, ppath) in params.items()
        }
        for name, o in c.outputs.items():
            base = Base("output", name, "GMEM", np_dtype(o.dtype), tuple(o.shape))
            params[name] = (base, [], f"call.outputs.{name}")
        for name, sc in c.scratch.items():
            kind = sc.KIND
            if kind in ("barrier", "cluster_barrier"):
                kind = "barrier"
            elif kind != "semaphore":
                # tiling and swizzle change the layout in memory, not what the kernel indexes
                base = Base("scratch", name, sc.memory_space, np_dtype(sc.dtype), tuple(sc.shape))
                params[name] = (base, [], f"call.scratch.{name}")
                continue
            base = Base(kind, name, sc.memory_space, np.dtype(np.int32), tuple(sc.shape))
            params[name] = (base, [], f"call.scratch.{name}")
        self.params = params

    def infos(self, data: bool, reading: bool) -> list[dict[str, Any]]:
        """Each program's info for a run: following values (``data``: every view is
        made) or not, and exploring semaphore reads (``reading``: a choice before each
        statement that reads one, on a body of its own)."""
        reading = reading and any(self.reads)
        if not data and not reading:
            return self.programs
        key = (data, reading)
        got = self._infos.get(key)
        if got is None:
            got = []
            for p, info in enumerate(self.programs):
                nodes = info["nodes"]
                if reading and self.reads[p]:
                    prog = self.s.call.programs[p]
                    nodes, _ = compile_body(list(prog.body), f"call.programs[{p}].body", [0])
                    nodes = _with_reads(nodes, self.reads[p])
                got.append({**info, "nodes": nodes, "used": None if data else self.used[p]})
            self._infos[key] = got
        return got


def _bitcasts(nodes: tuple[_Node, ...]) -> bool:
    """Whether a ``let`` of a compiled body (nested ones too) bitcasts."""
    for node in nodes:
        if any(t.REINTERPRETS for t, _ in node.steps):
            return True
        if node.children and _bitcasts(node.children):
            return True
    return False


class _Trips:
    """What an actor yields for a loop with an empty body: its trips, each a step toward
    the step and time bounds (nothing runs in them, so they are counted at once: a loop
    of 2**31 empty trips costs one yield, and stops the run at the step bound)."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n


class _Run:
    """One actor while it runs."""

    __slots__ = (
        "a",
        "actor",
        "blocked",
        "agent",
        "committed",
        "env",
        "gen",
        "gone",
        "grid_point",
        "groups",
        "open_group",
        "own",
        "places",
        "pids",
        "scope",
        "node",
        "read",
        "values",
        "waits",
        "who",
    )

    def __init__(self, a: int, actor: Actor, values: dict[str, int], env: E.Env, gp: int, pids):
        self.a = a
        self.actor = actor
        self.values = values
        self.env = env
        self.grid_point = gp
        self.pids = pids
        self.gen: Any = None
        self.gone = False  # finished, or parked aside (``Engine._run``)
        self.blocked: Wait | None = None
        self.committed = 0  # own time at the last commit_smem
        # committed copy groups' clocks: (its SMEM reads done, the whole copy done)
        self.groups: list[tuple[np.ndarray, np.ndarray]] = []
        self.open_group: list[tuple[np.ndarray, np.ndarray]] = []
        self.waits: dict[tuple, int] = {}  # barrier key -> waits done
        self.own: dict[str, int] | None = None  # device coordinates by axis (``peer``)
        self.places: dict[int, Location] = {}  # id(base) -> its place here (``_place``)
        self.agent: Actor | None = None  # its copy engine (``_log``)
        self.who = ""  # "device 0 block 1": who signals (``signal``)
        # the views in scope and the node running now: where an expression's loads and
        # semaphore reads look (``_Reader``)
        self.scope: dict[str, View] = {}
        self.node: _Node | None = None
        # (exploring mode) the values the chooser let this node's semaphore reads see,
        # by semaphore key (``_read_points``)
        self.read: dict[tuple, int] = {}

    @property
    def cluster(self) -> tuple[int, ...]:
        return self.actor.cluster

    def describe(self) -> str:
        return self.actor.describe()

    def env_(self) -> E.Env:
        return self.env

    def end(self) -> None:
        """The run is over (finished, or the whole run stopped): its generator closed
        and its reader let go, so nothing of it refers back to it (its env's reader and
        its body's frame do while it runs) and it is freed without the cycle collector."""
        gen, self.gen = self.gen, None
        if gen is not None:
            gen.close()
        self.env.data = None
        self.blocked = None


class Engine:
    """One run of one scenario (see the module docstring). ``log_limit``, ``max_races``
    and ``log_tally``: the access log's bounds (:class:`~mpmd_lab.accesslog.AccessLog`)."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        data: bool = True,
        program_id: str = "grid",
        limits: Limits | None = None,
        log_limit: int | None = DEFAULT_LIMIT,
        log_tally: bool = True,
        max_races: int = MAX_RACES,
        sample: dict[int, list[tuple[int, ...]]] | None = None,
        sample_devices: list[int] | None = None,
        chooser: Any = None,
        strict: bool | None = None,
        prepared: Prepared | None = None,
    ):
        self.s = scenario
        #: what every run over this scenario shares (made here where none is given)
        self.prepared = prepared if prepared is not None else Prepared(scenario, data=data)
        #: a problem fails the run (the simulator), or is recorded as a finding and the
        #: run goes on (the static check: data-free, or following values; default: with
        #: data, strict)
        self.strict = data if strict is None else strict
        #: the exploring mode's choices (:class:`~mpmd_lab.engine.explore.Chooser`):
        #: semaphore waits and barrier arrivals complete only when nothing else can run,
        #: one chosen at a time
        self.chooser = chooser
        #: (exploring mode) the barrier arrival the statement running now made, held
        self._arrival: BarrierArrival | None = None
        #: (exploring mode) the statements in the order they ran: (actor index, path)
        self.trail: list[tuple[int, str]] = []
        #: (exploring mode) actor index -> the actor, for the trail and the choices
        self.actors: dict[int, Actor] = {}
        self.data = data
        self.mode = scenario.run.interpret
        self.pid_mode = program_id
        self.limits = limits or Limits()
        self.mesh = self.prepared.mesh
        self.ndev = self.prepared.ndev
        self.sample = sample
        self.devices = sample_devices if sample_devices is not None else self.prepared.devices
        self.out = Outcome(log=AccessLog(log_limit, max_races, log_tally))
        self.memory = self.out.memory
        self._whole: dict[Base, View] = {}
        self._param_whole: dict[str, View] = {}  # parameter name -> its base's whole view
        self._owners: dict[int, np.ndarray] = {}
        self._locs: dict[tuple, Location] = {}
        self._spans: dict[tuple, tuple[np.ndarray | None, list[tuple[int, int]]]] = {}
        # the same cache by offsets array (kept alive, its id stays its own) and dtype:
        # a view's offsets are shared (``sliced``, a whole), and its data address costs
        # a microsecond to read
        self._spans_of: dict[int, tuple[np.ndarray, np.dtype, Any]] = {}
        self._sliced: dict[tuple[int, tuple], tuple[np.ndarray, np.ndarray]] = {}
        #: ``spans`` of affine views by their ``lay``
        self._spans_lay: dict[tuple, tuple[np.ndarray | None, list[tuple[int, int]]]] = {}
        self.work = 0
        self._memo: dict[tuple[int, Any], Any] = {}
        #: the views of lets that read no axis index (``_Node.shared``), by (id(node), the
        #: view they start from, the values of the names they read): a compiled view
        #: of an affine view (its ``lay``) is then the same for every thread (nodes
        #: outlive the engine: their ids stay theirs; the views are kept by the key)
        self._shared: dict[tuple, View] = {}
        self._parsed: dict[Any, E.Expr] = {}
        #: id(expression) -> (it, its function, whether it reads pl.program_id)
        self._compiled: dict[int, tuple[E.Expr, Callable[[E.Env], int], bool]] = {}
        self.semaphores: dict[tuple, Semaphore] = {}
        #: the same by (name, element, device, block, program), as ``semaphore`` is asked
        self._sem_of: dict[tuple, Semaphore] = {}
        self._signal_paths: dict[str, set[str]] = self.out.signals
        self.barriers: dict[tuple, Barrier] = {}
        self._bar_of: dict[tuple[str, int, int], tuple[tuple, Barrier]] = {}  # (name, e, actor)
        #: multicast loads: each block's issues so far, by (group, block); the shares of
        #: one round issued so far, by (group, round)
        self._mc_round: dict[tuple, int] = {}
        self._mc_shares: dict[tuple, list[_Share]] = {}
        self.compact = not data and not self.prepared.bitcast
        #: (data-free) input buffers the kernel writes: loads from them are not known
        #: before it runs (found at the first load); the initial values of the others,
        #: per device, as loaded
        self._written: frozenset[str] | None = None
        self._initial: dict[str, list[np.ndarray]] = {}
        self._dev_coords = self.prepared.dev_coords
        self._setup()
        self._plan()
        # each barrier's async copies have their own copy engine (a wait on one barrier
        # says nothing of copies landing on another), where the clocks stay small
        self._bar_agent: dict[tuple[str, int], int] = {}
        nbars = self.prepared.nbars
        self._agents = nbars if self.n_actors * (2 + nbars) <= 1 << 16 else 0
        if nbars and not self._agents:
            self.out.notes.append(
                "async copies into different barriers are taken to land in the order they "
                "were issued (too many threads to give each barrier's copies a clock)"
            )
        self.clocks = Clocks((2 + self._agents) * self.n_actors)
        self.shadow = Shadow(self.clocks, self.out.log)

    # ------------------------------------------------------------ set-up

    def _coords_of(self, d: int) -> tuple[int, ...]:
        return _unravel(tuple(self.mesh.values()), d)

    def device_coords(self, d: int) -> tuple[int, ...]:
        if self._dev_coords is not None:
            return self._dev_coords[d]
        return self._coords_of(d)

    def _setup(self) -> None:
        """The parameters as the prepared call binds them; following values, each
        device's inputs as the call gives them and its outputs as uninitialised."""
        prep, s = self.prepared, self.s
        self.params = prep.params
        self.inputs = prep.inputs
        self._param_steps = prep.param_steps
        self.scratch = prep.scratch
        if not self.data:
            return
        shard = s.device_mesh is not None and s.run.shard_map is not False
        for buf, base in prep.inputs.items():
            b = s.buffers[buf]
            g = host_value(b, self.ndev, tuple(s.global_shape(buf)))
            spec, mesh = s.buffer_spec(buf), s.device_mesh or {}
            locals_ = sharding.shards_of(g, spec, mesh) if shard else [g] * self.ndev
            for d, local in enumerate(locals_):
                loc = Location("GMEM", buf, d, None, "input")
                self.memory[loc] = Storage.of(loc, local.astype(base.dtype))
        for name, o in s.call.outputs.items():
            dt = self.params[name][0].dtype
            for d in range(self.ndev):
                loc = Location("GMEM", name, d, None, "output")
                self.memory[loc] = Storage.of(loc, uninitialized(tuple(o.shape), dt, self.mode))

    def _plan(self) -> None:
        """The units of admission (program, grid point) and how many actors there are."""
        # (exploring, not sampling: each semaphore read is a choice, before its statement)
        reading = self.chooser is not None and self.sample is None
        self.programs = self.prepared.infos(self.data, reading)
        units = []
        total = 0
        for p, info in enumerate(self.programs):
            per_unit = len(self.devices) * info["ncl"] * info["nthreads"]
            points = self.sample.get(p, []) if self.sample is not None else None
            npoints = len(points) if points is not None else math.prod(info["grid_shape"])
            if per_unit * npoints > self.limits.max_actors or total > self.limits.max_actors:
                raise SimError(
                    "SIM_TOO_LARGE",
                    f"call.programs[{p}].mesh",
                    f"{per_unit * npoints} threads (devices x blocks x cluster blocks x "
                    f"warpgroups) is more than the simulator's {self.limits.max_actors}; "
                    "shrink the grid or the device mesh",
                )
            units.append((info, points, npoints, total))
            total += per_unit * npoints
        self.units = units
        self.n_actors = total

    def _unit_iter(self):
        for info, points, _npoints, offset in self.units:
            grid_shape = info["grid_shape"]
            if points is None:
                it = itertools.product(*(range(n) for n in grid_shape))
            else:
                it = iter(points)
            per_unit = len(self.devices) * info["ncl"] * info["nthreads"]
            for k, gcoords in enumerate(it):
                if points is None:
                    gi = k
                else:
                    gi = int(np.ravel_multi_index(gcoords, grid_shape)) if grid_shape else 0
                yield info, gi, tuple(gcoords), offset + k * per_unit

    def _make_runs(self, info: dict, gi: int, gcoords: tuple[int, ...], offset: int) -> list[_Run]:
        grid, cluster = info["grid"], info["cluster"]
        ncl, nthreads, tname = info["ncl"], info["nthreads"], info["tname"]
        cluster_shape = tuple(cluster.values())
        runs = []
        k = offset
        p, sizes, grid_shape, nodes = info["p"], info["sizes"], info["grid_shape"], info["nodes"]
        gvalues = dict(zip(grid, gcoords, strict=True))
        blocks = [
            (ci, ccoords, dict(zip(cluster, ccoords, strict=True)))
            for ci, ccoords in enumerate(itertools.product(*(range(n) for n in cluster_shape)))
        ]
        for d in self.devices:
            dcoords = self.device_coords(d)
            dvalues = dict(zip(self.mesh, dcoords, strict=True))
            for ci, ccoords, cvalues in blocks:
                for t in range(nthreads):
                    actor = Actor(p, d, gi * ncl + ci, t, gcoords, ccoords, dcoords)
                    values = {**dvalues, **gvalues, **cvalues}
                    if tname:
                        values[tname] = t
                    if self.pid_mode == "grid":
                        pids = (*gcoords, *ccoords, t)
                    else:
                        pids = (0,) * (len(gcoords) + len(ccoords) + 1)
                    env = E.Env(values, sizes, pids, grid_shape)
                    run = _Run(k, actor, values, env, gi, pids)
                    env.data = _Reader(self, run)
                    run.gen = self._body(run, nodes, {})
                    if self.chooser is not None:
                        self.actors[k] = actor
                    runs.append(run)
                    k += 1
        return runs

    # ------------------------------------------------------------ what the ops ask

    @property
    def cluster_sizes(self) -> dict[str, int]:
        return self._cur["cluster"]

    def memo(self, obj: Any, key: Any, fn: Any) -> Any:
        """``fn()`` once per op object and key (hashable: parsed expressions, resolved
        entries, a rule's answer for a shape)."""
        k = (id(obj), key)
        v = self._memo.get(k)
        if v is None:
            v = self._memo[k] = (obj, fn())  # keep obj alive: its id stays its own
        return v[1]

    def expr(self, raw: Any) -> E.Expr:
        e = self._parsed.get(raw) if not isinstance(raw, E.Expr) else raw
        if e is None:
            e = self._parsed[raw] = E.parse(raw)
        return e

    def fail(self, code: str, path: str, message: str) -> NoReturn:
        """Stop the simulation: the call fails at ``path``."""
        raise SimError(code, path, message)

    def eval(self, e: E.Expr, run: _Run, path: str, sub: str = "", truth: bool = False) -> int:
        """An index expression's value for one actor (``path``, and ``sub`` under it:
        where a failing one is). A value loaded from a float ref is taken only as a
        truth value (``truth``: a condition, as ``pl.when`` takes it); as an index or a
        bound it is JAX's INDEX_DTYPE or LOOP_BOUND_DTYPE, which the check reports."""
        known = self._compiled.get(id(e))
        if known is None:
            known = self._compiled[id(e)] = (e, E.compiled(e), "program_id" in e.calls())
        if known[2]:
            self.out.used_pid = True
        try:
            v = known[1](run.env)
        except E.ExprDataDependent as ex:
            raise SimError("DATA_DEPENDENT", f"{path}.{sub}" if sub else path, str(ex)) from None
        except E.ExprError as ex:
            raise SimError("XREF_UNKNOWN_NAME", f"{path}.{sub}" if sub else path, str(ex)) from None
        if type(v) is float:
            if truth:
                return int(v != 0)
            raise SimError(
                "INDEX_DTYPE",
                f"{path}.{sub}" if sub else path,
                f"{e.label()} is a float ({v}): an index or a loop bound is an integer",
            )
        return v

    def peer(self, dref: Any, run: _Run, path: str) -> int:
        """The device a resolved device id names, seen from this actor (``path``: the
        device field; REMOTE_DEVICE_OOB when it names no device of the mesh)."""
        own = run.own
        if own is None:  # (target copies it)
            own = run.own = dict(zip(self.mesh, run.actor.device_coords, strict=True))
        try:
            d = dref.target(own, self.mesh, run.env)
        except IndexError:  # (before LookupError, its base)
            raise self._device_oob(dref, run, path) from None
        except LookupError as e:
            raise SimError("DEVICE_ID_UNKNOWN_AXIS", path, str(e)) from None
        except E.ExprDataDependent as e:
            raise SimError("DATA_DEPENDENT", path, str(e)) from None
        except E.ExprError as e:
            raise SimError("XREF_UNKNOWN_NAME", path, str(e)) from None
        if type(d) is not int:  # (a float loaded from memory: refused at trace)
            raise SimError("DEVICE_ID_DTYPE", path, "`device_id`s must be an int32 value")
        return d

    def _device_oob(self, dref: Any, run: _Run, path: str) -> SimError:
        tail = "JAX does not check it, and on a GPU it addresses no device"
        here = f" on device {run.actor.device}" if self.ndev > 1 else ""
        if dref.linear is not None:
            v = dref.linear.eval(run.env)
            what = (
                f"device id {v} is"
                if dref.linear.is_const
                else (f"device id {dref.linear.label()} is {v}{here},")
            )
            return SimError(
                "REMOTE_DEVICE_OOB",
                path,
                f"{what} outside the device mesh (devices 0..{self.ndev - 1}); {tail}",
            )
        for axis, e in dref.coords:
            v = e.eval(run.env)
            n = self.mesh.get(axis, 0)
            if not 0 <= v < n:
                what = f"index {v}" if e.is_const else f"index {e.label()} = {v}{here}"
                return SimError(
                    "REMOTE_DEVICE_OOB",
                    f"{path}.{axis}",
                    f"{what} on device-mesh axis {axis!r} is outside 0..{n - 1}; {tail}",
                )
        return SimError("REMOTE_DEVICE_OOB", path, f"the device id is outside the mesh; {tail}")

    def soft(self, e: SimError, run: _Run, node: _Node, field: str, access: str) -> None:
        """The check's modes: record a finding and skip the statement; the simulator's
        (``strict``): fail."""
        if self.strict:
            raise e
        self.out.findings.append(
            Finding(
                e.code,
                e.path,
                str(e),
                node.path,
                field,
                access,
                run.actor,
                dict(run.values),
                tuple(run.pids),
            )
        )
        raise _Skip

    def _stack(self, view: View, steps: tuple[tuple[Any, str], ...], run: _Run) -> View:
        """The view after a transform stack (``_steps``: each transform, its path)."""
        for t, tpath in steps:
            view = t.view(view, self, run, tpath)
        return view

    def _lookup(self, env: dict[str, View], name: str, run: _Run, path: str) -> View:
        v = env.get(name)
        if v is not None:
            return v
        whole = self._param_whole.get(name)
        if whole is None:
            p = self.params.get(name)
            if p is None:
                raise SimError("XREF_UNKNOWN_NAME", path, f"no parameter or view named {name!r}")
            base = p[0]
            whole = self._whole.get(base)
            if whole is None:  # offsets are never written: share them
                whole = self._whole[base] = View.whole(
                    base, compact=self.compact, affine=not self.data
                )
                owner = whole.offsets.base if whole.offsets.base is not None else whole.offsets
                self._owners[id(owner)] = owner
            self._param_whole[name] = whole
        steps = self._param_steps.get(name)
        view = self._stack(whole, steps, run) if steps else whole
        env[name] = view
        return view

    # ------------------------------------------------------------ memory access

    def sliced(self, offsets: np.ndarray, index: tuple) -> np.ndarray:
        """``offsets[index]`` (basic indexing: ints and slices), one array per offsets
        array and index (offsets are never written: views share them)."""
        key = (id(offsets), index)
        hit = self._sliced.get(key)
        if hit is None:
            if len(self._sliced) > 65536:
                self._sliced.clear()
            hit = self._sliced[key] = (offsets, offsets[index])  # (keeps offsets alive)
        return hit[1]

    def spans(self, view: View) -> tuple[np.ndarray | None, list[tuple[int, int]]]:
        """The base elements a view covers, as runs (numpy, and as a list of pairs;
        cached for views of a shared base; an affine view's by its ``lay``)."""
        lay = view.lay
        if lay is not None:
            hit = self._spans_lay.get(lay)
            if hit is None:  # (an affine view has its base's dtype: its lay says it all)
                if len(self._spans_lay) > 65536:
                    self._spans_lay.clear()
                hit = self._spans_lay[lay] = self._lay_spans(view, lay)
            return hit
        return self._spans_offsets(view)

    def _lay_spans(self, view: View, lay: Lay) -> tuple[np.ndarray | None, list[tuple[int, int]]]:
        """An affine view's runs from its start, shape and strides (by content, shared
        by every run, as ``_affine_spans``'s); its offsets where they do not say it."""
        key = (lay[1], lay[2], lay[3])
        pairs = _LAY.get(key, _NONE)
        if pairs is _NONE:
            if len(_LAY) > 65536:
                _LAY.clear()
            pairs = _LAY[key] = _lay_runs(lay[1], list(zip(lay[2], lay[3], strict=True)))
        if pairs is None:
            return self._spans_offsets(view)
        return (None, pairs)

    def _spans_offsets(self, view: View) -> tuple[np.ndarray | None, list[tuple[int, int]]]:
        """``spans`` from the view's offsets array."""
        o = view.offsets
        seen = self._spans_of.get(id(o))
        if seen is not None and seen[1] == view.dtype:
            return seen[2]
        owner = o.base
        key = None
        start = -1
        if owner is not None and id(owner) in self._owners:
            # a view sliced from a whole: where it starts (its first offset, a byte of
            # the base; -1 when empty), its shape and strides say which elements it holds
            start = o.item(0) if o.size else -1
            key = (id(owner), start, o.shape, o.strides, view.dtype)
            hit = self._spans.get(key)
            if hit is not None:
                self._spans_of[id(o)] = (o, view.dtype, hit)
                return hit
        pairs = None
        if key is not None:
            whole = self._whole[view.base]
            # (by content: every check of the same shapes slices the same way)
            wo = whole.offsets
            ckey = (start, o.shape, o.strides, o.itemsize, view.dtype, whole.dtype, wo.shape)
            pairs = _AFFINE.get(ckey, _NONE)
            if pairs is _NONE:
                if len(_AFFINE) > 65536:
                    _AFFINE.clear()
                pairs = _AFFINE[ckey] = _affine_spans(view, start, whole)
        if pairs is not None:
            # (the array is made only if an access is kept)
            both: tuple[np.ndarray | None, list[tuple[int, int]]] = (None, pairs)
        else:
            self.work += o.size
            if self.limits.max_work is not None and self.work > self.limits.max_work:
                raise _Stop(
                    f"stopped after indexing {self.work} view offsets (the bound is "
                    f"{self.limits.max_work})",
                    "SIM_TOO_LARGE",
                )
            r = runs_of(view.elements())
            both = (r, [tuple(x) for x in r.tolist()])
        if key is not None:
            if len(self._spans) > 65536:
                self._spans.clear()
                self._spans_of.clear()
            self._spans[key] = both
            self._spans_of[id(o)] = (o, view.dtype, both)
        return both

    def _block_of(self, view: View, run: _Run) -> int:
        if view.cluster is None:
            return run.actor.block
        info = self._cur
        return run.grid_point * info["ncl"] + int(
            np.ravel_multi_index(view.cluster, tuple(info["cluster"].values()))
        )

    def _targets(self, view: View, run: _Run, fan_out: tuple[str, ...] | None) -> list[int]:
        dev = run.actor.device if view.device is None else view.device
        axes = view.multicast or fan_out
        if not axes:
            return [dev]
        own = list(self.device_coords(dev))
        ranges = [range(self.mesh[a]) for a in axes]  # (KeyError: an axis the mesh lacks)
        names, sizes = list(self.mesh), list(self.mesh.values())
        where = [names.index(a) for a in axes]
        out = []
        for combo in itertools.product(*ranges):
            coords = own.copy()
            for k, c in zip(where, combo, strict=True):
                coords[k] = c  # (an axis named twice: the last)
            flat = 0
            for n, c in zip(sizes, coords, strict=True):
                flat = flat * n + c
            out.append(flat)
        return out

    def location(self, base: Base, device: int, block: int) -> Location:
        per_block = base.kind == "scratch" and base.memory != "GMEM"
        key = (base.name, base.kind, device, block if per_block else None)
        loc = self._locs.get(key)
        if loc is None:
            loc = self._locs[key] = Location(base.memory, base.name, device, key[3], base.kind)
        return loc

    def _place(self, view: View, run: _Run) -> Location:
        """Where an actor's access through ``view`` lands: its own device and block
        unless the view names others (a peer, a cluster block); the actor's own places
        are kept by base."""
        if view.device is None and view.cluster is None:
            loc = run.places.get(id(view.base))
            if loc is None:  # (bases live as long as the engine: their ids stay theirs)
                actor = run.actor
                loc = run.places[id(view.base)] = self.location(
                    view.base, actor.device, actor.block
                )
            return loc
        dev = run.actor.device if view.device is None else view.device
        block = run.actor.block if view.cluster is None else self._block_of(view, run)
        return self.location(view.base, dev, block)

    def _storage(self, loc: Location, base: Base) -> Storage:
        st = self.memory.get(loc)
        if st is None:  # scratch: allocated on first touch, uninitialized
            st = Storage.of(loc, uninitialized(base.shape, base.dtype, self.mode))
            self.memory[loc] = st
        return st

    def _access(self, x: StmtCtx, fld: str, kind: str) -> tuple[View, str]:
        """The view of field ``fld`` and its name; a view an index placed out of bounds
        fails softly here (at the access, as the GPU interpreter's bounds check does)."""
        name = x.stmt.ref_name(fld)
        view = self._lookup(x.env, name, x.run, x.path)
        self._check_data(view, name, x.path)
        if view.oob is not None:
            code, where, msg = view.oob
            self.soft(SimError(code, where, msg), x.run, x.node, fld, kind)
        return view, name

    def _elements(self, loc: Any, view: View) -> np.ndarray:
        """The view's elements at ``loc``, as an array of its shape and dtype."""
        raw = self._storage(loc, view.base).data[view.offsets]
        return np.ascontiguousarray(raw).view(view.dtype).reshape(view.shape)

    def read(self, x: StmtCtx, fld: str, agent: bool | int = False) -> Any:
        view, name = self._access(x, fld, "r")
        if view.multicast is not None:
            raise SimError("SIM_UNSUPPORTED", x.path, f"reading {name!r} through a multicast view")
        run = x.run
        a = self._agent_index(run, agent)
        loc = self._place(view, run)
        self._log("read", a, x, name, loc, view, fld)
        if not self.data:
            return Abstract(view.shape, view.dtype)
        return self._elements(loc, view)

    def read_all(self, x: StmtCtx, fld: str, axes: tuple[str, ...]) -> list[Any]:
        """The view read on every device along ``axes`` (multimem_load_reduce)."""
        view, name = self._access(x, fld, "r")
        out: list[Any] = []  # arrays (with data) or their Abstract shapes
        for dev in self._targets(view.with_(multicast=None), x.run, axes):
            loc = self.location(view.base, dev, self._block_of(view, x.run))
            self._log("read", x.run.a, x, name, loc, view, fld)
            if self.data:
                out.append(self._elements(loc, view))
            else:
                out.append(Abstract(view.shape, view.dtype))
        return out

    def write(
        self,
        x: StmtCtx,
        fld: str,
        value: Any,
        fan_out: tuple[str, ...] | None = None,
        kind: str = "write",
        agent: bool | int = False,
    ) -> None:
        name = x.stmt.ref_name(fld)
        run = x.run
        view = self._lookup(x.env, name, run, x.path)
        self._check_data(view, name, x.path)
        if tuple(value.shape) != view.shape:
            raise SimError(
                "SWAP_SHAPE_MISMATCH",
                x.path,
                f"Invalid shape for `swap`: storing {tuple(value.shape)} into {name!r} of shape "
                f"{view.shape}",
            )
        if value.dtype is not view.dtype and np.dtype(value.dtype) != view.dtype:
            raise SimError(
                "SIM_DTYPE_MISMATCH",
                x.path,
                f"storing {value.dtype} into {name!r} of dtype {view.dtype}",
            )
        if view.oob is not None:
            code, where, msg = view.oob
            self.soft(SimError(code, where, msg), run, x.node, fld, "w")
        a = self._agent_index(run, agent)
        raw = None
        if self.data:
            raw = np.ascontiguousarray(value).reshape(-1).view(np.uint8)
            raw = raw.reshape(*view.shape, view.dtype.itemsize)
        if view.multicast is None and fan_out is None:
            locs = [self._place(view, run)]
        else:
            block = run.actor.block if view.cluster is None else self._block_of(view, run)
            locs = [
                self.location(view.base, dev, block) for dev in self._targets(view, run, fan_out)
            ]
        for loc in locs:
            self._log(kind, a, x, name, loc, view, fld)
            if raw is not None:
                self._storage(loc, view.base).data[view.offsets] = raw

    def atomic_add(self, x: StmtCtx, fld: str, value: Any) -> None:
        view, name = self._access(x, fld, "w")
        if view.multicast is not None:
            raise SimError(
                "SIM_UNSUPPORTED", x.path, f"atomic_add through a multicast view {name!r}"
            )
        if tuple(value.shape) != view.shape:
            raise SimError(
                "SIM_SHAPE_MISMATCH", x.path, f"adding {tuple(value.shape)} into {view.shape}"
            )
        (dev,) = self._targets(view, x.run, None)
        loc = self.location(view.base, dev, self._block_of(view, x.run))
        self._log("atomic", x.run.a, x, name, loc, view, fld)
        if not self.data:
            return
        st = self._storage(loc, view.base)
        cur = self._elements(loc, view)
        with np.errstate(all="ignore"):
            new = np.add(cur, np.asarray(value).astype(view.dtype), dtype=view.dtype)
        st.data[view.offsets] = (
            np.ascontiguousarray(new).reshape(-1).view(np.uint8).reshape(*view.shape, -1)
        )

    def _agent_index(self, run: _Run, agent: bool | int) -> int:
        """The clock index of an access: the thread's, or its copy engine's (``True``:
        the one for SMEM -> GMEM copies; an int: that index)."""
        if agent is False:
            return run.a
        if agent is True:
            return run.a + self.n_actors
        return int(agent)

    def written_inputs(self) -> frozenset[str]:
        """The input buffers some statement may write (``written_buffers``), once."""
        if self._written is None:
            self._written = written_buffers(self.s)
        return self._written

    def initial_element(self, base: Base, dev: int, sub: View, name: str) -> Any:
        """(Data-free) the element ``sub`` of an input the kernel never writes, as the
        call is given it on device ``dev``; ExprDataDependent for any other memory."""
        why = None
        if base.kind != "input":
            why = f"{name} is {'an output' if base.kind == 'output' else 'scratch'}"
        elif base.name in self.written_inputs():
            why = f"{name} is the buffer {base.name!r}, which the kernel writes"
        elif sub.dtype != base.dtype:
            why = f"{name} is a bitcast view"
        if why is not None:
            raise E.ExprDataDependent(
                f"a load of {name}: {why}, so its value is known only when the kernel runs"
            )
        shards = self._initial.get(base.name)
        if shards is None:
            s = self.s
            b = s.buffers[base.name]
            gshape = tuple(s.global_shape(base.name))
            g = host_value(b, self.ndev, gshape).astype(base.dtype)
            shard = s.device_mesh is not None and s.run.shard_map is not False
            mesh = s.device_mesh or {}
            shards = sharding.shards_of(g, s.buffer_spec(base.name), mesh) if shard else None
            shards = self._initial[base.name] = [
                np.ascontiguousarray(x).reshape(-1) for x in (shards or [g] * self.ndev)
            ]
        flat = int(sub.offsets.reshape(-1)[0]) // base.dtype.itemsize
        return shards[dev][flat]

    def _check_data(self, view: View, name: str, path: str) -> None:
        if view.base.is_sync:
            raise SimError(
                "SIM_UNSUPPORTED", path, f"{name!r} is a {view.base.kind}: it holds no data"
            )

    def _log(
        self, kind: str, a: int, x: StmtCtx, name: str, loc: Location, view: View, fld: str
    ) -> None:
        run = x.run
        actor = run.actor
        if a >= self.n_actors:
            agent = run.agent
            if agent is None:
                t = actor
                agent = run.agent = Actor(
                    t.program, t.device, t.block, t.thread, t.grid, t.cluster, t.device_coords, True
                )
            actor = agent
        node = x.node
        stmt = (node.index, node.op.op, name, node.path, fld)
        spans, pyspans = self.spans(view)
        self.shadow.access(kind, a, actor, stmt, loc, view.base.shape, spans, pyspans)

    def log_load(self, run: _Run, node: _Node, name: str, loc: Location, view: View) -> None:
        """A scalar load of an expression (``ids[0]`` in a device id or index), by the
        thread itself, as a read of its statement (a ``let``'s too) of field ``load``."""
        op = node.op
        stmt = (node.index, "let" if isinstance(op, Let) else op.op, name, node.path, "load")
        spans, pyspans = self.spans(view)
        self.shadow.access("read", run.a, run.actor, stmt, loc, view.base.shape, spans, pyspans)

    # ------------------------------------------------------------ synchronisation

    def _one(self, view: View, name: str, what: str, path: str) -> int:
        if view.base.kind != what:  # ("semaphore" or "barrier": a kind of synchronisation)
            raise SimError("SIM_UNSUPPORTED", path, f"{name!r} is not a {what}")
        lay = view.lay
        if lay is not None and not lay[2]:
            return lay[1]  # (one element of its base's dtype: the one it starts at)
        pairs = self.spans(view)[1]
        if len(pairs) != 1 or pairs[0][1] - pairs[0][0] != 1 or view.shape:
            count = sum(b - a for a, b in pairs)
            raise SimError(
                "SIM_UNSUPPORTED", path, f"{name!r} is {count} {what}s: index one with at"
            )
        return pairs[0][0]

    def _sem_view(self, x: StmtCtx, fld: str) -> tuple[View, int]:
        """The semaphore a statement's field names, and its element: an index outside
        the semaphore array is an out-of-bounds finding (no semaphore is made for it)."""
        name = x.stmt.ref_name(fld)
        view = self._lookup(x.env, name, x.run, x.path)
        if view.oob is not None and view.base.is_sync:
            code, where, msg = view.oob
            self.soft(SimError(code, where, f"semaphore {msg}"), x.run, x.node, fld, "")
        return view, self._one(view, name, "semaphore", x.path)

    def semaphore(self, base: Base, e: int, dev: int, block: int, program: int = 0) -> Semaphore:
        """Element ``e`` of a semaphore on device ``dev`` as block ``block`` of program
        ``program`` sees it: its block's own, or (``pl.get_global``) the one every block
        of the program shares (each program's ``get_global`` is its own: key block
        ``-1 - program``)."""
        name = base.name
        seen = (name, e, dev, block, program)
        sem = self._sem_of.get(seen)
        if sem is not None:
            return sem
        spec = self.scratch.get(name)
        shared = isinstance(spec, SemaphoreScratch) and spec.shared
        key = (name, e, dev, -1 - program if shared else block)
        sem = self.semaphores.get(key)
        if sem is None:  # (its label said when a report asks)
            sem = self.semaphores[key] = Semaphore("", key, bool(base.shape), shared)
        self._sem_of[seen] = sem
        return sem

    def signal(self, x: StmtCtx, fld: str, inc: int, dref: Any, axes: tuple[str, ...] | None):
        run = x.run
        view, e = self._sem_view(x, fld)
        if inc < 0:
            raise SimError("SIM_UNSUPPORTED", x.path, f"a negative semaphore increment ({inc})")
        if axes:
            devs = self._targets(view.with_(device=None), run, axes)
        elif dref is not None:
            try:
                devs = [self.peer(dref, run, f"{x.path}.device")]
            except SimError as err:
                if err.code != "REMOTE_DEVICE_OOB":
                    raise
                self.soft(err, run, x.node, fld, "")
        else:
            devs = [run.actor.device if view.device is None else view.device]
        vc = self.clocks.snapshot(run.a)
        who = run.who
        if not who:
            many = self._cur["ncl"] * math.prod(self._cur["grid"].values()) > 1
            who = f"device {run.actor.device}" + (f" block {run.actor.block}" if many else "")
            run.who = who
        block, program = run.actor.block, run.actor.program
        for d in devs:
            sem = self.semaphore(view.base, e, d, block, program)
            if sem.value + inc > E.INT32_MAX:  # a GPU's semaphore is an int32: it would wrap
                raise SimError(
                    "SIM_UNSUPPORTED",
                    x.path,
                    f"a semaphore value past int32 ({sem.label} would hold {sem.value + inc})",
                )
            sem.signal(inc, vc, who, x.path, run.a, self.chooser is not None)
        paths = self._signal_paths.get(view.base.name)
        if paths is None:
            paths = self._signal_paths[view.base.name] = set()
        paths.add(x.path)
        self.clocks.tick(run.a)

    def wait_semaphore(self, x: StmtCtx, fld: str, value: int, decrement: bool) -> Wait | None:
        run = x.run
        view, e = self._sem_view(x, fld)
        dev = run.actor.device if view.device is None else view.device
        sem = self.semaphore(view.base, e, dev, run.actor.block, run.actor.program)
        waits = self.out.waits
        paths = waits.get(view.base.name)
        if paths is None:
            paths = waits[view.base.name] = set()
        paths.add(x.path)
        if self.sample is not None:
            return None  # a sampled run: the signallers may not run at all
        return SemaphoreWait(self, run.a, sem, value, decrement, x.path)

    def semaphore_value(self, x: StmtCtx, fld: str) -> int:
        """``pl.semaphore_read``: the semaphore's value now, as this schedule left it. An
        acquire (Mosaic GPU lowers it to ``ld.acquire.sys.u32``; a signal is a
        ``red.release.sys.global.add``): the reader is ordered after the signals it saw
        (:meth:`_read_value`), as a wait is, and takes nothing."""
        run = x.run
        view, e = self._sem_view(x, fld)
        dev = run.actor.device if view.device is None else view.device
        return self._read_value(
            run, self.semaphore(view.base, e, dev, run.actor.block, run.actor.program)
        )

    def barrier(self, view: View, name: str, run: _Run, path: str) -> tuple[tuple, Barrier]:
        e = self._one(view, name, "barrier", path)
        name = view.base.name
        mine = self._bar_of.get((name, e, run.a))
        if mine is not None:
            return mine
        spec = self.scratch[name]
        assert isinstance(spec, BarrierScratch)  # (_one checked it is a barrier)
        dev = run.actor.device
        key: tuple[Any, ...]
        if isinstance(spec, ClusterBarrierScratch):
            from mpmd_lab.fields import axes_tuple

            axes = axes_tuple(spec.collective_axes)
            names = list(self._cur["cluster"])
            coords = list(run.actor.cluster)
            group = 1
            for a in axes:
                if a not in names:
                    raise SimError("SIM_UNSUPPORTED", path, f"{a!r} is not a cluster axis")
                coords[names.index(a)] = -1
                group *= self._cur["cluster"][a]
            key = (name, e, dev, run.grid_point, tuple(coords))
            target = spec.num_arrivals * group
            where = f"the cluster of block {run.actor.block} on device {dev}"
        else:
            key = (name, e, dev, run.actor.block)
            target = spec.num_arrivals
            where = f"device {dev} block {run.actor.block}"
        bar = self.barriers.get(key)
        if bar is None:
            label = f"{name}[{e}]" if spec.num_barriers > 1 else name
            bar = self.barriers[key] = Barrier(f"{label} of {where}", target)
        mine = self._bar_of[name, e, run.a] = (key, bar)
        return mine

    def arrive(self, x: StmtCtx, fld: str) -> None:
        key, bar = self.barrier(x.view(fld), getattr(x.stmt, fld), x.run, x.path)
        if self.chooser is not None and self.sample is None:
            self._arrival = BarrierArrival(self, x.run.a, key, bar, x.path)
            return  # (held: the scheduler chooses when it lands)
        bar.arrive(self.clocks.snapshot(x.run.a), actor=x.run.a)
        self.clocks.tick(x.run.a)

    def wait_barrier(self, x: StmtCtx, fld: str) -> Wait | None:
        key, bar = self.barrier(x.view(fld), getattr(x.stmt, fld), x.run, x.path)
        k = x.run.waits.get(key, 0)
        x.run.waits[key] = k + 1
        bar.waited = True
        if self.sample is not None:
            return None
        return BarrierWait(self, x.run.a, bar, k, x.path)

    def _load_engine(self, x: StmtCtx, barrier: str) -> tuple[Barrier, int]:
        """The barrier an async GMEM -> SMEM load lands on, and the copy engine (an agent
        with its own clock, one per barrier when barriers are told apart) that does it,
        ordered after this actor's accesses so far."""
        run = x.run
        key, bar = self.barrier(x.view(barrier), getattr(x.stmt, barrier), run, x.path)
        g = run.a + self.n_actors
        if self._agents:
            j = self._bar_agent.setdefault((key[0], key[1]), len(self._bar_agent))
            g = run.a + (2 + j) * self.n_actors
        self.clocks.issue(g, run.a)
        self.clocks.join(g, self.clocks.snapshot(run.a))
        return bar, g

    def copy_to_smem(self, x: StmtCtx, src: str, dst: str, barrier: str) -> None:
        """An async GMEM -> SMEM copy by this actor's copy engine, landing on ``barrier``."""
        run = x.run
        bar, g = self._load_engine(x, barrier)
        value = self.read(x, src, agent=g)
        self.write(x, dst, value, agent=g)
        bar.arrive(self.clocks.snapshot(g), copy=True, actor=g, issuer=run.a)
        self.clocks.tick(g)
        self.clocks.tick(run.a)

    def copy_to_smem_collective(
        self, x: StmtCtx, src: str, dst: str, barrier: str, axes: tuple[str, ...]
    ) -> None:
        """A multicast GMEM -> SMEM load (``collective_axes``): each block of the cluster
        along ``axes`` issues its share, and the whole copy lands in every one of them once
        the last share is issued (each block's barrier completes then, by its own copy
        engine, ordered after every block's issue). A block of the group that never
        issues leaves the others' barriers waiting."""
        run = x.run
        names, sizes = list(self._cur["cluster"]), dict(self._cur["cluster"])
        coords = list(run.actor.cluster)
        n = 1
        for a in axes:
            if a not in names:
                raise SimError("SIM_UNSUPPORTED", x.path, f"{a!r} is not a cluster axis")
            coords[names.index(a)] = -1
            n *= sizes[a]
        group = (x.path, run.actor.program, run.actor.device, run.grid_point, tuple(coords))
        block = run.actor.block
        rnd = self._mc_round.get((group, block), 0)
        self._mc_round[group, block] = rnd + 1
        bar, g = self._load_engine(x, barrier)
        value = self.read(x, src, agent=g)
        shares = self._mc_shares.setdefault((group, rnd), [])
        shares.append(_Share(x, g, bar, value, self.clocks.snapshot(g), x.view(src)))
        self.clocks.tick(g)
        self.clocks.tick(run.a)
        if len(shares) < n:
            return
        del self._mc_shares[group, rnd]
        first = shares[0].value
        for sh in shares[1:]:
            if not _same_memory(sh.source, shares[0].source):
                raise SimError(
                    "SIM_UNSUPPORTED",
                    x.path,
                    "the blocks of a multicast load name different sources "
                    f"({sh.x.run.who or 'one block'} and another): each block would receive a "
                    "mix of the blocks' shares, which the simulator does not follow",
                )
        for sh in shares:
            for other in shares:
                self.clocks.join(sh.agent, other.issued)
            self.write(sh.x, dst, first, agent=sh.agent)
            sh.barrier.arrive(self.clocks.snapshot(sh.agent), copy=True, actor=sh.agent)
            self.clocks.tick(sh.agent)

    def copy_to_gmem(self, x: StmtCtx, src: str, dst: str, commit_group: bool) -> None:
        """An async SMEM -> GMEM copy: it sees this actor's writes up to its last commit."""
        run = x.run
        g = run.a + self.n_actors
        self.clocks.issue(g, run.a)
        snap = self.clocks.snapshot(run.a)
        snap[run.a] = run.committed
        self.clocks.join(g, snap)
        value = self.read(x, src, agent=True)
        read = self.clocks.snapshot(g)  # its SMEM read (what wait_read_only waits for)
        self.clocks.tick(g)
        self.write(x, dst, value, agent=True)
        run.open_group.append((read, self.clocks.snapshot(g)))
        self.clocks.tick(g)
        self.clocks.tick(run.a)
        if commit_group:
            self._close_group(run)

    def _close_group(self, run: _Run) -> None:
        from mpmd_lab.engine.clocks import join_all

        reads, dones = zip(*run.open_group, strict=True)
        run.groups.append((join_all(list(reads)), join_all(list(dones))))  # type: ignore[arg-type]
        run.open_group = []

    def commit(self, x: StmtCtx) -> None:
        x.run.committed = self.clocks.now(x.run.a)
        self.clocks.tick(x.run.a)

    def wait_copies(self, x: StmtCtx, n: int, read_only: bool = False) -> None:
        """At most ``n`` commit groups left in flight: this actor is ordered after the
        older groups' copies (``read_only``: only after their SMEM reads; their GMEM
        writes stay in flight, and a later full wait still waits for them)."""
        run = x.run
        if run.open_group:
            self._close_group(run)
        if read_only:
            for read, _done in run.groups[: max(len(run.groups) - n, 0)]:
                self.clocks.join(run.a, read)
            return
        while len(run.groups) > n:
            self.clocks.join(run.a, run.groups.pop(0)[1])

    # ------------------------------------------------------------ running

    def _read_points(self, run: _Run, node: _Node, env: dict[str, View], names: tuple[str, ...]):
        """(Exploring mode) the semaphore reads of ``node``, each held as a choice (the
        chooser picks where it falls between the signals issued so far); the values
        chosen are what the node's expressions then read (``run.read``)."""
        run.scope, run.node = env, node
        run.read = {}
        for name in names:
            view = self._lookup(env, name, run, node.path)
            e = self._one(view, name, "semaphore", node.path)
            dev = run.actor.device if view.device is None else view.device
            sem = self.semaphore(view.base, e, dev, run.actor.block, run.actor.program)
            if sem.key in run.read:
                continue
            w = SemaphoreRead(self, run.a, sem, node.path)
            yield w  # parked: the scheduler lets it read (a choice point)
            if w.seen is not None:
                run.read[sem.key] = w.seen

    def _read_value(self, run: _Run, sem: Semaphore) -> int:
        """A semaphore read's value: the chooser's (exploring: its choice point ordered
        the reader after the signals it saw), else the count now, the reader ordered
        after the signals it counts (``ld.acquire`` on the counter their release adds
        reached; those a decrementing wait already took are not joined, so a read here
        orders no more than it may)."""
        v = run.read.get(sem.key) if run.read else None
        if v is not None:
            return v
        for t in sem.tokens:
            self.clocks.join(run.a, t.vc)
        return sem.value

    def _body(self, run: _Run, nodes: tuple[_Node, ...], env: dict[str, View]):
        used = self._cur.get("used")
        exploring = self.chooser is not None
        merged = 0
        run.scope = env  # (again after each nested body: its scope was its own)
        for k, node in enumerate(nodes):
            if merged:
                merged -= 1
                yield None  # (a wait merged into the one before: its step all the same)
                continue
            op = node.op
            flavor = node.flavor
            run.node = node
            if flavor is _LET:
                if used is None or op.let in used:
                    view = self._lookup(env, op.ref, run, node.path)
                    chain = node.chain
                    if chain is None:
                        chain = self._chain(node)
                    key = None
                    if node.shared is not None:
                        key = (id(node), view, *map(run.values.get, node.shared))
                        got = self._shared.get(key)
                        if got is not None:
                            env[op.let] = got
                            yield None
                            continue
                    for compiled, t, tpath in chain:
                        if compiled is None:
                            view = t.view(view, self, run, tpath)
                        else:
                            view = compiled(t, view, self, run)
                    if key is not None and view.lay is not None:
                        if len(self._shared) >= MAX_SHARED:  # (a long loop: one per trip)
                            self._shared.clear()
                        self._shared[key] = view
                    env[op.let] = view
                yield None  # (a step all the same: the interleaving stays as it was)
                continue
            if flavor is _STMT:
                try:
                    w = op.execute(StmtCtx(self, run, node, env))
                except _Skip:
                    w = None
                if exploring:
                    self.trail.append((run.a, node.path))
                    if self._arrival is not None:
                        held, self._arrival = self._arrival, None
                        if w is None:
                            w = held
                        else:  # barrier_arrive_and_wait: its arrival lands, then it waits
                            yield held
                if w is not None:
                    if exploring and isinstance(w, SemaphoreWait | BarrierArrival):
                        if isinstance(w, SemaphoreWait):
                            merged = self._merge_waits(run, nodes, k, w, env)
                        yield w  # parked: the scheduler completes it (a choice point)
                    else:
                        while not w.ready():
                            yield w
                        w.complete()
                yield None
                continue
            if flavor is _LOOP:
                start = self.eval(self.expr(op.start), run, f"{node.path}.start")
                stop = self.eval(self.expr(op.stop), run, f"{node.path}.stop")
                yield None
                trips = op.trips(start, stop, node.int32)
                if not node.children:  # nothing runs, but every trip is a step all the same
                    yield _Trips(trip_count(trips.start, trips.stop, op.step))
                    continue
                had = op.var in run.values
                old = run.values.get(op.var)
                for i in trips:
                    run.values[op.var] = i
                    yield from self._body(run, node.children, dict(env))
                run.scope = env
                if had:
                    run.values[op.var] = old  # type: ignore[assignment]
                else:
                    run.values.pop(op.var, None)
                continue
            if flavor is _READ:
                yield from self._read_points(run, node, env, node.names)  # type: ignore[attr-defined]
                continue
            # a when
            cond = self.eval(
                self.memo(op, "cond", op.condition), run, f"{node.path}.cond", truth=True
            )
            yield None
            if cond:
                yield from self._body(run, node.children, dict(env))
                run.scope = env

    def _chain(self, node: _Node) -> tuple[tuple[Any, Any, str], ...]:
        """A let's transforms with their compiled views (``node.chain``), and whether
        its view is the same for every thread (``node.shared``), made at its first run."""
        chain = node.chain = tuple([(t.compiled(p), t, p) for t, p in node.steps])
        if None not in [compiled for compiled, _, _ in chain]:
            names: set[str] = set()
            for t, _ in node.steps:
                for _, e in t.exprs():
                    names |= e.names()
            if names.isdisjoint(self._cur["sizes"]):
                node.shared = tuple(sorted(names))
        return chain

    def _merge_waits(
        self, run: _Run, nodes: tuple[_Node, ...], k: int, w: SemaphoreWait, env: dict[str, View]
    ) -> int:
        """(Exploring mode) the decrementing waits on the same semaphore view that follow
        wait ``w`` (statement ``k``) with nothing in between: one wait for their sum, as
        nothing the thread does between them could tell them apart (one choice of the
        signals they saw, not one per wait). How many statements it took in.

        Only where no other thread can wait on that semaphore (one thread per block, the
        block's own semaphore): a rival waiter could take a signal between two waits of
        1, leaving this thread holding one and both blocked, where one wait for 2 takes
        nothing until both signals came (a deadlock the sum would hide)."""
        first = nodes[k].op
        if not w.decrement or w.sem.shared or self._cur["nthreads"] > 1:
            return 0
        n = 0
        for node in nodes[k + 1 :]:
            op = node.op
            if node.flavor is not _STMT or type(op) is not type(first) or op.sem != first.sem:
                break
            if not getattr(op, "decrement", False):
                break
            more = op.execute(StmtCtx(self, run, node, env))
            if not isinstance(more, SemaphoreWait) or more.sem is not w.sem:
                break  # (not reached: the same name in the same scope is the same view)
            w.value += more.value
            self.trail.append((run.a, node.path))
            n += 1
        return n

    def run(self) -> Outcome:
        """Run every actor to the end (or a deadlock, an error, a bound)."""
        import gc

        # a run allocates many small acyclic objects (accesses, views, clocks): the
        # cyclic collector's passes only cost time, growing with the heap
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._run()
        finally:
            if collecting:
                gc.enable()

    def _run(self) -> Outcome:
        out = self.out
        start = time.perf_counter()
        deadline = None if self.limits.max_seconds is None else start + self.limits.max_seconds
        max_steps = self.limits.max_steps
        units = self._unit_iter()
        parking = self.chooser is not None
        # the runs that step, in the order of their index (the order they were admitted
        # in); exploring, those parked at a semaphore wait or barrier arrival wait aside
        # (``parked``) until the chooser completes one, rather than being passed over in
        # every round
        active: list[_Run] = []
        parked: list[_Run] = []
        nxt = next(units, None)
        steps = 0
        self._cur: dict[str, Any] = (
            self.programs[0] if self.programs else {"p": 0, "ncl": 1, "cluster": {}}
        )

        def admit() -> bool:
            """The next grid point's actors (programs one after another)."""
            nonlocal nxt
            if nxt is None:
                return False
            info, gi, gcoords, offset = nxt
            alive = active or parked
            if alive and alive[0].actor.program != info["p"]:
                return False
            self._cur = info
            active.extend(self._make_runs(info, gi, gcoords, offset))
            nxt = next(units, None)
            return True

        # the next step count that asks the bounds: the step bound, or (with a time
        # bound) the next multiple of 1024, where the clock is read
        check = max_steps if deadline is None else min(max_steps, 1024)
        try:
            while True:
                if not active and not parked and not admit():
                    break
                progressed = False
                left = False  # a run finished or parked this round: ``active`` is rebuilt
                for run in active:
                    w = run.blocked
                    if w is not None and not w.ready():
                        continue
                    try:
                        r = next(run.gen)
                    except StopIteration:
                        progressed = left = run.gone = True
                        run.end()
                        continue
                    run.blocked = r
                    if r is not None:
                        if type(r) is _Trips:  # an empty loop's trips, counted at once
                            steps = min(steps + r.n, max_steps) - 1
                            run.blocked = r = None
                        elif parking and r.kind in _CHOSEN:
                            parked.append(run)
                            left = run.gone = True
                            continue
                    if r is None:
                        progressed = True
                        steps += 1
                        if steps >= check:
                            if steps >= max_steps:
                                raise _Stop(
                                    f"stopped after {steps} steps (the simulator's limit)",
                                    "SIM_TOO_LARGE",
                                )
                            if not steps & 1023 and time.perf_counter() > deadline:  # type: ignore[operator]
                                raise _Stop(
                                    f"did not finish in {self.limits.max_seconds:g} s "
                                    f"({steps} steps run): the simulator's time bound",
                                    "RUN_TIMEOUT",
                                )
                            check = min(max_steps, (steps | 1023) + 1)
                if left:
                    active = [r for r in active if not r.gone]
                if progressed or not (active or parked) or admit():
                    continue
                if parking:  # every thread waits: one ready semaphore wait goes on
                    parked.sort(key=_index)
                    ready = [r for r in parked if r.blocked is not None and r.blocked.ready()]
                    if ready:
                        chosen, _ = self.chooser.pick(ready)
                        chosen.blocked = None
                        chosen.gone = False
                        parked.remove(chosen)
                        insort(active, chosen, key=_index)  # (back in its place)
                        continue
                out.deadlock = [
                    Blocked(
                        r.actor,
                        r.blocked.path,
                        r.blocked.kind,
                        self._why(r.blocked),
                        r.blocked.sem.key[0] if isinstance(r.blocked, SemaphoreWait) else "",
                    )
                    for r in sorted(active + parked, key=_index)
                    if r.blocked is not None
                ]
                break
        except _Stop as e:
            out.stopped = str(e)
            if self.strict:
                out.error = SimError(e.code, "call.programs", str(e))
        except SimError as e:
            out.error = e
        finally:
            for run in active:
                run.end()
            for run in parked:
                run.end()
        out.steps = steps
        out.unordered = sorted(b.label for b in self.barriers.values() if b.order_matters)
        if out.error is None and not out.deadlock and not out.stopped:
            for _, sem in sorted(self.semaphores.items(), key=lambda kv: kv[0]):
                if sem.unbalanced:
                    last = sem.tokens[-1].path if sem.tokens else ""
                    out.leftover.append((sem.label, sem.value, last))
            if self.data:
                out.outputs = self._outputs()
        return out

    def _why(self, w: Wait) -> str:
        """What a deadlocked wait waits for, and where the signals it needs went."""
        text = w.describe()
        if not isinstance(w, SemaphoreWait):
            return text
        name, e, dev, block = w.sem.key
        paths = sorted(self._signal_paths.get(name, ()))
        if not paths:
            return text + f"; no statement ever signals {name}"
        others = [
            f"{sem.label.split(' on ')[0]} holds {sem.value}"
            for key, sem in self.semaphores.items()
            if key[0] == name and key[2:] == (dev, block) and sem is not w.sem and sem.value
        ]
        went = f" ({', '.join(others[:3])} there)" if others else ""
        return text + f"; the signals to {name} (at {', '.join(paths[:3])}) went elsewhere{went}"

    def _outputs(self) -> dict[str, np.ndarray]:
        shard = self.s.device_mesh is not None and self.s.run.shard_map is not False

        def gather(name: str, kind: str, spec: Any) -> np.ndarray:
            """The global array shard_map makes of each device's value under ``spec``."""
            parts = [
                self.memory[Location("GMEM", name, d, None, kind)].value() for d in range(self.ndev)
            ]
            if not shard:
                return parts[0]
            return sharding.assemble(parts, spec, self.s.device_mesh or {})

        outs = self.s.call.outputs
        out = {name: gather(name, "output", o.spec) for name, o in outs.items()}
        refs = [b for b in self.inputs if self.s.buffers[b].as_ref]
        for b, key in ref_result_keys(outs, refs).items():
            out[key] = gather(b, "input", self.s.buffer_spec(b))
        return out


#: (exploring mode) the blocking statements the scheduler completes, one at a time
_CHOSEN = ("semaphore", "arrive", "read")


#: a run's index (its ``a``): runs are admitted in its order, and step in it (a sort
#: key that runs no Python per comparison)
_index = attrgetter("a")


class _Stop(Exception):
    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.code = code


class _Share:
    """One block's share of a multicast load: where it was issued (its statement
    context), its copy engine's clock index, its barrier, what it read, and the engine's
    clock at the issue."""

    __slots__ = ("agent", "barrier", "issued", "source", "value", "x")

    def __init__(
        self, x: StmtCtx, agent: int, barrier: Barrier, value: Any, issued: Any, source: View
    ) -> None:
        self.x, self.agent, self.barrier, self.value, self.issued = x, agent, barrier, value, issued
        self.source = source


def _same_memory(a: View, b: View) -> bool:
    """Two views of the same elements of the same buffer, on the same device."""
    return (
        (a.base.name, a.base.kind) == (b.base.name, b.base.kind)
        and a.device == b.device
        and a.offsets.shape == b.offsets.shape
        and bool(np.array_equal(a.offsets, b.offsets))
    )


class _Reader:
    """Where one actor's index expressions load (``ids[0]``) and read semaphores
    (``pl.semaphore_read``): the ref as the running statement's scope names it. With
    data, memory as this schedule left it; data-free, the initial value of an input the
    kernel never writes (the same on every schedule), else the value is not known
    (``ExprDataDependent``: the check says what it could not follow). A load is a read
    of that element: the race check judges it."""

    __slots__ = ("engine", "run")

    def __init__(self, engine: Engine, run: _Run) -> None:
        self.engine, self.run = engine, run

    def _where(self) -> tuple[_Node, str]:
        node = self.run.node
        assert node is not None  # (set before any expression of a node is evaluated)
        return node, node.path

    def load(self, name: str, index: tuple[int, ...]) -> int:
        eng, run = self.engine, self.run
        node, path = self._where()
        view = eng._lookup(run.scope, name, run, path)
        if view.base.is_sync:
            raise E.ExprError(
                f"{name!r} is a {view.base.kind}: it holds no data (read a semaphore with "
                "pl.semaphore_read)"
            )
        if view.multicast is not None:
            raise SimError("SIM_UNSUPPORTED", path, f"a load through the multicast view {name!r}")
        shape = view.shape
        for i in index:
            if type(i) is float:  # (loaded from a float ref: JAX indexes with int32)
                raise SimError(
                    "INDEX_DTYPE",
                    path,
                    f"{name}[...] is indexed by a float ({i}): an index is an integer",
                )
        if len(index) != len(shape):
            raise E.ExprError(
                f"{name}[...] in an expression loads one element: {name} has shape "
                f"{list(shape)}, indexed by {len(index)} integer(s)"
            )
        for i, n in zip(index, shape, strict=True):
            if not -n <= i < n:  # (a negative index counts from the end, as a view's)
                raise SimError(
                    "OOB_INDEX", path, f"index {i} out of bounds for size {n} (a load of {name})"
                )
        index = tuple(i % n for i, n in zip(index, shape, strict=True))
        if view.oob is not None:
            code, where, msg = view.oob
            raise SimError(code, where, msg)
        sub = View(view.base, view.dtype, view.offsets[index], view.device, None, view.cluster)
        dev = run.actor.device if view.device is None else view.device
        loc = eng._place(view, run)
        eng.log_load(run, node, name, loc, sub)
        if eng.data:
            v = eng._elements(loc, sub)[()]
        else:
            v = eng.initial_element(view.base, dev, sub, name)
        if view.dtype.kind == "b":
            return int(bool(v))
        if view.dtype.kind not in "iu":  # (a condition takes it: ``Engine.eval``)
            return float(v)  # type: ignore[return-value]
        return int(v)

    def semaphore(self, name: str) -> int:
        eng, run = self.engine, self.run
        node, path = self._where()
        view = eng._lookup(run.scope, name, run, path)
        e = eng._one(view, name, "semaphore", path)
        dev = run.actor.device if view.device is None else view.device
        return eng._read_value(
            run, eng.semaphore(view.base, e, dev, run.actor.block, run.actor.program)
        )


class StmtCtx:
    """What a statement op sees while it is simulated for one actor."""

    __slots__ = ("engine", "env", "node", "path", "run", "stmt")

    def __init__(self, engine: Engine, run: _Run, node: _Node, env: dict[str, View]):
        self.engine, self.run, self.node, self.env = engine, run, node, env
        self.stmt = node.op
        self.path = node.path

    @property
    def mesh(self) -> dict[str, int]:
        return self.engine.mesh

    @property
    def data(self) -> bool:
        """Values are computed (False: the data-free race check, reads give shapes only)."""
        return self.engine.data

    def view(self, field: str) -> View:
        return self.engine._lookup(self.env, self.stmt.ref_name(field), self.run, self.path)

    def read(self, field: str) -> Any:
        return self.engine.read(self, field)

    def read_all(self, field: str, axes: tuple[str, ...]) -> list[Any]:
        return self.engine.read_all(self, field, axes)

    def write(self, field: str, value: Any, fan_out: tuple[str, ...] | None = None) -> None:
        self.engine.write(self, field, value, fan_out)

    def atomic_add(self, field: str, value: Any) -> None:
        self.engine.atomic_add(self, field, value)

    def like(self, shape: tuple[int, ...], dtype: Any) -> Abstract:
        return Abstract(tuple(shape), np.dtype(dtype))

    def eval(self, raw: Any, sub: str = "") -> int:
        if type(raw) is int:  # (a constant: what parsing and evaluating it gives)
            return raw
        e = self.engine.expr(raw)
        return self.engine.eval(e, self.run, self.path, sub)

    def signal(
        self, field: str, inc: int, device: Any = None, axes: tuple[str, ...] | None = None
    ) -> None:
        self.engine.signal(self, field, inc, device, axes)

    def wait_semaphore(self, field: str, value: int, decrement: bool) -> Wait | None:
        return self.engine.wait_semaphore(self, field, value, decrement)

    def semaphore_value(self, field: str) -> int:
        return self.engine.semaphore_value(self, field)

    def arrive(self, field: str) -> None:
        self.engine.arrive(self, field)

    def wait_barrier(self, field: str) -> Wait | None:
        return self.engine.wait_barrier(self, field)

    def copy_to_smem(self, src: str, dst: str, barrier: str) -> None:
        self.engine.copy_to_smem(self, src, dst, barrier)

    def copy_to_smem_collective(
        self, src: str, dst: str, barrier: str, axes: tuple[str, ...]
    ) -> None:
        self.engine.copy_to_smem_collective(self, src, dst, barrier, axes)

    def copy_to_gmem(self, src: str, dst: str, commit_group: bool = True) -> None:
        self.engine.copy_to_gmem(self, src, dst, commit_group)

    def commit(self) -> None:
        self.engine.commit(self)

    def wait_copies(self, n: int, read_only: bool = False) -> None:
        self.engine.wait_copies(self, n, read_only)

    def memo(self, key: str, fn: Any) -> Any:
        return self.engine.memo(self.stmt, key, fn)

    def fail(self, code: str, message: str) -> NoReturn:
        raise SimError(code, self.path, message)


#: ``_affine_spans``'s answers by what they are computed from (start, the view's
#: shape, strides, itemsize and dtype, the whole's dtype and offsets' shape), shared by
#: every run
_AFFINE: dict[tuple, list[tuple[int, int]] | None] = {}
_NONE: Any = object()
#: ``_lay_runs``'s answers by (start, shape, strides) of an affine view, shared by every run
_LAY: dict[tuple, list[tuple[int, int]] | None] = {}


def _affine_spans(view: View, start: int, whole: View) -> list[tuple[int, int]] | None:
    """The runs of a view sliced from its base's whole offsets (``start``: its first
    offset, the byte of the base where it starts), from the slicing's origin and
    strides alone; None when that does not say it (a bitcast, many runs...)."""
    o = view.offsets
    if view.dtype != whole.dtype or o.size == 0:
        return None
    last = whole.offsets.shape[-1]
    isz = o.itemsize
    origin, byte = divmod(start, whole.dtype.itemsize)
    if byte or o.shape[-1] != last or (last > 1 and o.strides[-1] != isz):
        return None
    dims = []
    for n, st in zip(o.shape[:-1], o.strides[:-1], strict=True):
        if n == 1:
            continue
        q, r = divmod(st, isz * last)
        if r:
            return None
        dims.append((n, q))
    return _lay_runs(origin, dims)


def _lay_runs(origin: int, dims: list[tuple[int, int]]) -> list[tuple[int, int]] | None:
    """The runs of base elements ``origin + sum(i_k * stride_k)`` over ``dims`` (each
    (size, stride) in elements); None when that does not say it simply (a stride not
    positive, many runs, runs that touch or overlap: the generic path merges them)."""
    dims = [(q, n) for n, q in dims if n != 1]
    for q, n in dims:
        if q <= 0 or n == 0:
            return None
    dims.sort()
    length = 1
    while dims and dims[0][0] == length:
        length *= dims.pop(0)[1]
    if not dims:
        return [(origin, origin + length)]
    count = 1
    for _, n in dims:
        count *= n
    if count > 4096:
        return None
    starts = np.full(1, origin, np.int64)
    for q, n in dims:
        starts = (starts[:, None] + np.arange(n, dtype=np.int64) * q).reshape(-1)
    starts.sort()
    if length == 1 or np.any(np.diff(starts) < length):
        return None  # runs that touch or overlap: the generic path merges them
    return [(int(a), int(a) + length) for a in starts.tolist()]


def written_buffers(s: Scenario) -> frozenset[str]:
    """The buffers some statement may write (through a parameter or any view of one):
    an index loaded from any other input is the call's initial value on every
    schedule."""
    from mpmd_lab.ops import WRITE

    c = s.call
    root: dict[str, set[str]] = {}
    for a in c.args:
        if isinstance(a, BufferArg):
            root.setdefault(a.param, set()).add(a.buffer)
        else:
            for j, buf in enumerate(a.tuple):
                root.setdefault(f"{a.param}[{j}]", set()).add(buf)
    for cap in c.captures:
        root.setdefault(cap.name, set()).add(cap.buffer)
    lets: dict[str, set[str]] = {}
    written: set[str] = set()

    def walk(body: list[Any]) -> None:
        for st in body:
            if isinstance(st, Let):
                lets.setdefault(st.let, set()).add(st.ref)
                continue
            for _f, name, access in st.ref_fields():
                if access == WRITE:
                    written.add(name)
            if st.BODY:
                walk(st.body)

    for prog in c.programs:
        walk(prog.body)
    out: set[str] = set()
    seen: set[str] = set()
    todo = list(written)
    while todo:  # a written view writes what it is a view of
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        out |= root.get(name, set())
        todo.extend(lets.get(name, ()))
    return frozenset(out)


def _names_used(body: Any) -> set[str]:
    """Every name a statement of ``body`` (nested bodies too) reads a ref by: the refs of
    statements, the sources of views, and the refs expressions load (``ids_ref[0]``)."""
    from mpmd_lab.plan import expr_fields

    out: set[str] = set()
    for st in body:
        for _, name, _ in st.ref_fields():
            out.add(name)
        for _, e in expr_fields(st):
            calls = e.calls()
            if "load" in calls or "semaphore_read" in calls:
                out.update(r.ref for r in E.data_reads(e))
        if getattr(st, "BODY", False):
            out |= _names_used(st.body)
    return out


def read_names(op: Any, exprs: bool = True) -> tuple[str, ...]:
    """The semaphores a statement reads (``pl.semaphore_read``), each once, in order: in
    its index expressions (``exprs``: False where none reads data) and a compute's
    value."""
    names: list[str] = []
    if exprs:
        from mpmd_lab.plan import expr_fields

        names = [
            r.ref
            for _, e in expr_fields(op)
            if "semaphore_read" in e.calls()
            for r in E.data_reads(e)
            if isinstance(r, E.SemRead)
        ]
    if isinstance(op, Compute):
        names += op.sem_names()
    elif not names:
        return ()
    return tuple(dict.fromkeys(names))


def _sem_reads(nodes: tuple[_Node, ...]) -> dict[int, tuple[str, ...]]:
    """The statements of a compiled body (nested ones too) that read a semaphore, by
    flat index: the names they read (:func:`read_names`)."""
    out: dict[int, tuple[str, ...]] = {}
    for node in nodes:
        names = read_names(node.op)
        if names:
            out[node.index] = names
        if node.children:
            out.update(_sem_reads(node.children))
    return out


def deadlock_diagnostic(blocked: list[Blocked], stage: str = "simulate") -> Diagnostic:
    """A ``DEADLOCK_*`` error naming the blocked actors and what each waits for."""
    first = blocked[0]
    code = "DEADLOCK_BARRIER" if first.kind == "barrier" else "DEADLOCK_SEMAPHORE"
    devices = sorted({b.actor.device for b in blocked})
    shown = ", ".join(map(str, devices[:8])) + (" ..." if len(devices) > 8 else "")
    groups: dict[str, list[Blocked]] = {}
    for b in blocked:
        groups.setdefault(b.path, []).append(b)
    lines = []
    for path, bs in list(groups.items())[:3]:
        line = f"{bs[0].actor.describe()} at {path} {bs[0].what}"
        if len(bs) > 1:
            rest = [b.actor.describe() for b in bs[1:4]]
            line += f" (and likewise {', '.join(rest)}" + (" ...)" if len(bs) > 4 else ")")
        lines.append(line)
    more = f"; {len(groups) - 3} more waits blocked" if len(groups) > 3 else ""
    return Diagnostic(
        code=code,
        severity="error",
        stage=stage,
        path=first.path,
        message=f"deadlock: every thread left is blocked (device{'s' if len(devices) > 1 else ''} "
        f"{shown}), and no signal or arrival can come: " + "; ".join(lines) + more,
    )


__all__ = [
    "deadlock_diagnostic",
    "step_estimate",
    "synchronises",
    "Blocked",
    "Engine",
    "Finding",
    "Limits",
    "Outcome",
    "SimError",
    "StmtCtx",
    "compile_body",
    "read_names",
]
