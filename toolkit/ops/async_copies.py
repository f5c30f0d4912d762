"""Copies the GPU's copy engines and multimem units make.

- ``copy_gmem_to_smem {src, dst, barrier}``: a TMA load, GMEM (here or a peer's) into
  SMEM; it completes on ``barrier`` (``barrier_wait`` before reading ``dst``);
- ``copy_smem_to_gmem {src, dst}``: a TMA store, SMEM into GMEM (a peer's, or every
  device's through a multicast view), in the current commit group;
  ``wait_smem_to_gmem {n}`` waits until at most ``n`` groups are in flight;
  ``commit_smem {}`` makes this thread's SMEM writes visible to the copy engine first;
- ``tma_store {src, dst}``: the three together (commit, copy, wait);
- ``multimem_store {src, dst, axes}``: a store to the same address on every device along
  ``axes``.
"""

from collections.abc import Iterator
from typing import Annotated, Any, ClassVar, Literal, Self

from mpmd_lab import dtypes
from mpmd_lab import expr as E
from mpmd_lab import layout_rules as L
from mpmd_lab.fields import AxisNames, RefName, axes_tuple, sub_path
from mpmd_lab.ops import values as V
from mpmd_lab.ops.base import (
    READ,
    SYNC,
    WRITE,
    ExecuteContext,
    Fit,
    LowerContext,
    SourceWriter,
    StatementOp,
    TraceContext,
)
from mpmd_lab.ops.statements import LANES
from mpmd_lab.ops.sync import check_barrier
from pydantic import Field, StrictBool, StrictInt, model_validator


class TmaStore(StatementOp):
    """``commit_smem(); copy_smem_to_gmem(src, dst); wait_smem_to_gmem(0)``."""

    @classmethod
    def example(cls, fit: Fit) -> dict[str, Any]:
        return {
            "op": "tma_store",
            "src": fit.first(fit.smem, "smem"),
            "dst": fit.first(fit.outputs, "out"),
        }

    HELP: ClassVar[str] = "SMEM -> GMEM by TMA, committed and waited"
    FAMILY: ClassVar[str] = "async"
    INTERPRET_LIMITS: ClassVar[dict[str, str]] = {
        "hlo": "The HLO interpreter has no rule for TMA copies (copy_smem_to_gmem).",
    }
    REFS: ClassVar[tuple[tuple[str, str], ...]] = (("src", READ), ("dst", WRITE))

    op: Literal["tma_store"]
    src: RefName = Field(description="an SMEM ref (or view)")
    dst: RefName = Field(description="a GMEM ref (or a peer or multicast view of one)")

    def label(self) -> str:
        return f"{self.dst} <- {self.src}"

    def source(self, g: SourceWriter) -> list[str]:
        return [
            "plgpu.commit_smem()",
            f"plgpu.copy_smem_to_gmem({g.ref(self.src)}, {g.ref(self.dst)})",
            "plgpu.wait_smem_to_gmem(0)",
        ]

    def trace(self, t: TraceContext) -> bool:
        return trace_store(t)

    def lower(self, low: LowerContext) -> bool:
        return lower_store(low)

    def execute(self, x: ExecuteContext) -> None:
        x.write("dst", x.read("src"))


