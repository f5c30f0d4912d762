"""Shape-changing views of a ref: ``at`` (indexing), ``bitcast``, ``reshape``,
``transpose``, and the scratch-only layout transforms ``tiling`` and ``swizzle``.

Each class is the op's one meaning: its fields, JAX's type rule and exact messages
(read off jax 0.12 ``jax._src.state.indexing``, ``state.types``,
``pallas.mosaic_gpu.core`` and checked by tracing real kernels), its JAX source,
its label and what the simulator does with it.
"""

import functools
import math
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from mpmd_lab import dtypes, sharding
from mpmd_lab import expr as E
from mpmd_lab import layout_rules as L
from mpmd_lab.diagnostics import Edit, Fix
from mpmd_lab.fields import MAX_DIM, MAX_RANK, Expr, Ident, Model, Path, Size, SmallInt, format_path
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
from mpmd_lab.shapes import (
    OUTSIDE,
    Dim,
    RefInfo,
    StepError,
    err,
    first_unbound,
    replace,
    view_info,
)
from pydantic import Field, StrictInt, model_validator

if TYPE_CHECKING:
    from mpmd_lab.memory import View

# ---------------------------------------------------------------- index entries


class DsIndex(Model):
    """``pl.ds(start, size)``: ``size`` elements from ``start`` (an expression)."""

    ds: Annotated[list[Expr], Field(min_length=2, max_length=2)] = Field(
        description="[start, size]: start an int or an expression, size a static int"
    )

    @model_validator(mode="after")
    def _static_size(self) -> "DsIndex":
        if not isinstance(self.ds[1], int):
            raise ValueError("the size of pl.ds is a static int")
        if self.ds[1] < 0:
            raise ValueError(f"the size of pl.ds must not be negative (got {self.ds[1]})")
        return self


class BlockIndex(Model):
    """A slice at the kernel axis index times the stride (``lax.axis_index``)."""

    block: Ident = Field(description="the grid, cluster or thread axis whose index picks it")
    size: Size = Field(description="elements per block")
    stride: Size | None = Field(None, description="elements between blocks (default: size)")


class PidIndex(Model):
    """A slice at ``pl.program_id(pid)`` times the size."""

    pid: Annotated[StrictInt, Field(ge=0, le=2)] = Field(description="the grid dimension")
    size: Size = Field(description="elements per program")


#: an ``at`` entry: whole dim, an int or expression (drops the dim), a Python slice
#: ``[start, stop]``, ``{"ds": [start, size]}``, ``{"block": ...}``, ``{"pid": ...}``
IndexEntry = (
    None
    | Expr
    | Annotated[list[SmallInt | None], Field(min_length=2, max_length=2)]
    | DsIndex
    | BlockIndex
    | PidIndex
)


class Ix(Record):
    """One ``at`` entry, resolved: ``all``, ``int`` (``start``), ``slice`` (``lo:hi``,
    Python's, static) or ``ds`` (``start``, ``size``). ``legacy`` keeps where a dynamic
    start came from for the block rules (``("block", axis)`` / ``("pid", dim)``)."""

    __slots__ = ("kind", "start", "size", "lo", "hi", "stride", "legacy")
    kind: str
    start: E.Expr | None
    size: int | None
    lo: int | None
    hi: int | None
    stride: int
    legacy: tuple[str, Any] | None

    def __init__(
        self,
        kind: str,
        start: E.Expr | None = None,
        size: int | None = None,
        lo: int | None = None,
        hi: int | None = None,
        stride: int = 0,
        legacy: tuple[str, Any] | None = None,
    ) -> None:
        self.kind = kind
        self.start = start
        self.size = size
        self.lo = lo
        self.hi = hi
        self.stride = stride
        self.legacy = legacy

    @property
    def dynamic(self) -> bool:
        return self.start is not None and not self.start.is_const


#: a whole dimension (``None``, and the dims an index leaves out)
_ALL = Ix("all")


def resolve_entry(e: Any) -> Ix:
    """The one meaning of an index entry (the old forms become ``pl.ds`` expressions)."""
    if e is None:
        return _ALL
    if isinstance(e, BlockIndex):
        stride = e.size if e.stride is None else e.stride
        start = E.scaled(E.Name(e.block), stride)
        return _ds(start, e.size, stride, ("block", e.block))
    if isinstance(e, DsIndex):
        return Ix("ds", _python_int(E.parse(e.ds[0])), int(e.ds[1]))
    if isinstance(e, PidIndex):
        start = E.scaled(E.Call("program_id", e.pid), e.size)
        return _ds(start, e.size, e.size, ("pid", e.pid))
    if isinstance(e, bool):  # pragma: no cover - the schema refuses it
        raise TypeError("a boolean index")
    if isinstance(e, int | str):
        return Ix("int", E.parse(e))
    if isinstance(e, list):
        return Ix("slice", None, None, e[0], e[1])
    raise TypeError(f"unknown index entry {e!r}")  # pragma: no cover


def _python_int(e: E.Expr) -> E.Expr:
    """A constant expression (``"4 - 0"``) as the int Python computes where the
    generated code runs it: JAX is given that int, a static start its trace checks."""
    if type(e) is E.Const:
        return e
    v = e.python_int()
    return e if v is None else E.Const(v)


def _ds(start: E.Expr, size: int, stride: int, legacy: tuple[str, Any]) -> Ix:
    """A block or pid entry: ``pl.ds(start, size)`` with its stride and where it came from."""
    return Ix("ds", start, size, None, None, stride, legacy)


def _entry_repr(e: Any) -> str:
    """An index entry as JAX prints it inside ``indices=(...)``."""
    ix = resolve_entry(e)
    traced = "Traced<int32[]>with<DynamicJaxprTrace>"
    if ix.kind == "all":
        return "slice(None, None, None)"
    if ix.kind == "int":
        return repr(ix.start.value) if isinstance(ix.start, E.Const) else traced
    if ix.kind == "slice":
        return f"slice({ix.lo!r}, {ix.hi!r}, None)"
    start = repr(ix.start.value) if isinstance(ix.start, E.Const) else traced
    return f"Slice(start={start}, size={ix.size}, stride=1)"


def _indices_repr(entries: list[Any]) -> str:
    inner = ", ".join(_entry_repr(e) for e in entries)
    if len(entries) == 1:
        inner += ","
    return f"({inner})"


