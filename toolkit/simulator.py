"""A reference simulator: a scenario's call executed with numpy, device by device.

No CPU interpreter of JAX runs ``remote_ref``, ``multicast_ref`` or ``cluster_ref``
(RECIPES.md). This module runs the scenario's semantics itself, over every device
of the device mesh, every block (grid point x cluster) and every warpgroup, and
logs every access (``mpmd_lab.accesslog``). Where JAX's CPU interpreter does run a
scenario, the tests hold the two to bit-identical outputs.

The model, in short:

* **Memory.** Each buffer is a flat byte array: inputs and outputs in each
  device's ``GMEM``, ``SMEM``/``TMEM`` scratch per block (fresh in every block),
  ``GMEM`` scratch per device. Outputs and scratch start as JAX's interpreter
  fills them: NaN for floats; for ints and bools the GPU interpreter
  (``run.interpret == "gpu"``) uses the dtype's max and ``True``, the HLO
  interpreter (``"hlo"``) the dtype's min and ``False``.
* **Views.** A view is an array of byte offsets, shape ``view.shape + (itemsize,)``,
  into one buffer; the transform stack is applied to it: ``at`` is numpy indexing
  (a ``block`` entry is ``lax.axis_index`` of a grid, cluster, thread or device
  axis), ``reshape`` and ``transpose`` reshape and permute it, ``bitcast``
  regroups the bytes exactly as ``jax._src.state.utils.bitcast`` (a width change
  scales the second-minor dim). ``remote_ref`` picks a device (an int is the
  linear index in mesh order; ``{axis: i}`` sets those coordinates, the others
  stay this device's; ``{"offset": k}`` wraps), ``multicast_ref`` all devices
  along the named axes (writes fan out), ``cluster_ref`` the SMEM of the named
  block of the same cluster.
  A negative int index wraps, as the HLO interpreter does (JAX's GPU interpreter
  fails writing through one: an AssertionError in its bounds check).
* **Statements.** ``copy`` and ``tma_store`` (commit, copy, wait: it completes
  before the next statement) store ``src`` into ``dst``; ``add`` stores
  ``lhs + rhs`` (one dtype, numpy arithmetic, which XLA's CPU arithmetic matches
  bit for bit); ``fill`` is ``jnp.full`` (a Python float becomes float32 first);
  ``multimem_store`` stores into ``dst`` on every device along ``axes``. Reading
  through a multicast view is an error.
* **pl.program_id** follows the scenario's interpreter: 0 in every block under
  ``"gpu"`` (what JAX's GPU interpreter does), the block's grid coordinate under
  ``"hlo"``. Pass ``program_id="grid"`` or ``"zero"`` to choose.
* **Order.** Programs one after another; within a program the grid points one
  after another in C order (JAX's GPU interpreter loops over them); within a grid
  point every statement runs for every device, cluster block and warpgroup before
  the next statement (lockstep, devices then blocks then threads, each in C
  order). A race's surviving value is therefore the last writer in that order;
  the log reports the race either way (write-write and read-write conflicts
  between different actors: ``mpmd_lab.accesslog``).
* **Scale.** Views hold 8 bytes of offset per byte of data: fine for the
  megabytes of a teaching scenario (a 4-device ring shift of 1M float32 takes a
  few seconds), not for production-sized tensors.
* **Errors** JAX would raise are the validator's: when ``mpmd_lab.validate.check``
  reports an error at the build or trace stage, the result is an error carrying
  that diagnostic; one at the GPU-lowering stage becomes a note (the CPU
  interpreters still run the call). What the simulator itself cannot make sense of
  (an index out of bounds, a store of the wrong shape) is an error too, never a
  guess.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mpmd_lab import expr as E
from mpmd_lab.accesslog import AccessLog, Actor, Location
from mpmd_lab.callsupport import encode_outputs
from mpmd_lab.diagnostics import Diagnostic
from mpmd_lab.dtypes import np_dtype
from mpmd_lab.memory import Base, Storage, View, host_value, uninitialized
from mpmd_lab.ops import Let
from mpmd_lab.scenario import BufferArg, Program, Scenario, load_scenario

BACKEND = "simulate"
NOTE = (
    "Simulated by mpmd-lab (mpmd_lab.simulator): numpy over every device, block and "
    "warpgroup, not a run of JAX. Where JAX's CPU interpreter runs a scenario the "
    "simulator matches it bit for bit; cross-device and cluster traffic no CPU "
    "interpreter runs are the simulator's model alone."
)


#: Most (thread, statement) steps one simulation runs: keeps a widget responsive.
MAX_STEPS = 1 << 18
#: Most memory one simulation may take (bytes): the smaller of this and half of what is free.
MAX_BYTES = 8 * 2**30


def memory_estimate(s: Scenario) -> int:
    """Bytes a simulation of ``s`` needs, roughly: every buffer's bytes on every device,
    the host's global copy of each input, and 8 bytes of offset per viewed byte."""
    from mpmd_lab.dtypes import nbytes

    n = s.num_devices
    total = 0
    for b in s.buffers.values():
        total += nbytes(b.shape, b.dtype) * (2 * n + 8)
    for o in s.call.outputs.values():
        total += nbytes(o.shape, o.dtype) * (n + 8)
    for sc in s.call.scratch.values():
        if sc.KIND == "array":
            total += nbytes(sc.shape, sc.dtype) * (n + 8)
    return total


