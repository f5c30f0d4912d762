"""Synchronisation: semaphores (across devices and blocks) and barriers (async copies,
cluster blocks).

- ``semaphore_signal {sem, inc, device}``: ``pl.semaphore_signal(sem, inc,
  device_id=...)``: add ``inc`` to ``sem`` on this device, or on the peer ``device``
  names (the device-id forms of ``remote_ref``);
- ``semaphore_signal_multicast {sem, inc, axes}``: ``plgpu.semaphore_signal_multicast``:
  the same on every device along ``axes``;
- ``semaphore_wait {sem, value, decrement}``: ``pl.semaphore_wait(sem, value)``: block
  until ``sem`` reaches ``value``, then take it off (unless ``decrement`` is false);
- ``barrier_wait {barrier}``: ``plgpu.barrier_wait``: block until the barrier's phase
  completes (its async copies landed, its arrivals came);
- ``barrier_arrive {barrier}``: ``plgpu.barrier_arrive``: arrive at a (cluster) barrier;
- ``barrier_arrive_and_wait {barrier}``: ``plgpu.barrier_arrive_and_wait``: both, in
  one call.

A signal happens before the wait it satisfies; a copy's completion happens before the
``barrier_wait`` on its barrier: that is how kernels order their traffic, and how the
race check and the simulator judge it.
"""

import functools
from collections.abc import Iterator
from typing import Any, ClassVar, Literal

from mpmd_lab import expr as E
from mpmd_lab.diagnostics import Edit, Fix
from mpmd_lab.fields import AxisNames, Expr, RefName, axes_tuple, format_path, sub_path
from mpmd_lab.ops.base import (
    SYNC,
    ExecuteContext,
    Fit,
    LowerContext,
    SourceWriter,
    StatementOp,
    TraceContext,
)
from mpmd_lab.ops.peers import (
    DeviceId,
    check_device,
    device_label,
    device_source,
    resolve_device,
)
from pydantic import Field, StrictBool, field_validator

#: the semaphore dtypes ``check_sem_avals`` accepts, as JAX prints the set (its order is
#: a Python set's: it varies between processes)
SEM_TYPES = (
    "{<class 'jax._src.pallas.core.barrier_semaphore'>, <class 'jax._src.pallas.core.semaphore'>, "
    "<class 'jax.numpy.int16'>}"
)
#: the dtypes of refs JAX signals and waits on (``int16``: the interpreter's semaphores)
SEM_DTYPES = ("semaphore", "int16")
#: each transform's class, as an AttributeError names it
TRANSFORM_CLASS = {
    "bitcast": "BitcastTransform",
    "reshape": "ReshapeTransform",
    "transpose": "TransposeTransform",
    "remote_ref": "PeerMemRef",
    "multicast_ref": "MulticastRef",
    "cluster_ref": "ClusterRefTransform",
}


def check_semaphore(t: TraceContext, field: str, name: str) -> bool:
    """``check_sem_avals``: a ref, scalar after its last index, of a semaphore dtype.

    ``name`` is the verb JAX's messages use (``signal``, ``wait``,
    ``semaphore_signal_multicast``). True when tracing stops."""
    b = t.binding(field)
    info = t.info(field)
    if not info.is_ref:
        t.jax(
            "SEMAPHORE_NOT_A_REF",
            sub_path(t.path, field),
            f"Cannot {name} on a non-semaphore Ref: {info.dtype}[{','.join(map(str, info.shape))}]",
        )
        return True
    if b.stack and b.stack[-1][1].op != "at":
        # JAX reads the shape off the last transform, which only an index can give
        last = b.stack[-1][1].op
        t.jax(
            "SEMAPHORE_VIEW_TRANSFORM",
            sub_path(t.path, field),
            f"'{TRANSFORM_CLASS.get(last, last)}' object has no attribute 'get_indexer_shape'",
        )
        return True
    if t.use(field):
        return True
    if info.shape:
        t.jax(
            "SEMAPHORE_NOT_SCALAR",
            sub_path(t.path, field),
            f"Cannot {name} on a non-()-shaped semaphore: {tuple(info.shape)!r}",
        )
        return True
    if info.dtype not in SEM_DTYPES:
        t.jax(
            "SEMAPHORE_WRONG_TYPE",
            sub_path(t.path, field),
            f"Must {name} semaphores of the following types: {SEM_TYPES}. Got {info.dtype}.",
        )
        return True
    return False


