"""Views of memory elsewhere: ``remote_ref`` (a peer device), ``multicast_ref``
(every device along some axes) and ``cluster_ref`` (another block of the cluster).

The device-id forms a scenario may write, and what they mean (resolved once here,
evaluated per device by the simulator, the graph and the rules):

- an int or an expression: the device's index (on a 1-D mesh, along its one axis;
  JAX's ``DeviceIdType.MESH`` with one id);
- ``{axis: int | expression}``: those coordinates; the axes not named keep this
  device's own coordinate;
- ``{axis: {"offset": k}}``: this device's coordinate plus ``k``, wrapped around.
"""

import functools
import itertools
import math
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from mpmd_lab import expr as E
from mpmd_lab import layout_rules as L
from mpmd_lab.diagnostics import SimError
from mpmd_lab.fields import MAX_DEVICES, AxisNames, Expr, Model, Path, SmallInt, axes_tuple
from mpmd_lab.fields import check_mapping_names as _check_mapping_names
from mpmd_lab.ops.base import (
    AccessLowering,
    Actor,
    ArrayError,
    ArrayValue,
    Fit,
    GmemCopyLowering,
    InterpLimit,
    SourceWriter,
    TransformOp,
    ViewContext,
)
from mpmd_lab.record import Record
from mpmd_lab.shapes import RefInfo, StepError, err, first_unbound, replace
from pydantic import Field, StrictInt, field_validator

if TYPE_CHECKING:
    from mpmd_lab.memory import View


class Offset(Model):
    """This device's coordinate plus ``offset``, wrapped around the axis."""

    offset: SmallInt = Field(description="how far along the axis (negative: backwards)")


DeviceCoord = Annotated[StrictInt, Field(ge=-MAX_DEVICES, le=MAX_DEVICES)] | Expr | Offset
DeviceId = (
    Annotated[StrictInt, Field(ge=-MAX_DEVICES, le=MAX_DEVICES)] | Expr | dict[str, DeviceCoord]
)


class DeviceRef(Record):
    """A device id, resolved: ``linear`` (one expression) or ``coords`` (per named axis)."""

    __slots__ = ("linear", "coords")
    linear: E.Expr | None
    coords: tuple[tuple[str, E.Expr], ...]

    def __init__(self, linear: E.Expr | None, coords: tuple[tuple[str, E.Expr], ...] = ()) -> None:
        self.linear = linear
        self.coords = coords

    def exprs(self) -> Iterator[tuple[str, E.Expr]]:
        if self.linear is not None:
            yield "device", self.linear
        for axis, e in self.coords:
            yield f"device.{axis}", e

    def target(self, own: Mapping[str, int], mesh: Mapping[str, int], env: E.Env) -> int:
        """The flat device index this id names from a device at ``own`` (coordinates).

        Raises LookupError (an axis the mesh lacks) or IndexError (outside the mesh).
        (Asked per actor: its expressions are evaluated as ``E.compiled`` functions.)"""
        if self.linear is not None:
            d = E.compiled(self.linear)(env)
            n = math.prod(mesh.values())
            if not 0 <= d < n:
                raise IndexError(f"device {d} outside the mesh (devices 0..{n - 1})")
            return d
        coords = dict(own)
        for axis, e in self.coords:
            if axis not in mesh:
                raise LookupError(f"Unrecognized axes in device_id: {axis!r}")
            v = E.compiled(e)(env)
            if not 0 <= v < mesh[axis]:
                raise IndexError(f"{axis}={v} outside the mesh (0..{mesh[axis] - 1})")
            coords[axis] = v
        flat = 0
        for a, s in mesh.items():
            flat = flat * s + coords[a]
        return flat


def resolve_device(device: Any) -> DeviceRef:
    """The one meaning of a ``device`` field (see the module docstring); a mapping's once
    per content (its offsets' trees are built, the expressions' texts are parsed, once)."""
    if isinstance(device, dict):
        key = tuple(
            (axis, ("offset", v.offset) if isinstance(v, Offset) else v)
            for axis, v in device.items()
        )
        hit = _BY_MAPPING.get(key)
        if hit is None:
            if len(_BY_MAPPING) >= 1024:
                _BY_MAPPING.clear()
            hit = _BY_MAPPING[key] = _mapping_device(device)
        return hit
    return DeviceRef(E.parse(device))


