"""Plain body statements: ``copy``, ``add``, ``fill``, ``return``.

Each class says, in one place, what the statement reads and writes, its trace-time
rules (JAX's messages), its GPU-lowering rules, what the simulator does and the JAX
source it exports.
"""

import math
from typing import Annotated, Any, ClassVar, Literal

from mpmd_lab import dtypes, sharding
from mpmd_lab import layout_rules as L
from mpmd_lab.diagnostics import Edit, Fix
from mpmd_lab.fields import RefName, format_path
from mpmd_lab.ops.base import (
    READ,
    WRITE,
    ExecuteContext,
    Fit,
    LowerContext,
    SourceWriter,
    StatementOp,
    TraceContext,
)
from mpmd_lab.ops.scratch import BARRIER_DTYPE, SEMAPHORE_DTYPE
from pydantic import Field, StrictBool, StrictFloat, StrictInt, field_validator

#: one warpgroup: a register array's size must be a multiple of this to lower
LANES = 128


class Copy(StatementOp):
    """``dst[...] = src[...]``."""

    PLAIN_STORE: ClassVar[bool] = True
    HELP: ClassVar[str] = "dst[...] = src[...]"
    FAMILY: ClassVar[str] = "memory"
    REFS: ClassVar[tuple[tuple[str, str], ...]] = (("src", READ), ("dst", WRITE))

    op: Literal["copy"]
    src: RefName = Field(description="the ref read")
    dst: RefName = Field(description="the ref written")

    def label(self) -> str:
        return f"{self.dst} <- {self.src}"

    def source(self, g: SourceWriter) -> list[str]:
        return [f"{g.ref(self.dst)}[...] = {g.ref(self.src)}[...]"]

    def trace(self, t: TraceContext) -> bool:
        # the load first, then the store
        if t.use("src") or t.use("dst"):
            return True
        src = t.info("src")
        return t.store("dst", src.shape, src.dtype)

    def lower(self, low: LowerContext) -> bool:
        if low.access("src", "load") or low.access("dst", "store"):
            return True
        info = low.info("src")
        # (the roots' spaces asked only of a copy of booleans: the one rule that reads them)
        if (
            info.dtype == "bool"
            and info.shape
            and low.root_space("src") == low.root_space("dst") == "GMEM"
        ):
            vec = L.strided_vec_size(tuple(info.shape), 1)
            if 0 < vec < 8:  # (0: the size rule's own error)
                low.no_layout(
                    low.path,
                    f"{self.src} holds {vec} booleans per thread and vector, less than a byte: "
                    "no register layout moves it (1024 booleans or more do).",
                )
        return False

    def execute(self, x: ExecuteContext) -> None:
        x.write("dst", x.read("src"))


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    out = []
    for p, q in zip(
        ((1,) * (len(b) - len(a)) + tuple(a)), ((1,) * (len(a) - len(b)) + tuple(b)), strict=False
    ):
        if p != q and 1 not in (p, q):
            return None
        out.append(max(p, q) if 1 in (p, q) else p)
    return tuple(out)