def _constant(low: LowerContext, field: str, value: int | str) -> bool:
    """The lowering writes an increment (the statement's ``field``) as an MLIR constant:
    a traced one fails."""
    if low.static(E.parse(value)):
        return False
    low.jax(
        "GPU_TRACED_CONSTANT",
        sub_path(low.path, field),
        "Unsupported constant: <jaxlib.mlir._mlir_libs._mlir.ir.OpResult object at 0x...>",
        explanation=f"The increment {E.parse(value).label()!r} is computed inside the kernel "
        "(it depends on an axis index or a loop variable), but the Mosaic GPU lowering of a "
        "semaphore signal takes the increment as a constant. Signal a static amount (and "
        "wait for a computed value instead: a wait's value may be traced).",
    )
    return True


class SemaphoreSignal(StatementOp):
    """``pl.semaphore_signal(sem, inc, device_id=device)``."""

    @classmethod
    def example(cls, fit: Fit) -> dict[str, Any]:
        dev = fit.device_axes
        out = {"op": "semaphore_signal", "sem": fit.first(fit.semaphores, "sem")}
        return {**out, "device": {dev[0]: {"offset": 1}}} if dev else out

    HELP: ClassVar[str] = "add inc to a semaphore, here or on a peer device"
    FAMILY: ClassVar[str] = "sync"
    SYNC_ROLE: ClassVar[str] = "signal"
    REFS: ClassVar[tuple[tuple[str, str], ...]] = (("sem", SYNC),)

    def cross_device(self) -> bool:
        return self.device is not None

    op: Literal["semaphore_signal"]
    sem: RefName = Field(description="a semaphore (or an element of a semaphore array)")
    inc: Expr = Field(1, description="how much to add (an int or an expression)")
    device: DeviceId | None = Field(
        None,
        description="the device whose semaphore is signalled (null: this one); the forms "
        "of remote_ref's device",
    )

    _axes = field_validator("device")(classmethod(lambda cls, v: check_device(v)))

    def device_ref(self) -> Any:
        return None if self.device is None else resolve_device(self.device)

    @functools.cached_property
    def _dref(self) -> Any:
        """``device_ref``, once per op (what ``execute`` asks per signal)."""
        return self.device_ref()

    def exprs(self) -> Iterator[tuple[str, E.Expr]]:
        yield "inc", E.parse(self.inc)
        if self.device is not None:
            yield from self.device_ref().exprs()

    def expr_kind(self, field: str) -> str:
        return "count" if field == "inc" else super().expr_kind(field)

    def interpret_limit(self, interp: str, devices: int) -> str | None:
        if interp == "hlo" and self.device is not None:
            return (
                "The HLO interpreter cannot signal another device (Remote signal not implemented)."
            )
        return super().interpret_limit(interp, devices)

    def label(self) -> str:
        inc = "" if self.inc == 1 else f" +{E.parse(self.inc).label()}"
        to = "" if self.device is None else f" -> {device_label(self.device)}"
        return f"signal {self.sem}{inc}{to}"

    def source(self, g: SourceWriter) -> list[str]:
        args = [g.ref(self.sem)]
        if self.inc != 1:
            args.append(g.expr(E.parse(self.inc)))
        if self.device is not None:
            args.append(f"device_id={device_source(self.device, g)}")
        return [f"pl.semaphore_signal({', '.join(args)})"]

    def trace(self, t: TraceContext) -> bool:
        return check_semaphore(t, "sem", "signal")

    def lower(self, low: LowerContext) -> bool:
        # the semaphore's transforms, then the device id, then the increment
        if self.device is not None and low.device_id(self.device, "device"):
            return True
        return _constant(low, "inc", self.inc)

    def execute(self, x: ExecuteContext) -> None:
        """Add inc to the semaphore here or on the peer (the same block there)."""
        x.signal("sem", x.eval(self.inc, "inc"), device=self._dref)