class MultimemStore(StatementOp):
    """``plgpu.multimem_store(src[...], dst, axes)``: ``dst`` on every device along ``axes``;
    or ``plgpu.multimem_store(value, dst, axes)`` of a value computed in registers (a
    ``compute`` value: ``lax.broadcasted_iota(...)``, ``x_ref[...] * 2``)."""

    HELP: ClassVar[str] = "store to dst on every device along axes (multimem)"

    @classmethod
    def example(cls, fit: Fit) -> dict[str, Any]:
        return {
            "op": cls.op_name(),
            "src": fit.first(fit.refs, "x_ref"),
            "dst": fit.first(fit.outputs, fit.first(fit.refs, "out")),
            "axes": list(fit.device_axes) or ["dev"],
        }

    def cross_device(self) -> bool:
        return True

    FAMILY: ClassVar[str] = "async"
    INTERPRET_LIMITS: ClassVar[dict[str, str]] = {
        "hlo": "The HLO interpreter has no rule for multimem_store.",
    }
    #: the refs ``value`` loads are ``value.NAME`` (``ref_fields``), as a compute's
    REFS: ClassVar[tuple[tuple[str, str], ...]] = (("src", READ), ("dst", WRITE))

    def interpret_error(self, interp: str) -> Any:
        return L.multimem_interpret_error() if interp == "gpu" else None

    op: Literal["multimem_store"]
    src: RefName | None = Field(
        default=None, description="the ref whose value is stored (or give value)"
    )
    value: V.ValueText | None = Field(
        default=None,
        description="instead of src: the value stored, computed in registers as a compute's "
        "(lax.broadcasted_iota(jnp.int32, (128, 128), 1), x_ref[...] * 2)",
    )
    dst: RefName = Field(description="a GMEM ref, written on every device along axes")
    axes: AxisNames = Field(description="device-mesh axes (JAX wants all of them, as a tuple)")

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.src is None) == (self.value is None):
            raise ValueError("give src (a ref) or value (a computed value), one of them")
        if self.value is not None and any(True for _ in self.tree.sem_reads()):
            raise ValueError("a multimem_store value does not read semaphores")
        return self

    @property
    def tree(self) -> V.Node:
        """The computed value (``value`` given)."""
        return V.parse(self.value or "")

    def ref_fields(self) -> list[tuple[str, str, str]]:
        if self.value is None:
            return super().ref_fields()
        reads = [(f"value.{n}", n, READ) for n in dict.fromkeys(self.tree.loads())]
        return [*reads, ("dst", self.dst, WRITE)]

    def exprs(self) -> Iterator[tuple[str, E.Expr]]:
        if self.value is None:
            yield from super().exprs()
            return
        for idx in self.tree.indices():
            yield "value", idx.e

    def expr_kind(self, field: str) -> str:
        return "value" if field == "value" else super().expr_kind(field)

    def ref_name(self, field: str) -> str:
        if field.startswith("value."):
            return field.removeprefix("value.")
        return super().ref_name(field)

    def label(self) -> str:
        what = self.src if self.value is None else self.tree.source(V.LABEL)
        return f"{self.dst} <- {what} over {','.join(axes_tuple(self.axes))}"

    def source(self, g: SourceWriter) -> list[str]:
        what = f"{g.ref(self.src)}[...]" if self.src is not None else self.tree.source(g)
        return [f"plgpu.multimem_store({what}, {g.ref(self.dst)}, {g.axes(self.axes)})"]

    def trace(self, t: TraceContext) -> bool:
        """multimem_store's abstract eval: dst in GMEM, then dtype, then shape."""
        if self.value is not None:
            from mpmd_lab.ops.compute import trace_value

            ty = trace_value(t, self.tree)
            if ty is None:
                return True
            shape, dtype = tuple(ty.shape), ty.dtype
        else:
            if t.use("src"):
                return True
            info = t.info("src")
            shape, dtype = tuple(info.shape), info.dtype
        if t.root_space("dst") != "GMEM":
            t.jax(
                "MULTIMEM_DST_NOT_GMEM",
                (*t.path, "dst"),
                f"ref must be a GMEM reference, got {t.base_type('dst')}",
            )
            return True
        if t.use("dst"):
            return True
        dst = t.info("dst")
        if dtype != dst.dtype:
            t.jax(
                "MULTIMEM_MISMATCH",
                t.path,
                f"Value dtype {dtype} does not match ref dtype {dst.dtype}",
            )
            return True
        if shape != tuple(dst.shape):
            t.jax(
                "MULTIMEM_MISMATCH",
                t.path,
                f"Value shape {shape!r} does not match ref shape {tuple(dst.shape)!r}",
            )
            return True
        return False

    def lower(self, low: LowerContext) -> bool:
        if self.value is not None:
            from mpmd_lab.ops.compute import lower_value

            if lower_value(low, self.tree) is None:
                return True
        elif low.access("src", "load"):
            return True
        if low.collective(self.axes, "multimem_store"):
            return True
        if low.multimem_ref("dst"):
            return True
        src = low.info("dst") if self.value is not None else low.info("src")
        if src.shape and src.size % LANES == 0 and src.size // LANES * dtypes.bits(src.dtype) < 32:
            low.later(
                "p3",
                "MULTIMEM_STORE_WIDTH",
                low.path,
                "Only 32-, 64- and 128-bit stores are supported",
                f"Each of the {LANES} threads would store {src.size // LANES} {src.dtype} "
                "value(s), fewer than 32 bits; multimem stores move 32, 64 or 128 bits per thread.",
            )
        return False

    def execute(self, x: ExecuteContext) -> None:
        if self.value is not None:
            from mpmd_lab.ops.compute import eval_value

            dst = x.view("dst")
            value = eval_value(x, self.tree)
            if value is None:
                value = x.like(dst.shape, dst.dtype)
        else:
            value = x.read("src")
        axes = axes_tuple(self.axes)
        for a in axes:
            if a not in x.mesh:
                x.fail("DEVICE_ID_UNKNOWN_AXIS", f"no device axis {a!r}")
        x.write("dst", value, fan_out=axes)