def _entry_label(e: Any) -> str:
    ix = resolve_entry(e)
    if ix.kind == "all":
        return ":"
    if ix.kind == "int":
        return ix.start.label()  # type: ignore[union-attr]
    if ix.kind == "slice":
        return f"{'' if ix.lo is None else ix.lo}:{'' if ix.hi is None else ix.hi}"
    if ix.legacy and ix.legacy[0] == "block":
        return f"ds({ix.legacy[1]}*{ix.stride},{ix.size})"
    if ix.legacy and ix.legacy[0] == "pid":
        return f"ds(pid{ix.legacy[1]}*{ix.size},{ix.size})"
    return f"ds({ix.start.label()},{ix.size})"  # type: ignore[union-attr]


def _entry_source(e: Any, g: SourceWriter) -> str:
    ix = resolve_entry(e)
    if ix.kind == "all":
        return ":"
    if ix.kind == "slice":
        return f"{'' if ix.lo is None else ix.lo}:{'' if ix.hi is None else ix.hi}"
    assert ix.start is not None  # (an int or ds entry has a start)
    if ix.kind == "int":
        return g.expr(ix.start)
    return f"pl.ds({g.expr(ix.start)}, {ix.size!r})"


def _oob_at(e: "L.JaxError", k: int) -> StepError:
    """``layout_rules.slice_bounds_error`` of entry ``k``, as its step raises it."""
    return err(e.code, e.jax_type, e.message, field=f"index[{k}]")


def full_entry(e: Any, d: int) -> bool:
    """An index entry that selects the whole dimension."""
    ix = resolve_entry(e)
    if ix.kind == "all":
        return True
    if ix.kind == "slice":
        a, b = ix.lo, ix.hi
        return (a in (None, 0) or (a is not None and a <= -d)) and (b is None or b >= d)
    if ix.kind == "ds":
        return isinstance(ix.start, E.Const) and ix.start.value == 0 and ix.size == d
    return False


# ---------------------------------------------------------------- at


