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
from mpmd_lab.accesslog import AccessLog, Actor, Location, unique_sorted
from mpmd_lab.callsupport import encode_outputs
from mpmd_lab.diagnostics import STAGE_ORDER, Diagnostic, JaxError
from mpmd_lab.scenario import (
    Add,
    At,
    Bitcast,
    BlockIndex,
    BufferArg,
    ClusterRef,
    Copy,
    DsIndex,
    Fill,
    Let,
    MulticastRef,
    MultimemStore,
    Offset,
    PidIndex,
    Program,
    RemoteRef,
    Reshape,
    Return,
    Scenario,
    Swizzle,
    Tiling,
    TmaStore,
    Transpose,
    load_scenario,
)

BACKEND = "simulate"
NOTE = (
    "Simulated by mpmd-lab (mpmd_lab.simulate): numpy over every device, block and "
    "warpgroup, not a run of JAX. Where JAX's CPU interpreter runs a scenario the "
    "simulator matches it bit for bit; cross-device and cluster traffic no CPU "
    "interpreter runs are the simulator's model alone."
)


#: Most (thread, statement) steps one simulation runs: keeps a widget responsive.
MAX_STEPS = 1 << 18


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
    error: dict[str, Any] | None = None
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
            "error": self.error,
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
        out = []
        if self.error:
            e = self.error
            out.append(
                Diagnostic(
                    code=e.get("code") or "SIM_UNSUPPORTED",
                    stage=e["stage"] if e.get("stage") in STAGE_ORDER else "gpu-run",
                    path=e.get("path") or "",
                    message=str(e.get("message")),
                    jax=JaxError(type=e["type"], message=str(e.get("message")))
                    if e.get("type") and e.get("type") != "SimulationError"
                    else None,
                )
            )
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
        if not self.ok:
            e = self.error or {}
            return f"simulate: error {e.get('code')} at {e.get('path') or '<scenario>'}: " + str(
                e.get("message")
            )
        lines = [f"simulate: ok on {self.devices} device(s), {len(self.log.accesses)} accesses"]
        for name, value in self.outputs.items():
            lines.append(f"  {name}: shape={list(value.shape)} dtype={value.dtype}")
        lines += [f"  race: {r.describe()}" for r in self.races[:10]]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


# ---------------------------------------------------------------- dtypes and fills


def np_dtype(name: str) -> np.dtype:
    """A scenario dtype as a numpy dtype (bfloat16 and float8 through ml_dtypes)."""
    if name == "bool":
        return np.dtype(np.bool_)
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


def _is_float(dt: np.dtype) -> bool:
    return dt.kind == "f" or dt.name.startswith(("bfloat", "float8"))


def uninitialized(shape: tuple[int, ...], dt: np.dtype, mode: str) -> np.ndarray:
    """JAX's interpreter fill for memory nobody wrote (``mode``: "gpu" or "hlo")."""
    if _is_float(dt):
        return np.full(shape, np.nan, dt)
    if dt.kind == "b":
        return np.full(shape, mode == "gpu", dt)
    info = np.iinfo(dt)
    return np.full(shape, info.max if mode == "gpu" else info.min, dt)


