"""The simulator's memory: buffers as bytes, views as arrays of byte offsets.

A buffer is a flat byte array in one place (a device's GMEM, a block's SMEM); a view
is an array of byte offsets into one buffer, shape ``view.shape + (itemsize,)``, that
the transform ops (:mod:`mpmd_lab.ops`) reshape, permute and index.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpmd_lab.accesslog import Location, unique_sorted
from mpmd_lab.dtypes import np_dtype

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
    value = np.asarray(b.init).astype(dt)
    if shape and value.shape == gshape and gshape != shape:
        return value  # the global value: dim 0 split over the devices
    one = value.reshape(shape)
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


__all__ = [
    "Base",
    "Storage",
    "View",
    "bitcast_offsets",
    "fill_value",
    "host_value",
    "uninitialized",
]