def trace_store(t: TraceContext) -> bool:
    """copy_smem_to_gmem's abstract eval: memory spaces, then dtypes, then shapes."""
    if t.root_space("src") != "SMEM":
        t.jax(
            "TMA_SRC_NOT_SMEM",
            (*t.path, "src"),
            f"src must be a SMEM reference, got {t.base_type('src')}",
        )
        return True
    if t.root_space("dst") != "GMEM":
        t.jax(
            "TMA_DST_NOT_GMEM",
            (*t.path, "dst"),
            f"dst must be a GMEM reference, got {t.base_type('dst')}",
        )
        return True
    if t.use("src") or t.use("dst"):
        return True
    s_, d_ = t.info("src"), t.info("dst")
    if s_.dtype != d_.dtype:
        t.jax(
            "TMA_DTYPE_MISMATCH",
            t.path,
            f"Expected dtypes to match but src had type {s_.dtype} and dst had type {d_.dtype}",
        )
        return True
    if len(s_.shape) != len(d_.shape):
        longer = 1 if len(s_.shape) > len(d_.shape) else 2
        t.jax(
            "TMA_SHAPE_MISMATCH",
            t.path,
            f"zip() argument {3 - longer} is {'shorter' if longer == 1 else 'longer'} "
            "than argument 1",
            jax_type="ValueError",
        )
        return True
    if s_.shape != d_.shape:
        t.jax(
            "TMA_SHAPE_MISMATCH",
            t.path,
            f"Expected shapes to match, but src has shape {s_.shape!r} and dst has shape "
            f"{d_.shape!r}",
        )
        return True
    return False


def lower_store(low: LowerContext) -> bool:
    """copy_smem_to_gmem's lowering: the GMEM side's transforms, then (dialect lowering)
    the copy's width."""
    if low.tma("src", "dst"):
        return True
    if low.info("src").cluster:
        low.jax(
            "TMA_SMEM_CLUSTER",
            (*low.path, "src"),
            "Only SMEM <-> GMEM copies supported",
            explanation="A TMA store reads this block's own SMEM; the source here is "
            "another block's (cluster_ref).",
        )
        return True
    _copy_width(low, "src")
    return False


def _copy_width(low: LowerContext, field: str) -> None:
    """``async_copy``: the bits along the last dimension, a multiple of 128
    (``layout_rules.tma_last_dim_error``)."""
    info = low.info(field)
    if info.size == 0:
        low.later(
            "p3",
            "GPU_ZERO_SIZE_ACCESS",
            low.path,
            f"a TMA copy of {info.describe()}, which holds no element: JAX's lowering "
            "refuses it (ValueError: a must be strictly positive)",
            "A TMA copy moves boxes of at least one element along every dimension.",
        )
        return
    minor = info.shape[-1] if info.shape else 1  # (a 0-d ref: one element)
    bits = dtypes.bits(info.dtype)
    e = L.tma_last_dim_error(minor, bits)
    if e is not None:
        low.later(
            "p3",
            e.code,
            low.path,
            e.message,
            f"A TMA copy moves 16-byte units along the last dimension; {minor} "
            f"{info.dtype} element{'s are' if minor != 1 else ' is'} {minor * bits} bits.",
        )


