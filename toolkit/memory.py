"""The simulator's memory: buffers as bytes, views as arrays of byte offsets.

A buffer is a flat byte array in one place (a device's GMEM, a block's SMEM); a view
is an array of byte offsets into one buffer, shape ``view.shape + (itemsize,)``, that
the transform ops (:mod:`mpmd_lab.ops`) reshape, permute and index.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from mpmd_lab.accesslog import Location, unique_sorted
from mpmd_lab.dtypes import np_dtype
from mpmd_lab.record import Record

# ---------------------------------------------------------------- dtypes and fills


def is_float(dt: np.dtype) -> bool:
    return dt.kind == "f" or dt.name.startswith(("bfloat", "float8"))


def uninitialized(shape: tuple[int, ...], dt: np.dtype, mode: str) -> np.ndarray:
    """JAX's interpreter fill for memory nobody wrote (``mode``: "gpu" or "hlo")."""
    if is_float(dt):
        return np.full(shape, np.nan, dt)
    if dt.kind == "b":
        return np.full(shape, mode == "gpu", dt)
    info = np.iinfo(dt)
    return np.full(shape, info.max if mode == "gpu" else info.min, dt)


def fill_value(value: bool | int | float, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
    """``jnp.full(shape, value, dtype)`` as JAX computes it (x64 off): a Python float is
    float32 first; a Python int goes through ``np.asarray(value).astype(dtype)`` (int64,
    or uint64 past 2**63: integer dtypes keep its low bits, as JAX does); an int below
    -2**63 only reaches a float dtype (JAX's OverflowError otherwise)."""
    if isinstance(value, bool):
        src = np.asarray(value)
    elif isinstance(value, int):
        try:
            src = np.asarray(value)
        except OverflowError:
            if not is_float(dt):
                raise OverflowError(f"Python int {value} too large to convert to C long") from None
            src = np.asarray(float(value))
    else:
        src = np.asarray(value, np.float32)
    with np.errstate(all="ignore"):
        return np.full(shape, src.astype(dt), dt)


def host_value(b: Any, num_devices: int, gshape: Sequence[int] | None = None) -> np.ndarray:
    """``callsupport.host_array`` without importing JAX (the tests hold the two equal):
    ``gshape`` the global shape (None: dim 0 times the device count)."""
    dt = np_dtype(b.dtype)
    shape = tuple(b.shape)
    if gshape is None:
        gshape = (shape[0] * num_devices, *shape[1:]) if shape else ()
    gshape = tuple(gshape)
    if b.init == "zeros":
        return np.zeros(gshape, dt)
    if b.init == "ones":
        return np.ones(gshape, dt)
    if b.init == "iota":
        return np.arange(math.prod(gshape)).reshape(gshape).astype(dt)
    if b.init == "random":
        return np.random.default_rng(b.seed).standard_normal(gshape).astype(dt)
    value = np.asarray(b.init).astype(dt)
    if shape and value.shape == gshape and gshape != shape:
        return value  # the global value: split over the devices by the spec
    one = value.reshape(shape)
    if not shape:
        return one
    return np.tile(one, [g // d if d else 1 for g, d in zip(gshape, shape, strict=True)])


# ---------------------------------------------------------------- memory and views


class Abstract(Record):
    """A value without data (the data-free race check): only its shape and dtype."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.shape = shape
        self.dtype = dtype

    def astype(self, dt: Any) -> Abstract:
        return Abstract(self.shape, np.dtype(dt))


class Storage(Record):
    """One buffer's bytes in one place (``data``: uint8, flat)."""

    __slots__ = ("location", "dtype", "shape", "data")

    def __init__(
        self, location: Location, dtype: np.dtype, shape: tuple[int, ...], data: np.ndarray
    ) -> None:
        self.location = location
        self.dtype = dtype
        self.shape = shape
        self.data = data

    @classmethod
    def of(cls, location: Location, value: np.ndarray) -> Storage:
        value = np.array(value, order="C")  # (ascontiguousarray makes rank 0 rank 1)
        return cls(location, value.dtype, value.shape, value.reshape(-1).view(np.uint8).copy())

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def value(self) -> np.ndarray:
        return self.data.view(self.dtype).reshape(self.shape).copy()


class Base(Record):
    """What a kernel parameter names: a buffer of some memory space.

    ``kind``: ``"input"``, ``"output"``, ``"scratch"``, or ``"semaphore"`` /
    ``"barrier"`` (synchronisation objects: indexed, never read or written as data);
    ``name``: the buffer / output / scratch name; ``memory``: "GMEM", "SMEM", "TMEM".
    """

    __slots__ = ("kind", "name", "memory", "dtype", "shape", "is_sync")
    _unshown = ("is_sync",)

    def __init__(
        self, kind: str, name: str, memory: str, dtype: np.dtype, shape: tuple[int, ...]
    ) -> None:
        self.kind = kind
        self.name = name
        self.memory = memory
        self.dtype = dtype
        self.shape = shape
        #: a synchronisation object (``kind``, asked at every access: known once)
        self.is_sync = kind in ("semaphore", "barrier")


def c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The strides (in elements) of a C-order array of ``shape`` (by shape, once)."""
    got = _C_STRIDES.get(shape)
    if got is None:
        out = []
        step = 1
        for d in reversed(shape):
            out.append(step)
            step *= d
        if len(_C_STRIDES) > 4096:
            _C_STRIDES.clear()
        got = _C_STRIDES[shape] = tuple(reversed(out))
    return got


_C_STRIDES: dict[tuple[int, ...], tuple[int, ...]] = {}


#: an affine view's ``(id(root), start, shape, strides)``, in base elements
Lay = tuple[int, int, tuple[int, ...], tuple[int, ...]]


class View:
    """A ref as seen by one actor: byte offsets into a base buffer, and where it lives.

    ``offsets`` has the view's shape plus one last dimension: every byte of an element
    (``itemsize`` long), or only its first byte (length 1, a *compact* view: what the
    data-free race check uses when no bitcast needs the bytes). ``oob`` is set on a view
    an index placed outside its ref (``(field path, message)``; the offsets are clipped
    to keep its shape): an access through it fails, as the GPU interpreter's bounds
    check does at the access, not at the view.

    A view of its base's elements in an affine pattern (the whole, and what indexing
    keeps of it) may carry ``lay``: ``(id(root), start, shape, strides)``, its first
    element and its strides in base elements, over ``root`` (the whole's offsets array,
    flat). Such a view is made from a few integers (the data-free check's lets, per
    actor per step); its offsets array is made only when something asks for it, equal
    to the one numpy's indexing of the whole would give (same root, start, strides).

    A plain class with slots, treated as immutable (``with_`` makes the changed copy):
    the data-free check makes one per transform per actor, where a frozen dataclass's
    ``__init__`` was a measurable share of its time.
    """

    __slots__ = (
        "_offsets",
        "base",
        "cluster",
        "device",
        "dtype",
        "lay",
        "multicast",
        "oob",
        "root",
    )

    base: Base
    dtype: np.dtype
    device: int | None  # a peer device (remote_ref)
    multicast: tuple[str, ...] | None  # axes (multicast_ref)
    cluster: tuple[int, ...] | None  # cluster coordinates (cluster_ref)
    oob: tuple[str, str, str] | None  # (code, field path, message)
    lay: Lay | None  # (an affine view) its place in the root, or None
    root: np.ndarray | None  # (an affine view) the whole's offsets, as allocated

    def __init__(
        self,
        base: Base,
        dtype: np.dtype,
        offsets: np.ndarray | None,
        device: int | None = None,
        multicast: tuple[str, ...] | None = None,
        cluster: tuple[int, ...] | None = None,
        oob: tuple[str, str, str] | None = None,
        lay: Lay | None = None,
        root: np.ndarray | None = None,
    ) -> None:
        self.base = base
        self.dtype = dtype
        self._offsets = offsets
        self.device = device
        self.multicast = multicast
        self.cluster = cluster
        self.oob = oob
        self.lay = lay
        self.root = root

    def __repr__(self) -> str:
        return (
            f"View({self.base.name!r}, {self.dtype}, shape={self.shape}, device={self.device},"
            f" multicast={self.multicast}, cluster={self.cluster}, oob={self.oob})"
        )

    @property
    def offsets(self) -> np.ndarray:
        """int32 (int64 past 2 GiB), shape = view shape + (itemsize or 1,)."""
        o = self._offsets
        if o is None:
            o = self._offsets = self._strided()
        return o

    @offsets.setter
    def offsets(self, value: np.ndarray) -> None:
        self._offsets = value
        self.lay = self.root = None

    def _strided(self) -> np.ndarray:
        """An affine view's offsets: its elements' rows of the root, strided."""
        root, lay = self.root, self.lay
        assert root is not None and lay is not None  # (a view has offsets or a lay)
        last = 1 if root.ndim == 1 else root.shape[-1]
        row = last * root.itemsize  # bytes of one element's row in the root
        # (an empty view may start past the end: pl.ds(n, 0) of each dim; it holds nothing)
        return np.ndarray(
            (*lay[2], last),
            root.dtype,
            buffer=root,
            offset=0 if 0 in lay[2] else lay[1] * row,
            strides=(*[s * row for s in lay[3]], root.itemsize),
        )

    @property
    def shape(self) -> tuple[int, ...]:
        lay = self.lay
        if lay is not None:
            return lay[2]
        return self._offsets.shape[:-1]  # type: ignore[union-attr]

    @classmethod
    def whole(cls, base: Base, compact: bool = False, affine: bool = False) -> View:
        """The whole base (``affine``: with its ``lay``, its offsets' array as ``root``)."""
        isz = base.dtype.itemsize
        n = math.prod(base.shape)
        if compact:
            small = n * isz < 2**31
            root = np.arange(0, n * isz, isz, dtype=np.int32 if small else np.int64)
            offs = root.reshape(*base.shape, 1)
        else:
            it = np.dtype(np.int32 if n * isz < 2**31 else np.int64)
            root = (np.arange(n, dtype=it) * isz)[:, None] + np.arange(isz, dtype=it)
            offs = root.reshape(*base.shape, isz)
        if not affine:
            return cls(base, base.dtype, offs)
        lay = (id(root), 0, tuple(base.shape), c_strides(tuple(base.shape)))
        return cls(base, base.dtype, offs, lay=lay, root=root)

    def elements(self) -> np.ndarray:
        """The base buffer's flat element indices this view covers."""
        bsz = self.base.dtype.itemsize
        offsets = self.offsets
        # a view element holds whole base elements (widening) or lies inside one
        starts = offsets[..., ::bsz] if self.dtype.itemsize >= bsz else offsets[..., :1]
        return unique_sorted(starts // bsz)

    def with_offsets(self, offsets: np.ndarray, oob: tuple[str, str, str] | None = None) -> View:
        """A copy with other offsets and ``oob`` (``with_``'s most common change, at a
        third of its cost)."""
        return View(self.base, self.dtype, offsets, self.device, self.multicast, self.cluster, oob)

    def with_lay(self, lay: Lay, oob: tuple[str, str, str] | None) -> View:
        """A copy with another ``lay`` over the same root (an affine view's indexing)."""
        return View(
            self.base,
            self.dtype,
            None,
            self.device,
            self.multicast,
            self.cluster,
            oob,
            lay,
            self.root,
        )

    def with_(self, **kw: Any) -> View:
        """A copy with the fields in ``kw`` changed (``offsets``: an affine view's lay
        goes with its old offsets)."""
        new = View.__new__(View)
        new.base = self.base
        new.dtype = self.dtype
        new._offsets = self._offsets
        new.device = self.device
        new.multicast = self.multicast
        new.cluster = self.cluster
        new.oob = self.oob
        new.lay = self.lay
        new.root = self.root
        for k, v in kw.items():
            setattr(new, k, v)
        return new


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


__all__ = [
    "Abstract",
    "Base",
    "Storage",
    "View",
    "bitcast_offsets",
    "c_strides",
    "fill_value",
    "host_value",
    "uninitialized",
]
