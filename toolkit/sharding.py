"""Partition specs over the device mesh, as ``jax.shard_map`` reads them (no JAX here).

A scenario's spec is the JSON form of a ``jax.sharding.PartitionSpec``: one entry per
array dimension, ``null`` (not sharded), an axis name, or a list of axis names (the
dimension split over their product, the first major). ``None`` instead of a spec is the
scenario's convention since schema@1: dim 0 over every device-mesh axis in order (a
rank-0 value replicated). Buffer and output shapes stay **per device**; the global shape
multiplies each dimension by the sizes of the axes its entry names.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

#: the JSON form: one entry per leading dimension
SpecJson = list[str | list[str] | None]


def entries(spec: Any, ndim: int, axes: Mapping[str, int]) -> list[tuple[str, ...]]:
    """The axis names each of ``ndim`` dimensions is split over (``()``: not split).

    ``spec`` None is the schema@1 default; a ``jax.sharding.PartitionSpec`` or the JSON
    list are read alike. Entries past ``ndim`` are ignored (``spec_error`` reports them)."""
    if spec is None:
        return [tuple(axes) if i == 0 else () for i in range(ndim)]
    given = list(spec)
    out: list[tuple[str, ...]] = []
    for i in range(ndim):
        e = given[i] if i < len(given) else None
        if e is None:
            out.append(())
        elif isinstance(e, tuple | list):
            out.append(tuple(str(x) for x in e))
        else:
            out.append((str(e),))
    return out


def is_default(spec: Any, ndim: int, axes: Mapping[str, int]) -> bool:
    """Whether ``spec`` splits as the schema@1 default does (dim 0 over every axis)."""
    return entries(spec, ndim, axes) == entries(None, ndim, axes)


def text(spec: Any, ndim: int, axes: Mapping[str, int]) -> str:
    """The spec as JAX prints a ``PartitionSpec``: ``P('x',)``, ``P(None, 'y')``, ``P()``."""
    if spec is None:
        spec = [tuple(axes)] if ndim and axes else []
    items = [tuple(e) if isinstance(e, list | tuple) else e for e in spec]
    if len(items) == 1 and isinstance(items[0], tuple) and len(items[0]) == 1:
        items = [items[0][0]]  # P(('x',)) prints as P('x',)
    return "P" + repr(tuple(items))


def parse_text(source: str) -> SpecJson | None:
    """A spec as a user writes it, ``P(None, 'y')`` (or ``None, 'y'``), as JSON;
    ``""`` is None (the default). ValueError when it is not one."""
    import ast

    body = source.strip()
    if not body:
        return None
    if body.startswith("P(") and body.endswith(")"):
        body = body[2:-1]
    try:
        body = body.strip()
        value = ast.literal_eval(f"({body}{'' if not body or body.endswith(',') else ','})")
    except (ValueError, SyntaxError):
        raise ValueError(f"{source!r} is not a partition spec such as P(None, 'y')") from None
    out: SpecJson = []
    for e in value:
        if e is None or isinstance(e, str):
            out.append(e)
        elif isinstance(e, tuple) and all(isinstance(x, str) for x in e):
            out.append(list(e))
        else:
            raise ValueError(f"a spec entry is None, an axis name or a tuple of them, not {e!r}")
    return out


def parts(names: Sequence[str], axes: Mapping[str, int]) -> int:
    """How many pieces a dimension split over ``names`` is cut into."""
    return math.prod(axes.get(n, 1) for n in names)


def global_shape(local: Sequence[int], spec: Any, axes: Mapping[str, int]) -> list[int]:
    """The global shape of a value whose per-device shape is ``local``."""
    ents = entries(spec, len(local), axes)
    return [d * parts(e, axes) for d, e in zip(local, ents, strict=True)]


def mesh_coords(axes: Mapping[str, int]) -> list[dict[str, int]]:
    """Each device's coordinates on the mesh, in row-major order (device id order)."""
    return [
        dict(zip(axes, c, strict=True))
        for c in itertools.product(*(range(n) for n in axes.values()))
    ]


def shard_slices(
    spec: Any, axes: Mapping[str, int], gshape: Sequence[int]
) -> list[tuple[slice, ...]]:
    """For each device (row-major over the mesh), the slices of the global array it holds."""
    ents = entries(spec, len(gshape), axes)
    out = []
    for c in mesh_coords(axes):
        sl = []
        for dim, names in zip(gshape, ents, strict=True):
            idx = 0
            for n in names:
                idx = idx * axes.get(n, 1) + c.get(n, 0)
            size = dim // parts(names, axes)
            sl.append(slice(idx * size, (idx + 1) * size))
        out.append(tuple(sl))
    return out


