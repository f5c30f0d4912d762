"""Argument transforms applied to a plain array (a buffer without ``as_ref``).

Outside the kernel the caller's value is a ``jax.Array`` tracer, not a Ref, so the
scenario's transforms mean what they mean for arrays: ``.at[...]`` makes an update
helper (which no kernel accepts), ``.reshape`` / ``.transpose`` make a new array,
``.bitcast`` does not exist, and the ref functions reject it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from mpmd_lab.ops import BlockIndex, PidIndex


@dataclass
class ArrayResult:
    shape: tuple[int, ...]
    dtype: str
    updater: bool = False  # an ``x.at[...]`` helper, not an array
    error: tuple[str, str, str, str] | None = None  # (code, type, message, path)


def apply_array(
    shape: tuple[int, ...], dtype: str, transforms: list[Any], base: str, bound: frozenset[str]
) -> ArrayResult:
    """Follow ``transforms`` on an array value; stop at the first error."""
    r = ArrayResult(tuple(shape), dtype)
    for k, t in enumerate(transforms):
        path = f"{base}[{k}]"
        op = t.op
        if op == "remote_ref" and isinstance(t.device, dict):
            # the device id expression (lax.axis_index) is evaluated before the call
            axis = next(
                (a for a, v in t.device.items() if not isinstance(v, int) and a not in bound), None
            )
            if axis is not None:
                r.error = (
                    "UNBOUND_AXIS",
                    "NameError",
                    f"Found an unbound axis name: {axis}. To fix this, please call axis_index "
                    "under `jax.shard_map`.",
                    path,
                )
                return r
        if r.updater:
            if op in ("at", "bitcast", "reshape") or (op == "transpose" and t.via == "method"):
                name = {"at": "at", "bitcast": "bitcast", "reshape": "reshape"}.get(op, "transpose")
                r.error = (
                    "ARRAY_NO_METHOD",
                    "AttributeError",
                    f"'_IndexUpdateRef' object has no attribute '{name}'",
                    path,
                )
                return r
            if op == "transpose":  # transpose_ref asserts the ref has a memory space
                r.error = ("JAX_ASSERTION", "AssertionError", "", path)
                return r
            continue  # remote/multicast/cluster wrap it without complaint
        if op == "at":
            for e in t.index:
                if isinstance(e, PidIndex):
                    r.error = ("JAX_ASSERTION", "AssertionError", "", path)
                    return r
                if isinstance(e, BlockIndex) and e.block not in bound:
                    r.error = (
                        "UNBOUND_AXIS",
                        "NameError",
                        f"Found an unbound axis name: {e.block}. To fix this, please call "
                        "axis_index under `jax.shard_map`.",
                        path,
                    )
                    return r
            r.updater = True
        elif op == "bitcast":
            r.error = (
                "ARRAY_NO_METHOD",
                "AttributeError",
                "DynamicJaxprTracer has no attribute bitcast",
                path,
            )
            return r
        elif op == "reshape":
            target = tuple(t.shape)
            size = math.prod(r.shape)
            if target.count(-1) > 1:
                r.error = (
                    "RESHAPE_MINUS_ONE",
                    "TypeError",
                    f"can only specify one unknown axis size with a `-1` value, got {target!r}",
                    path,
                )
                return r
            shown = str(target[0]) if len(target) == 1 else repr(target)
            if -1 in target:
                rest = math.prod(d for d in target if d != -1)
                if rest and size % rest == 0:
                    target = tuple(size // rest if d == -1 else d for d in target)
            if -1 in target or math.prod(target) != size:
                r.error = (
                    "RESHAPE_SIZE",
                    "TypeError",
                    f"cannot reshape array of shape {r.shape!r} (size {size}) into shape "
                    f"{shown} (size {abs(math.prod(target))})",
                    path,
                )
                return r
            r.shape = target
        elif op == "transpose":
            if t.via == "transpose_ref":
                sh = ",".join(map(str, r.shape))
                r.error = (
                    "TRANSPOSE_REF_RAW_BUG",
                    "ValueError",
                    "The 'memory_space' attribute is not available on traced array with shape "
                    f"{r.dtype}[{sh}]. Use `jax.typeof(x).memory_space` instead.",
                    path,
                )
                return r
            n = len(r.shape)
            bad = next((p for p in t.perm if not -n <= p < n), None)
            if bad is not None:
                r.error = (
                    "TRANSPOSE_BAD_AXIS",
                    "ValueError",
                    f"axis {bad} is out of bounds for array of dimension {n}",
                    path,
                )
                return r
            perm = [p % n for p in t.perm]
            if sorted(perm) != list(range(n)):
                r.error = (
                    "TRANSPOSE_RANK",
                    "TypeError",
                    "transpose permutation isn't a permutation of operand dimensions, got "
                    f"permutation {tuple(t.perm)!r} for operand shape {r.shape!r}.",
                    path,
                )
                return r
            r.shape = tuple(r.shape[p] for p in perm)
        else:  # remote_ref, multicast_ref, cluster_ref
            r.error = ("REF_NOT_A_REF", "TypeError", "ref must be a reference", path)
            return r
    return r