def _mapping_device(device: dict[str, Any]) -> DeviceRef:
    coords: list[tuple[str, E.Expr]] = []
    for axis, v in device.items():
        if isinstance(v, Offset):
            wrapped = E.BinOp(
                "%", E.BinOp("+", E.Name(axis), E.Const(v.offset)), E.Call("axis_size", axis)
            )
            coords.append((axis, wrapped))
        else:
            coords.append((axis, E.parse(v)))
    return DeviceRef(None, tuple(coords))


#: a device mapping's content -> its DeviceRef (immutable: shared)
_BY_MAPPING: dict[tuple[tuple[str, Any], ...], DeviceRef] = {}


def check_device(v: Any) -> Any:
    """A field validator for device ids: a mapping names at least one axis, by its name."""
    if isinstance(v, dict):
        if not v:
            raise ValueError("a device id names at least one axis")
        _check_mapping_names(v)
    return v


def device_label(device: Any) -> str:
    """``dev+1``, ``x=0,y=dev``, ``3``: a device id as the graph shows it."""
    if not isinstance(device, dict):
        return E.parse(device).label()
    parts = []
    for axis, v in device.items():
        if isinstance(v, Offset):
            parts.append(f"{axis}{v.offset:+d}")
        else:
            parts.append(f"{axis}={E.parse(v).label()}")
    return ",".join(parts)


def device_source(device: Any, g: SourceWriter) -> str:
    dref = resolve_device(device)
    if dref.linear is not None:
        return g.expr(dref.linear)
    return "{" + ", ".join(f"{axis!r}: {g.expr(e)}" for axis, e in dref.coords) + "}"


def device_targets(device: Any, mesh: Mapping[str, int]) -> list[int] | None:
    """For each device (flat, row-major), the device a ``remote_ref`` names; ``None``
    when that needs more than the device's coordinates (a loop variable, a block axis)
    or names an axis the mesh lacks. Out-of-range ids map to ``-1``."""
    dref = resolve_device(device)
    names = frozenset().union(*(e.names() for _, e in dref.exprs()))
    if names - set(mesh) or any(a not in mesh for a, _ in dref.coords):
        return None
    out = []
    for coords in itertools.product(*(range(n) for n in mesh.values())):
        own = dict(zip(mesh, coords, strict=True))
        env = E.Env(own, dict(mesh))
        try:
            out.append(dref.target(own, mesh, env))
        except (IndexError, E.ExprError):
            out.append(-1)
    return out


def _not_a_ref(ref: RefInfo) -> StepError | None:
    if ref.is_ref:
        return None
    return err("REF_NOT_A_REF", "TypeError", "ref must be a reference")


class _Elsewhere(TransformOp):
    """A view of the same ref in other memory (a peer's, every device's, another
    block's): the same dims; the lowering of a plain access may stop at it (a bad
    device id or block, SMEM of a peer, any multicast access)."""

    def root_dims(self, dims: list[int]) -> list[int] | None:
        return dims

    def stops_access(self) -> bool:
        return True