def trace_load(t: TraceContext) -> bool:
    """copy_gmem_to_smem's abstract eval: memory spaces (src, dst, barrier), then dtypes,
    then shapes."""
    for field, space in (("src", "GMEM"), ("dst", "SMEM")):
        info = t.info(field)
        if not info.is_ref:
            t.jax(
                "TMA_SRC_NOT_GMEM" if field == "src" else "TMA_DST_NOT_SMEM",
                sub_path(t.path, field),
                f"{field} must be a reference, got {info.dtype}[{','.join(map(str, info.shape))}]",
                jax_type="TypeError",
            )
            return True
        if t.root_space(field) != space:
            t.jax(
                "TMA_SRC_NOT_GMEM" if field == "src" else "TMA_DST_NOT_SMEM",
                sub_path(t.path, field),
                f"{field} must be a {space} reference, got {t.base_type(field)}",
            )
            return True
    if t.st.node.barrier is not None and check_barrier(t, "barrier"):
        return True
    if t.use("src") or t.use("dst"):
        return True
    for k, (_p, step) in enumerate(t.binding("src").stack):  # (each view step's own rule)
        if step.trace_gmem_load(t, "src", k):
            return True
    s_, d_ = t.info("src"), t.info("dst")
    if s_.dtype != d_.dtype:
        t.jax(
            "TMA_DTYPE_MISMATCH",
            t.path,
            f"Expected dtypes to match but src had type {s_.dtype} and dst had type {d_.dtype}",
        )
        return True
    if s_.shape != d_.shape:
        t.jax(
            "TMA_SHAPE_MISMATCH",
            t.path,
            f"Expected source shape to be {tuple(d_.shape)!r}, but got {tuple(s_.shape)!r}. ",
        )
        return True
    return False