class SemaphoreSignalMulticast(StatementOp):
    """``plgpu.semaphore_signal_multicast(sem, inc, collective_axes=axes)``."""

    HELP: ClassVar[str] = "add inc to a semaphore on every device along axes"

    def cross_device(self) -> bool:
        return True

    FAMILY: ClassVar[str] = "sync"
    SYNC_ROLE: ClassVar[str] = "signal"
    INTERPRET_LIMITS: ClassVar[dict[str, str]] = {
        "hlo": "The HLO interpreter has no rule for semaphore_signal_multicast.",
    }
    REFS: ClassVar[tuple[tuple[str, str], ...]] = (("sem", SYNC),)

    op: Literal["semaphore_signal_multicast"]
    sem: RefName = Field(description="a semaphore")
    inc: Expr = Field(1, description="how much to add")
    axes: AxisNames = Field(description="device-mesh axes: every device along them is signalled")

    def exprs(self) -> Iterator[tuple[str, E.Expr]]:
        yield "inc", E.parse(self.inc)

    def expr_kind(self, field: str) -> str:
        return "count"

    def label(self) -> str:
        return f"signal {self.sem} on all of {','.join(axes_tuple(self.axes))}"

    def source(self, g: SourceWriter) -> list[str]:
        args = [g.ref(self.sem)]
        if self.inc != 1:
            args.append(g.expr(E.parse(self.inc)))
        args.append(f"collective_axes={g.axes(self.axes)}")
        return [f"plgpu.semaphore_signal_multicast({', '.join(args)})"]

    def trace(self, t: TraceContext) -> bool:
        return check_semaphore(t, "sem", "semaphore_signal_multicast")

    def lower(self, low: LowerContext) -> bool:
        axes = axes_tuple(self.axes)  # JAX wraps a bare name in a tuple
        mesh = low.mesh_axes
        if not mesh:
            low.jax(
                "MULTICAST_NO_DEVICE_MESH",
                (*low.path, "axes"),
                "collective_axes requires a mesh context",
                explanation="A multicast signal reaches every device of the device mesh; "
                "without a device mesh (jax.shard_map over jax.make_mesh) there is none.",
            )
            return True
        if set(axes) != set(mesh):
            low.jax(
                "SIGNAL_MULTICAST_AXES",
                (*low.path, "axes"),
                f"collective_axes {axes!r} must equal entire mesh axes {tuple(mesh)!r}",
                fix=Fix(
                    description="signal along every device-mesh axis",
                    edits=[
                        Edit(op="replace", path=format_path((*low.path, "axes")), value=list(mesh))
                    ],
                ),
            )
            return True
        return _constant(low, "inc", self.inc)

    def execute(self, x: ExecuteContext) -> None:
        """Add inc to the semaphore on every device along axes (this one included)."""
        inc = x.eval(self.inc, "inc")
        axes = axes_tuple(self.axes)
        for a in axes:
            if a not in x.mesh:
                x.fail("DEVICE_ID_UNKNOWN_AXIS", f"no device axis {a!r}")
        x.signal("sem", inc, axes=axes)


class SemaphoreWait(StatementOp):
    """``pl.semaphore_wait(sem, value, decrement=...)``."""

    HELP: ClassVar[str] = "wait until a semaphore reaches value (then take it off)"
    FAMILY: ClassVar[str] = "sync"
    SYNC_ROLE: ClassVar[str] = "wait"
    REFS: ClassVar[tuple[tuple[str, str], ...]] = (("sem", SYNC),)

    op: Literal["semaphore_wait"]
    sem: RefName = Field(description="a semaphore (or an element of a semaphore array)")
    value: Expr = Field(1, description="the value to wait for (an int or an expression)")
    decrement: StrictBool = Field(True, description="take the value off after the wait")

    def exprs(self) -> Iterator[tuple[str, E.Expr]]:
        yield "value", E.parse(self.value)

    def expr_kind(self, field: str) -> str:
        return "count"

    def label(self) -> str:
        v = "" if self.value == 1 else f" >= {E.parse(self.value).label()}"
        return f"wait {self.sem}{v}" + ("" if self.decrement else " (keep)")

    def source(self, g: SourceWriter) -> list[str]:
        args = [g.ref(self.sem)]
        if self.value != 1 or not self.decrement:
            args.append(g.expr(E.parse(self.value)))
        if not self.decrement:
            args.append("decrement=False")
        return [f"pl.semaphore_wait({', '.join(args)})"]

    def trace(self, t: TraceContext) -> bool:
        return check_semaphore(t, "sem", "wait")

    def execute(self, x: ExecuteContext) -> Any:
        """Blocks (the returned wait) until the semaphore reaches value."""
        value = x.eval(self.value, "value")
        return x.wait_semaphore("sem", value, self.decrement)


class BarrierWait(StatementOp):
    """``plgpu.barrier_wait(barrier)``."""

    HELP: ClassVar[str] = "wait for a barrier's phase (its copies landed, arrivals came)"
    FAMILY: ClassVar[str] = "sync"
    SYNC_ROLE: ClassVar[str] = "wait"
    INTERPRET_LIMITS: ClassVar[dict[str, str]] = {
        "hlo": "The HLO interpreter has no rule for barriers.",
    }
    REFS: ClassVar[tuple[tuple[str, str], ...]] = (("barrier", SYNC),)

    op: Literal["barrier_wait"]
    barrier: RefName = Field(description="a barrier (or one of a barrier array)")

    def label(self) -> str:
        return f"wait {self.barrier}"

    def source(self, g: SourceWriter) -> list[str]:
        return [f"plgpu.barrier_wait({g.ref(self.barrier)})"]

    def trace(self, t: TraceContext) -> bool:
        return check_barrier(t, "barrier")

    def lower(self, low: LowerContext) -> bool:
        return low.barrier("barrier", "wait")

    def execute(self, x: ExecuteContext) -> Any:
        """Blocks (the returned wait) until this thread's next phase of the barrier."""
        return x.wait_barrier("barrier")


