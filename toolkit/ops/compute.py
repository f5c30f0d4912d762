"""Compute the collectives need: an atomic add into a (peer's) ref, a reduction loaded
from every device at once (multimem), and a matrix product for the collective matmul.

- ``atomic_add {dst, src}``: ``plgpu.atomic_add(dst, src[...])``;
- ``multimem_load_reduce {src, dst, axes, reduction}``: ``dst[...] =
  plgpu.multimem_load_reduce(src, collective_axes=axes, reduction_op=reduction)``
  (``src`` reduced over every device along ``axes``);
- ``dot {dst, lhs, rhs}``: ``dst[...] = lhs @ rhs`` with float32 accumulation, exported
  in the simplest form the Mosaic GPU lowering accepts: ``plgpu.wgmma`` on SMEM
  operands into a ``plgpu.ACC`` accumulator (``pl.run_scoped``), stored into ``dst``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from mpmd_lab.fields import AxisNames, RefName, axes_tuple
from mpmd_lab.ops.base import READ, WRITE, Fit, StatementOp
from pydantic import Field

REDUCTIONS = ("add", "min", "max", "and", "or", "xor")


class AtomicAdd(StatementOp):
    """``plgpu.atomic_add(dst, src[...])``: ``dst += src``, atomically."""

    HELP: ClassVar[str] = "dst += src, atomically (dst may be a peer's)"
    FAMILY: ClassVar[str] = "compute"
    REFS: ClassVar[tuple[tuple[str, str], ...]] = (("src", READ), ("dst", WRITE))

    op: Literal["atomic_add"]
    dst: RefName = Field(description="a GMEM ref (or a peer's view of one)")
    src: RefName = Field(description="the ref whose value is added")

    def label(self) -> str:
        return f"{self.dst} += {self.src} (atomic)"

    def source(self, g: Any) -> list[str]:
        return [f"plgpu.atomic_add({g.ref(self.dst)}, {g.ref(self.src)}[...])"]


class MultimemLoadReduce(StatementOp):
    """``dst[...] = plgpu.multimem_load_reduce(src, collective_axes, reduction_op)``."""

    HELP: ClassVar[str] = "dst = src reduced over every device along axes (multimem)"
    FAMILY: ClassVar[str] = "compute"
    REFS: ClassVar[tuple[tuple[str, str], ...]] = (("src", READ), ("dst", WRITE))

    op: Literal["multimem_load_reduce"]
    src: RefName = Field(description="a GMEM ref, read on every device along axes")
    dst: RefName = Field(description="the ref written with the reduction")
    axes: AxisNames = Field(description="device-mesh axes to reduce over")
    reduction: Literal[REDUCTIONS] = Field(  # type: ignore[valid-type]
        "add", description="add, min, max, and, or, xor"
    )

    def label(self) -> str:
        return f"{self.dst} <- {self.reduction}({self.src}) over {','.join(axes_tuple(self.axes))}"

    def source(self, g: Any) -> list[str]:
        return [
            f"{g.ref(self.dst)}[...] = plgpu.layout_cast(",
            f"    plgpu.multimem_load_reduce({g.ref(self.src)}, "
            f"collective_axes={g.axes(self.axes)}, reduction_op={self.reduction!r}),",
            f"    plgpu.Layout.WG_STRIDED({g.ref(self.dst)}.shape, vec_size=1),",
            ")",
        ]


class Dot(StatementOp):
    """``dst[...] = lhs @ rhs`` (float32 accumulation; WGMMA on SMEM operands)."""

    @classmethod
    def example(cls, fit: Fit) -> dict[str, Any]:
        return {
            "op": "dot",
            "dst": fit.first(fit.outputs, "out"),
            "lhs": fit.first(fit.smem, "a_smem"),
            "rhs": fit.first(fit.smem[1:], "b_smem"),
        }

    HELP: ClassVar[str] = "dst = lhs @ rhs (WGMMA on SMEM operands, f32 accumulator)"
    FAMILY: ClassVar[str] = "compute"
    REFS: ClassVar[tuple[tuple[str, str], ...]] = (("lhs", READ), ("rhs", READ), ("dst", WRITE))

    op: Literal["dot"]
    dst: RefName = Field(description="the ref written with the product (float32)")
    lhs: RefName = Field(description="an SMEM ref [M, K]")
    rhs: RefName = Field(description="an SMEM ref [K, N]")

    def label(self) -> str:
        return f"{self.dst} <- {self.lhs} @ {self.rhs}"

    def source(self, g: Any) -> list[str]:
        acc = g.fresh("acc")
        fn = g.fresh("mma")
        return [
            f"def {fn}({acc}):",
            f"    plgpu.wgmma({acc}, {g.ref(self.lhs)}, {g.ref(self.rhs)})",
            f"    return {acc}[...]",
            "",
            f"{g.ref(self.dst)}[...] = pl.run_scoped(",
            f"    {fn}, plgpu.ACC(({g.ref(self.lhs)}.shape[0], {g.ref(self.rhs)}.shape[1]), "
            "jnp.float32)",
            ")",
        ]


__all__ = ["REDUCTIONS", "AtomicAdd", "Dot", "MultimemLoadReduce"]


# ---------------------------------------------------------------- simulated (mpmd_lab.engine)
# What each op does when simulated: its ``execute`` (kept together here, apart from the
# JAX-facing rules above).

_REDUCE = {
    "add": "add",
    "min": "minimum",
    "max": "maximum",
    "and": "bitwise_and",
    "or": "bitwise_or",
    "xor": "bitwise_xor",
}


def _atomic_add_execute(self: AtomicAdd, x: Any) -> None:
    """``dst += src`` as one atomic update (atomics do not race with each other)."""
    x.atomic_add("dst", x.read("src"))


def _multimem_load_reduce_execute(self: MultimemLoadReduce, x: Any) -> None:
    """``src`` read on every device along ``axes`` (this one included), reduced in device
    order, stored into ``dst``."""
    import numpy as np

    axes = axes_tuple(self.axes)
    for a in axes:
        if a not in x.mesh:
            x.fail("DEVICE_ID_UNKNOWN_AXIS", f"no device axis {a!r}")
    values = x.read_all("src", axes)
    first = values[0]
    if self.reduction in ("and", "or", "xor") and np.dtype(first.dtype).kind not in "biu":
        x.fail("SIM_UNSUPPORTED", f"a bitwise {self.reduction} reduction of {first.dtype}")
    if not x.data:
        x.write("dst", first)
        return
    fn = getattr(np, _REDUCE[self.reduction])
    total = values[0]
    with np.errstate(all="ignore"):
        for v in values[1:]:
            total = fn(total, v).astype(first.dtype)
    x.write("dst", np.asarray(total, first.dtype))


def _dot_execute(self: Dot, x: Any) -> None:
    """``dst = lhs @ rhs``, the products summed in float32 (the WGMMA accumulator)."""
    import numpy as np

    lhs, rhs = x.read("lhs"), x.read("rhs")
    if len(lhs.shape) != 2 or len(rhs.shape) != 2 or lhs.shape[1] != rhs.shape[0]:
        x.fail("SIM_SHAPE_MISMATCH", f"a matrix product of {lhs.shape} and {rhs.shape}")
    dst = x.view("dst")
    shape = (lhs.shape[0], rhs.shape[1])
    if not x.data:
        x.write("dst", x.like(shape, dst.dtype))
        return
    with np.errstate(all="ignore"):
        acc = np.matmul(lhs.astype(np.float32), rhs.astype(np.float32), dtype=np.float32)
    x.write("dst", acc.astype(dst.dtype))


AtomicAdd.execute = _atomic_add_execute  # type: ignore[method-assign]
MultimemLoadReduce.execute = _multimem_load_reduce_execute  # type: ignore[method-assign]
Dot.execute = _dot_execute  # type: ignore[method-assign]