def _tiled(shape: tuple[int, ...], tile: tuple[int, ...] | None) -> list[int]:
    """A shape through Mosaic GPU's ``TileTransform``: the tiled trailing dims become
    their tile counts, followed by the tile."""
    if not tile or len(tile) > len(shape):
        return list(shape)
    k = len(tile)
    return [*shape[:-k], *(d // t for d, t in zip(shape[-k:], tile, strict=True)), *tile]


def _multicast_share(low: LowerContext, n: int) -> None:
    """``async_copy``'s partition of a multicast load among ``n`` blocks: the first
    leading dim of the transformed slice (not the last one when swizzled) that ``n``
    divides, or dims whose sizes multiply up to ``n``; else JAX's ValueError. (Dims of 1
    never decide it: the squeezed and the dropped unit dims.)"""
    info = low.info("dst")
    dst = low.root_layout("dst")
    tile: tuple[int, ...] | None = None
    swizzled = False
    for t in () if dst is None else dst[1]:
        if t.LOWERS_AS == "tiling":
            tile = tuple(t.tile)
        elif t.LOWERS_AS == "swizzle":
            swizzled = t.bytes != 0
    body = _tiled(tuple(info.shape), tile)
    src = low.root_layout("src")
    src_info = low.info("src")
    squeezed: list[int] = []
    if src is not None and src_info.view_dims is not None:
        kept = [src[0][d] for d in src_info.view_dims]
        squeezed = [src[0][d] for d in range(len(src[0])) if d not in src_info.view_dims]
        gmem = _tiled(tuple(kept), tile)
        if len(gmem) == len(body):  # a unit dim of both is dropped
            body = [s for s, g in zip(body, gmem, strict=True) if not (s == 1 and g == 1)]
    shape = [1 for g in squeezed if g != 1] + body
    left = n
    for size in shape[:-1] if swizzled else shape:
        if size % left == 0:
            left = 1
            break
        if left % size:
            break
        left //= size
    if left > 1:
        low.later(
            "p3",
            "MULTICAST_LOAD_SHARE",
            low.path,
            f"None of the leading dimensions in the transformed slice shape {shape} is "
            f"divisible by the collective size {n}",
            f"A multicast load is split among the {n} blocks of its group along one leading "
            f"dim of the slice as the SMEM layout arranges it ({shape}"
            + (", the last dim excluded: it is swizzled" if swizzled else "")
            + f"); none of them divides by {n}.",
        )


def lower_load(low: LowerContext, collective: tuple[str, ...] = ()) -> bool:
    """copy_gmem_to_smem's lowering: the barrier, the cluster axes of a multicast load,
    the GMEM side's transforms, the SMEM side (no other block's), then (dialect lowering)
    the SMEM view against the GMEM ref (contiguous, no transpose the GMEM side cannot
    follow), how a multicast load is shared, and the copy's width."""
    if low.tma_dst("dst"):  # (the destination's view is lowered first)
        return True
    if low.st.node.barrier is None:
        low.jax(
            "TMA_LOAD_NO_BARRIER",
            low.path,
            "copy_gmem_to_smem without a barrier is only supported on pre-Hopper GPUs, which "
            "use the cp.async implementation",
            explanation="On Hopper and newer GPUs (what the lowering targets) a TMA load "
            "completes on a barrier: allocate one (scratch `kind: barrier`), pass it as "
            "`barrier` and `barrier_wait` on it before reading the destination.",
        )
        return True
    if low.barrier("barrier", "as_barrier_memref"):
        return True
    n = 1
    if collective:
        group = low.cluster_group(collective, (*low.path, "collective_axes"))
        if group is None:
            return True
        n = group
    if low.gmem_transforms("src", load=True):
        return True
    if low.info("dst").cluster:
        low.jax(
            "TMA_SMEM_CLUSTER",
            (*low.path, "dst"),
            "Only SMEM <-> GMEM copies supported",
            explanation="A TMA load lands in this block's own SMEM; the destination here is "
            "another block's (cluster_ref). Load into the own SMEM and let the other block "
            "read it through its cluster view, or have that block load itself.",
        )
        return True
    low.tma_smem("dst", "src", n)
    if n > 1:
        _multicast_share(low, n)
    _copy_width(low, "dst")
    return False


class CopyGmemToSmem(StatementOp):
    """``plgpu.copy_gmem_to_smem(src, dst, barrier)``: completes on ``barrier``."""

    @classmethod
    def example(cls, fit: Fit) -> dict[str, Any]:
        return {
            "op": "copy_gmem_to_smem",
            "src": fit.first(fit.refs, "x_ref"),
            "dst": fit.first(fit.smem, "smem"),
            "barrier": fit.first(fit.barriers, "barrier"),
        }

    HELP: ClassVar[str] = "GMEM -> SMEM by TMA; completes on a barrier"
    FAMILY: ClassVar[str] = "async"
    SYNC_ROLE: ClassVar[str] = "complete"
    INTERPRET_LIMITS: ClassVar[dict[str, str]] = {
        "hlo": "The HLO interpreter has no rule for TMA copies (copy_gmem_to_smem).",
        # falsely, and not every time (jax 0.12 and 0.11.2); on one device it runs them
        "gpu-multi": "On several devices the GPU interpreter leaves a TMA load's barrier "
        "allocated and fails at the end of the kernel (AssertionError: Barrier remains "
        "allocated), not every time; on one device it runs it.",
    }
    REFS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("src", READ),
        ("dst", WRITE),
        ("barrier", SYNC),
    )

    op: Literal["copy_gmem_to_smem"]
    src: RefName = Field(description="a GMEM ref (or a peer's view of one)")
    dst: RefName = Field(description="an SMEM ref")
    barrier: RefName | None = Field(
        None,
        description="the barrier the copy completes on (null: none, which only pre-Hopper "
        "GPUs take)",
    )
    collective_axes: AxisNames | None = Field(
        None,
        description="cluster axes of a multicast load (null: none): the blocks of the "
        "cluster along them each issue a share of the copy and every one of them receives "
        "the whole of it, its barrier completing once every share has landed",
    )

    def label(self) -> str:
        on = "no barrier" if self.barrier is None else f"on {self.barrier}"
        if self.collective_axes is not None:
            on += f", multicast over {','.join(axes_tuple(self.collective_axes))}"
        return f"{self.dst} <~ {self.src} ({on})"

    def source(self, g: SourceWriter) -> list[str]:
        bar = "" if self.barrier is None else f", {g.ref(self.barrier)}"
        if self.collective_axes is not None:
            bar += f", collective_axes={g.axes(self.collective_axes)}"
        return [f"plgpu.copy_gmem_to_smem({g.ref(self.src)}, {g.ref(self.dst)}{bar})"]

    def trace(self, t: TraceContext) -> bool:
        return trace_load(t)

    def lower(self, low: LowerContext) -> bool:
        axes = () if self.collective_axes is None else axes_tuple(self.collective_axes)
        return lower_load(low, axes)

    def execute(self, x: ExecuteContext) -> None:
        """Issued now by this thread's copy engine; its data has landed once its barrier's
        phase completes (barrier_wait). A multicast load lands in every block of the group
        once the last of them has issued its share."""
        if self.collective_axes is not None:
            x.copy_to_smem_collective("src", "dst", "barrier", axes_tuple(self.collective_axes))
            return
        x.copy_to_smem("src", "dst", "barrier")


class CopySmemToGmem(StatementOp):
    """``plgpu.copy_smem_to_gmem(src, dst)``: an async TMA store in a commit group."""

    @classmethod
    def example(cls, fit: Fit) -> dict[str, Any]:
        return {
            "op": "copy_smem_to_gmem",
            "src": fit.first(fit.smem, "smem"),
            "dst": fit.first(fit.outputs, "out"),
        }

    HELP: ClassVar[str] = "SMEM -> GMEM by TMA, async (wait_smem_to_gmem completes it)"
    FAMILY: ClassVar[str] = "async"
    INTERPRET_LIMITS: ClassVar[dict[str, str]] = {
        "hlo": "The HLO interpreter has no rule for TMA copies (copy_smem_to_gmem).",
    }
    REFS: ClassVar[tuple[tuple[str, str], ...]] = (("src", READ), ("dst", WRITE))

    op: Literal["copy_smem_to_gmem"]
    src: RefName = Field(description="an SMEM ref")
    dst: RefName = Field(description="a GMEM ref (or a peer or multicast view of one)")
    commit_group: StrictBool = Field(True, description="close a commit group after it")

    def label(self) -> str:
        return f"{self.dst} <~ {self.src}"

    def source(self, g: SourceWriter) -> list[str]:
        extra = "" if self.commit_group else ", commit_group=False"
        return [f"plgpu.copy_smem_to_gmem({g.ref(self.src)}, {g.ref(self.dst)}{extra})"]

    def trace(self, t: TraceContext) -> bool:
        return trace_store(t)

    def lower(self, low: LowerContext) -> bool:
        return lower_store(low)

    def execute(self, x: ExecuteContext) -> None:
        """Issued now (it sees this thread's SMEM writes up to its last commit_smem); done
        at the wait_smem_to_gmem that covers its commit group."""
        x.copy_to_gmem("src", "dst", self.commit_group)


class CommitSmem(StatementOp):
    """``plgpu.commit_smem()``: SMEM writes so far are visible to the copy engine."""

    HELP: ClassVar[str] = "make SMEM writes visible to TMA copies"
    FAMILY: ClassVar[str] = "async"

    op: Literal["commit_smem"]

    def label(self) -> str:
        return "commit SMEM"

    def source(self, g: SourceWriter) -> list[str]:
        return ["plgpu.commit_smem()"]

    def execute(self, x: ExecuteContext) -> None:
        x.commit()


class WaitSmemToGmem(StatementOp):
    """``plgpu.wait_smem_to_gmem(n, wait_read_only=...)``: at most ``n`` commit groups
    still in flight (``wait_read_only``: still reading their SMEM source)."""

    HELP: ClassVar[str] = "wait until at most n SMEM -> GMEM copy groups are in flight"
    FAMILY: ClassVar[str] = "async"

    op: Literal["wait_smem_to_gmem"]
    n: Annotated[StrictInt, Field(ge=0, le=64)] = Field(
        0, description="groups allowed to stay in flight (0: all done)"
    )
    wait_read_only: StrictBool = Field(
        False,
        description="wait only until the copies have read their SMEM source (it may be "
        "written again); their GMEM writes may still be in flight",
    )

    def label(self) -> str:
        what = "copies' SMEM reads" if self.wait_read_only else "copies"
        return f"wait {what} (<= {self.n} in flight)"

    def source(self, g: SourceWriter) -> list[str]:
        extra = ", wait_read_only=True" if self.wait_read_only else ""
        return [f"plgpu.wait_smem_to_gmem({self.n!r}{extra})"]

    def execute(self, x: ExecuteContext) -> None:
        """This thread is ordered after the older groups' copies (only after their SMEM
        reads with ``wait_read_only``: reading their GMEM destination still races)."""
        x.wait_copies(self.n, self.wait_read_only)


__all__ = [
    "lower_load",
    "lower_store",
    "trace_load",
    "trace_store",
    "CommitSmem",
    "CopyGmemToSmem",
    "CopySmemToGmem",
    "MultimemStore",
    "TmaStore",
    "WaitSmemToGmem",
]
