"""The one table of dtypes: names a scenario may use, their widths, JAX's short names,
JAX's canonical (x64-off) form, promotion, and the numpy dtype (imported lazily).

Every module that needs a fact about a dtype asks here.
"""

from __future__ import annotations

import math
from typing import Any

#: name -> (bits, JAX's short name, kind: "f" float, "i" signed, "u" unsigned, "b" bool)
_TABLE: dict[str, tuple[int, str, str]] = {
    "float32": (32, "f32", "f"),
    "float16": (16, "f16", "f"),
    "bfloat16": (16, "bf16", "f"),
    "float64": (64, "f64", "f"),
    "int32": (32, "i32", "i"),
    "int16": (16, "i16", "i"),
    "int8": (8, "i8", "i"),
    "int64": (64, "i64", "i"),
    "uint32": (32, "u32", "u"),
    "uint16": (16, "u16", "u"),
    "uint8": (8, "u8", "u"),
    "bool": (8, "bool", "b"),
    "float8_e4m3fn": (8, "f8_e4m3fn", "f"),
    "float8_e5m2": (8, "f8_e5m2", "f"),
}

#: dtype names a scenario may use (numpy / jax.numpy spellings), in the schema's order.
DTYPES: tuple[str, ...] = tuple(_TABLE)

#: the dtypes of semaphore and barrier scratch (``ops.scratch``): no array holds them, but
#: their refs have a width (a semaphore is an int32 counter in GMEM, an mbarrier 64 bits
#: of SMEM) and a host form (the simulator's counters)
_SPECIAL: dict[str, tuple[int, str, str, str]] = {
    "semaphore": (32, "semaphore", "s", "int32"),
    "barrier": (64, "barrier", "s", "uint64"),
}

#: Without ``jax_enable_x64`` JAX makes 64-bit dtypes 32-bit.
CANONICAL = {"float64": "float32", "int64": "int32", "uint64": "uint32"}


def canonical(dtype: str) -> str:
    """The dtype JAX really uses (64-bit types are 32-bit without x64)."""
    return CANONICAL.get(dtype, dtype)


#: ``bits`` of every name it knows: the table's (canonical: float64 is 32 bits), the
#: canonical forms' own spellings (uint64), the special dtypes'
_BITS: dict[str, int] = {
    **{d: _TABLE[canonical(d)][0] for d in (*_TABLE, *CANONICAL)},
    **{d: v[0] for d, v in _SPECIAL.items()},
}


def bits(dtype: str) -> int:
    """Bit width of a dtype as JAX sees it (canonical; a semaphore 32, a barrier 64)."""
    # (one lookup: every rule asks it; an unknown name is the KeyError of its name, as
    # the table's own lookup raised it)
    return _BITS[dtype]


def storage_bytes(dtype: str) -> int:
    """Bytes per element as the host stores it (64-bit stays 64-bit on the host)."""
    if dtype in _SPECIAL:
        return _SPECIAL[dtype][0] // 8
    return _TABLE[dtype][0] // 8 if dtype in _TABLE else 4


def short(dtype: str) -> str:
    """``float32`` -> ``f32``, as JAX writes a dtype in a type."""
    return _TABLE[dtype][1] if dtype in _TABLE else dtype


def is_int(dtype: str) -> bool:
    return dtype in _TABLE and _TABLE[dtype][2] in "iu"


def is_float(dtype: str) -> bool:
    return dtype in _TABLE and _TABLE[dtype][2] == "f"


def nbytes(shape: list[int] | tuple[int, ...], dtype: str) -> int:
    """Bytes of a host array of this shape and dtype (no numpy needed)."""
    return math.prod(shape) * storage_bytes(dtype)


def promote(a: str, b: str) -> str:
    """JAX's type promotion of two (canonical) dtypes, without x64."""
    if a == b:
        return a
    if a == "bool":
        return b
    if b == "bool":
        return a
    fa, fb = is_float(a), is_float(b)
    if fa != fb:
        return a if fa else b
    wa, wb = bits(a), bits(b)
    if fa:
        if wa == wb:
            return "float32" if wa == 16 else "float16" if wa == 8 else a
        return a if wa > wb else b
    sa, sb = _TABLE[a][2] == "i", _TABLE[b][2] == "i"
    if sa == sb:
        return a if wa > wb else b
    sw, uw = (wa, wb) if sa else (wb, wa)
    return f"int{min(max(sw, 2 * uw), 32)}"


def np_dtype(name: str) -> Any:
    """A scenario dtype as a numpy dtype (bfloat16 and float8 through ml_dtypes)."""
    import numpy as np

    if name == "bool":
        return np.dtype(np.bool_)
    if name in _SPECIAL:  # a semaphore's or barrier's counter on the host
        return np.dtype(_SPECIAL[name][3])
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


def jnp_expr(dtype: str) -> str:
    """The dtype as generated JAX source writes it (``jnp.float32``)."""
    return f"jnp.{dtype}" if dtype != "bool" else "jnp.bool_"
