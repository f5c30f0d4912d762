"""Transform-stack semantics without JAX: what a ref looks like after every step.

``propagate(base, transforms)`` follows a ref through a stack of transform ops and
returns one :class:`Step` per transform: the ref before and after (shape, dtype,
memory space, peer / multicast / cluster flags) and the error that step raises when
JAX traces it (code and JAX's exact message). It stops at the first trace-time error,
like JAX does. Each op's own rule is its ``typed`` method (:mod:`mpmd_lab.ops`); this
module holds the ref type they share and the one driver.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

from mpmd_lab import dtypes
from mpmd_lab import expr as E
from mpmd_lab.fields import Path, format_path, sub_path
from mpmd_lab.record import Record
from mpmd_lab.sharding import ShardSpec, typed_dims


class Dim(Record):
    """Where one dimension of a view sits in its base (for races and bounds).

    ``start`` is the static offset, ``step`` the stride in base elements; a
    dynamic start (a kernel axis index times ``stride``) is recorded in ``axis``
    (``("block", name)`` or ``("pid", dim)``) and ``stride``.
    """

    __slots__ = ("start", "size", "step", "axis", "stride")
    start: int
    size: int
    step: int
    axis: tuple[str, Any] | None
    stride: int

    def __init__(
        self,
        start: int,
        size: int,
        step: int = 1,
        axis: tuple[str, Any] | None = None,
        stride: int = 0,
    ) -> None:
        self.start = start
        self.size = size
        self.step = step
        self.axis = axis
        self.stride = stride


class RefInfo(Record):
    """A ref (or view of one) as JAX types it.

    ``memory_space``: GMEM, SMEM, TMEM, or VALUE (not a ref: a plain array);
    ``transformed``: any transform at all (a TransformedRef); ``region``: per base
    dimension, the region this view covers (a dynamic start in its ``Dim.axis``), None
    once unknowable; ``view_dims``: which base dims the view's dims are (None once a
    reshape, bitcast or transpose hides it); ``cluster_block``: the block of a
    ``cluster_ref`` view; ``pending``: a lazy error waiting for the ref's type to be
    computed (see ``StepError.lazy``);
    ``sharded``: how each base dim is sharded over the device mesh (an input without
    shard_map: ``sharding.ShardSpec``), None where none is;
    ``gathered``: an index entry is an array (``x.at[off_ref[...]]``: a gather view),
    the memory spaces it loads from (``"GMEM"``, ``"GMEM,SMEM"``; ``""``: no gather);
    ``new_ref``: a buffer passed as a Ref (``jax.new_ref``), which has no memory space.
    Immutable by convention (``replace`` makes a changed copy).

    The record holds what a rule reads, nothing more: it is made at every view step.
    What only the transforms know (which were reshapes, bitcasts or transposes, the
    integer indices, the peer's device) is read from the steps themselves (``Step.op``,
    the transform op).
    """

    __slots__ = (
        "shape",
        "dtype",
        "memory_space",
        "base",
        "peer",
        "multicast",
        "cluster",
        "transformed",
        "region",
        "view_dims",
        "cluster_block",
        "pending",
        "sharded",
        "gathered",
        "new_ref",
    )
    #: (a gather view shows in its shape; the flag is for the lowering's rule; a Ref's
    #: lack of a memory space shows in messages only)
    _unshown = ("gathered", "new_ref")

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: str,
        memory_space: str = "GMEM",
        base: str = "",
        peer: bool = False,
        multicast: bool = False,
        cluster: bool = False,
        transformed: bool = False,
        region: tuple[Dim, ...] | None = None,
        view_dims: tuple[int, ...] | None = None,
        cluster_block: tuple[tuple[str, int], ...] = (),
        pending: StepError | None = None,
        sharded: ShardSpec | None = None,
        gathered: str = "",
        new_ref: bool = False,
    ) -> None:
        self.shape = shape
        self.dtype = dtype
        self.memory_space = memory_space
        self.base = base
        self.peer = peer
        self.multicast = multicast
        self.cluster = cluster
        self.transformed = transformed
        self.region = region
        self.view_dims = view_dims
        self.cluster_block = cluster_block
        self.pending = pending
        self.sharded = sharded
        self.gathered = gathered
        self.new_ref = new_ref

    @property
    def is_ref(self) -> bool:
        return self.memory_space != "VALUE"

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * dtypes.bits(self.dtype) // 8

    def jax_type(self) -> str:
        """The ref's type as JAX prints it (``AbstractRef.str_short``):
        ``Ref<gmem>{float32[8,128]}``; ``Ref{...}`` for a ``jax.new_ref`` buffer (no memory
        space); its dims as ``jax_dims``."""
        inner = f"{self.dtype}[{self.jax_dims()}]"
        if self.new_ref:
            return f"Ref{{{inner}}}"
        return f"Ref<{self.memory_space.lower()}>{{{inner}}}"

    def jax_dims(self) -> str:
        """The shape as JAX prints it in a type: ``8,128``, a dim sharded over the device
        mesh as ``8@dev`` (one axis) or ``8@(x,y)`` (``core._get_shape_sharding_str``; a
        sharded ref's view keeps its dims: slices only, whole along a sharded dim)."""
        return typed_dims(self.shape, self.sharded)

    def describe(self) -> str:
        """``f32[8,128] GMEM peer`` as shown by the widgets and the graph."""
        dt = dtypes.short(self.dtype)
        flags = [f for f in ("peer", "multicast", "cluster") if getattr(self, f)]
        text = f"{dt}[{','.join(map(str, self.shape))}] {self.memory_space}"
        return text + ("" if not flags else " " + " ".join(flags))


class StepError(Record):
    """What one transform step raises (or warns about): JAX's exact ``message`` (or
    mpmd-lab's words for own codes), ``field`` a sub-field of the transform
    (``index[1]``, ``perm``), ``lazy``: raised only when the ref's type is next computed
    (a later index, bitcast or reshape, or a load / store through the view), not when
    the transform is applied; ``path`` the field path of the transform (set by
    ``propagate``)."""

    __slots__ = ("code", "message", "jax_type", "stage", "severity", "field", "lazy", "path")

    def __init__(
        self,
        code: str,
        message: str,
        jax_type: str = "",
        stage: str = "trace",
        severity: str = "error",
        field: str = "",
        lazy: bool = False,
        path: str = "",
    ) -> None:
        self.code = code
        self.message = message
        self.jax_type = jax_type
        self.stage = stage
        self.severity = severity
        self.field = field
        self.lazy = lazy
        self.path = path


class Step(Record):
    """One transform applied: the ref before and after, and what it raises."""

    __slots__ = ("index", "op", "before", "after", "error", "notes")

    def __init__(
        self,
        index: int,
        op: str,
        before: RefInfo,
        after: RefInfo | None,
        error: StepError | None = None,
        notes: tuple[StepError, ...] = (),
    ) -> None:
        self.index = index
        self.op = op
        self.before = before
        self.after = after
        self.error = error
        self.notes = notes


def replace(obj: Record, **changes: Any) -> Any:
    """A copy of ``obj`` with ``changes`` (``dataclasses.replace`` for a Record: its
    fields are its ``__init__``'s arguments, in order)."""
    cls: Any = obj.__class__
    values = list(obj._values(obj))
    at = cls._position
    for name, value in changes.items():
        values[at[name]] = value
    return cls(*values)


def view_info(
    ref: RefInfo,
    shape: tuple[int, ...],
    region: tuple[Dim, ...] | None,
    view_dims: tuple[int, ...] | None,
) -> RefInfo:
    """``ref`` seen through one index, reshape or transpose step (``transformed``): its
    new ``shape``, ``region`` and ``view_dims``; every other field ``ref``'s (a step
    that changes less names only what it changes: ``replace``)."""
    return replace(ref, shape=shape, transformed=True, region=region, view_dims=view_dims)


@functools.lru_cache(maxsize=1024)
def _whole(d: int) -> Dim:
    """A whole base dimension (Dim is immutable: one shared instance per size)."""
    return Dim(0, d)


@functools.lru_cache(maxsize=1024)
def _whole_dims(shape: tuple[int, ...]) -> tuple[tuple[Dim, ...], tuple[int, ...]]:
    """A whole ref's region and view dims (both immutable: shared per shape)."""
    return tuple(map(_whole, shape)), tuple(range(len(shape)))


def base_info(
    shape: list[int] | tuple[int, ...],
    dtype: str,
    memory_space: str = "GMEM",
    base: str = "",
    sharded: ShardSpec | None = None,
    canonical: bool = True,
    new_ref: bool = False,
) -> RefInfo:
    """A whole, untransformed ref (or a plain array with ``memory_space="VALUE"``).

    ``sharded``: how each dim is sharded over the device mesh (an input seen without
    shard_map), None where none is. ``canonical``: the dtype as JAX makes it without x64
    (an input's value is canonicalised; an output's ``out_type`` ref keeps ``float64``).
    ``new_ref``: a buffer passed as a Ref (``jax.new_ref``).
    """
    return _base_info(tuple(shape), dtype, memory_space, base, sharded, canonical, new_ref)


@functools.lru_cache(maxsize=4096)
def _base_info(
    shape: tuple[int, ...],
    dtype: str,
    memory_space: str,
    base: str,
    sharded: ShardSpec | None,
    canonical: bool,
    new_ref: bool,
) -> RefInfo:
    """``base_info``, once per content (a RefInfo is immutable: shared, as ``_whole_dims``
    shares its region; every check of a scenario names the same buffers, outputs and
    scratch)."""
    region, view_dims = _whole_dims(shape)
    return RefInfo(
        shape,
        dtypes.canonical(dtype) if canonical else dtype,
        memory_space,
        base,
        region=region,
        view_dims=view_dims,
        sharded=sharded,
        new_ref=new_ref,
    )


def err(code: str, jax_type: str, message: str, **kw: Any) -> StepError:
    """A step's error: JAX's exception type and exact message (``jax_type`` "" for own codes)."""
    return StepError(code=code, message=message, jax_type=jax_type, **kw)


def first_unbound(exprs: Sequence[Any], bound: frozenset[str] | set[str]) -> str | None:
    """The first axis name these expressions (in order) evaluate with ``lax.axis_index``
    that ``bound`` lacks (None: all bound); ``"<pid>"`` for ``pl.program_id`` outside a
    kernel: a transform's ``unbound_axis``."""
    for e in exprs:
        name = e.unbound(bound)
        if name is not None:
            return name
        if OUTSIDE in bound and not PID_CALLS.isdisjoint(e.calls()):
            return "<pid>"
    return None


#: the calls that are not available outside the kernel
PID_CALLS = frozenset(("program_id", "num_programs"))


#: marks the axis names bound outside the kernel (pl.program_id is not available there)
OUTSIDE = "<outside the kernel>"


def apply(ref: RefInfo, t: Any, index: int = 0, bound: Any = None, env: Any = None) -> Step:
    """One transform step (``t`` a transform op) applied to ``ref``.

    ``bound``: the names an index expression may use where the step runs (kernel axes,
    shard_map axes, loop variables), or None not to check. ``env``: the refs bound where
    it runs, by name (``.info`` each: the shapes of what an index loads), or None.
    """
    op = t.op  # (a transform's kind)
    axis = None if bound is None else t.unbound_axis(bound)
    if axis == "<pid>":  # pl.program_id outside a kernel: an internal assertion fails
        error = err("JAX_ASSERTION", "AssertionError", "")
        return Step(index=index, op=op, before=ref, after=None, error=error)
    if axis is not None:
        read = [e for _, e in t.exprs()]
        error = err("UNBOUND_AXIS", "NameError", E.unbound_message(axis, read))
        return Step(index=index, op=op, before=ref, after=None, error=error)
    if ref.pending is not None:
        if t.needs_type(ref):
            # this step computes the ref's type: the waiting error is raised now
            return Step(index=index, op=op, before=ref, after=None, error=ref.pending)
        if t.DEFERS_TYPE:
            return Step(index=index, op=op, before=ref, after=replace(ref, transformed=True))
    after, error, notes = t.typed(ref)
    if env is not None and after is not None and t.INDEXES:
        after = t.gathered(after, env)
    if error is not None and error.lazy:
        # nothing raised yet: the view exists, its type cannot be computed
        return Step(
            index=index,
            op=op,
            before=ref,
            after=replace(ref, transformed=True, pending=error, region=None, view_dims=None),
            error=error,
            notes=notes,
        )
    return Step(index, op, ref, None if error is not None else after, error, notes)


def _step_path(base: Path | str, i: int, field: str) -> str:
    """The field path of step ``i``'s ``field`` (a sub-path, ``''``: the step itself), as
    an error reports it."""
    if isinstance(base, str):
        return f"{base}[{i}]" + (f".{field}" if field else "")
    return format_path(sub_path(base, i, field))


def propagate(
    ref: RefInfo,
    transforms: list[Any],
    base_path: Path | str = "",
    bound: Any = None,
    env: Any = None,
) -> list[Step]:
    """Every step of a transform stack, stopping after the first error JAX raises there.

    A lazy error (``StepError.lazy``) does not stop the stack: it waits in
    ``RefInfo.pending`` until a step (or a use of the view) computes the type.
    ``base_path`` (``...transforms``, a tuple or text) gives each error its field path
    (text: an error is reported). ``env``: the refs bound where the view is made, by
    name (what an index loads: ``apply``), or None.
    """
    steps: list[Step] = []
    cur = ref
    for i, t in enumerate(transforms):
        step = apply(cur, t, i, bound, env)
        if step.error is not None and not step.error.path:
            e = step.error
            step = replace(step, error=replace(e, path=_step_path(base_path, i, e.field)))
            if step.after is not None and step.after.pending is e:
                step = replace(step, after=replace(step.after, pending=step.error))
        if step.notes:
            step = replace(
                step,
                notes=tuple(replace(n, path=_step_path(base_path, i, n.field)) for n in step.notes),
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
