"""A reference simulator: a scenario's call executed with numpy, as a GPU runs it.

No CPU interpreter of JAX runs ``remote_ref``, ``multicast_ref``, ``cluster_ref`` or a
cross-device semaphore (RECIPES.md). This module runs the call's semantics itself
(:mod:`mpmd_lab.engine`), over every device of the device mesh, every block (grid
point x cluster) and every warpgroup, and logs every access (:mod:`mpmd_lab.accesslog`).
Where JAX's CPU interpreter does run a scenario, the tests hold the two to bit-identical
outputs (and compare only where the interpreter is right: see ``pl.program_id``).

The model, in short:

* **Memory.** Each buffer is a flat byte array: inputs and outputs in each device's
  ``GMEM`` (an input and an output of one name are two places), ``SMEM``/``TMEM``
  scratch per block (fresh in every block), ``GMEM`` scratch per device. Outputs and
  scratch start as JAX's interpreter fills them: NaN for floats; for ints and bools the
  GPU interpreter (``run.interpret == "gpu"``) uses the dtype's max and ``True``, the
  HLO interpreter (``"hlo"``) the dtype's min and ``False``.
* **Views.** A view is an array of byte offsets into one buffer; the transform stack
  is applied to it (``at`` is numpy indexing, ``reshape``/``transpose`` reshape and
  permute, ``bitcast`` regroups bytes as ``jax._src.state.utils.bitcast``;
  ``remote_ref`` picks a device, ``multicast_ref`` every device along some axes,
  ``cluster_ref`` another block's SMEM). An index outside its ref fails at the access.
* **Statements.** ``copy``, ``add``, ``fill``, ``tma_store`` (synchronous),
  ``multimem_store`` (every device along ``axes``), ``atomic_add``,
  ``multimem_load_reduce``, ``dot`` (float32 accumulation); semaphores, barriers and
  async copies with GPU semantics (:mod:`mpmd_lab.engine.sync`).
* **pl.program_id** is each block's own grid index, as on a GPU. JAX's GPU interpreter
  returns 0 in every block (the check warns: PROGRAM_ID_GPU_INTERP); ``program_id=
  "zero"`` reproduces that.
* **Order.** Grid points one after another (programs one after another), each
  statement in lockstep over devices, blocks and threads; a blocked actor lets the
  others (and the next grid point) go on. Races are judged by happens-before, not by
  this order; a race's surviving value is the last writer in it.
* **Bounds.** Before it starts: a memory estimate (``SIM_TOO_LARGE`` with the
  estimate) and a step estimate; while it runs: steps and seconds. A deadlock ends the
  run with a ``DEADLOCK_*`` error naming who waits for what. ``run(..., "simulate")``
  runs it in a child process (:mod:`mpmd_lab.engine.child`) with the JAX backends'
  timeout and cancel.
* **A partial import** (``not_imported``: what ``from_jax`` could not carry) is refused
  with its first IMPORT_UNSUPPORTED: its outputs would not be the kernel's.
* **Errors** JAX would raise are the validator's: when ``mpmd_lab.validate.check``
  reports an error at the build, trace or GPU-lowering stage, the result is an error
  carrying that diagnostic (what a GPU compile, and ``run --backend interpret``, say).
  What the simulator itself cannot make sense of is an error too.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from mpmd_lab.accesslog import DEFAULT_LIMIT, AccessLog, Location
from mpmd_lab.callsupport import encode_outputs
from mpmd_lab.diagnostics import Diagnostic
from mpmd_lab.engine import (
    MAX_STEPS,
    Blocked,
    Engine,
    Limits,
    SimError,
    deadlock_diagnostic,
    step_estimate,
    synchronises,
)
from mpmd_lab.memory import Storage
from mpmd_lab.record import Record
from mpmd_lab.scenario import Scenario, load_scenario

BACKEND = "simulate"
NOTE = (
    "Simulated by mpmd-lab (mpmd_lab.simulator): numpy over every device, block and "
    "warpgroup, not a run of JAX. Where JAX's CPU interpreter runs a scenario the "
    "simulator matches it bit for bit; cross-device and cluster traffic no CPU "
    "interpreter runs are the simulator's model alone."
)

#: Most memory one simulation may take (bytes): the smaller of this and half of what is free.
MAX_BYTES = 8 * 2**30
#: Seconds an in-process simulation may run (``simulate(max_seconds=...)``).
MAX_SECONDS = 300.0
#: Most (thread, statement) steps one simulation runs.
MAX_STEPS_DEFAULT = MAX_STEPS


def memory_estimate(s: Scenario) -> int:
    """Bytes a simulation of ``s`` needs, roughly: every buffer on every device (and
    per-block scratch in every block), the host's global copy of each input and its
    making (``iota``'s int64 range, ``random``'s float64 draw), 8 bytes of offset per
    viewed byte, and the vector clocks of the actors that synchronise."""
    from mpmd_lab.dtypes import nbytes

    n = s.num_devices
    total = 0
    for b in s.buffers.values():
        size = nbytes(b.shape, b.dtype)
        elems = math.prod(b.shape) if b.shape else 1
        total += size * (2 * n + 8) + (8 * elems * n if b.init in ("iota", "random") else 0)
    for o in s.call.outputs.values():
        total += nbytes(o.shape, o.dtype) * (n + 8)
    actors = 0
    for prog in s.call.programs:
        m = prog.mesh
        blocks = math.prod(m.grid.values()) * math.prod(m.cluster.values())
        actors += n * blocks * (m.threads.count if m.threads else 1)
        for sc in s.call.scratch.values():
            if sc.KIND == "array":
                per = blocks if sc.memory_space != "GMEM" else 1
                total += nbytes(sc.shape, sc.dtype) * (n * per + 8)
    if synchronises(s):
        total += actors * 2 * actors * 4 * 2  # clocks, and their snapshots in flight
    return total


def memory_limit() -> int:
    """The memory a simulation may use here: MAX_BYTES, or half of what is available."""
    try:
        import os

        avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return MAX_BYTES
    return min(MAX_BYTES, avail // 2)


# ---------------------------------------------------------------- results


class SimResult(Record):
    """What ``simulate`` returns: ``status`` "ok" or "error", outputs (global arrays, in
    out_type order, then the as_ref buffers' final values), the access log, the races, a
    deadlock if any, ``leftover``: semaphores not zero at the end (which, value, a
    signal's path), ``startup``: seconds a worker process took to start for it (0 when
    simulated in this process)."""

    __slots__ = (
        "status",
        "devices",
        "outputs",
        "log",
        "error",
        "seconds",
        "notes",
        "backend",
        "memory",
        "deadlock",
        "leftover",
        "steps",
        "startup",
        "lowering",
    )
    _unshown = ("memory",)

    def __init__(
        self,
        status: str,
        devices: int,
        outputs: dict[str, np.ndarray] | None = None,
        log: AccessLog | None = None,
        error: Diagnostic | None = None,
        seconds: float = 0.0,
        notes: list[str] | None = None,
        backend: str = BACKEND,
        memory: dict[Location, Storage] | None = None,
        deadlock: list[Blocked] | None = None,
        leftover: list[tuple[str, int, str]] | None = None,
        steps: int = 0,
        startup: float = 0.0,
        lowering: Diagnostic | None = None,
    ) -> None:
        self.status = status
        self.devices = devices
        self.outputs = {} if outputs is None else outputs
        self.log = AccessLog() if log is None else log
        self.error = error
        self.seconds = seconds
        self.notes = [] if notes is None else notes
        self.backend = backend
        self.memory = {} if memory is None else memory
        self.deadlock = [] if deadlock is None else deadlock
        self.leftover = [] if leftover is None else leftover
        self.steps = steps
        self.startup = startup
        #: the GPU-lowering error a simulation asked to run past it ran despite
        #: (``simulate(..., past_lowering=True)``): a GPU compile stops there
        self.lowering = lowering

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def races(self) -> list:
        return self.log.races

    def value(
        self, buffer: str, device: int = 0, block: int | None = None, kind: str | None = None
    ) -> np.ndarray:
        """Final contents of any buffer in one place (``block`` for SMEM/TMEM scratch;
        ``kind`` "input" / "output" / "scratch" when an input and an output share a name)."""
        for loc, st in self.memory.items():
            if (loc.buffer, loc.device, loc.block) == (buffer, device, block) and (
                kind is None or loc.kind == kind
            ):
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
        if self.lowering is not None:
            out["lowering_error"] = self.lowering.error_json()
        if self.deadlock:
            out["deadlock"] = [
                {"actor": b.actor.to_dict(), "path": b.path, "waits": b.what} for b in self.deadlock
            ]
        if log:
            out["log"] = self.log.to_dict()
        return out

    def diagnostics(self) -> list[Diagnostic]:
        """The GPU-lowering error it ran past (first), the error, each race (``RACE`` at
        the later access) and unbalanced semaphores."""
        out = [self.lowering] if self.lowering else []
        out += [self.error] if self.error else []
        seen = set()
        for r in self.races:
            path = r.second.path or (
                f"call.programs[{r.second.actor.program}].body[{r.second.statement}]"
            )
            key = (path, r.first.path, r.kind)
            if key in seen:
                continue
            seen.add(key)
            out.append(
                Diagnostic(
                    code="RACE",
                    severity="error",
                    stage="gpu-run",
                    path=path,
                    message=f"{r.kind} race (simulated): {r.describe()}",
                )
            )
        for label, value, path in self.leftover[:20]:
            out.append(
                Diagnostic(
                    code="SEMAPHORE_IMBALANCE",
                    severity="warning",
                    stage="gpu-run",
                    path=path,
                    message=f"{label} is {value} when the kernel ends (simulated): more "
                    "signals than waits took off",
                )
            )
        return out

    def summary(self) -> str:
        lines = []
        if self.lowering is not None:
            e = self.lowering
            lines.append(
                f"GPU lowering: error {e.code} at {e.path or '<scenario>'}: {e.message} "
                "(a GPU compile stops there; simulated as JAX's interpreter runs it)"
            )
        if self.error is not None:
            e = self.error
            lines.append(f"simulate: error {e.code} at {e.path or '<scenario>'}: {e.message}")
            return "\n".join(lines)
        lines.append(f"simulate: ok on {self.devices} device(s), {self.log.total} accesses")
        for name, value in self.outputs.items():
            lines.append(f"  {name}: shape={list(value.shape)} dtype={value.dtype}")
        lines += [f"  race: {r.describe()}" for r in self.races[:10]]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


# ---------------------------------------------------------------- entry point


#: Stages at which JAX stops a run of the call: a GPU compile, and ``run --backend
#: interpret``, which lowers for the GPU first (issue 18: simulate says what JAX says).
BLOCKING_STAGES = ("schema", "build", "trace", "gpu-lower")


def _static_findings(
    diags: Any, past_lowering: bool = False
) -> tuple[Diagnostic | None, Diagnostic | None]:
    """(the first error that stops the run, the first GPU-lowering error run past) of
    the scenario's diagnostics.

    Errors at the build, trace or GPU-lowering stage stop the run, as JAX stops it
    (``past_lowering``: a GPU-lowering error does not, as JAX's interpreters, which
    never lower for the GPU, run the call anyway; it is kept, not dropped).
    Errors of the ``interpret`` and ``gpu-run`` stages are what running shows (the
    interpreters' limits, races, deadlocks): the simulator runs the call and shows them.
    """
    lowering = None
    for d in diags:
        if not d.is_error or d.stage not in BLOCKING_STAGES:
            continue
        if past_lowering and d.stage == "gpu-lower":
            lowering = lowering or d
            continue
        return d, lowering
    return None, lowering


def simulate(
    scenario: Any,
    *,
    check: bool = True,
    diagnostics: Any = None,
    program_id: str = "grid",
    log: str | int | None = "bounded",
    max_seconds: float | None = MAX_SECONDS,
    max_steps: int = MAX_STEPS_DEFAULT,
    schedule: Any = None,
    past_lowering: bool = False,
) -> SimResult:
    """Simulate a scenario's call (see the module docstring for the model), in this
    process, bounded in memory (refused past ``memory_limit()``), steps and seconds.

    ``scenario``: a Scenario or anything ``load_scenario`` takes. ``check``: first
    see whether JAX would reject the call, from ``diagnostics`` (the scenario's, when
    the caller has them) or by checking it once. ``program_id``: ``"grid"`` (each
    block's index, as on a GPU) or ``"zero"`` (JAX's GPU interpreter). ``log``:
    ``"bounded"`` (the first accesses in full, the rest counted), ``"full"``, or a count.
    ``schedule``: run one schedule of the static check's exploration (a race's or
    deadlock's ``Diagnostic.witness``, its ``schedule``, or a list of (actor, set)
    choices), with data, step by step as it was found.
    ``past_lowering``: simulate a call the Mosaic GPU lowering refuses (JAX's
    interpreters run it: its races are found), its lowering error kept as
    ``result.lowering``, first in ``diagnostics()`` and the summary.
    """
    if max_seconds is not None and not (
        isinstance(max_seconds, int | float) and math.isfinite(max_seconds) and max_seconds > 0
    ):  # (inf never stops; nan compares false everywhere and fails later, elsewhere)
        raise ValueError(
            f"max_seconds={max_seconds!r}: give a positive, finite number of seconds (or None)"
        )
    start = time.perf_counter()
    s = load_scenario(scenario)
    ndev = s.num_devices
    notes: list[str] = []
    lowering: Diagnostic | None = None
    if program_id == "auto":
        program_id = "grid"
    if s.not_imported:  # a partial import: what it computes is not the kernel's
        from mpmd_lab.validate.imported import not_imported_diagnostics

        first = not_imported_diagnostics(s.not_imported[:1])[0]
        return SimResult("error", ndev, error=first, seconds=time.perf_counter() - start)
    if check:
        if diagnostics is None:
            from mpmd_lab.validate import check as static_check

            diagnostics = static_check(s)
        diag, lowering = _static_findings(diagnostics, past_lowering)
        if diag is not None:
            return SimResult(
                "error", ndev, error=diag, seconds=time.perf_counter() - start, lowering=lowering
            )

    def refused(path: str, message: str) -> SimResult:
        error = Diagnostic(code="SIM_TOO_LARGE", stage="simulate", path=path, message=message)
        return SimResult("error", ndev, error=error, seconds=time.perf_counter() - start)

    need, limit = memory_estimate(s), memory_limit()
    if need > limit:
        return refused(
            "buffers",
            f"simulating this call needs about {need / 2**30:.1f} GiB, more than the "
            f"{limit / 2**30:.1f} GiB the simulator may use here; shrink the buffers or the "
            "device mesh",
        )
    steps = step_estimate(s)
    if steps > max_steps:
        return refused(
            "call.programs[0].mesh",
            f"{steps} steps (threads x statements) is more than the simulator's {max_steps}; "
            "shrink the grid or the device mesh",
        )
    limit_log = None if log == "full" else (DEFAULT_LIMIT if log in ("bounded", None) else int(log))
    err: SimError | None = None
    chooser = None
    if schedule is not None:
        from mpmd_lab.engine.explore import Chooser, Schedule

        if isinstance(schedule, dict) and "schedule" in schedule:
            schedule = schedule["schedule"]  # a witness
        try:
            chooser = Chooser(Schedule.from_json(schedule).choices)
        except (ValueError, KeyError, TypeError) as e:
            error = Diagnostic(
                code="SIM_UNSUPPORTED", stage="simulate", path="schedule", message=str(e)
            )
            return SimResult("error", ndev, error=error, seconds=time.perf_counter() - start)
    try:
        engine = Engine(
            s,
            data=True,
            program_id=program_id,
            limits=Limits(max_steps=max_steps, max_seconds=max_seconds),
            log_limit=limit_log,
            chooser=chooser,
        )
        out = engine.run()
    except SimError as e:
        out = None
        err = e
    except MemoryError:
        return refused("buffers", "the simulation ran out of memory (MemoryError)")
    if out is not None:
        err = out.error
    if chooser is not None:
        notes.append(
            f"run in the given schedule ({len(chooser.points)} choice(s) of semaphore waits)"
            if not chooser.mismatch
            else f"the given schedule does not fit this scenario ({chooser.mismatch}); "
            "the run went on with the first ready wait"
        )
    if out is not None and out.used_pid and s.run.interpret == "gpu":
        notes.append(
            "pl.program_id is each block's grid index here, as on a GPU; JAX's GPU "
            "interpreter returns 0 in every block (PROGRAM_ID_GPU_INTERP)."
            if program_id == "grid"
            else "pl.program_id is 0 in every block, as under JAX's GPU interpreter "
            "(PROGRAM_ID_GPU_INTERP); a real GPU gives the block index."
        )
    seconds = time.perf_counter() - start
    if err is not None:
        error = Diagnostic(code=err.code, stage="simulate", path=err.path, message=str(err))
        return SimResult(
            "error",
            ndev,
            log=out.log if out else AccessLog(),
            error=error,
            seconds=seconds,
            notes=notes,
            steps=out.steps if out else 0,
            lowering=lowering,
        )
    assert out is not None
    if out.deadlock:
        return SimResult(
            "error",
            ndev,
            log=out.log,
            error=deadlock_diagnostic(out.deadlock),
            seconds=seconds,
            notes=notes,
            deadlock=out.deadlock,
            steps=out.steps,
            lowering=lowering,
        )
    if out.log.truncated:
        notes.append(
            f"The access log keeps the first {len(out.log.accesses)} of {out.log.total} "
            "accesses (the rest are counted); simulate(..., log='full') keeps them all."
        )
    return SimResult(
        "ok",
        ndev,
        outputs=out.outputs,
        log=out.log,
        seconds=seconds,
        notes=notes,
        memory=out.memory,
        leftover=out.leftover,
        steps=out.steps,
        lowering=lowering,
    )


__all__ = [
    "NOTE",
    "SimError",
    "SimResult",
    "deadlock_diagnostic",
    "memory_estimate",
    "simulate",
    "step_estimate",
]