class At(TransformOp):
    """``ref.at[...]``: one entry per leading dimension."""

    @classmethod
    def example(cls, fit: Fit) -> dict[str, Any]:
        return {"op": "at", "index": [None]}

    HELP: ClassVar[str] = "index or slice: ref.at[...]"
    FAMILY: ClassVar[str] = "views"
    NEEDS_TYPE: ClassVar[bool] = True
    INDEXES: ClassVar[bool] = True
    LOWERS_AS: ClassVar[str] = "index"
    TEXT_FIELDS: ClassVar[dict[str, Callable[[str], Any]]] = {"index": E.parse_index}
    TEXT_SHOWN: ClassVar[dict[str, Callable[[Any], str | None]]] = {"index": E.format_index}

    op: Literal["at"]
    index: Annotated[list[IndexEntry], Field(max_length=MAX_RANK)] = Field(
        description="one entry per leading dim: null (all), an int or expression (drops "
        'the dim), [start, stop], {"ds": [start, size]}, {"block": axis, "size": k}, '
        '{"pid": d, "size": k}'
    )

    @functools.cached_property
    def _entries(self) -> tuple[Ix, ...]:
        return tuple(resolve_entry(e) for e in self.index)

    def entries(self) -> list[Ix]:
        """The index entries, resolved (once per op object)."""
        return list(self._entries)

    def traces_scalar(self) -> bool:
        # (an integer entry: a leaf of the indexer, traced; a slice's bounds are static)
        return any(ix.kind == "int" for ix in self._entries)

    def exprs(self) -> Iterator[tuple[str, E.Expr]]:
        for k, ix in enumerate(self._entries):
            if ix.start is not None:
                yield f"index[{k}]", ix.start

    def int_indices(self) -> Iterator[E.Expr]:
        for ix in self._entries:
            if ix.kind == "int" and ix.start is not None:
                yield ix.start

    @functools.cached_property
    def _loaded_ints(self) -> tuple[E.Expr, ...]:
        """The integer entries that load (``x.at[off_ref[...]]``: maybe an array)."""
        return tuple(e for e in self.int_indices() if "load" in e.calls())

    def gathered(self, after: RefInfo, env: Mapping[str, Any]) -> RefInfo:
        """NDIndexer with an array among its integer indices (a load with fewer indices
        than its ref has dims, ``E.value_shape``): a gather view, whose shape is the
        integer indices' broadcast shape placed as numpy (and NDIndexer's
        ``get_indexer_shape``) places it: where the first integer entry is when the
        integer entries are next to each other, else first; the dims the slices keep
        around it."""
        if not self._loaded_ints:
            return after

        def shape_of(name: str) -> tuple[int, ...] | None:
            b = env.get(name)
            return None if b is None or b.info is None else tuple(b.info.shape)

        shape = E.broadcast_shapes(tuple(E.value_shape(e, shape_of) for e in self._loaded_ints))
        if not shape:
            return after
        spaces = {
            b.info.memory_space
            for e in self._loaded_ints
            for r in E.data_reads(e)
            if (b := env.get(r.ref)) is not None and b.info is not None
        }
        ints = [k for k, ix in enumerate(self._entries) if ix.kind == "int"]
        pos = ints[0] if ints[-1] - ints[0] == len(ints) - 1 else 0
        return replace(
            after,
            shape=(*after.shape[:pos], *shape, *after.shape[pos:]),
            region=None,
            view_dims=None,
            gathered=",".join(sorted(spaces)) or "?",
        )

    def root_dims(self, dims: list[int]) -> list[int] | None:
        idx = list(self.index) + [None] * (len(dims) - len(self.index))
        return [d for d, e in zip(dims, idx, strict=False) if not isinstance(e, int)]

    def _negative_ds(self) -> int | None:
        """The first ``pl.ds`` entry with a negative static start (None: none)."""
        if not any(type(e) is DsIndex for e in self.index):
            return None  # (a block or pid entry's start is never static: no resolving)
        for k, ix in enumerate(self._entries):
            if ix.kind == "ds" and isinstance(ix.start, E.Const) and ix.start.value < 0:
                return k
        return None

    def stops_access(self) -> bool:
        return self._negative_ds() is not None

    def lower_access(self, a: AccessLowering, pos: int, path: Path) -> bool:
        """The lowering's slices have non-negative bounds (``_slice_memref``)."""
        k = self._negative_ds()
        if k is None:
            return False
        ix = self._entries[k]
        assert isinstance(ix.start, E.Const) and ix.size is not None
        start, size = ix.start.value, ix.size
        a.jax(
            "AT_NEGATIVE_SLICE",
            (*path, "index", k),
            f"Slice slice({start}, {start + size}, 1) along axis {k} has negative bounds",
        )
        return True

    def lower_gmem_copy(self, a: GmemCopyLowering, path: Path) -> bool:
        return False  # (a TMA copy's GMEM side is addressed by indexing)

    def on_array(self, a: ArrayValue, bound: frozenset[str]) -> ArrayError | None:
        """``x.at[...]`` of an array makes an update helper (which no kernel accepts)."""
        if a.updater:
            return ("ARRAY_NO_METHOD", "AttributeError", _NO_METHOD.format("at"))
        for e in self.index:
            if isinstance(e, PidIndex):
                return ("JAX_ASSERTION", "AssertionError", "")
            if isinstance(e, BlockIndex) and e.block not in bound:
                return (
                    "UNBOUND_AXIS",
                    "NameError",
                    f"Found an unbound axis name: {e.block}. To fix this, please call "
                    "axis_index under `jax.shard_map`.",
                )
        a.updater = True
        # (the index ``__getitem__`` was given: one entry itself, several a tuple)
        entries = [_entry_repr(e) for e in self.index]
        a.helper_index = entries[0] if len(entries) == 1 else f"({', '.join(entries)})"
        return None

    def unbound_axis(self, bound: frozenset[str] | set[str]) -> str | None:
        # ``TransformOp.unbound_axis``, a block or pid entry read off its kind (its start is
        # resolve_entry's own: ``axis * stride`` names the axis and calls nothing,
        # ``program_id(d) * size`` names nothing and calls program_id)
        for ix in self._entries:
            start = ix.start
            if start is None:
                continue
            legacy = ix.legacy
            if legacy is None:
                name = first_unbound((start,), bound)
                if name is not None:
                    return name
            elif legacy[0] == "block":
                if legacy[1] not in bound:
                    return legacy[1]
            elif OUTSIDE in bound:
                return "<pid>"
        return None

    def uses_call(self, fn: str) -> bool:
        # a block or pid entry's start is resolve_entry's own: ``axis * stride`` calls
        # nothing, ``program_id(d) * size`` calls program_id; only a written expression is
        # walked (once per let and check: the walks of every index were most of it)
        for ix in self._entries:
            start = ix.start
            if start is None:
                continue
            legacy = ix.legacy
            if legacy is None:
                if fn in start.calls():
                    return True
            elif legacy[0] == "pid" and fn == "program_id":
                return True
        return False

    def interpret_limit(self, interp: str) -> InterpLimit | None:
        """The HLO interpreter cannot evaluate ``lax.axis_index`` of a kernel axis."""
        if interp != "hlo":
            return None
        axis = next((e.block for e in self.index if isinstance(e, BlockIndex)), None)
        if axis is None:
            return None
        return InterpLimit(
            "UNBOUND_AXIS",
            f"JAX's HLO interpreter can't evaluate the kernel axis {axis!r}; the GPU "
            "interpreter (run.interpret: gpu) and simulate can",
            f"Found an unbound axis name: {axis}. To fix this, please call axis_index under "
            "`jax.shard_map`.",
            "The HLO interpreter (interpret=True) cannot evaluate lax.axis_index of a kernel "
            "axis; the GPU interpreter (run.interpret: gpu) can.",
        )

    def label(self) -> str:
        return f"at[{','.join(_entry_label(e) for e in self.index) or '...'}]"

    def source(self, base: str, g: SourceWriter) -> str:
        inner = ", ".join(_entry_source(e, g) for e in self.index)
        return f"{base}.at[{inner or '...'}]"

    def typed(self, ref: RefInfo) -> tuple[RefInfo | None, StepError | None, tuple[StepError, ...]]:
        notes: tuple[StepError, ...] = ()  # (rare: a tuple grown by one)
        shape = ref.shape
        index = self.index
        if len(index) > len(shape):
            return (
                None,
                err(
                    "AT_TOO_MANY_INDICES",
                    "ValueError",
                    "`indices` must not be longer than `shape`: "
                    f"indices={_indices_repr(index)}, shape={tuple(shape)!r}",
                    field="index",
                ),
                notes,
            )
        pad = len(shape) - len(index)
        ixs = (*self._entries, *(_ALL,) * pad) if pad else self._entries
        # NDIndexer._validate_sharding (run when the type is next computed): a sharded
        # input (no shard_map) takes slices only, and only whole ones along a sharded dim
        # (a sharded ref's views keep its dims: a reshape, bitcast or transpose of it
        # raises before it makes a view, and their lazy error leaves ``view_dims`` None)
        spec = ref.sharded
        if spec is not None and shape and ref.view_dims is not None:
            # (NDIndexer checks its static slices' bounds when ``.at`` makes it, the
            # sharding only when the type is next computed: the bounds first)
            if (bounds := L.index_bounds_error_at(shape, index)) is not None:
                return None, _oob_at(*bounds), notes
            if any(ix.kind == "int" for ix in ixs):
                return (
                    None,
                    err(
                        "SHARDED_REF_SLICE",
                        "TypeError",
                        "sharded ref (array reference) can only be indexed by slices, not integers",
                        lazy=True,
                    ),
                    notes,
                )
            for dim, base_dim in enumerate(ref.view_dims):
                by = spec[base_dim] if base_dim < len(spec) else None
                entry = index[dim] if dim < len(index) else None
                if by is None or full_entry(entry, shape[dim]):
                    continue
                return (
                    None,
                    err(
                        "SHARDED_REF_SLICE",
                        "ValueError",
                        "sharded ref (array reference) can only be sliced along unsharded "
                        f"axes, but ref of shape {tuple(shape)!r} was sliced on axis {dim}, "
                        f"which is sharded like {by}",
                        field=f"index[{dim}]",
                        lazy=True,
                    ),
                    notes,
                )
        # the base region narrowed by each view dim's selection, as the loop makes it
        # (``out`` None once unknowable); ``keep``: the base dims the view still shows
        view_dims = ref.view_dims or ()
        out = list(ref.region) if ref.region is not None and len(view_dims) == len(shape) else None
        keep: list[int] = []
        new_shape: list[int] = []
        for k, (d, ix) in enumerate(zip(shape, ixs, strict=True)):
            kind = ix.kind
            if kind == "int":  # the dim is dropped
                if isinstance(ix.start, E.Const):
                    i = ix.start.value
                    if not -d <= i < d:
                        notes += (
                            err(
                                "OOB_INDEX",
                                "",
                                f"integer index {i} is out of bounds for a dimension of size "
                                f"{d}; JAX does not check integer indices inside a kernel, so "
                                "it reads or writes outside the ref",
                                stage="interpret",
                                field=f"index[{k}]",
                            ),
                        )
                    if out is not None:
                        r = out[view_dims[k]]
                        out[view_dims[k]] = Dim(r.start + i * r.step, 1, r.step, r.axis, r.stride)
                    continue
                if out is not None:  # a traced integer index
                    r = out[view_dims[k]]
                    if r.axis is not None:
                        out = None
                    else:
                        out[view_dims[k]] = Dim(r.start, 1, r.step, ("expr", ix.start), r.step)
                continue
            # a slice of the dim: ``size`` elements from ``start``, at a kernel axis's
            # index times ``stride`` when ``axis`` is one
            axis: tuple[str, Any] | None = None
            stride = 0
            # NDIndexer's bounds check of every static slice, whole ones too, in dim
            # order (``layout_rules.index_bounds_error_at``, of the entries resolved)
            if kind == "all":
                start, size = 0, d
                if (oob := L.slice_bounds_error(start, size, d)) is not None:
                    return None, _oob_at(oob, k), notes
            elif kind == "slice":
                a, b = ix.lo, ix.hi
                start = 0 if a is None else (min(d, a) if a >= 0 else max(0, d + a))
                stop = d if b is None else (min(d, b) if b >= 0 else max(0, d + b))
                size = max(0, stop - start)
                if (oob := L.slice_bounds_error(start, size, d)) is not None:
                    return None, _oob_at(oob, k), notes
                if b is not None and b > d:
                    notes += (
                        err(
                            "AT_SLICE_CLAMPED",
                            "",
                            f"slice [{a}, {b}] stops past the end of a dimension of size {d}; "
                            f"Python slicing silently clamps it to [{start}, {stop}] "
                            f"({size} elements, not {b - (a or 0)})",
                            severity="warning",
                            field=f"index[{k}]",
                        ),
                    )
            elif isinstance(ix.start, E.Const):  # pl.ds with a static start
                start, size = ix.start.value, ix.size or 0
                if (oob := L.slice_bounds_error(start, size, d)) is not None:
                    return None, _oob_at(oob, k), notes
                if start < 0:
                    notes += (
                        err(
                            "AT_NEGATIVE_SLICE",
                            "NotImplementedError",
                            f"Slice slice({start}, {start + size}, 1) along axis {k} has "
                            "negative bounds",
                            stage="gpu-lower",
                            field=f"index[{k}]",
                        ),
                    )
                size = max(0, size)
            else:  # pl.ds with a traced start
                start, size = 0, ix.size or 0
                axis = ix.legacy if ix.legacy is not None else ("expr", ix.start)
                stride = ix.stride or 1
            new_shape.append(size)
            if out is not None:
                bd = view_dims[k]
                r = out[bd]
                if axis is not None:
                    if r.axis is not None:
                        out = None
                        continue
                    out[bd] = Dim(r.start + start * r.step, size, r.step, axis, stride * r.step)
                elif start or size != r.size:
                    out[bd] = Dim(r.start + start * r.step, size, r.step, r.axis, r.stride)
                keep.append(bd)  # (a whole dim: unchanged)
        after = view_info(
            ref,
            tuple(new_shape),
            None if out is None else tuple(out),
            None if out is None else tuple(keep),
        )
        return after, None, notes

    @functools.cached_property
    def _plans(self) -> dict[tuple[tuple[int, ...], str], tuple[tuple[Any, ...], tuple]]:
        """``view``'s plan per ref shape and field path (``_plan``)."""
        return {}

    def _plan(
        self, shape: tuple[int, ...], path: str, sim: ViewContext
    ) -> tuple[tuple[Any, ...], tuple]:
        """What indexing a ref of ``shape`` takes: the numpy index, its entries known
        without an actor (the whole dims, static slices, constant indices inside the
        dim), and ``(dim, entry, size, field path)`` of the others, evaluated per actor."""
        if len(self.index) > len(shape):
            sim.fail("AT_TOO_MANY_INDICES", path, "`indices` must not be longer than `shape`")
        # NDIndexer's bounds check of static slices (JAX raises it at trace): the rule
        # the type rule reads too, layout_rules.index_bounds_error_at
        bad = L.index_bounds_error_at(shape, self.index)
        if bad is not None:
            sim.fail(bad[0].code, f"{path}.index[{bad[1]}]", bad[0].message)
        static: list[Any] = []
        per_actor = []
        for dim, (ix, size) in enumerate(zip(self._entries, shape, strict=False)):
            kind = ix.kind
            start = ix.start.value if type(ix.start) is E.Const else None
            n = ix.size or 0
            if kind == "all":
                static.append(_WHOLE)
            elif kind == "slice":
                static.append(slice(ix.lo, ix.hi))
            elif kind == "int" and start is not None and -size <= start < size:
                static.append(start % size)
            elif kind == "ds" and start is not None and 0 <= start and 0 <= n <= size - start:
                static.append(slice(start, start + n))
            else:
                static.append(None)
                per_actor.append((dim, ix, size, f"{path}.index[{dim}]"))
        plan = (tuple(static), tuple(per_actor))
        self._plans[shape, path] = plan
        return plan

    @functools.cached_property
    def _affine_plans(self) -> dict[tuple, tuple[int, tuple, tuple, tuple]]:
        """``_affine``'s plan per ref shape, strides and field path."""
        return {}

    def _affine(
        self, shape: tuple[int, ...], strides: tuple[int, ...], path: str, sim: ViewContext
    ) -> tuple[int, tuple[int, ...], tuple[int, ...], tuple]:
        """``_plan`` as arithmetic on an affine view (strides in base elements): where
        the entries known without an actor move its start, the shape and strides it
        keeps, and ``(start expression, size, field path, stride, slice size)`` of the others
        (slice size None: an int index)."""
        static, per_actor = self._plans.get((shape, path)) or self._plan(shape, path, sim)
        ix_of = {dim: (ix, size, where) for dim, ix, size, where in per_actor}
        off = 0
        out_shape: list[int] = []
        out_strides: list[int] = []
        per: list[tuple[Any, int, str, int, int | None]] = []
        for dim, (size, st) in enumerate(zip(shape, strides, strict=True)):
            entry = static[dim] if dim < len(static) else _WHOLE
            if entry is None:
                ix, size, where = ix_of[dim]
                if ix.kind == "int":
                    per.append((ix.start, size, where, st, None))
                else:
                    per.append((ix.start, size, where, st, ix.size or 0))
                    out_shape.append(ix.size or 0)
                    out_strides.append(st)
            elif type(entry) is int:
                off += entry * st
            else:
                lo, hi, _ = entry.indices(size)
                out_shape.append(max(0, hi - lo))
                out_strides.append(st)
                off += lo * st
        plan = (off, tuple(out_shape), tuple(out_strides), tuple(per))
        self._affine_plans[shape, strides, path] = plan
        return plan

    def view(self, v: "View", sim: ViewContext, actor: Actor, path: str) -> "View":
        """numpy indexing of the offsets; an index outside the ref marks the view
        (``View.oob``, clipped offsets): the access through it fails, not the view. An
        affine view (``View.lay``) is indexed as arithmetic on its start (numpy's
        basic indexing of its offsets, without them), unless an index falls outside."""
        lay = v.lay
        if lay is None:
            shape = v.offsets.shape[:-1]
            plan = self._plans.get((shape, path)) or self._plan(shape, path, sim)
            return self._indexed(v, sim, actor, plan, [])
        shape, strides = lay[2], lay[3]
        aplan = self._affine_plans.get((shape, strides, path)) or self._affine(
            shape, strides, path, sim
        )
        start = lay[1] + aplan[0]
        values: list[int] = []
        for e, size, where, st, n in aplan[3]:
            i = sim.eval(e, actor, where)
            values.append(i)
            if n is None:  # an int index: the dim goes
                if not -size <= i < size:
                    break
                start += i % size * st
            else:  # pl.ds(i, n)
                if i < 0 or n < 0 or i + n > size:
                    break
                start += i * st
        else:
            return v.with_lay((lay[0], start, aplan[1], aplan[2]), v.oob)
        # (an index outside the ref: numpy's indexing, clipped, marks the view)
        return self._indexed(v, sim, actor, self._plans[shape, path], values)

    @functools.cached_property
    def _compiled(self) -> dict[str, Any]:
        """``compiled``'s functions by field path."""
        return {}

    def compiled(self, path: str) -> Callable[[Any, "View", ViewContext, Actor], "View"] | None:
        """``view`` of an affine view, its entries' expressions called as compiled
        functions of the actor's values (``E.compiled``) rather than through the
        engine's ``eval``, the affine plan of the last shape and strides kept at hand.
        What else ``view`` does (another layout, an index outside the ref, an
        expression that fails: evaluated again there, which changes nothing, as these
        read nothing) is left to it. None where an entry's expression loads, reads a
        semaphore or ``pl.program_id``: the engine's ``eval`` records those."""
        got = self._compiled.get(path, _NONE)
        if got is _NONE:
            got = self._compiled[path] = _compile_at(self, path)
        return got

    def _indexed(
        self, v: "View", sim: ViewContext, actor: Actor, plan: tuple, values: list[int]
    ) -> "View":
        """numpy's indexing of the offsets (``values``: the per-actor entries' values
        evaluated already, in order; the others are evaluated here)."""
        static, per_actor = plan
        if not per_actor:
            return v.with_offsets(sim.sliced(v.offsets, static), v.oob)
        idx = list(static)
        clipped: list[tuple[int, Any]] = []  # (view dim, indices) taken after the slicing
        # dims of size 0 indexed outside: no offset to clip to; the view's offsets there
        # are taken from one placeholder element (the view is marked: no access reads it)
        empty: list[int] = []
        oob = v.oob
        for k, (dim, ix, size, where) in enumerate(per_actor):
            if ix.kind == "int":
                i = values[k] if k < len(values) else sim.eval(ix.start, actor, where)
                if not -size <= i < size:
                    if oob is None:
                        oob = ("OOB_INDEX", where, f"index {i} out of bounds for size {size}")
                    if size == 0:
                        empty.append(dim)
                        size = 1
                    i = min(max(i, 0), size - 1)
                idx[dim] = i % size
            else:
                start = values[k] if k < len(values) else sim.eval(ix.start, actor, where)
                n = ix.size or 0
                if start < 0 or n < 0 or start + n > size:
                    if n < 0:
                        sim.fail("OOB_INDEX", where, f"slice [{start}, {start + n}) of size {size}")
                    if oob is None:
                        oob = (
                            "OOB_INDEX",
                            where,
                            f"slice [{start}, {start + n}) out of bounds for size {size} "
                            f"({actor.describe()})",
                        )
                    if size == 0:
                        empty.append(dim)
                        size = 1
                    idx[dim] = _WHOLE
                    kept = sum(1 for e in self._entries[:dim] if e.kind != "int")
                    clipped.append((kept, _clip(start, n, size)))
                else:
                    idx[dim] = slice(start, start + n)
        if empty:
            import numpy as np

            whole = v.offsets
            shape = tuple(1 if d in empty else n for d, n in enumerate(whole.shape))
            offsets = np.zeros(shape, whole.dtype)[tuple(idx)]
        else:
            offsets = sim.sliced(v.offsets, tuple(idx))
        if clipped:
            import numpy as np

            for axis, take in clipped:
                offsets = np.take(offsets, take, axis=axis)
        return v.with_offsets(offsets, oob)