def shards_of(value: Any, spec: Any, axes: Mapping[str, int]) -> list[Any]:
    """Each device's shard of the global numpy array ``value``."""
    return [value[s] for s in shard_slices(spec, axes, tuple(value.shape))]


def assemble(shards: Sequence[Any], spec: Any, axes: Mapping[str, int]) -> Any:
    """The global array ``jax.shard_map`` makes of these per-device values (row-major over
    the mesh) under the out spec ``spec``: along an axis the spec does not name the
    values are taken as equal (``check_vma=False``) and the first device's is kept."""
    import numpy as np

    first = shards[0]
    out = np.empty(tuple(global_shape(first.shape, spec, axes)), first.dtype)
    slices = shard_slices(spec, axes, out.shape)
    for s, sl in reversed(list(zip(shards, slices, strict=True))):
        out[sl] = s  # the first device writes last: its value is the one kept
    return out


def spec_error(
    spec: Any,
    shape: Sequence[int],
    dtype: str,
    axes: Mapping[str, int],
    where: str,
    label: str = "",
    explicit: bool = True,
) -> tuple[str, str, str] | None:
    """The first thing JAX refuses in ``spec`` for a value of per-device ``shape``:
    ``(code, exception type, JAX's message)``, or None.

    ``where`` is ``"in"`` (an argument: the exported call places it with
    ``NamedSharding`` before ``jax.shard_map`` sees it: the build stage) or ``"out"`` (an
    out spec, checked by ``jax.shard_map`` at the trace stage: its axis names before the
    body traces, ``out_axes_error``, the rest once it traced);
    ``label`` the out spec's key (``"o"``: ``out_specs['o']``); ``explicit`` whether the
    mesh's axes are Explicit (``jax.make_mesh``'s) or Auto (a ``Mesh`` built by hand)."""
    if spec is None:
        return None
    p = text(spec, len(spec), axes)
    ents = entries(spec, len(spec), axes)
    for n in (n for e in ents for n in e):
        if n not in axes:
            if where == "in":
                msg = f"Resource axis: {n} of {p} is not found in mesh: {tuple(axes)!r}."
            else:
                msg = out_axes_error({label: spec}, axes) or ""
            return "SHARD_SPEC_AXIS", "ValueError", msg
    ndim = len(shape)
    if where == "out" and len(spec) > ndim:
        # (shard_map checks out specs' ranks as its body's call returns, before it makes
        # their shardings, which finds an axis twice)
        msg = out_rank_error({label: (spec, shape, dtype)}, axes) or ""
        return "SHARD_SPEC_RANK", "ValueError", msg
    seen: set[str] = set()
    for n in (n for e in ents for n in e):
        if n in seen:
            # an out spec's sharding is made for the output's rank: padded with None
            padded = list(spec) + [None] * (ndim - len(spec)) if where == "out" else spec
            shown = text(padded, len(padded), axes)
            msg = (
                "A single NamedSharding spec specification can map every mesh axis to at "
                f"most one positional dimension, but {shown} has duplicate entries for `{n}`"
            )
            return "SHARD_SPEC_DUPLICATE", "DuplicateSpecError", msg
        seen.add(n)
    if len(spec) <= ndim:
        return None
    kind = "Explicit" if explicit else "Auto"
    mesh = (
        "AbstractMesh("
        + ", ".join(f"{a!r}: {k}" for a, k in axes.items())
        + f", axis_types=({', '.join(kind for _ in axes)}"
        + ("," if len(axes) == 1 else "")
        + "), device_kind=cpu, num_cores=None, platform=cpu)"
    )
    msg = (
        f"Length of sharding.spec ({len(spec)}) must be equal to aval's ndim ({ndim}). "
        f"Got sharding.spec {p}, aval.ndim {ndim} and sharding "
        f"NamedSharding(mesh={mesh}, spec={p})"
    )
    return "SHARD_SPEC_RANK", "ValueError", msg