class RemoteRef(_Elsewhere):
    """``plgpu.remote_ref(ref, device_id)``: the same ref on another device."""

    @classmethod
    def example(cls, fit: Fit) -> dict[str, Any]:
        dev = fit.device_axes
        return {"op": "remote_ref", "device": {dev[0]: {"offset": 1}} if dev else 0}

    HELP: ClassVar[str] = "the ref on a peer device: plgpu.remote_ref(ref, device)"
    FAMILY: ClassVar[str] = "devices"
    CROSS_DEVICE: ClassVar[bool] = True
    GPU_INTERP_REPR: ClassVar[str | None] = (
        "PeerMemRef(device_id=..., device_id_type=<DeviceIdType.MESH: 'mesh'>)"
    )
    HLO_INTERP_CLASS: ClassVar[str | None] = "jax._src.pallas.mosaic_gpu.core.PeerMemRef"
    REACH: ClassVar[str] = "peer"

    def jax_repr(self) -> str:
        return "PeerMemRef(device_id=..., device_id_type=<DeviceIdType.MESH: 'mesh'>)"

    def traces_scalar(self) -> bool:
        return True  # (the device id)

    def lower_access(self, a: AccessLowering, pos: int, path: Path) -> bool:
        """The device id resolves against the mesh; the peer's pointer is a kernel
        argument's (GMEM)."""
        if a.device_id(self.device):
            return True
        if a.root_space == "SMEM":
            # the peer pointer is taken from a kernel argument (GMEM); an SMEM
            # allocation is none (JAX's message goes on with the MLIR of the slice)
            a.jax(
                "REMOTE_SMEM",
                a.where,
                "Can't find the kernel argument.",
                jax_type="ValueError",
                explanation="remote_ref reaches another device's GMEM only (the kernel's "
                "arguments and outputs); SMEM is per block and no other device can "
                "address it. Write into the peer's output (GMEM) instead, or, between "
                "blocks of one cluster, use cluster_ref.",
            )
            return True
        return False

    def lower_gmem_copy(self, a: GmemCopyLowering, path: Path) -> bool:
        return a.device_id(self.device)

    def on_array(self, a: ArrayValue, bound: frozenset[str]) -> ArrayError | None:
        """The device id expression (``lax.axis_index``) is evaluated before the call."""
        if isinstance(self.device, dict):
            axis = next(
                (k for k, v in self.device.items() if not isinstance(v, int) and k not in bound),
                None,
            )
            if axis is not None:
                return (
                    "UNBOUND_AXIS",
                    "NameError",
                    f"Found an unbound axis name: {axis}. To fix this, please call axis_index "
                    "under `jax.shard_map`.",
                )
        return super().on_array(a, bound)

    op: Literal["remote_ref"]
    device: DeviceId = Field(
        description='the peer: an int or expression ("(dev + 1) % 4"), {axis: index}, or '
        '{axis: {"offset": k}} (own index + k, wrapped)'
    )

    _axes = field_validator("device")(classmethod(lambda cls, v: check_device(v)))

    def device_ref(self) -> DeviceRef:
        return resolve_device(self.device)

    @functools.cached_property
    def _dref(self) -> DeviceRef:
        """``device_ref``, once per op (what ``view`` asks per actor)."""
        return self.device_ref()

    def exprs(self) -> Iterator[tuple[str, E.Expr]]:
        return self.device_ref().exprs()

    def label(self) -> str:
        return f"remote_ref({device_label(self.device)})"

    def source(self, base: str, g: SourceWriter) -> str:
        return f"plgpu.remote_ref({base}, {device_source(self.device, g)})"

    def typed(self, ref: RefInfo) -> tuple[RefInfo | None, StepError | None, tuple[StepError, ...]]:
        e = _not_a_ref(ref)
        if e is None and ref.multicast:
            e = err(
                "REF_MULTICAST_TO_PEER",
                "ValueError",
                "Can't make a multicast reference into a peer reference.",
            )
        if e is not None:
            return None, e, ()
        return replace(ref, peer=True, transformed=True), None, ()

    def view(self, v: "View", sim: ViewContext, actor: Actor, path: str) -> "View":
        if v.multicast is not None:
            sim.fail(
                "REF_MULTICAST_TO_PEER",
                path,
                "Can't make a multicast reference into a peer reference.",
            )
        try:
            return v.with_(device=sim.peer(self._dref, actor, f"{path}.device"))
        except SimError as e:
            if e.code != "REMOTE_DEVICE_OOB":
                raise
            return v.with_(oob=(e.code, e.path, str(e)))  # fails at the access


