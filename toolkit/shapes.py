"""Transform-stack semantics without JAX: what a ref looks like after every step.

``propagate(base, transforms)`` follows a ref through a stack of scenario transforms
(``at``, ``bitcast``, ``reshape``, ``transpose``, ``remote_ref``, ``multicast_ref``,
``cluster_ref``) and returns one :class:`Step` per transform: the ref before and
after (shape, dtype, memory space, peer / multicast / cluster flags) and the error
that step raises when JAX traces it (code and JAX's exact message, as jax 0.12
formats it). It stops at the first trace-time error, like JAX does.

The rules were read off jax 0.12 (``jax._src.state.indexing``, ``state.types``,
``pallas.mosaic_gpu.core``) and checked by tracing real kernels.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
from dataclasses import dataclass, field
from typing import Any

from mpmd_lab.scenario import (
    At,
    Bitcast,
    BlockIndex,
    ClusterRef,
    DsIndex,
    MulticastRef,
    PidIndex,
    RemoteRef,
    Reshape,
    Swizzle,
    Tiling,
    Transpose,
)

#: Without ``jax_enable_x64`` JAX makes 64-bit dtypes 32-bit.
CANONICAL = {"float64": "float32", "int64": "int32", "uint64": "uint32"}

_BITS = {
    "float32": 32,
    "int32": 32,
    "uint32": 32,
    "float16": 16,
    "bfloat16": 16,
    "int16": 16,
    "uint16": 16,
    "int8": 8,
    "uint8": 8,
    "bool": 8,
    "float8_e4m3fn": 8,
    "float8_e5m2": 8,
}


def canonical_dtype(dtype: str) -> str:
    """The dtype JAX really uses (64-bit types are 32-bit without x64)."""
    return CANONICAL.get(dtype, dtype)


def bits(dtype: str) -> int:
    """Bit width of a dtype as JAX sees it."""
    return _BITS[canonical_dtype(dtype)]


#: dtype names as JAX prints them in types (``f32[8,128]``).
SHORT_DTYPE = {
    "float32": "f32",
    "float16": "f16",
    "bfloat16": "bf16",
    "float64": "f64",
    "int32": "i32",
    "int16": "i16",
    "int8": "i8",
    "int64": "i64",
    "uint32": "u32",
    "uint16": "u16",
    "uint8": "u8",
    "bool": "bool",
    "float8_e4m3fn": "f8_e4m3fn",
    "float8_e5m2": "f8_e5m2",
}


def short_dtype(dtype: str) -> str:
    """``float32`` -> ``f32``, as JAX writes a dtype in a type."""
    return SHORT_DTYPE.get(dtype, dtype)


@dataclass(frozen=True, slots=True)
class Dim:
    """Where one dimension of a view sits in its base (for races and bounds).

    ``start`` is the static offset, ``step`` the stride in base elements; a
    dynamic start (a kernel axis index times ``stride``) is recorded in ``axis``
    (``("block", name)`` or ``("pid", dim)``) and ``stride``.
    """

    start: int
    size: int
    step: int = 1
    axis: tuple[str, Any] | None = None
    stride: int = 0


@dataclass(slots=True)
class RefInfo:
    """A ref (or view of one) as JAX types it."""

    shape: tuple[int, ...]
    dtype: str
    memory_space: str = "GMEM"  # GMEM, SMEM, TMEM, or VALUE (not a ref: a plain array)
    base: str = ""
    peer: bool = False
    multicast: bool = False
    cluster: bool = False
    transposed: bool = False
    reshaped: bool = False
    bitcast: bool = False
    sliced: bool = False
    int_indexed: bool = False
    transformed: bool = False  # any transform at all (a TransformedRef)
    dynamic: bool = False  # an index depends on the kernel axis or program id
    #: per base dimension: the region this view covers, None once unknowable
    region: tuple[Dim, ...] | None = None
    #: which base dims the view's dims are (None once a reshape/bitcast/transpose hides it)
    view_dims: tuple[int, ...] | None = None
    #: integer indices into the base, for the out-of-bounds check
    int_indices: tuple[tuple[int, int], ...] = ()
    peer_device: Any = None
    multicast_axes: tuple[str, ...] = ()
    cluster_block: tuple[tuple[str, int], ...] = ()
    #: a lazy error waiting for the ref's type to be computed (see StepError.lazy)
    pending: StepError | None = None
    #: dim 0 is sharded over these device axes (an input without shard_map)
    sharded: str | None = None

    @property
    def is_ref(self) -> bool:
        return self.memory_space != "VALUE"

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * bits(self.dtype) // 8

    def describe(self) -> str:
        """``f32[8,128] GMEM peer`` as shown by the widgets and the graph."""
        dt = short_dtype(self.dtype)
        flags = [f for f in ("peer", "multicast", "cluster") if getattr(self, f)]
        text = f"{dt}[{','.join(map(str, self.shape))}] {self.memory_space}"
        return text + ("" if not flags else " " + " ".join(flags))


@dataclass(frozen=True)
class StepError:
    """What one transform step raises (or warns about)."""

    code: str
    message: str  # JAX's exact message, or mpmd-lab's words for own codes
    jax_type: str = ""
    stage: str = "trace"
    severity: str = "error"
    field: str = ""  # a sub-field of the transform (``index[1]``, ``perm``)
    #: raised only when the ref's type is next computed (a later index, bitcast or reshape,
    #: or a load / store through the view), not when the transform is applied
    lazy: bool = False
    path: str = ""  # the field path of the transform (set by ``propagate``)


@dataclass(frozen=True)
class Step:
    """One transform applied: the ref before and after, and what it raises."""

    index: int
    op: str
    before: RefInfo
    after: RefInfo | None
    error: StepError | None = None
    notes: tuple[StepError, ...] = field(default=())


_REF_FIELDS = tuple(f.name for f in dataclasses.fields(RefInfo))
_ref_values = operator.attrgetter(*_REF_FIELDS)


def replace(obj: Any, **changes: Any) -> Any:
    """``dataclasses.replace``, with a fast path for RefInfo (built once per step)."""
    if type(obj) is not RefInfo:
        return dataclasses.replace(obj, **changes)
    new = RefInfo(*_ref_values(obj))
    for name, value in changes.items():
        setattr(new, name, value)
    return new


@functools.lru_cache(maxsize=1024)
def _whole(d: int) -> Dim:
    """A whole base dimension (Dim is frozen: one shared instance per size)."""
    return Dim(0, d)


def base_info(
    shape: list[int] | tuple[int, ...],
    dtype: str,
    memory_space: str = "GMEM",
    base: str = "",
    sharded: str | None = None,
) -> RefInfo:
    """A whole, untransformed ref (or a plain array with ``memory_space="VALUE"``).

    ``sharded``: the device-mesh axes dim 0 is sharded over (an input seen without
    shard_map), as JAX prints them.
    """
    shape = tuple(shape)
    return RefInfo(
        sharded=sharded,
        shape=shape,
        dtype=canonical_dtype(dtype),
        memory_space=memory_space,
        base=base,
        region=tuple(_whole(d) for d in shape),
        view_dims=tuple(range(len(shape))),
    )


# ---------------------------------------------------------------- index repr


def _entry_repr(e: Any) -> str:
    """An index entry as JAX prints it inside ``indices=(...)``."""
    if e is None:
        return "slice(None, None, None)"
    if isinstance(e, int):
        return repr(e)
    if isinstance(e, list):
        a, b = e
        return f"slice({a!r}, {b!r}, None)"
    if isinstance(e, DsIndex):
        return f"Slice(start={e.ds[0]}, size={e.ds[1]}, stride=1)"
    if isinstance(e, BlockIndex | PidIndex):
        return f"Slice(start=Traced<int32[]>with<DynamicJaxprTrace>, size={e.size}, stride=1)"
    return repr(e)


def _indices_repr(entries: list[Any]) -> str:
    inner = ", ".join(_entry_repr(e) for e in entries)
    if len(entries) == 1:
        inner += ","
    return f"({inner})"


# ---------------------------------------------------------------- steps


def _err(code: str, jax_type: str, message: str, **kw: Any) -> StepError:
    return StepError(code=code, message=message, jax_type=jax_type, **kw)


def _apply_at(ref: RefInfo, t: At) -> tuple[RefInfo | None, StepError | None, list[StepError]]:
    notes: list[StepError] = []
    shape = ref.shape
    entries = list(t.index)
    if len(entries) > len(shape):
        return (
            None,
            _err(
                "AT_TOO_MANY_INDICES",
                "ValueError",
                f"`indices` must not be longer than `shape`: indices={_indices_repr(entries)}, "
                f"shape={tuple(shape)!r}",
                field="index",
            ),
            notes,
        )
    entries += [None] * (len(shape) - len(entries))
    # NDIndexer._validate_sharding (run when the type is next computed): a sharded input
    # (no shard_map) takes slices only, and only whole ones along its sharded dim 0
    sharded0 = (
        ref.sharded is not None
        and bool(shape)
        and bool(ref.view_dims)
        and ref.view_dims[0] == 0
        and not (ref.reshaped or ref.bitcast)
    )
    if sharded0 and any(isinstance(e, int) for e in entries):
        return (
            None,
            _err(
                "SHARDED_REF_SLICE",
                "TypeError",
                "sharded ref (array reference) can only be indexed by slices, not integers",
                lazy=True,
            ),
            notes,
        )
    if sharded0 and not _full(entries[0], shape[0]):
        return (
            None,
            _err(
                "SHARDED_REF_SLICE",
                "ValueError",
                "sharded ref (array reference) can only be sliced along unsharded axes, but ref "
                f"of shape {tuple(shape)!r} was sliced on axis 0, which is sharded like "
                f"{ref.sharded}",
                field="index[0]",
                lazy=True,
            ),
            notes,
        )
    new_shape: list[int] = []
    sels: list[tuple[Any, ...]] = []
    ints: list[tuple[int, int]] = []
    has_int = False
    dynamic = ref.dynamic
    for k, (e, d) in enumerate(zip(entries, shape, strict=False)):
        f = f"index[{k}]"
        if e is None:
            new_shape.append(d)
            sels.append(("slice", 0, d, None, 0))
        elif isinstance(e, int):
            has_int = True
            ints.append((e, d))
            if not -d <= e < d:
                notes.append(
                    _err(
                        "OOB_INDEX",
                        "",
                        f"integer index {e} is out of bounds for a dimension of size {d}; JAX "
                        "does not check integer indices inside a kernel, so it reads or writes "
                        "outside the ref",
                        stage="interpret",
                        field=f,
                    )
                )
            sels.append(("int", e))
        elif isinstance(e, list):
            a, b = e
            start = 0 if a is None else (min(d, a) if a >= 0 else max(0, d + a))
            stop = d if b is None else (min(d, b) if b >= 0 else max(0, d + b))
            size = max(0, stop - start)
            if start >= d:
                return (
                    None,
                    _err(
                        "AT_OOB_SLICE",
                        "ValueError",
                        f"Out of bound slice: start={start}, dim={d}.",
                        field=f,
                    ),
                    notes,
                )
            if b is not None and b > d:
                notes.append(
                    _err(
                        "AT_SLICE_CLAMPED",
                        "",
                        f"slice [{a}, {b}] stops past the end of a dimension of size {d}; "
                        f"Python slicing silently clamps it to [{start}, {stop}] "
                        f"({size} elements, not {b - (a or 0)})",
                        severity="warning",
                        field=f,
                    )
                )
            new_shape.append(size)
            sels.append(("slice", start, size, None, 0))
        elif isinstance(e, DsIndex):
            start, size = e.ds
            if start >= d:
                return (
                    None,
                    _err(
                        "AT_OOB_SLICE",
                        "ValueError",
                        f"Out of bound slice: start={start}, dim={d}.",
                        field=f,
                    ),
                    notes,
                )
            if size and start + size - 1 >= d:
                return (
                    None,
                    _err(
                        "AT_OOB_SLICE",
                        "ValueError",
                        f"Out of bound slice: start={start}, size={size}, stride=1, dim={d}.",
                        field=f,
                    ),
                    notes,
                )
            if start < 0:
                notes.append(
                    _err(
                        "AT_NEGATIVE_SLICE",
                        "NotImplementedError",
                        f"Slice slice({start}, {start + size}, 1) along axis {k} has negative "
                        "bounds",
                        stage="gpu-lower",
                        field=f,
                    )
                )
            new_shape.append(max(0, size))
            sels.append(("slice", start, max(0, size), None, 0))
        elif isinstance(e, BlockIndex | PidIndex):
            dynamic = True
            stride = e.size if isinstance(e, PidIndex) else (e.stride or e.size)
            axis = ("block", e.block) if isinstance(e, BlockIndex) else ("pid", e.pid)
            new_shape.append(e.size)
            sels.append(("slice", 0, e.size, axis, stride))
        else:  # pragma: no cover - the model admits nothing else
            raise TypeError(f"unknown index entry {e!r}")
    region, view_dims = _compose_region(ref, sels)
    after = replace(
        ref,
        shape=tuple(new_shape),
        transformed=True,
        sliced=True,
        int_indexed=ref.int_indexed or has_int,
        dynamic=dynamic,
        region=region,
        view_dims=view_dims,
        int_indices=ref.int_indices + tuple(ints),
    )
    return after, None, notes


def _full(e: Any, d: int) -> bool:
    """An index entry that selects the whole dimension."""
    if e is None:
        return True
    if isinstance(e, list):
        a, b = e
        return (a in (None, 0) or a <= -d) and (b is None or b >= d)
    if isinstance(e, DsIndex):
        return e.ds[0] == 0 and e.ds[1] == d
    return False


def _compose_region(
    ref: RefInfo, sels: list[tuple[Any, ...]]
) -> tuple[tuple[Dim, ...] | None, tuple[int, ...] | None]:
    """The base region of ``ref`` narrowed by one selection per view dim.

    A selection is ``("int", i)`` or ``("slice", start, size, axis, stride)``.
    Returns the new region and which base dims the view still shows.
    """
    if ref.region is None or ref.view_dims is None or len(ref.view_dims) != len(sels):
        return None, None
    out = list(ref.region)
    keep: list[int] = []
    for bd, sel in zip(ref.view_dims, sels, strict=False):
        r = out[bd]
        if sel[0] == "int":
            out[bd] = Dim(r.start + sel[1] * r.step, 1, r.step, r.axis, r.stride)
            continue
        _, start, size, axis, stride = sel
        if axis is not None and r.axis is not None:
            return None, None
        if start == 0 and axis is None and size == r.size:
            keep.append(bd)  # the whole dim: unchanged
            continue
        out[bd] = Dim(
            r.start + start * r.step,
            size,
            r.step,
            axis if axis is not None else r.axis,
            stride * r.step if axis is not None else r.stride,
        )
        keep.append(bd)
    return tuple(out), tuple(keep)


def _sharded_error() -> StepError:
    """Bitcast, reshape and transpose types reject a sharded array: a bare error."""
    return _err("MPMD_GPU_MESH_NOT_COMBINABLE", "NotImplementedError", "", lazy=True)


def _apply_bitcast(ref: RefInfo, t: Bitcast) -> tuple[RefInfo | None, StepError | None]:
    if ref.sharded:
        return None, _sharded_error()
    new = canonical_dtype(t.dtype)
    old_bits, new_bits = bits(ref.dtype), bits(new)
    shape = ref.shape
    if len(shape) <= 1:
        if old_bits != new_bits:
            return None, _err(
                "BITCAST_1D_WIDTH_CHANGE",
                "NotImplementedError",
                "Bitcast 1D ref with bitwidth change is not supported.",
                lazy=True,
            )
        return None, _err(
            "BITCAST_1D_SAME_WIDTH_BUG", "IndexError", "list index out of range", lazy=True
        )
    second_minor = shape[-2]
    if old_bits != new_bits:
        if (second_minor * old_bits) % new_bits:
            return None, _err(
                "BITCAST_SECOND_MINOR",
                "ValueError",
                "Expected input and output shapes are the same after multiplying the "
                "second-minor dimension by the bitwidths.",
                lazy=True,
            )
        new_shape = (*shape[:-2], second_minor * old_bits // new_bits, shape[-1])
    else:
        new_shape = shape
    after = replace(
        ref,
        shape=new_shape,
        dtype=new,
        transformed=True,
        bitcast=True,
        region=None if old_bits != new_bits else ref.region,
        view_dims=None if old_bits != new_bits else ref.view_dims,
    )
    return after, None


def _apply_reshape(ref: RefInfo, t: Reshape) -> tuple[RefInfo | None, StepError | None]:
    target = tuple(t.shape)
    if target.count(-1) > 1:
        return None, _err(
            "RESHAPE_MINUS_ONE",
            "ValueError",
            f"At most one dimension can be -1, but got {target!r}",
        )
    size = ref.size
    if -1 in target:
        rest = math.prod(d for d in target if d != -1)
        if rest == 0 or size % rest:
            return None, _err(
                "RESHAPE_NOT_DIVISIBLE",
                "ValueError",
                f"Specified dims {target!r} do not evenly divide the size of the ref ({size}).",
            )
        target = tuple(size // rest if d == -1 else d for d in target)
    if math.prod(target) != size:
        return None, _err(
            "RESHAPE_SIZE",
            "ValueError",
            f"cannot reshape shape {ref.shape!r} into shape {target!r}",
        )
    if ref.sharded:
        return None, _sharded_error()
    after = replace(
        ref,
        shape=target,
        transformed=True,
        reshaped=True,
        region=ref.region if target == ref.shape else None,
        view_dims=ref.view_dims if target == ref.shape else None,
    )
    return after, None


def _apply_transpose(ref: RefInfo, t: Transpose) -> tuple[RefInfo | None, StepError | None]:
    perm = tuple(t.perm)
    if t.via == "transpose_ref":
        if not ref.transformed:
            sh = ",".join(map(str, ref.shape))
            return None, _err(
                "TRANSPOSE_REF_RAW_BUG",
                "ValueError",
                "The 'memory_space' attribute is not available on traced array with shape "
                f"Ref<{ref.memory_space.lower()}>{{{_short(ref.dtype)}[{sh}]}}. Use "
                "`jax.typeof(x).memory_space` instead.",
            )
        if ref.memory_space == "TMEM":
            return None, _err("TRANSPOSE_TMEM", "ValueError", "Can't transpose a TMEM reference.")
    if len(perm) != len(ref.shape):
        return None, _err(
            "TRANSPOSE_RANK",
            "ValueError",
            f"Permutation {perm!r} does not match the rank of the type ({len(ref.shape)})",
            field="perm",
            lazy=True,
        )
    if ref.sharded:
        return None, _sharded_error()
    if any(p >= len(ref.shape) or p < -len(ref.shape) for p in perm):
        return None, _err(
            "TRANSPOSE_BAD_AXIS", "IndexError", "tuple index out of range", field="perm", lazy=True
        )
    new_shape = tuple(ref.shape[p] for p in perm)
    after = replace(
        ref,
        shape=new_shape,
        transformed=True,
        transposed=True if perm != tuple(range(len(perm))) else ref.transposed,
        region=ref.region,
        view_dims=None if ref.view_dims is None else tuple(ref.view_dims[p] for p in perm),
    )
    return after, None


def _short(dtype: str) -> str:
    return {
        "float32": "float32",
    }.get(dtype, dtype)


def _not_a_ref(ref: RefInfo) -> StepError | None:
    if ref.is_ref:
        return None
    return _err("REF_NOT_A_REF", "TypeError", "ref must be a reference")


def unbound_axis(t: Any, bound: frozenset[str] | set[str] | None) -> str | None:
    """The first axis name a transform's index or device id evaluates with
    ``lax.axis_index`` that is not bound where it runs (None: all bound, or unknown)."""
    if bound is None:
        return None
    if isinstance(t, At):
        for e in t.index:
            if isinstance(e, BlockIndex) and e.block not in bound:
                return e.block
            if isinstance(e, PidIndex) and "<outside the kernel>" in bound:
                return "<pid>"
    if isinstance(t, RemoteRef) and isinstance(t.device, dict):
        for axis, v in t.device.items():
            if not isinstance(v, int) and axis not in bound:
                return axis
    return None


def apply(ref: RefInfo, t: Any, index: int = 0, bound: Any = None) -> Step:
    """One transform step (``t`` a scenario transform) applied to ``ref``.

    ``bound``: the axis names ``lax.axis_index`` knows where the step runs (kernel
    axes and shard_map axes), or None not to check.
    """
    op = getattr(t, "op", "?")
    axis = unbound_axis(t, bound)
    if axis == "<pid>":  # pl.program_id outside a kernel: an internal assertion fails
        err = _err("JAX_ASSERTION", "AssertionError", "")
        return Step(index=index, op=op, before=ref, after=None, error=err)
    if axis is not None:
        err = _err(
            "UNBOUND_AXIS",
            "NameError",
            f"Found an unbound axis name: {axis}. To fix this, please call axis_index under "
            "`jax.shard_map`.",
        )
        return Step(index=index, op=op, before=ref, after=None, error=err)
    notes: list[StepError] = []
    after: RefInfo | None
    err: StepError | None = None
    needs_type = isinstance(t, At | Bitcast | Reshape) or (
        isinstance(t, Transpose) and t.via == "transpose_ref" and ref.transformed
    )
    if ref.pending is not None and needs_type:
        # this step computes the ref's type: the waiting error is raised now
        return Step(index=index, op=op, before=ref, after=None, error=ref.pending)
    if isinstance(t, Transpose) and ref.pending is not None:
        return Step(index=index, op=op, before=ref, after=replace(ref, transformed=True))
    if isinstance(t, At):
        after, err, notes = _apply_at(ref, t)
    elif isinstance(t, Bitcast):
        after, err = _apply_bitcast(ref, t)
    elif isinstance(t, Reshape):
        after, err = _apply_reshape(ref, t)
    elif isinstance(t, Transpose):
        after, err = _apply_transpose(ref, t)
    elif isinstance(t, RemoteRef):
        err = _not_a_ref(ref)
        if err is None and ref.multicast:
            err = _err(
                "REF_MULTICAST_TO_PEER",
                "ValueError",
                "Can't make a multicast reference into a peer reference.",
            )
        after = None if err else replace(ref, peer=True, transformed=True, peer_device=t.device)
    elif isinstance(t, MulticastRef):
        err = _not_a_ref(ref)
        if err is None and ref.peer:
            err = _err(
                "REF_PEER_TO_MULTICAST",
                "ValueError",
                "Can't make a peer reference into a multicast reference.",
            )
        axes = (t.axes,) if isinstance(t.axes, str) else tuple(t.axes)
        after = None if err else replace(ref, multicast=True, transformed=True, multicast_axes=axes)
    elif isinstance(t, ClusterRef):
        err = _not_a_ref(ref)
        after = (
            None
            if err
            else replace(ref, cluster=True, transformed=True, cluster_block=tuple(t.block.items()))
        )
    elif isinstance(t, Tiling | Swizzle):
        after = None
        err = _err(
            "SCRATCH_ONLY_TRANSFORM",
            "",
            f"{op} is a scratch-only transform: no JAX call applies it to a ref",
            stage="build",
        )
    else:  # pragma: no cover
        raise TypeError(f"unknown transform {t!r}")
    if err is not None and err.lazy:
        # nothing raised yet: the view exists, its type cannot be computed
        flags = {"bitcast": True} if isinstance(t, Bitcast) else {}
        return Step(
            index=index,
            op=op,
            before=ref,
            after=replace(ref, transformed=True, pending=err, region=None, view_dims=None, **flags),
            error=err,
            notes=tuple(notes),
        )
    if err is not None:
        after = None
    elif ref.memory_space == "VALUE" and not isinstance(t, RemoteRef | MulticastRef | ClusterRef):
        # a plain array: .at[...] is the array's update helper, not a view
        pass
    return Step(index=index, op=op, before=ref, after=after, error=err, notes=tuple(notes))


def propagate(
    ref: RefInfo, transforms: list[Any], base_path: str = "", bound: Any = None
) -> list[Step]:
    """Every step of a transform stack, stopping after the first error JAX raises there.

    A lazy error (``StepError.lazy``) does not stop the stack: it waits in
    ``RefInfo.pending`` until a step (or a use of the view) computes the type.
    ``base_path`` (``...transforms``) gives each error its field path.
    """
    steps: list[Step] = []
    cur = ref
    for i, t in enumerate(transforms):
        step = apply(cur, t, i, bound)
        if step.error is not None and not step.error.path:
            e = step.error
            step = replace(
                step,
                error=replace(e, path=f"{base_path}[{i}]" + (f".{e.field}" if e.field else "")),
            )
            if step.after is not None and step.after.pending is e:
                step = replace(step, after=replace(step.after, pending=step.error))
        if step.notes:
            step = replace(
                step,
                notes=tuple(
                    replace(n, path=f"{base_path}[{i}]" + (f".{n.field}" if n.field else ""))
                    for n in step.notes
                ),
            )
        steps.append(step)
        if step.after is None:
            break
        cur = step.after
    return steps


def final(ref: RefInfo, transforms: list[Any]) -> RefInfo | None:
    """The ref after the whole stack, or None when a step fails."""
    steps = propagate(ref, transforms)
    return ref if not steps else steps[-1].after
