"""Argument transforms applied to a plain array (a buffer without ``as_ref``).

Outside the kernel the caller's value is a ``jax.Array`` tracer, not a Ref, so the
scenario's transforms mean what they mean for arrays: ``.at[...]`` makes an update
helper (which no kernel accepts), ``.reshape`` / ``.transpose`` make a new array,
``.bitcast`` does not exist, and the ref functions reject it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from mpmd_lab.fields import Path, format_path
from mpmd_lab.ops.base import ShardSpec, TransformOp


@dataclass
class ArrayResult:
    shape: tuple[int, ...]
    dtype: str
    updater: bool = False  # an ``x.at[...]`` helper, not an array
    helper_index: str = ""  # (the helper's index, as JAX prints it)
    error: tuple[str, str, str, str] | None = None  # (code, type, message, path)
    #: each dim's sharding over the device mesh (None: not sharded, or not followed)
    spec: ShardSpec | None = None
    #: the device mesh's axis sizes (what a sharded dim's split is measured by)
    mesh: Mapping[str, int] = field(default_factory=dict)


def apply_array(
    shape: tuple[int, ...],
    dtype: str,
    transforms: list[TransformOp],
    base: Path,
    bound: frozenset[str],
    spec: ShardSpec | None = None,
    mesh: Mapping[str, int] | None = None,
) -> ArrayResult:
    """Follow ``transforms`` on an array value (each transform's ``on_array``); stop at
    the first error (its path made text under ``base``, the transforms' path). ``spec``:
    the array's sharding over the device mesh ``mesh`` (the global array a kernel sees
    without shard_map), followed through the transforms as JAX's sharding rules do."""
    r = ArrayResult(tuple(shape), dtype, spec=spec, mesh=mesh or {})
    for k, t in enumerate(transforms):
        e = t.on_array(r, bound)
        if e is not None:
            r.error = (*e, format_path((*base, k)))
            return r
    return r