def _compile_at(at: At, path: str) -> Callable[[At, "View", ViewContext, Actor], "View"] | None:
    """``At.compiled``'s function (the op is its first argument: the op keeps the
    function, which keeps nothing of the op but its plans, so no cycle holds them)."""
    for ix in at._entries:
        if ix.start is not None and not ix.start.calls() <= _PURE_CALLS:
            return None
    from mpmd_lab.memory import View

    plans = at._affine_plans
    shape: tuple[int, ...] | None = None  # the plan at hand: for this shape and strides
    strides: tuple[int, ...] = ()
    off = 0
    out_shape: tuple[int, ...] = ()  # the view's shape and strides after it
    out_strides: tuple[int, ...] = ()
    per: tuple[tuple[Callable[[E.Env], int], int, int, int | None], ...] = ()

    def view(op: At, v: "View", sim: ViewContext, actor: Actor) -> "View":
        nonlocal shape, strides, off, out_shape, out_strides, per
        lay = v.lay
        if lay is None:
            return op.view(v, sim, actor, path)
        if lay[2] != shape or lay[3] != strides:
            plan = plans.get((lay[2], lay[3], path)) or op._affine(lay[2], lay[3], path, sim)
            shape, strides = lay[2], lay[3]
            off, out_shape, out_strides = plan[0], plan[1], plan[2]
            per = tuple([(E.compiled(e), size, st, n) for e, size, _, st, n in plan[3]])
        start = lay[1] + off
        env = actor.env
        try:
            for fn, size, st, n in per:
                i = fn(env)
                if n is None:  # an int index: the dim goes
                    if not -size <= i < size:
                        return op.view(v, sim, actor, path)
                    start += i % size * st
                else:  # pl.ds(i, n)
                    if i < 0 or n < 0 or i + n > size:
                        return op.view(v, sim, actor, path)
                    start += i * st
        except E.ExprError:
            return op.view(v, sim, actor, path)
        lay = (lay[0], start, out_shape, out_strides)
        return View(v.base, v.dtype, None, v.device, v.multicast, v.cluster, v.oob, lay, v.root)

    return view