def out_rank_error(
    outs: Mapping[str, tuple[Any, Sequence[int], str]], axes: Mapping[str, int]
) -> str | None:
    """JAX's message for out specs longer than their output's rank, or None.

    ``outs`` maps each output's name to ``(spec, per-device shape, short dtype)``;
    ``jax.shard_map`` checks them all once the body traced and names every one too long
    (a bullet each where there are several; outputs in key order)."""
    lines = []
    rank0 = False
    for label in sorted(outs):
        spec, shape, dtype = outs[label]
        if spec is None or len(spec) <= len(shape):
            continue
        ndim = len(shape)
        rank0 = rank0 or ndim == 0
        local = ",".join(map(str, shape))  # (the body's value: one device's)
        lines.append(
            f"* out_specs[{label!r}] is {text(spec, len(spec), axes)} which has length "
            f"{len(spec)}, but call(*args)[{label!r}] has shape {dtype}[{local}], which has "
            f"rank {ndim} (and {ndim} < {len(spec)})"
        )
    if not lines:
        return None
    if len(lines) == 1:
        lines = [lines[0][2:]]  # (one: no bullet)
    msg = (
        "shard_map applied to the function 'call' was given an out_specs entry which is too "
        "long to be compatible with the corresponding output value from the function:\n\n"
        + "\n\n".join(lines)
        + "\n\nEntries in out_specs must be of length no greater than the number of axes in "
        "the corresponding output value.\n\n"
        "Either revise the spec to be shorter, or modify 'call' so that its outputs have "
        "sufficient rank."
    )
    if rank0:
        msg += (
            "\n\nFor scalar values (rank 0), consider using an out_specs entry of `P()`, "
            "where `P = jax.sharding.PartitionSpec`. In particular, for rank 0 outputs "
            "which are not constant over the mesh, add at least one (singleton) axis to "
            "them so that they can be concatenated using out_specs."
        )
    return msg


def out_axes_error(specs: Mapping[str, Any], axes: Mapping[str, int]) -> str | None:
    """JAX's message for out specs that name an axis the mesh lacks, or None.

    ``jax.shard_map`` checks every out spec's names when the mapped function is called,
    before its body traces (and so before anything the kernel does); ``specs`` maps each
    output's name to its spec. One line per such name, the outputs in key order (a
    dict's pytree order)."""
    lines = [
        f"  out_specs[{label!r}] refers to {n!r}"
        for label in sorted(specs)
        if specs[label] is not None
        for e in entries(specs[label], len(specs[label]), axes)
        for n in e
        if n not in axes
    ]
    if not lines:
        return None
    return (
        "shard_map out_specs argument must refer to an axis marked as manual "
        f"({_frozenset(axes)}), but:\n\n" + "\n\n".join(lines) + "\n\n"
        "Check the out_specs values passed to shard_map."
    )


def repaired(spec: SpecJson, ndim: int, axes: Mapping[str, int]) -> SpecJson:
    """``spec`` with what JAX refuses taken out: names the mesh lacks, a second use of an
    axis, entries past ``ndim`` (a fix to offer; the check verifies it)."""
    seen: set[str] = set()
    out: SpecJson = []
    for e in spec[:ndim]:
        names = [e] if isinstance(e, str) else list(e or [])
        keep = [n for n in names if n in axes and n not in seen]
        seen.update(keep)
        out.append(None if not keep else keep[0] if isinstance(e, str) else keep)
    return out


def _frozenset(axes: Mapping[str, int]) -> str:
    # a frozenset's order is the hash's: the catalogue pattern does not pin it
    return "frozenset({" + ", ".join(repr(a) for a in axes) + "})"


__all__ = [
    "SpecJson",
    "assemble",
    "broadcast_error",
    "broadcast_result",
    "entries",
    "global_shape",
    "is_default",
    "mesh_coords",
    "out_axes_error",
    "out_rank_error",
    "parse_text",
    "parts",
    "repaired",
    "shard_slices",
    "shards_of",
    "spec_error",
    "text",
]


#: a dim's sharding as a ``PartitionSpec`` holds it: None (not sharded), one axis name,
#: or a tuple of two or more (a spec's ``()`` and ``("x",)`` are None and ``"x"``)
ShardPart = str | tuple[str, ...] | None
#: a value's sharding: a ``ShardPart`` per dim
ShardSpec = tuple[ShardPart, ...]


def part(names: Sequence[str]) -> ShardPart:
    """``names`` as a ``PartitionSpec`` entry holds them."""
    return None if not names else names[0] if len(names) == 1 else tuple(names)


def names_of(p: ShardPart) -> tuple[str, ...]:
    """The axis names of a spec entry."""
    return () if p is None else (p,) if isinstance(p, str) else p