class MulticastRef(_Elsewhere):
    """``plgpu.multicast_ref(ref, axes)``: every device along ``axes`` (writes fan out)."""

    @classmethod
    def example(cls, fit: Fit) -> dict[str, Any]:
        dev = fit.device_axes
        return {"op": "multicast_ref", "axes": dev[0] if len(dev) == 1 else dev or "dev"}

    HELP: ClassVar[str] = "every device along axes: plgpu.multicast_ref(ref, axes)"
    CROSS_DEVICE: ClassVar[bool] = True
    FAMILY: ClassVar[str] = "devices"
    HLO_INTERP_CLASS: ClassVar[str | None] = "jax._src.pallas.mosaic_gpu.core.MulticastRef"
    REACH: ClassVar[str] = "multicast"

    def jax_repr(self) -> str:
        return f"MulticastRef(collective_axes={self.axis_names!r})"

    def lower_access(self, a: AccessLowering, pos: int, path: Path) -> bool:
        """Only a TMA store writes through a multicast view."""
        a.jax(
            "MULTICAST_PLAIN_STORE",
            a.where,
            "Multicast references are not allowed in the lowering of this primitive.",
            explanation="A multicast view can only be written by a TMA copy "
            "(`tma_store` from SMEM); a plain load or store through it does not lower.",
        )
        return True

    def lower_gmem_copy(self, a: GmemCopyLowering, path: Path) -> bool:
        """A TMA store may multicast (to the whole device mesh); a load may not."""
        if a.load:
            a.jax(
                "MULTICAST_TMA_LOAD",
                a.where,
                "Multicast refs are not supported by this primitive.",
                explanation="A TMA load reads one device's memory: it cannot read "
                "through a multicast view. Load from a peer (remote_ref), or reduce over "
                "every device with multimem_load_reduce.",
            )
            return True
        return a.multicast(self.axis_names, path)

    op: Literal["multicast_ref"]
    axes: AxisNames = Field(
        description="a device-mesh axis name or a list of them (the lowering wants all)"
    )

    @property
    def axis_names(self) -> tuple[str, ...]:
        return axes_tuple(self.axes)

    def interpret_limit(self, interp: str) -> InterpLimit | None:
        if interp == "gpu":  # (it fails before the unsupported-transform check)
            return InterpLimit(
                "GPU_INTERP_MULTICAST",
                "JAX's CPU interpreter can't run multicast_ref; simulate does",
                "'MulticastRef' object has no attribute 'indices'",
                "The GPU interpreter cannot run multicast views.",
            )
        return super().interpret_limit(interp)

    def label(self) -> str:
        return f"multicast_ref({','.join(self.axis_names)})"

    def source(self, base: str, g: SourceWriter) -> str:
        return f"plgpu.multicast_ref({base}, {g.axes(self.axes)})"

    def typed(self, ref: RefInfo) -> tuple[RefInfo | None, StepError | None, tuple[StepError, ...]]:
        e = _not_a_ref(ref)
        if e is None and ref.peer:
            e = err(
                "REF_PEER_TO_MULTICAST",
                "ValueError",
                "Can't make a peer reference into a multicast reference.",
            )
        if e is not None:
            return None, e, ()
        return (
            replace(ref, multicast=True, transformed=True),
            None,
            (),
        )

    def view(self, v: "View", sim: ViewContext, actor: Actor, path: str) -> "View":
        if v.device is not None:
            sim.fail(
                "REF_PEER_TO_MULTICAST",
                path,
                "Can't make a peer reference into a multicast reference.",
            )
        for a in self.axis_names:
            if a not in sim.mesh:
                sim.fail("DEVICE_ID_UNKNOWN_AXIS", path, f"no device axis {a!r}")
        return v.with_(multicast=self.axis_names)


#: what a constant expression is evaluated against (it reads nothing of it)
_NO_ENV = E.Env({}, {})