#: a whole dimension, as numpy indexes it
_WHOLE = slice(None)
#: what an index expression may call and still read nothing but the actor's values
#: (``At.compiled``)
_PURE_CALLS = frozenset(("axis_size", "num_programs"))
_NONE: Any = object()


def _clip(start: int, n: int, size: int) -> Any:
    """The indices ``start .. start + n - 1`` clipped into ``[0, size)``."""
    import numpy as np

    return np.clip(np.arange(start, start + n), 0, size - 1)


# ---------------------------------------------------------------- bitcast, reshape, transpose


#: an update helper's (``x.at[...]``) missing method
_NO_METHOD = "'_IndexUpdateRef' object has no attribute '{}'"


def sharded_error() -> StepError:
    """Bitcast, reshape and transpose types reject a sharded array: a bare error."""
    return err("MPMD_GPU_MESH_NOT_COMBINABLE", "NotImplementedError", "", lazy=True)


class Bitcast(TransformOp):
    """``ref.bitcast(dtype)``: a width change scales the second-minor dimension."""

    @classmethod
    def example(cls, fit: Fit) -> dict[str, Any]:
        return {"op": "bitcast", "dtype": "int32"}

    HELP: ClassVar[str] = "reinterpret the bits: ref.bitcast(dtype)"
    FAMILY: ClassVar[str] = "views"
    GPU_INTERP_REPR: ClassVar[str | None] = "BitcastTransform(dtype=...)"
    NEEDS_TYPE: ClassVar[bool] = True
    MOVES_AXES: ClassVar[bool] = True
    REINTERPRETS: ClassVar[bool] = True
    LOWERS_AS: ClassVar[str] = "bitcast"

    def on_array(self, a: ArrayValue, bound: frozenset[str]) -> ArrayError | None:
        """An array has no ``bitcast`` method."""
        if a.updater:
            return ("ARRAY_NO_METHOD", "AttributeError", _NO_METHOD.format("bitcast"))
        return ("ARRAY_NO_METHOD", "AttributeError", "DynamicJaxprTracer has no attribute bitcast")

    op: Literal["bitcast"]
    dtype: Literal[dtypes.DTYPES] = Field(  # type: ignore[valid-type]
        description="the new dtype (1-D refs cannot change width)"
    )

    def label(self) -> str:
        return f"bitcast({dtypes.short(self.dtype)})"

    def source(self, base: str, g: SourceWriter) -> str:
        return f"{base}.bitcast({dtypes.jnp_expr(self.dtype)})"

    def typed(self, ref: RefInfo) -> tuple[RefInfo | None, StepError | None, tuple[StepError, ...]]:
        # (JAX's shape rule, ``state.utils.bitcast`` under eval_shape, raises its own
        # errors before the array ops that refuse a sharded array)
        new = dtypes.canonical(self.dtype)
        old_bits, new_bits = dtypes.bits(ref.dtype), dtypes.bits(new)
        shape = ref.shape
        if len(shape) <= 1:
            if old_bits != new_bits:
                return (
                    None,
                    err(
                        "BITCAST_1D_WIDTH_CHANGE",
                        "NotImplementedError",
                        "Bitcast 1D ref with bitwidth change is not supported.",
                        lazy=True,
                    ),
                    (),
                )
            return (
                None,
                err(
                    "BITCAST_1D_SAME_WIDTH_BUG", "IndexError", "list index out of range", lazy=True
                ),
                (),
            )
        second_minor = shape[-2]
        if old_bits != new_bits:
            if (second_minor * old_bits) % new_bits:
                return (
                    None,
                    err(
                        "BITCAST_SECOND_MINOR",
                        "ValueError",
                        "Expected input and output shapes are the same after multiplying the "
                        "second-minor dimension by the bitwidths.",
                        lazy=True,
                    ),
                    (),
                )
        if ref.sharded:
            return None, sharded_error(), ()
        if old_bits != new_bits:
            new_shape = (*shape[:-2], second_minor * old_bits // new_bits, shape[-1])
            # the second-minor dim regroups bytes: where the view sits is unknowable
            after = replace(
                ref, shape=new_shape, dtype=new, transformed=True, region=None, view_dims=None
            )
        else:  # one width: the same elements, read as another type
            after = replace(ref, dtype=new, transformed=True)
        return after, None, ()

    def view(self, v: "View", sim: ViewContext, actor: Actor, path: str) -> "View":
        from mpmd_lab.memory import bitcast_offsets

        new = dtypes.np_dtype(self.dtype)
        try:
            offs = bitcast_offsets(v.offsets, v.dtype, new)
        except IndexError as e:
            sim.fail("BITCAST_1D_SAME_WIDTH_BUG", path, str(e))
        except ValueError as e:
            code = "BITCAST_1D_WIDTH_CHANGE" if "1D" in str(e) else "BITCAST_SECOND_MINOR"
            sim.fail(code, path, str(e))
        return v.with_(dtype=new, offsets=offs)


class Reshape(TransformOp):
    """``ref.reshape(*shape)`` (one ``-1`` allowed)."""

    @classmethod
    def example(cls, fit: Fit) -> dict[str, Any]:
        return {"op": "reshape", "shape": [-1]}

    HELP: ClassVar[str] = "a new shape of the same size: ref.reshape(...)"
    FAMILY: ClassVar[str] = "views"
    GPU_INTERP_REPR: ClassVar[str | None] = "ReshapeTransform(shape=...)"
    NEEDS_TYPE: ClassVar[bool] = True
    RESHAPES: ClassVar[bool] = True
    LOWERS_AS: ClassVar[str] = "reshape"

    def lower_access(self, a: AccessLowering, pos: int, path: Path) -> bool:
        """The first reshape the lowering cannot make (``layout_rules.view_memref``)."""
        return a.unmade_reshape(pos, path)

    def on_array(self, a: ArrayValue, bound: frozenset[str]) -> ArrayError | None:
        """``jnp.reshape`` of the array (its own messages)."""
        if a.updater:
            return ("ARRAY_NO_METHOD", "AttributeError", _NO_METHOD.format("reshape"))
        target = tuple(self.shape)
        size = math.prod(a.shape)
        if target.count(-1) > 1:
            return (
                "RESHAPE_MINUS_ONE",
                "TypeError",
                f"can only specify one unknown axis size with a `-1` value, got {target!r}",
            )
        shown = str(target[0]) if len(target) == 1 else repr(target)
        if -1 in target:
            rest = math.prod(d for d in target if d != -1)
            if rest and size % rest == 0:
                target = tuple(size // rest if d == -1 else d for d in target)
        if -1 in target or math.prod(target) != size:
            return (
                "RESHAPE_SIZE",
                "TypeError",
                f"cannot reshape array of shape {a.shape!r} (size {size}) into shape "
                f"{shown} (size {abs(math.prod(target))})",
            )
        if a.spec is not None:  # a sharded array: lax.reshape's sharding rule
            try:
                a.spec = sharding.reshaped(a.spec, a.shape, target, a.mesh)
            except sharding.ReshapeUnsupported:
                return (
                    "RESHAPE_SHARDING",
                    "ShardingTypeError",
                    "This reshape is not supported. Please specify the sharding of the output "
                    "via the `out_sharding` argument of jax.lax.reshape. Got operand type: "
                    f"{a.dtype}[{sharding.typed_dims(a.shape, a.spec)}], new sizes: {target!r}",
                )
        a.shape = target
        return None

    op: Literal["reshape"]
    shape: Annotated[
        list[Annotated[StrictInt, Field(ge=-1, le=MAX_DIM)]], Field(max_length=MAX_RANK)
    ] = Field(description="the new shape; one -1 is inferred")

    def label(self) -> str:
        return f"reshape({','.join(map(str, self.shape))})"

    def source(self, base: str, g: SourceWriter) -> str:
        return f"{base}.reshape({', '.join(map(repr, self.shape))})"

    def typed(self, ref: RefInfo) -> tuple[RefInfo | None, StepError | None, tuple[StepError, ...]]:
        target = tuple(self.shape)
        if target.count(-1) > 1:
            return (
                None,
                err(
                    "RESHAPE_MINUS_ONE",
                    "ValueError",
                    f"At most one dimension can be -1, but got {target!r}",
                ),
                (),
            )
        size = ref.size
        if -1 in target:
            rest = math.prod(d for d in target if d != -1)
            if rest == 0 or size % rest:
                return (
                    None,
                    err(
                        "RESHAPE_NOT_DIVISIBLE",
                        "ValueError",
                        f"Specified dims {target!r} do not evenly divide the size of the ref "
                        f"({size}).",
                    ),
                    (),
                )
            target = tuple(size // rest if d == -1 else d for d in target)
        if math.prod(target) != size:
            return (
                None,
                err(
                    "RESHAPE_SIZE",
                    "ValueError",
                    f"cannot reshape shape {ref.shape!r} into shape {target!r}",
                ),
                (),
            )
        if ref.sharded:
            return None, sharded_error(), ()
        if target == ref.shape:  # (the same dims: only the type records a transform)
            after = replace(ref, transformed=True)
        else:
            after = view_info(ref, target, None, None)
        return after, None, ()

    def view(self, v: "View", sim: ViewContext, actor: Actor, path: str) -> "View":
        from mpmd_lab.memory import c_strides

        lay = v.lay
        if lay is not None and -1 not in self.shape:
            # an affine view laid out contiguously (C order) reshapes as arithmetic
            target = tuple(self.shape)
            if math.prod(target) == math.prod(lay[2]) and lay[3] == c_strides(lay[2]):
                return v.with_lay((lay[0], lay[1], target, c_strides(target)), v.oob)
        try:
            return v.with_(offsets=v.offsets.reshape(*self.shape, v.offsets.shape[-1]))
        except ValueError:
            sim.fail(
                "RESHAPE_SIZE",
                path,
                f"cannot reshape ref of shape {v.shape} into shape {tuple(self.shape)}",
            )


class Transpose(TransformOp):
    """``ref.transpose(perm)`` or ``plgpu.transpose_ref(ref, perm)``."""

    @classmethod
    def example(cls, fit: Fit) -> dict[str, Any]:
        return {"op": "transpose", "perm": [1, 0]}

    HELP: ClassVar[str] = "permute the dims: ref.transpose(perm)"
    FAMILY: ClassVar[str] = "views"
    HLO_INTERP_CLASS: ClassVar[str | None] = "jax._src.state.types.TransposeTransform"
    MOVES_AXES: ClassVar[bool] = True
    DEFERS_TYPE: ClassVar[bool] = True
    LOWERS_AS: ClassVar[str] = "transpose"

    def root_dims(self, dims: list[int]) -> list[int] | None:
        try:
            return [dims[p] for p in self.perm]
        except IndexError:
            return None

    def stops_access(self) -> bool:
        # (a negative axis is out of order too; a 0-D view's empty permutation crashes)
        return not self.perm or sorted(self.perm) != list(range(len(self.perm)))

    def lower_access(self, a: AccessLowering, pos: int, path: Path) -> bool:
        """The lowering's ``memref_transpose`` takes a permutation of non-negative axes;
        on a 0-D view (the empty permutation) MLIR's ``memref.transpose`` segfaults, so
        JAX gives no error, the process dies (TRANSPOSE_0D_CRASH)."""
        perm = self.perm
        if not perm:
            a.own(
                "TRANSPOSE_0D_CRASH",
                (*path, "perm"),
                "a load or store through a transpose of a 0-D view crashes JAX's Mosaic GPU "
                "lowering (a segfault in memref.transpose with the empty permutation): the "
                "process dies without an error",
                fix=Fix(
                    description="drop the transpose: on a 0-D view it changes nothing",
                    edits=[Edit(op="remove", path=format_path(path))],
                ),
            )
            return True
        if any(p < 0 for p in perm):
            a.jax(
                "TRANSPOSE_NEGATIVE_PERM_GPU",
                (*path, "perm"),
                "get_permutation(): incompatible function arguments.",
                fix=self._perm_fix(path),
            )
            return True
        if sorted(perm) != list(range(len(perm))):
            a.jax(
                "TRANSPOSE_INVALID_PERM_GPU",
                (*path, "perm"),
                "Invalid permutation when attempting to create an AffineMap",
            )
            return True
        return False

    def _perm_fix(self, path: Path) -> Fix | None:
        """The same permutation with non-negative axes (None: it is none)."""
        n = len(self.perm)
        fixed = [p % n for p in self.perm]
        if sorted(fixed) != list(range(n)):
            return None
        return Fix(
            description=f"write the permutation with non-negative axes: {fixed}",
            edits=[Edit(op="replace", path=format_path((*path, "perm")), value=fixed)],
        )

    def on_array(self, a: ArrayValue, bound: frozenset[str]) -> ArrayError | None:
        """``jnp.transpose`` of the array; ``transpose_ref`` wants a ref."""
        if a.updater:
            if self.via == "method":
                return ("ARRAY_NO_METHOD", "AttributeError", _NO_METHOD.format("transpose"))
            return ("JAX_ASSERTION", "AssertionError", "")  # it asserts a memory space
        if self.via == "transpose_ref":
            sh = ",".join(map(str, a.shape))
            return (
                "TRANSPOSE_REF_RAW_BUG",
                "ValueError",
                "The 'memory_space' attribute is not available on traced array with shape "
                f"{a.dtype}[{sh}]. Use `jax.typeof(x).memory_space` instead.",
            )
        n = len(a.shape)
        bad = next((p for p in self.perm if not -n <= p < n), None)
        if bad is not None:
            return (
                "TRANSPOSE_BAD_AXIS",
                "ValueError",
                f"axis {bad} is out of bounds for array of dimension {n}",
            )
        perm = [p % n for p in self.perm]
        if sorted(perm) != list(range(n)):
            return (
                "TRANSPOSE_RANK",
                "TypeError",
                "transpose permutation isn't a permutation of operand dimensions, got "
                f"permutation {tuple(self.perm)!r} for operand shape {a.shape!r}.",
            )
        a.shape = tuple(a.shape[p] for p in perm)
        if a.spec is not None:  # (its sharding moves with its dims)
            a.spec = tuple(a.spec[p] for p in perm)
        return None

    op: Literal["transpose"]
    perm: Annotated[
        list[Annotated[StrictInt, Field(ge=-MAX_RANK, le=MAX_RANK)]], Field(max_length=MAX_RANK)
    ] = Field(description="a permutation of the dims")
    via: Literal["method", "transpose_ref"] = Field(
        "method", description="ref.transpose (method) or plgpu.transpose_ref"
    )

    def needs_type(self, ref: RefInfo) -> bool:
        return self.via == "transpose_ref" and ref.transformed

    def label(self) -> str:
        name = "transpose_ref" if self.via == "transpose_ref" else "transpose"
        return f"{name}({','.join(map(str, self.perm))})"

    def source(self, base: str, g: SourceWriter) -> str:
        perm = repr(tuple(self.perm))
        if self.via == "transpose_ref":
            return f"plgpu.transpose_ref({base}, {perm})"
        return f"{base}.transpose({perm})"

    def typed(self, ref: RefInfo) -> tuple[RefInfo | None, StepError | None, tuple[StepError, ...]]:
        perm = tuple(self.perm)
        if self.via == "transpose_ref":
            if not ref.transformed:
                return (
                    None,
                    err(
                        "TRANSPOSE_REF_RAW_BUG",
                        "ValueError",
                        "The 'memory_space' attribute is not available on traced array with "
                        f"shape {ref.jax_type()}. Use `jax.typeof(x).memory_space` instead.",
                    ),
                    (),
                )
            if ref.memory_space == "TMEM":
                return (
                    None,
                    err("TRANSPOSE_TMEM", "ValueError", "Can't transpose a TMEM reference."),
                    (),
                )
        shape = ref.shape
        rank = len(shape)
        if len(perm) != rank:
            return (
                None,
                err(
                    "TRANSPOSE_RANK",
                    "ValueError",
                    f"Permutation {perm!r} does not match the rank of the type ({rank})",
                    field="perm",
                    lazy=True,
                ),
                (),
            )
        if ref.sharded:
            return None, sharded_error(), ()
        if perm and (min(perm) < -rank or max(perm) >= rank):
            return (
                None,
                err(
                    "TRANSPOSE_BAD_AXIS",
                    "IndexError",
                    "tuple index out of range",
                    field="perm",
                    lazy=True,
                ),
                (),
            )
        dims = ref.view_dims
        after = view_info(
            ref,
            tuple([shape[p] for p in perm]),
            ref.region,
            None if dims is None else tuple([dims[p] for p in perm]),
        )
        return after, None, ()

    def view(self, v: "View", sim: ViewContext, actor: Actor, path: str) -> "View":
        rank = len(v.shape)
        perm = [p % rank if rank else p for p in self.perm]
        if sorted(perm) != list(range(rank)):
            sim.fail("TRANSPOSE_RANK", path, f"{self.perm} is not a permutation")
        lay = v.lay
        if lay is not None:  # an affine view: its dims' sizes and strides permuted
            shape, strides = lay[2], lay[3]
            moved = (tuple([shape[p] for p in perm]), tuple([strides[p] for p in perm]))
            return v.with_lay((lay[0], lay[1], *moved), v.oob)
        return v.with_(offsets=v.offsets.transpose(*perm, rank))


# ---------------------------------------------------------------- scratch layout


class _ScratchOnly(TransformOp):
    SCRATCH_ONLY: ClassVar[bool] = True
    FAMILY: ClassVar[str] = "layout"

    def typed(self, ref: RefInfo) -> tuple[RefInfo | None, StepError | None, tuple[StepError, ...]]:
        return (
            None,
            err(
                "SCRATCH_ONLY_TRANSFORM",
                "",
                f"{self.op_name()} is a scratch-only transform: no JAX call applies it to a ref",
                stage="build",
            ),
            (),
        )

    def view(self, v: "View", sim: ViewContext, actor: Actor, path: str) -> "View":
        sim.fail("SIM_UNSUPPORTED", path, f"{self.op_name()} applies to scratch types only")

    def source(self, base: str, g: SourceWriter) -> str:
        g.fail(f"{self.op_name()} is a scratch-only transform: no JAX call applies it to a ref")
        return base  # pragma: no cover


class Tiling(_ScratchOnly):
    """``plgpu.TilingTransform(tile)`` on a scratch type."""

    @classmethod
    def example(cls, fit: Fit) -> dict[str, Any]:
        return {"op": "tiling", "tile": [8, 32]}

    HELP: ClassVar[str] = "tile the layout in memory (scratch only)"
    LOWERS_AS: ClassVar[str] = "tiling"

    op: Literal["tiling"]
    tile: Annotated[list[Size], Field(min_length=1, max_length=MAX_RANK)] = Field(
        description="the tile shape (trailing dims)"
    )

    def label(self) -> str:
        return f"tiling({','.join(map(str, self.tile))})"

    def scratch_source(self) -> str:
        return f"plgpu.TilingTransform({tuple(self.tile)!r})"


class Swizzle(_ScratchOnly):
    """``plgpu.SwizzleTransform(bytes)`` on a scratch type."""

    @classmethod
    def example(cls, fit: Fit) -> dict[str, Any]:
        return {"op": "swizzle", "bytes": 128}

    HELP: ClassVar[str] = "swizzle the layout in memory (scratch only)"
    LOWERS_AS: ClassVar[str] = "swizzle"

    op: Literal["swizzle"]
    bytes: Annotated[StrictInt, Field(ge=0, le=2**20)] = Field(
        description="the swizzle in bytes: 32, 64 or 128"
    )

    def label(self) -> str:
        return f"swizzle({self.bytes})"

    def scratch_source(self) -> str:
        return f"plgpu.SwizzleTransform({self.bytes!r})"


__all__ = [
    "At",
    "Bitcast",
    "BlockIndex",
    "DsIndex",
    "IndexEntry",
    "Ix",
    "PidIndex",
    "Reshape",
    "Swizzle",
    "Tiling",
    "Transpose",
    "full_entry",
    "resolve_entry",
]