def memory_limit() -> int:
    """The memory a simulation may use here: MAX_BYTES, or half of what is available."""
    try:
        import os

        avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return MAX_BYTES
    return min(MAX_BYTES, avail // 2)


class SimError(Exception):
    """The simulated call fails: a diagnostic code, a field path and a message."""

    def __init__(self, code: str, path: str, message: str):
        self.code = code
        self.path = path
        super().__init__(message)


# ---------------------------------------------------------------- results


@dataclass
class SimResult:
    """What ``simulate`` returns: outputs (global arrays), the access log, the races."""

    status: str  # "ok" | "error"
    devices: int
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    log: AccessLog = field(default_factory=AccessLog)
    error: Diagnostic | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    backend: str = BACKEND
    memory: dict[Location, Storage] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def races(self) -> list:
        return self.log.races

    def value(self, buffer: str, device: int = 0, block: int | None = None) -> np.ndarray:
        """Final contents of any buffer in one place (``block`` for SMEM/TMEM scratch)."""
        for loc, st in self.memory.items():
            if (loc.buffer, loc.device, loc.block) == (buffer, device, block):
                return st.value()
        raise KeyError(f"{buffer!r} was never allocated on device {device} block {block}")

    @property
    def note(self) -> str:
        return " ".join([NOTE, *self.notes])

    def to_json(self, log: bool = False) -> dict[str, Any]:
        """The ``run --json`` form, plus ``note`` and ``races`` (and ``log`` if asked)."""
        out: dict[str, Any] = {
            "status": self.status,
            "backend": self.backend,
            "devices": self.devices,
            "error": self.error.error_json() if self.error else None,
            "outputs": encode_outputs(self.outputs),
            "seconds": round(self.seconds, 6),
            "note": self.note,
            "races": [r.to_dict() for r in self.races],
        }
        if log:
            out["log"] = self.log.to_dict()
        return out

    def diagnostics(self) -> list[Diagnostic]:
        """The error and each race as a Diagnostic (code ``RACE`` at the later statement)."""
        out = [self.error] if self.error else []
        for r in self.races:
            out.append(
                Diagnostic(
                    code="RACE",
                    severity="warning",
                    stage="gpu-run",
                    path=f"call.programs[{r.second.actor.program}].body[{r.second.statement}]",
                    message=f"{r.kind} race (simulated): {r.describe()}",
                )
            )
        return out

    def summary(self) -> str:
        if self.error is not None:
            e = self.error
            return f"simulate: error {e.code} at {e.path or '<scenario>'}: {e.message}"
        lines = [f"simulate: ok on {self.devices} device(s), {len(self.log.accesses)} accesses"]
        for name, value in self.outputs.items():
            lines.append(f"  {name}: shape={list(value.shape)} dtype={value.dtype}")
        lines += [f"  race: {r.describe()}" for r in self.races[:10]]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


# ---------------------------------------------------------------- the simulation


@dataclass(frozen=True)
class Context:
    """One actor's coordinates: what ``lax.axis_index`` and ``pl.program_id`` return."""

    actor: Actor
    axes: dict[str, int]
    axis_sizes: dict[str, int]
    pids: tuple[int, ...]
    grid_point: int
    npids: tuple[int, ...] = ()

    @property
    def cluster(self) -> tuple[int, ...]:
        return self.actor.cluster

    def describe(self) -> str:
        return self.actor.describe()

    def env(self) -> E.Env:
        return E.Env(self.axes, self.axis_sizes, self.pids, self.npids)


class Simulator:
    """Runs one scenario; ``run()`` fills ``self.log`` and returns the outputs."""

    def __init__(self, scenario: Scenario, program_id: str = "auto"):
        self.s = scenario
        self.mode = scenario.run.interpret
        self.pid_mode = (
            ("zero" if self.mode == "gpu" else "grid") if program_id == "auto" else program_id
        )
        self.mesh = dict(scenario.device_mesh or {})
        self.ndev = scenario.num_devices
        self.log = AccessLog()
        self.memory: dict[Location, Storage] = {}
        self.params: dict[str, tuple[Base, list[Any], str]] = {}
        self.notes: list[str] = []
        self.used_pid = False
        self._whole: dict[Base, View] = {}

    # ------------------------------------------------------------ set-up

    def _device_coords(self, d: int) -> tuple[int, ...]:
        return tuple(int(i) for i in np.unravel_index(d, tuple(self.mesh.values()) or (1,)))[
            : len(self.mesh)
        ]

    def _device_of(self, coords: dict[str, int]) -> int:
        if not self.mesh:
            return 0
        return int(np.ravel_multi_index([coords[a] for a in self.mesh], tuple(self.mesh.values())))

    def _setup(self) -> None:
        s, c = self.s, self.s.call
        inputs: dict[str, Base] = {}

        def input_base(buf: str, path: str) -> Base:
            if buf not in s.buffers:
                raise SimError("XREF_UNKNOWN_BUFFER", path, f"no buffer {buf!r}")
            if buf not in inputs:
                b = s.buffers[buf]
                dt = np_dtype(b.dtype)
                inputs[buf] = Base("input", buf, "GMEM", dt, tuple(b.shape))
                g = host_value(b, self.ndev)
                n = b.shape[0] if b.shape else 0
                for d in range(self.ndev):
                    local = g[d * n : (d + 1) * n] if b.shape else g
                    loc = Location("GMEM", buf, d)
                    self.memory[loc] = Storage.of(loc, local.astype(dt))
            return inputs[buf]

        for i, a in enumerate(c.args):
            path = f"call.args[{i}]"
            if isinstance(a, BufferArg):
                self.params[a.param] = (input_base(a.buffer, path), a.transforms, path)
            else:
                for j, buf in enumerate(a.tuple):
                    base = input_base(buf, path)
                    self.params[f"{a.param}[{j}]"] = (base, a.transforms, path)
        for i, cap in enumerate(c.captures):
            self.params[cap.name] = (input_base(cap.buffer, f"call.captures[{i}]"), [], "")
        self.inputs = inputs
        for name, o in c.outputs.items():
            dt = np_dtype(o.dtype)
            base = Base("output", name, "GMEM", dt, tuple(o.shape))
            self.params[name] = (base, [], f"call.outputs.{name}")
            for d in range(self.ndev):
                loc = Location("GMEM", name, d)
                self.memory[loc] = Storage.of(loc, uninitialized(tuple(o.shape), dt, self.mode))
        for name, sc in c.scratch.items():
            # tiling and swizzle change the layout in memory, not what the kernel indexes
            base = Base("scratch", name, sc.memory_space, np_dtype(sc.dtype), tuple(sc.shape))
            self.params[name] = (base, [], f"call.scratch.{name}")

    def _storage(self, base: Base, device: int, block: int) -> Storage:
        per_block = base.kind == "scratch" and base.memory != "GMEM"
        loc = Location(base.memory, base.name, device, block if per_block else None)
        st = self.memory.get(loc)
        if st is None:  # scratch: allocated on first touch, uninitialized
            st = Storage.of(loc, uninitialized(base.shape, base.dtype, self.mode))
            self.memory[loc] = st
        return st

    # ------------------------------------------------------------ views

    # ------------------------------------------------------------ what the ops ask

    def fail(self, code: str, path: str, message: str) -> None:
        """Stop the simulation: the call fails at ``path``."""
        raise SimError(code, path, message)

    def eval(self, e: E.Expr, ctx: Context, path: str) -> int:
        """An index expression's value for one actor."""
        if "program_id" in e.calls():
            self.used_pid = True
        try:
            return e.eval(ctx.env())
        except E.ExprError as ex:
            raise SimError("XREF_UNKNOWN_NAME", path, str(ex)) from None

    @property
    def cluster_sizes(self) -> dict[str, int]:
        return self._cluster_sizes

    def peer(self, dref: Any, ctx: Context, path: str) -> int:
        """The device a resolved device id names, seen from this actor."""
        own = dict(zip(self.mesh, ctx.actor.device_coords, strict=True))
        if "program_id" in frozenset().union(*(e.calls() for _, e in dref.exprs())):
            self.used_pid = True
        try:
            return dref.target(own, self.mesh, ctx.env())
        except IndexError as e:  # (before LookupError, its base)
            raise SimError("REMOTE_DEVICE_OOB", path, str(e)) from None
        except LookupError as e:
            raise SimError("DEVICE_ID_UNKNOWN_AXIS", path, str(e)) from None
        except E.ExprError as e:
            raise SimError("XREF_UNKNOWN_NAME", path, str(e)) from None

    def _apply(self, view: View, t: Any, ctx: Context, path: str) -> View:
        return t.view(view, self, ctx, path)

    def _stack(self, view: View, transforms: list[Any], ctx: Context, path: str) -> View:
        for i, t in enumerate(transforms):
            view = self._apply(view, t, ctx, f"{path}.transforms[{i}]")
        return view

    def _lookup(self, env: dict[str, View], name: str, ctx: Context, path: str) -> View:
        if name in env:
            return env[name]
        if name in self.params:
            base, transforms, ppath = self.params[name]
            if base not in self._whole:  # offsets are never written: share them
                self._whole[base] = View.whole(base)
            view = self._stack(self._whole[base], transforms, ctx, ppath)
            env[name] = view
            return view
        raise SimError("XREF_UNKNOWN_NAME", path, f"no parameter or view named {name!r}")

    # ------------------------------------------------------------ memory access

    def _targets(self, view: View, ctx: Context, fan_out: tuple[str, ...] | None) -> list[Storage]:
        dev = ctx.actor.device if view.device is None else view.device
        axes = view.multicast or fan_out
        devices = [dev]
        if axes:
            own = dict(zip(self.mesh, self._device_coords(dev), strict=True))
            ranges = [range(self.mesh[a]) for a in axes]
            devices = []
            for combo in itertools.product(*ranges):
                devices.append(self._device_of({**own, **dict(zip(axes, combo, strict=True))}))
        block = ctx.actor.block
        if view.cluster is not None:
            block = ctx.grid_point * self._cluster_count + int(
                np.ravel_multi_index(view.cluster, tuple(self._cluster_sizes.values()))
            )
        return [self._storage(view.base, d, block) for d in devices]

    def _read(self, view: View, ctx: Context, k: int, op: str, name: str, path: str) -> np.ndarray:
        if view.multicast is not None:
            raise SimError("SIM_UNSUPPORTED", path, f"reading {name!r} through a multicast view")
        (st,) = self._targets(view, ctx, None)
        raw = st.data[view.offsets]
        value = np.ascontiguousarray(raw).view(view.dtype).reshape(view.shape)
        self.log.record("read", ctx.actor, k, op, name, st.location, view.elements(), st.size)
        return value

    def _write(
        self,
        view: View,
        value: np.ndarray,
        ctx: Context,
        k: int,
        op: str,
        name: str,
        path: str,
        fan_out: tuple[str, ...] | None = None,
    ) -> None:
        value = np.asarray(value)
        if value.shape != view.shape:
            raise SimError(
                "SWAP_SHAPE_MISMATCH",
                path,
                f"Invalid shape for `swap`: storing {value.shape} into {name!r} of shape "
                f"{view.shape}",
            )
        if value.dtype != view.dtype:
            raise SimError(
                "SIM_DTYPE_MISMATCH",
                path,
                f"storing {value.dtype} into {name!r} of dtype {view.dtype}",
            )
        raw = np.ascontiguousarray(value).reshape(-1).view(np.uint8)
        raw = raw.reshape(*view.shape, view.dtype.itemsize)
        for st in self._targets(view, ctx, fan_out):
            st.data[view.offsets] = raw
            self.log.record("write", ctx.actor, k, op, name, st.location, view.elements(), st.size)

    # ------------------------------------------------------------ statements

    def _exec(self, stmt: Any, k: int, env: dict[str, View], ctx: Context, path: str) -> None:
        if isinstance(stmt, Let):
            env[stmt.let] = self._stack(
                self._lookup(env, stmt.ref, ctx, path), stmt.transforms, ctx, path
            )
            return
        stmt.execute(_StmtCtx(self, stmt, k, env, ctx, path))

    def _run_program(self, p: int, prog: Program) -> None:
        m = prog.mesh
        grid = dict(m.grid) or {}
        self._cluster_sizes = dict(m.cluster)
        self._cluster_count = math.prod(self._cluster_sizes.values())
        nthreads = m.threads.count if m.threads else 1
        grid_shape = tuple(grid.values())
        cluster_shape = tuple(self._cluster_sizes.values())
        sizes = {**self.mesh, **grid, **self._cluster_sizes}
        if m.threads and m.threads.name:
            sizes[m.threads.name] = nthreads
        actors_total = self.ndev * math.prod(grid_shape) * self._cluster_count * nthreads
        if actors_total * max(1, len(prog.body)) > MAX_STEPS:
            raise SimError(
                "SIM_TOO_LARGE",
                f"call.programs[{p}].mesh",
                f"{actors_total} threads x {len(prog.body)} statements is more than the "
                f"simulator's {MAX_STEPS} steps; shrink the grid or the device mesh",
            )
        for gi, gcoords in enumerate(itertools.product(*(range(n) for n in grid_shape))):
            actors: list[tuple[Context, dict[str, View]]] = []
            for d in range(self.ndev):
                dcoords = self._device_coords(d)
                for ci, ccoords in enumerate(itertools.product(*(range(n) for n in cluster_shape))):
                    for t in range(nthreads):
                        actor = Actor(
                            p, d, gi * self._cluster_count + ci, t, gcoords, ccoords, dcoords
                        )
                        axes = {
                            **dict(zip(self.mesh, dcoords, strict=True)),
                            **dict(zip(grid, gcoords, strict=True)),
                            **dict(zip(self._cluster_sizes, ccoords, strict=True)),
                        }
                        if m.threads and m.threads.name:
                            axes[m.threads.name] = t
                        pids = (
                            (*gcoords, *ccoords, t)
                            if self.pid_mode == "grid"
                            else (0,) * (len(gcoords) + len(ccoords) + 1)
                        )
                        ctx = Context(actor, axes, sizes, pids, gi, grid_shape)
                        actors.append((ctx, {}))
            for k, stmt in enumerate(prog.body):
                path = f"call.programs[{p}].body[{k}]"
                for ctx, env in actors:
                    self._exec(stmt, k, env, ctx, path)

    def run(self) -> dict[str, np.ndarray]:
        self._setup()
        for p, prog in enumerate(self.s.call.programs):
            self._run_program(p, prog)
        if self.used_pid and self.pid_mode == "zero":
            self.notes.append(
                "pl.program_id is 0 in every block, as under JAX's GPU interpreter "
                "(PROGRAM_ID_GPU_INTERP); a real GPU gives the block index."
            )
        return self._outputs()

    def _outputs(self) -> dict[str, np.ndarray]:
        def gather(name: str) -> np.ndarray:
            parts = [self.memory[Location("GMEM", name, d)].value() for d in range(self.ndev)]
            if not parts[0].shape or self.s.device_mesh is None:
                return parts[0]
            return np.concatenate(parts, axis=0)

        out = {name: gather(name) for name in self.s.call.outputs}
        for b in self.inputs:
            if self.s.buffers[b].as_ref:
                out[b if b not in self.s.call.outputs else f"{b}_ref"] = gather(b)
        return out


class _StmtCtx:
    """What a statement op sees while it is simulated for one actor."""

    __slots__ = ("sim", "stmt", "k", "env", "ctx", "path")

    def __init__(
        self, sim: Simulator, stmt: Any, k: int, env: dict[str, View], ctx: Context, path: str
    ):
        self.sim, self.stmt, self.k, self.env, self.ctx, self.path = sim, stmt, k, env, ctx, path

    @property
    def mesh(self) -> dict[str, int]:
        return self.sim.mesh

    def view(self, field: str) -> View:
        return self.sim._lookup(self.env, getattr(self.stmt, field), self.ctx, self.path)

    def read(self, field: str) -> np.ndarray:
        name = getattr(self.stmt, field)
        return self.sim._read(self.view(field), self.ctx, self.k, self.stmt.op, name, self.path)

    def write(self, field: str, value: np.ndarray, fan_out: tuple[str, ...] | None = None) -> None:
        name = getattr(self.stmt, field)
        self.sim._write(
            self.view(field), value, self.ctx, self.k, self.stmt.op, name, self.path, fan_out
        )

    def fail(self, code: str, message: str) -> None:
        raise SimError(code, self.path, message)


# ---------------------------------------------------------------- entry point


#: Stages at which every way of running a call (GPU or CPU interpreter) fails.
BLOCKING_STAGES = ("schema", "build", "trace")


def _static_findings(diags: Any) -> tuple[Diagnostic | None, list[str]]:
    """(the first error that stops every run, notes) of the scenario's diagnostics.

    Errors when lowering for the GPU become notes: JAX's CPU interpreters still run
    such a call, and the simulator matches them. Errors of the ``interpret`` and
    ``gpu-run`` stages are the interpreters' limits and the races the simulator
    reports itself.
    """
    notes = []
    for d in diags:
        if not d.is_error:
            continue
        if d.stage in BLOCKING_STAGES:
            return d, notes
        if d.stage == "gpu-lower":
            notes.append(
                f"A GPU compile would reject this call ({d.code}: {d.message}); "
                "simulated as JAX's CPU interpreter would run it."
            )
    return None, notes


def simulate(
    scenario: Any,
    *,
    check: bool = True,
    diagnostics: Any = None,
    program_id: str = "auto",
) -> SimResult:
    """Simulate a scenario's call (see the module docstring for the model).

    ``scenario``: a Scenario or anything ``load_scenario`` takes. ``check``: first
    see whether JAX would reject the call, from ``diagnostics`` (the scenario's, when
    the caller has them) or by checking it once. ``program_id``: ``"auto"`` (as the
    scenario's interpreter), ``"zero"`` or ``"grid"``.
    """
    start = time.perf_counter()
    s = load_scenario(scenario)
    ndev = s.num_devices
    notes: list[str] = []
    if check:
        if diagnostics is None:
            from mpmd_lab.validate import check as static_check

            diagnostics = static_check(s)
        diag, notes = _static_findings(diagnostics)
        if diag is not None:
            return SimResult("error", ndev, error=diag, seconds=time.perf_counter() - start)
    need, limit = memory_estimate(s), memory_limit()
    if need > limit:
        error = Diagnostic(
            code="SIM_TOO_LARGE",
            stage="simulate",
            path="buffers",
            message=f"simulating this call needs about {need / 2**30:.1f} GiB, more than the "
            f"{limit / 2**30:.1f} GiB the simulator may use here; shrink the buffers or the "
            "device mesh",
        )
        return SimResult("error", ndev, error=error, seconds=time.perf_counter() - start)
    sim = Simulator(s, program_id=program_id)
    sim.notes.extend(notes)
    try:
        outputs = sim.run()
    except SimError as e:
        error = Diagnostic(code=e.code, stage="simulate", path=e.path, message=str(e))
        return SimResult(
            "error",
            ndev,
            log=sim.log,
            error=error,
            seconds=time.perf_counter() - start,
            notes=sim.notes,
        )
    return SimResult(
        "ok",
        ndev,
        outputs=outputs,
        log=sim.log,
        seconds=time.perf_counter() - start,
        notes=sim.notes,
        memory=sim.memory,
    )


__all__ = ["NOTE", "SimError", "SimResult", "Simulator", "simulate"]