class Add(StatementOp):
    """``dst[...] = lhs[...] + rhs[...]`` (``dst`` may be ``lhs``: an accumulation)."""

    PLAIN_STORE: ClassVar[bool] = True
    HELP: ClassVar[str] = "dst[...] = lhs[...] + rhs[...]"
    FAMILY: ClassVar[str] = "compute"
    REFS: ClassVar[tuple[tuple[str, str], ...]] = (("lhs", READ), ("rhs", READ), ("dst", WRITE))

    op: Literal["add"]
    dst: RefName = Field(description="the ref written")
    lhs: RefName = Field(description="the first addend")
    rhs: RefName = Field(description="the second addend")

    def label(self) -> str:
        return f"{self.dst} <- {self.lhs} + {self.rhs}"

    def source(self, g: SourceWriter) -> list[str]:
        return [f"{g.ref(self.dst)}[...] = {g.ref(self.lhs)}[...] + {g.ref(self.rhs)}[...]"]

    def trace(self, t: TraceContext) -> bool:
        if t.use("lhs") or t.use("rhs"):
            return True
        lhs, rhs = t.info("lhs"), t.info("rhs")
        if _semaphore_operand(t, lhs.dtype, rhs.dtype):
            return True
        shape = _broadcast(lhs.shape, rhs.shape)
        if shape is None:
            if len(lhs.shape) != len(rhs.shape):
                t.jax(
                    "ADD_SHAPE_MISMATCH",
                    t.path,
                    f"Incompatible shapes for broadcasting: shapes=[{lhs.shape!r}, {rhs.shape!r}]",
                    jax_type="ValueError",
                )
            else:
                t.jax(
                    "ADD_SHAPE_MISMATCH",
                    t.path,
                    f"add got incompatible shapes for broadcasting: {lhs.shape!r}, {rhs.shape!r}.",
                    jax_type="TypeError",
                )
            return True
        dtype = dtypes.promote(lhs.dtype, rhs.dtype)
        if lhs.sharded is not None or rhs.sharded is not None:
            # (a global call's loads of sharded inputs carry their sharding: lax's rule)
            operands = [(i.shape, dtypes.short(i.dtype), i.sharded) for i in (lhs, rhs)]
            bad = sharding.broadcast_error("add", operands, dtypes.short(dtype))
            if bad is not None:
                t.jax("VALUE_SHARDING", t.path, bad, jax_type="ShardingTypeError")
                return True
        if t.use("dst"):
            return True
        return t.store("dst", shape, dtype)

    def lower(self, low: LowerContext) -> bool:
        if low.access("lhs", "load") or low.access("rhs", "load"):
            return True
        dtype = dtypes.promote(low.info("lhs").dtype, low.info("rhs").dtype)
        if dtype != "bool" and dtypes.bits(dtype) == 8:
            low.later(
                "p3",
                "GPU_8BIT_ARITH",
                low.path,
                "Pointwise operations on 8-bit types are unsupported (except bitwise "
                "operations). Upcast to a 16- or 32-bit type before performing the operation.",
            )
        return low.access("dst", "store", check_layout=False)

    def execute(self, x: ExecuteContext) -> None:
        import numpy as np

        lhs, rhs = x.read("lhs"), x.read("rhs")
        # jnp's ``+``: numpy's broadcasting and JAX's type promotion (what ``trace`` typed)
        shape = _broadcast(lhs.shape, rhs.shape)
        if shape is None:
            x.fail("SIM_SHAPE_MISMATCH", f"adding {lhs.shape} and {rhs.shape}")
        dtype = dtypes.np_dtype(dtypes.promote(lhs.dtype.name, rhs.dtype.name))
        if not x.data:
            same = lhs.shape == shape and lhs.dtype == dtype
            x.write("dst", lhs if same else x.like(shape, dtype))
            return
        with np.errstate(all="ignore"):
            total = np.add(lhs.astype(dtype), rhs.astype(dtype), dtype=dtype)
        x.write("dst", total)


def _semaphore_operand(t: TraceContext, a: str, b: str) -> bool:
    """``lhs[...] + rhs[...]`` where an operand is a semaphore's value: jnp's dtype checks
    (promotion first when the dtypes differ, then ``add``'s accepted dtypes)."""
    if SEMAPHORE_DTYPE not in (a, b):
        return False
    if a != b:
        t.jax(
            "SEMAPHORE_ARITH",
            t.path,
            f"dtype={SEMAPHORE_DTYPE} is not a valid dtype for JAX type promotion.",
            jax_type="ValueError",
        )
    else:
        t.jax(
            "SEMAPHORE_ARITH",
            t.path,
            f"add does not accept dtype {SEMAPHORE_DTYPE} at position 0. Accepted dtypes at "
            "position 0 are subtypes of integer, floating, complexfloating.",
            jax_type="TypeError",
        )
    return True


def lower_splat_store(low: LowerContext, field: str, what: str) -> bool:
    """The store of a constant into ``field`` (a value in the splat layout: ``what``,
    jnp.full or a value MLIR folds to one): its size is one element or a multiple of
    128, and booleans fill whole bytes of its vectors."""
    dst = low.info(field)
    if low.access(field, "store", check_layout=False, splat=True):
        return True
    if dst.shape and dst.size != 1 and dst.size % LANES:
        low.later(
            "p3",
            "GPU_SPLAT_STORE",
            low.path,
            "Arrays with the splat layout can only be stored when they have a single "
            "element or a multiple of 128 elements",
        )
    elif dst.dtype == "bool" and dst.shape and 0 < L.strided_vec_size(dst.shape, 1) < 8:
        low.later(
            "p3",
            "GPU_BOOL_VECTOR",
            low.path,
            "Vector length should be a multiple of byte size",
            f"{what} stores {dst.size} booleans in vectors of "
            f"{L.strided_vec_size(dst.shape, 1)} per thread, less than a byte (1024 or "
            "more are stored whole bytes at a time).",
        )
    return False