def typed_dims(shape: Sequence[int], spec: ShardSpec | None) -> str:
    """``shape`` as JAX prints it in a type, a sharded dim as ``16@dev`` or ``16@(x,y)``
    (``core._get_shape_sharding_str``)."""
    dims = [str(d) for d in shape]
    for i, p in enumerate(spec or ()):
        if i < len(dims) and p is not None:
            dims[i] += f"@{p}" if isinstance(p, str) else f"@({','.join(p)})"
    return ",".join(dims)


def broadcast_error(
    prim: str,
    operands: Sequence[tuple[Sequence[int], str, ShardSpec | None]],
    out_dtype: str,
) -> str | None:
    """JAX's ShardingTypeError of an elementwise ``prim`` (``add``, ``mul``, ...) of
    values sharded over the device mesh (loads of a global call's sharded inputs), or
    None: ``operands`` are ``(shape, short dtype, per-dim sharding or None)``, of one
    rank (rank 0: a scalar, left out, as JAX leaves it). ``lax.broadcasting_sharding_rule``:
    a dim two operands shard differently (a replicated dim of size 1 aside); then a
    result naming one axis twice (``utils.call_shape_dtype_sharding_rule``)."""
    shaped = _ranked_up([(tuple(sh), dt, sp) for sh, dt, sp in operands if len(sh)])
    if not shaped or all(sp is None for _, _, sp in shaped):
        return None
    ndim = len(shaped[0][0])
    specs = [sp if sp is not None else (None,) * ndim for _, _, sp in shaped]
    result: list[ShardPart] = []
    for i in range(ndim):
        parts = [sp[i] if i < len(sp) else None for sp in specs]
        sizes = [sh[i] for sh, _, _ in shaped]
        kept = [p for p, d in zip(parts, sizes, strict=True) if not (d == 1 and p is None)]
        named = {p for p in kept if p is not None}
        if len(named) > 1:
            shown = ", ".join(str(tuple(sp)) for sp in specs)
            return f"{prim} got incompatible shardings for broadcasting: {shown}."
        result.append(next(iter(named)) if named else None)
    names = [n for p in result for n in names_of(p)]
    if len(names) == len(set(names)):
        return None
    shape = [max(sh[i] for sh, _, _ in shaped) for i in range(ndim)]
    avals = ", ".join(f"{dt}[{typed_dims(sh, sp)}]" for sh, dt, sp in shaped)
    out = f"{out_dtype}[{typed_dims(shape, tuple(result))}]"
    return f"{prim} operation with inputs: {avals} produces an illegally sharded result: {out}"


def broadcast_result(
    specs: Sequence[ShardSpec | None], shapes: Sequence[Sequence[int]]
) -> ShardSpec | None:
    """The sharding of an elementwise result where ``broadcast_error`` found none: per
    dim, the one axis (or axes) an operand of a rank shards it over (None: none)."""
    up = _ranked_up([(tuple(sh), "", sp) for sp, sh in zip(specs, shapes, strict=True) if len(sh)])
    ranked = [(sp, sh) for sh, _, sp in up]
    if not ranked or all(sp is None for sp, _ in ranked):
        return None
    ndim = len(ranked[0][1])
    out: list[ShardPart] = []
    for i in range(ndim):
        named = [sp[i] for sp, _ in ranked if sp is not None and i < len(sp) and sp[i] is not None]
        out.append(named[0] if named else None)
    return tuple(out)


def _ranked_up(
    operands: list[tuple[tuple[int, ...], str, ShardSpec | None]],
) -> list[tuple[tuple[int, ...], str, ShardSpec | None]]:
    """Operands of fewer dims with leading dims of size 1, unsharded, as jax.numpy
    broadcasts them before the primitive."""
    ndim = max((len(sh) for sh, _, _ in operands), default=0)
    out = []
    for sh, dt, sp in operands:
        pad = ndim - len(sh)
        spec = None if sp is None else (None,) * pad + tuple(sp)
        out.append(((1,) * pad + sh, dt, spec))
    return out


class ReshapeUnsupported(ValueError):
    """JAX cannot say how a sharded array's reshape is sharded (a ``ShardingTypeError``
    asking for ``out_sharding``)."""