class BarrierArrive(StatementOp):
    """``plgpu.barrier_arrive(barrier)``."""

    HELP: ClassVar[str] = "arrive at a (cluster) barrier"
    FAMILY: ClassVar[str] = "sync"
    SYNC_ROLE: ClassVar[str] = "arrive"
    INTERPRET_LIMITS: ClassVar[dict[str, str]] = {
        "hlo": "The HLO interpreter has no rule for barriers.",
    }
    REFS: ClassVar[tuple[tuple[str, str], ...]] = (("barrier", SYNC),)

    op: Literal["barrier_arrive"]
    barrier: RefName = Field(description="a barrier (or one of a barrier array)")

    def label(self) -> str:
        return f"arrive {self.barrier}"

    def source(self, g: SourceWriter) -> list[str]:
        return [f"plgpu.barrier_arrive({g.ref(self.barrier)})"]

    def trace(self, t: TraceContext) -> bool:
        return check_barrier(t, "barrier")

    def lower(self, low: LowerContext) -> bool:
        return low.barrier("barrier", "arrive")

    def execute(self, x: ExecuteContext) -> None:
        x.arrive("barrier")


class BarrierArriveAndWait(StatementOp):
    """``plgpu.barrier_arrive_and_wait(barrier)``: ``barrier_arrive`` then
    ``barrier_wait`` on the same barrier, in one call (JAX lowers it as the two)."""

    HELP: ClassVar[str] = "arrive at a (cluster) barrier, then wait for its phase"
    FAMILY: ClassVar[str] = "sync"
    # a wait (the graph's and the deadlock marks' role); it arrives first
    SYNC_ROLE: ClassVar[str] = "wait"
    INTERPRET_LIMITS: ClassVar[dict[str, str]] = {
        "hlo": "The HLO interpreter has no rule for barriers.",
    }
    REFS: ClassVar[tuple[tuple[str, str], ...]] = (("barrier", SYNC),)

    op: Literal["barrier_arrive_and_wait"]
    barrier: RefName = Field(description="a barrier (or one of a barrier array)")

    def label(self) -> str:
        return f"arrive+wait {self.barrier}"

    def source(self, g: SourceWriter) -> list[str]:
        return [f"plgpu.barrier_arrive_and_wait({g.ref(self.barrier)})"]

    def trace(self, t: TraceContext) -> bool:
        return check_barrier(t, "barrier")

    def lower(self, low: LowerContext) -> bool:
        return low.barrier("barrier", "arrive") or low.barrier("barrier", "wait")

    def execute(self, x: ExecuteContext) -> Any:
        """Arrives, then blocks (the returned wait) until this thread's next phase."""
        x.arrive("barrier")
        return x.wait_barrier("barrier")


def check_barrier(t: TraceContext, field: str) -> bool:
    """``_check_ref(barrier, "barrier", SMEM)``: a ref in SMEM (a barrier's memory)."""
    info = t.info(field)
    if not info.is_ref:
        t.jax(
            "BARRIER_NOT_SMEM",
            sub_path(t.path, field),
            f"barrier must be a reference, got {info.dtype}[{','.join(map(str, info.shape))}]",
            jax_type="TypeError",
        )
        return True
    if t.root_space(field) != "SMEM":
        t.jax(
            "BARRIER_NOT_SMEM",
            sub_path(t.path, field),
            f"barrier must be a SMEM reference, got {t.base_type(field)}",
            explanation="A barrier is a `plgpu.Barrier` (or `ClusterBarrier`) scratch, in "
            "shared memory; a semaphore or a GMEM ref is not one. Semaphores are waited on "
            "with `semaphore_wait`.",
        )
        return True
    return t.use(field)


__all__ = [
    "SEM_DTYPES",
    "SEM_TYPES",
    "check_barrier",
    "check_semaphore",
    "BarrierArrive",
    "BarrierArriveAndWait",
    "BarrierWait",
    "SemaphoreSignal",
    "SemaphoreSignalMulticast",
    "SemaphoreWait",
]