class ClusterRef(_Elsewhere):
    """``plgpu.cluster_ref(ref, block)``: the SMEM of another block of the cluster."""

    @classmethod
    def example(cls, fit: Fit) -> dict[str, Any]:
        c = fit.cluster_axes
        return {"op": "cluster_ref", "block": {c[0]: 0} if c else {}}

    HELP: ClassVar[str] = "another block's SMEM: plgpu.cluster_ref(ref, block)"
    FAMILY: ClassVar[str] = "devices"
    GPU_INTERP_REPR: ClassVar[str | None] = "ClusterRefTransform(dims=..., idxs=...)"
    HLO_INTERP_CLASS: ClassVar[str | None] = "jax._src.pallas.mosaic_gpu.core.ClusterRefTransform"
    REACH: ClassVar[str] = "cluster"

    def jax_repr(self) -> str:
        return f"ClusterRefTransform(dims={tuple(self.block)!r}, idxs=(...))"

    def traces_scalar(self) -> bool:
        return bool(self.block)  # (the block ids: one traced int32 each)

    def lower_access(self, a: AccessLowering, pos: int, path: Path) -> bool:
        return a.cluster()

    op: Literal["cluster_ref"]
    block: dict[str, Annotated[StrictInt, Field(ge=-64, le=64)] | Expr] = Field(
        description="{cluster axis: index or expression}"
    )

    _v = field_validator("block")(classmethod(lambda cls, v: _check_mapping_names(v)))

    def interpret_limit(self, interp: str) -> InterpLimit | None:
        if interp != "gpu":
            return super().interpret_limit(interp)
        # the transform as JAX prints it: its cluster axes, and each index a traced int32
        # (of constant indices only: JAX's message of any other is not known, and the
        # generic limit, with the class's repr, stands)
        arrays = []
        for v in self.block.values():
            if type(v) is int:  # (a StrictInt: its own constant, no expression to parse)
                arrays.append(f"Array({v}, dtype=int32)")
                continue
            e = E.parse(v)
            if not e.is_const:
                return super().interpret_limit(interp)
            arrays.append(f"Array({e.eval(_NO_ENV)}, dtype=int32)")
        idxs = ", ".join(arrays)
        idxs = f"({idxs},)" if len(arrays) == 1 else f"({idxs})"
        repr_ = f"ClusterRefTransform(dims={tuple(self.block)!r}, idxs={idxs})"
        return self.gpu_interp_limit(L.interpret_transform_message(repr_))

    def exprs(self) -> Iterator[tuple[str, E.Expr]]:
        for axis, v in self.block.items():
            yield f"block.{axis}", E.parse(v)

    def _written(self) -> list[E.Expr]:
        """The block's expressions that are not ints (an int is a constant: it names
        and calls nothing, and a cluster block is mostly ints)."""
        return [E.parse(v) for v in self.block.values() if type(v) is not int]

    def unbound_axis(self, bound: frozenset[str] | set[str]) -> str | None:
        return first_unbound(self._written(), bound)

    def uses_call(self, fn: str) -> bool:
        return any(fn in e.calls() for e in self._written())

    def label(self) -> str:
        return (
            f"cluster_ref({','.join(f'{k}={E.parse(v).label()}' for k, v in self.block.items())})"
        )

    def source(self, base: str, g: SourceWriter) -> str:
        inner = ", ".join(f"{k!r}: {g.expr(E.parse(v))}" for k, v in self.block.items())
        return f"plgpu.cluster_ref({base}, {{{inner}}})"

    def typed(self, ref: RefInfo) -> tuple[RefInfo | None, StepError | None, tuple[StepError, ...]]:
        e = _not_a_ref(ref)
        if e is not None:
            return None, e, ()
        return (
            replace(ref, cluster=True, transformed=True, cluster_block=tuple(self.block.items())),
            None,
            (),
        )

    def view(self, v: "View", sim: ViewContext, actor: Actor, path: str) -> "View":
        sizes = sim.cluster_sizes
        coords = list(actor.cluster)
        names = list(sizes)
        oob = v.oob
        for axis, raw in self.block.items():
            if axis not in sizes:
                sim.fail("CLUSTER_REF_UNKNOWN_AXIS", path, f"Unknown cluster axis {axis}")
            i = sim.eval(sim.expr(raw), actor, f"{path}.block.{axis}")
            if not 0 <= i < sizes[axis]:
                if oob is None:
                    oob = (
                        "OOB_INDEX",
                        f"{path}.block.{axis}",
                        f"cluster {axis}={i} outside the cluster (0..{sizes[axis] - 1})",
                    )
                i = min(max(i, 0), sizes[axis] - 1)
            coords[names.index(axis)] = i
        return v.with_(cluster=tuple(coords), oob=oob)


__all__ = [
    "ClusterRef",
    "DeviceId",
    "DeviceRef",
    "MulticastRef",
    "Offset",
    "RemoteRef",
    "device_label",
    "device_targets",
    "resolve_device",
]