class Fill(StatementOp):
    """``dst[...] = jnp.full(dst.shape, value, dst.dtype)``."""

    PLAIN_STORE: ClassVar[bool] = True

    @classmethod
    def example(cls, fit: Fit) -> dict[str, Any]:
        return {
            "op": "fill",
            "dst": fit.first(fit.outputs, fit.first(fit.refs, "out")),
            "value": 0.0,
        }

    HELP: ClassVar[str] = "dst[...] = a constant"
    FAMILY: ClassVar[str] = "memory"
    REFS: ClassVar[tuple[tuple[str, str], ...]] = (("dst", WRITE),)

    op: Literal["fill"]
    dst: RefName = Field(description="the ref written")
    value: Annotated[StrictInt, Field(gt=-(2**64), lt=2**64)] | StrictFloat | StrictBool = Field(
        description="the constant (a Python float is float32 first)"
    )

    @field_validator("value")
    @classmethod
    def _finite(cls, v: float) -> float:
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError("fill value must be finite")
        return v

    def label(self) -> str:
        return f"{self.dst} <- {self.value!r}"

    def source(self, g: SourceWriter) -> list[str]:
        d = g.ref(self.dst)
        return [f"{d}[...] = jnp.full({d}.shape, {self.value!r}, {d}.dtype)"]

    def trace(self, t: TraceContext) -> bool:
        dst = t.info("dst")
        if not dst.is_ref:
            return t.store_to_array()
        if t.use("dst"):
            return True
        if dst.dtype in (SEMAPHORE_DTYPE, BARRIER_DTYPE):
            # jnp.full(shape, value, dtype) asks the dtype's type rules for ``full``
            owner = "type object 'AbstractSemaphoreTyRules'" if dst.dtype == SEMAPHORE_DTYPE else (
                "'NoneType' object"
            )  # fmt: skip
            t.jax(
                "SEMAPHORE_FILL",
                (*t.path, "dst"),
                f"{owner} has no attribute 'full'",
                jax_type="AttributeError",
                explanation=f"{self.dst} is a {dst.dtype}: it holds no values to fill. "
                "Semaphores start at 0 on every call; change one with semaphore_signal and "
                "semaphore_wait.",
            )
            return True
        # jnp.full(..., dst.dtype) is canonical (no x64): float32 for a float64 output
        return t.store("dst", dst.shape, dtypes.canonical(dst.dtype))

    def lower(self, low: LowerContext) -> bool:
        return lower_splat_store(low, "dst", "jnp.full")

    def execute(self, x: ExecuteContext) -> None:
        from mpmd_lab.memory import fill_value

        dst = x.view("dst")
        if not x.data:
            x.write("dst", x.like(dst.shape, dst.dtype))
            return
        try:
            value = fill_value(self.value, dst.shape, dst.dtype)
        except OverflowError as e:
            x.fail("SIM_UNSUPPORTED", f"jnp.full raises OverflowError: {e}")
        x.write("dst", value)


class Return(StatementOp):
    """``return src[...]``: a kernel that returns a value (JAX rejects it)."""

    HELP: ClassVar[str] = "return a value (JAX rejects it: write an output instead)"
    FAMILY: ClassVar[str] = "memory"
    REFS: ClassVar[tuple[tuple[str, str], ...]] = (("src", READ),)

    op: Literal["return"]
    src: RefName = Field(description="the ref whose value is returned")

    def label(self) -> str:
        return f"return {self.src}"

    def source(self, g: SourceWriter) -> list[str]:
        return [f"return {g.ref(self.src)}[...]"]

    def trace(self, t: TraceContext) -> bool:
        if t.use("src"):  # ``src[...]`` is loaded before anything is returned
            return True
        if t.entry != "pl.kernel":
            return t.end_body()  # plgpu.kernel runs the body in run_scoped: the value is dropped
        program = t.path[2]  # (call.programs[p]...)
        t.jax(
            "MPMD_RETURNS_VALUE",
            t.path,
            f"The kernel function in mpmd_map program{program} at <scenario> should return "
            "None. It returns a PyTree: PyTreeDef(*).",
            fix=Fix(
                description="drop the return statement (write into an output instead)",
                edits=[Edit(op="remove", path=format_path(t.path))],
            ),
        )
        return True

    def lower(self, low: LowerContext) -> bool:
        # (plgpu.kernel: pl.kernel's trace error came first) the load is lowered, its
        # value then dropped: what its view's transforms raise is raised
        return low.dropped_load("src")

    def execute(self, x: ExecuteContext) -> None:
        x.fail("MPMD_RETURNS_VALUE", "the kernel returns a value")


__all__ = ["LANES", "Add", "Copy", "Fill", "Return"]