def reshaped(
    spec: ShardSpec, shape: Sequence[int], new: Sequence[int], axes: Mapping[str, int]
) -> ShardSpec:
    """The sharding of an array of ``shape`` sharded as ``spec`` after its reshape to
    ``new`` (sizes known, the same element count), as ``lax.reshape``'s sharding rule
    makes it with no ``out_sharding``: the dims of size 1 aside, either the dims are kept,
    or exactly one dim splits into several (its axes taken by the new dims in order, each
    axis dividing what is left of its dim), or several consecutive dims merge into one
    (their axes, none after an unsharded one, dividing it). Raises
    ``ReshapeUnsupported`` where the rule has no answer."""
    if all(p is None for p in spec):
        return (None,) * len(new)
    kept = [p for p, d in zip(spec, shape, strict=True) if d != 1]
    old_big = [d for d in shape if d != 1]
    new_big = [d for d in new if d != 1]
    if old_big == new_big:  # (only dims of size 1 come or go: those are not sharded)
        big = iter(kept)
        return tuple(None if n == 1 else next(big) for n in new)
    split = _grouped(old_big, new_big)
    if split is not None:
        out_big = _split(split, kept, axes)
    else:
        merge = _grouped(new_big, old_big)
        if merge is None:
            raise ReshapeUnsupported
        out_big = _merged(merge, kept, new_big, axes)
    big = iter(out_big)
    return tuple(
        (spec[i] if i < len(shape) and shape[i] == 1 else None) if n == 1 else next(big)
        for i, n in enumerate(new)
    )


def _split(
    groups: list[int | list[int]], kept: list[ShardPart], axes: Mapping[str, int]
) -> list[ShardPart]:
    """The new dims' sharding where one dim splits (``_grouped``'s ``groups``, one per old
    dim, ``kept`` their sharding): a kept dim keeps its own, the split one's axes go to
    its new dims in order."""
    out: list[ShardPart] = []
    for group, p in zip(groups, kept, strict=True):
        if isinstance(group, int):
            out.append(p)
        elif p is None:
            out += [None] * len(group)
        else:
            out += _divided(names_of(p), group, axes)
    return out


def _merged(
    groups: list[int | list[int]],
    kept: list[ShardPart],
    new: list[int],
    axes: Mapping[str, int],
) -> list[ShardPart]:
    """The new dims' sharding where consecutive dims merge (``_grouped``'s ``groups``, one
    per new dim of ``new``; ``kept``: the old dims' sharding): the merged dims' axes, major
    first, none after an unsharded dim (raises ``ReshapeUnsupported``)."""
    out: list[ShardPart] = []
    rest = iter(kept)
    for size, group in zip(new, groups, strict=True):
        if isinstance(group, int):
            out.append(next(rest))
            continue
        names: list[str | None] = []
        for p in (next(rest) for _ in group):
            names += [None] if p is None else list(names_of(p))
        while names and names[-1] is None:
            names.pop()
        if not names:
            out.append(None)
        elif None in names:
            raise ReshapeUnsupported
        else:
            out += _divided([n for n in names if n is not None], [size], axes)
    return out


def _grouped(old: list[int], new: list[int]) -> list[int | list[int]] | None:
    """How ``new`` (more dims, none of size 1) splits exactly one dim of ``old``: per dim
    of ``old``, its size where it is kept, else the sizes it splits into; None where
    ``new`` is no such split. Raises ``ReshapeUnsupported`` where two dims split."""
    if len(new) <= len(old):
        return None
    out: list[int | list[int]] = []
    i = j = splits = 0
    while j < len(new):
        if i >= len(old):
            return None
        if old[i] == new[j]:
            out.append(old[i])
        else:
            splits += 1
            if splits > 1:
                raise ReshapeUnsupported
            group = [new[j]]
            while math.prod(group) != old[i]:
                if math.prod(group) > old[i] or j + 1 >= len(new):
                    return None
                j += 1
                group.append(new[j])
            out.append(group)
        i += 1
        j += 1
    return out if i == len(old) else None


def _divided(
    names: Sequence[str], sizes: Sequence[int], axes: Mapping[str, int]
) -> list[ShardPart]:
    """``names`` (a dim's axes, major first) over dims of ``sizes``: each dim takes the
    next axes while what is left of it is more than 1, each axis dividing it. Raises
    ``ReshapeUnsupported`` where an axis does not divide, or axes are left over."""
    left = iter(names)
    out: list[ShardPart] = []
    for size in sizes:
        taken: list[str] = []
        while size > 1:
            name = next(left, None)
            if name is None:
                break
            size, remainder = divmod(size, axes[name])
            if remainder:
                raise ReshapeUnsupported
            taken.append(name)
        out.append(part(taken))
    if next(left, None) is not None:
        raise ReshapeUnsupported
    return out