def _fill_value(value: bool | int | float, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
    """``jnp.full(shape, value, dtype)``: a Python float is float32 first (x64 off)."""
    if isinstance(value, bool):
        src = np.asarray(value)
    elif isinstance(value, int):
        src = np.asarray(value, np.int32 if -(2**31) <= value < 2**31 else np.int64)
    else:
        src = np.asarray(value, np.float32)
    with np.errstate(all="ignore"):
        return np.full(shape, src.astype(dt), dt)


def host_value(b: Any, num_devices: int) -> np.ndarray:
    """``callsupport.host_array`` without importing JAX (the tests hold the two equal)."""
    dt = np_dtype(b.dtype)
    shape = tuple(b.shape)
    gshape = (shape[0] * num_devices, *shape[1:]) if shape else ()
    if b.init == "zeros":
        return np.zeros(gshape, dt)
    if b.init == "ones":
        return np.ones(gshape, dt)
    if b.init == "iota":
        return np.arange(math.prod(gshape)).reshape(gshape).astype(dt)
    if b.init == "random":
        return np.random.default_rng(b.seed).standard_normal(gshape).astype(dt)
    one = np.asarray(b.init).astype(dt).reshape(shape)
    return np.concatenate([one] * num_devices, axis=0) if shape else one


# ---------------------------------------------------------------- memory and views


@dataclass
class Storage:
    """One buffer's bytes in one place."""

    location: Location
    dtype: np.dtype
    shape: tuple[int, ...]
    data: np.ndarray  # uint8, flat

    @classmethod
    def of(cls, location: Location, value: np.ndarray) -> Storage:
        value = np.array(value, order="C")  # (ascontiguousarray makes rank 0 rank 1)
        return cls(location, value.dtype, value.shape, value.reshape(-1).view(np.uint8).copy())

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def value(self) -> np.ndarray:
        return self.data.view(self.dtype).reshape(self.shape).copy()


@dataclass(frozen=True)
class Base:
    """What a kernel parameter names: a buffer of some memory space."""

    kind: str  # "input", "output", "scratch"
    name: str  # the buffer / output / scratch name
    memory: str  # "GMEM", "SMEM", "TMEM"
    dtype: np.dtype
    shape: tuple[int, ...]


@dataclass(frozen=True)
class View:
    """A ref as seen by one actor: byte offsets into a base buffer, and where it lives."""

    base: Base
    dtype: np.dtype
    offsets: np.ndarray  # int64, shape = view shape + (itemsize,)
    device: int | None = None  # a peer device (remote_ref)
    multicast: tuple[str, ...] | None = None  # axes (multicast_ref)
    cluster: tuple[int, ...] | None = None  # cluster coordinates (cluster_ref)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.offsets.shape[:-1]

    @classmethod
    def whole(cls, base: Base) -> View:
        isz = base.dtype.itemsize
        n = math.prod(base.shape)
        offs = (np.arange(n, dtype=np.int64) * isz)[:, None] + np.arange(isz, dtype=np.int64)
        return cls(base, base.dtype, offs.reshape(*base.shape, isz))

    def elements(self) -> np.ndarray:
        """The base buffer's flat element indices this view covers."""
        bsz = self.base.dtype.itemsize
        # a view element holds whole base elements (widening) or lies inside one
        starts = self.offsets[..., ::bsz] if self.dtype.itemsize >= bsz else self.offsets[..., :1]
        return unique_sorted(starts // bsz)

    def with_(self, **kw: Any) -> View:
        return View(
            **{
                "base": self.base,
                "dtype": self.dtype,
                "offsets": self.offsets,
                "device": self.device,
                "multicast": self.multicast,
                "cluster": self.cluster,
                **kw,
            }
        )


def bitcast_offsets(offs: np.ndarray, old: np.dtype, new: np.dtype) -> np.ndarray:
    """``jax._src.state.utils.bitcast`` on byte offsets (little-endian parts).

    Narrowing by r: element (i*r + k, j) is part k of element (i, j).
    Widening by r: element (i, j) joins elements (i*r + k, j), k = 0..r-1.
    """
    xs, ys = old.itemsize, new.itemsize
    shape = offs.shape[:-1]
    if len(shape) < 2 and xs == ys:
        # JAX indexes the second-minor dim even when the width stays (BITCAST_1D_SAME_WIDTH_BUG)
        raise IndexError("list index out of range")
    if xs == ys:
        return offs
    if len(shape) < 2:
        raise ValueError("Bitcast 1D ref with bitwidth change is not supported.")
    m, n = shape[-2], shape[-1]
    lead = shape[:-2]
    if m * xs % ys:
        raise ValueError(
            "Expected input and output shapes are the same after multiplying the "
            "second-minor dimension by the bitwidths."
        )
    if xs > ys:
        r = xs // ys
        parts = offs.reshape(*lead, m, n, r, ys)
        return np.swapaxes(parts, -2, -3).reshape(*lead, m * r, n, ys)
    r = ys // xs
    parts = offs.reshape(*lead, m // r, r, n, xs)
    return np.swapaxes(parts, -2, -3).reshape(*lead, m // r, n, ys)


# ---------------------------------------------------------------- the simulation


@dataclass(frozen=True)
class Context:
    """One actor's coordinates: what ``lax.axis_index`` and ``pl.program_id`` return."""

    actor: Actor
    axes: dict[str, int]
    axis_sizes: dict[str, int]
    pids: tuple[int, ...]
    grid_point: int


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

    def _axis(self, ctx: Context, name: str, path: str) -> int:
        if name not in ctx.axes:
            raise SimError("XREF_UNKNOWN_NAME", path, f"no axis named {name!r} for lax.axis_index")
        return ctx.axes[name]

    def _index(self, t: At, view: View, ctx: Context, path: str) -> View:
        shape = view.shape
        if len(t.index) > len(shape):
            raise SimError("AT_TOO_MANY_INDICES", path, "`indices` must not be longer than `shape`")
        idx: list[Any] = []
        for dim, (e, size) in enumerate(zip(t.index, shape, strict=False)):
            where = f"{path}.index[{dim}]"
            if e is None:
                idx.append(slice(None))
            elif isinstance(e, int):
                if not -size <= e < size:
                    raise SimError("OOB_INDEX", where, f"index {e} out of bounds for size {size}")
                idx.append(e % size)
            elif isinstance(e, list):
                start = range(size)[slice(e[0], e[1])].start if size else 0
                if start >= size:  # a Python slice: the stop clamps, a start past the end errors
                    raise SimError(
                        "AT_OOB_SLICE", where, f"Out of bound slice: start={start}, dim={size}."
                    )
                idx.append(slice(e[0], e[1]))
            else:
                if isinstance(e, DsIndex):
                    start, n = e.ds
                elif isinstance(e, BlockIndex):
                    stride = e.size if e.stride is None else e.stride
                    start, n = self._axis(ctx, e.block, where) * stride, e.size
                elif isinstance(e, PidIndex):
                    self.used_pid = True
                    pid = ctx.pids[e.pid] if e.pid < len(ctx.pids) else 0
                    start, n = pid * e.size, e.size
                else:  # pragma: no cover - the model has no other entries
                    raise SimError("SIM_UNSUPPORTED", where, f"unknown index entry {e!r}")
                if start < 0 or n < 0 or start + n > size:
                    raise SimError(
                        "OOB_INDEX",
                        where,
                        f"slice [{start}, {start + n}) out of bounds for size {size} "
                        f"({ctx.actor.describe()})",
                    )
                idx.append(slice(start, start + n))
        return view.with_(offsets=view.offsets[tuple(idx)])

    def _device_id(self, t: RemoteRef, ctx: Context, path: str) -> int:
        dev = t.device
        if isinstance(dev, int):
            if not 0 <= dev < self.ndev:
                raise SimError("REMOTE_DEVICE_OOB", path, f"device {dev} outside the mesh")
            return dev
        coords = dict(zip(self.mesh, ctx.actor.device_coords, strict=True))
        for axis, v in dev.items():
            if axis not in self.mesh:
                raise SimError(
                    "DEVICE_ID_UNKNOWN_AXIS", path, f"Unrecognized axes in device_id: {axis!r}"
                )
            size = self.mesh[axis]
            if isinstance(v, Offset):
                coords[axis] = (coords[axis] + v.offset) % size
            elif not 0 <= v < size:
                raise SimError("REMOTE_DEVICE_OOB", path, f"{axis}={v} outside the mesh")
            else:
                coords[axis] = v
        return self._device_of(coords)

    def _apply(self, view: View, t: Any, ctx: Context, path: str) -> View:
        if isinstance(t, At):
            return self._index(t, view, ctx, path)
        if isinstance(t, Bitcast):
            new = np_dtype(t.dtype)
            try:
                offs = bitcast_offsets(view.offsets, view.dtype, new)
            except IndexError as e:
                raise SimError("BITCAST_1D_SAME_WIDTH_BUG", path, str(e)) from None
            except ValueError as e:
                code = "BITCAST_1D_WIDTH_CHANGE" if "1D" in str(e) else "BITCAST_SECOND_MINOR"
                raise SimError(code, path, str(e)) from None
            return view.with_(dtype=new, offsets=offs)
        if isinstance(t, Reshape):
            try:
                return view.with_(offsets=view.offsets.reshape(*t.shape, view.dtype.itemsize))
            except ValueError:
                raise SimError(
                    "RESHAPE_SIZE",
                    path,
                    f"cannot reshape ref of shape {view.shape} into shape {tuple(t.shape)}",
                ) from None
        if isinstance(t, Transpose):
            rank = len(view.shape)
            perm = [p % rank if rank else p for p in t.perm]
            if sorted(perm) != list(range(rank)):
                raise SimError("TRANSPOSE_RANK", path, f"{t.perm} is not a permutation")
            return view.with_(offsets=view.offsets.transpose(*perm, rank))
        if isinstance(t, RemoteRef):
            if view.multicast is not None:
                raise SimError(
                    "REF_MULTICAST_TO_PEER",
                    path,
                    "Can't make a multicast reference into a peer reference.",
                )
            return view.with_(device=self._device_id(t, ctx, path))
        if isinstance(t, MulticastRef):
            if view.device is not None:
                raise SimError(
                    "REF_PEER_TO_MULTICAST",
                    path,
                    "Can't make a peer reference into a multicast reference.",
                )
            axes = (t.axes,) if isinstance(t.axes, str) else tuple(t.axes)
            for a in axes:
                if a not in self.mesh:
                    raise SimError("DEVICE_ID_UNKNOWN_AXIS", path, f"no device axis {a!r}")
            return view.with_(multicast=axes)
        if isinstance(t, ClusterRef):
            coords = list(ctx.actor.cluster)
            names = list(self._cluster_sizes)
            for axis, i in t.block.items():
                if axis not in self._cluster_sizes:
                    raise SimError("CLUSTER_REF_UNKNOWN_AXIS", path, f"Unknown cluster axis {axis}")
                if not 0 <= i < self._cluster_sizes[axis]:
                    raise SimError("OOB_INDEX", path, f"cluster {axis}={i} outside the cluster")
                coords[names.index(axis)] = i
            return view.with_(cluster=tuple(coords))
        if isinstance(t, Tiling | Swizzle):
            raise SimError("SIM_UNSUPPORTED", path, f"{t.op} applies to scratch types only")
        raise SimError("SIM_UNSUPPORTED", path, f"unknown transform {t!r}")

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
        look = lambda n: self._lookup(env, n, ctx, path)  # noqa: E731
        if isinstance(stmt, Let):
            env[stmt.let] = self._stack(look(stmt.ref), stmt.transforms, ctx, path)
        elif isinstance(stmt, Copy | TmaStore):
            value = self._read(look(stmt.src), ctx, k, stmt.op, stmt.src, path)
            self._write(look(stmt.dst), value, ctx, k, stmt.op, stmt.dst, path)
        elif isinstance(stmt, Add):
            lhs = self._read(look(stmt.lhs), ctx, k, "add", stmt.lhs, path)
            rhs = self._read(look(stmt.rhs), ctx, k, "add", stmt.rhs, path)
            if lhs.dtype != rhs.dtype:
                raise SimError("SIM_DTYPE_MISMATCH", path, f"adding {lhs.dtype} and {rhs.dtype}")
            if lhs.shape != rhs.shape:
                raise SimError("SIM_SHAPE_MISMATCH", path, f"adding {lhs.shape} and {rhs.shape}")
            with np.errstate(all="ignore"):
                total = np.add(lhs, rhs, dtype=lhs.dtype)
            self._write(look(stmt.dst), total, ctx, k, "add", stmt.dst, path)
        elif isinstance(stmt, Fill):
            dst = look(stmt.dst)
            self._write(
                dst, _fill_value(stmt.value, dst.shape, dst.dtype), ctx, k, "fill", stmt.dst, path
            )
        elif isinstance(stmt, MultimemStore):
            value = self._read(look(stmt.src), ctx, k, stmt.op, stmt.src, path)
            axes = (stmt.axes,) if isinstance(stmt.axes, str) else tuple(stmt.axes)
            for a in axes:
                if a not in self.mesh:
                    raise SimError("DEVICE_ID_UNKNOWN_AXIS", path, f"no device axis {a!r}")
            self._write(look(stmt.dst), value, ctx, k, stmt.op, stmt.dst, path, fan_out=axes)
        elif isinstance(stmt, Return):
            raise SimError("MPMD_RETURNS_VALUE", path, "the kernel returns a value")
        else:  # pragma: no cover
            raise SimError("SIM_UNSUPPORTED", path, f"unknown statement {stmt!r}")

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
                        actors.append((Context(actor, axes, sizes, pids, gi), {}))
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


# ---------------------------------------------------------------- entry point


#: Stages at which every way of running a call (GPU or CPU interpreter) fails.
BLOCKING_STAGES = ("schema", "build", "trace")


def _static_findings(scenario: Scenario) -> tuple[Any | None, list[str]]:
    """(the first error that stops every run, notes) from ``mpmd_lab.validate.check``.

    Errors when lowering for the GPU become notes: JAX's CPU interpreters still run
    such a call, and the simulator matches them. Errors of the ``interpret`` and
    ``gpu-run`` stages are the interpreters' limits and the races the simulator
    reports itself.
    """
    try:
        from mpmd_lab.validate import check
    except ImportError:
        return None, []
    notes = []
    for d in check(scenario):
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


def simulate(scenario: Any, *, check: bool = True, program_id: str = "auto") -> SimResult:
    """Simulate a scenario's call (see the module docstring for the model).

    ``scenario``: a Scenario or anything ``load_scenario`` takes. ``check``: first
    ask ``mpmd_lab.validate.check`` (when present) whether JAX would reject the
    call. ``program_id``: ``"auto"`` (as the scenario's interpreter), ``"zero"``
    or ``"grid"``.
    """
    start = time.perf_counter()
    s = load_scenario(scenario)
    ndev = s.num_devices
    notes: list[str] = []
    if check:
        diag, notes = _static_findings(s)
        if diag is not None:
            return SimResult(
                "error",
                ndev,
                error={
                    "code": diag.code,
                    "type": diag.jax.type if diag.jax else "",
                    "message": diag.jax.message if diag.jax else diag.message,
                    "stage": diag.stage,
                    "path": diag.path,
                },
                seconds=time.perf_counter() - start,
            )
    sim = Simulator(s, program_id=program_id)
    sim.notes.extend(notes)
    try:
        outputs = sim.run()
    except SimError as e:
        return SimResult(
            "error",
            ndev,
            log=sim.log,
            error={
                "code": e.code,
                "type": "SimulationError",
                "message": str(e),
                "stage": "simulate",
                "path": e.path,
            },
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


__all__ = ["NOTE", "SimError", "SimResult", "Simulator", "simulate", "uninitialized"]
