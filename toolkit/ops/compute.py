"""Compute the collectives need: an atomic add into a (peer's) ref, a reduction loaded
from every device at once (multimem), and a matrix product for the collective matmul.

- ``atomic_add {dst, src}``: ``plgpu.atomic_add(dst, src[...])``;
- ``multimem_load_reduce {src, dst, axes, reduction}``: ``dst[...] =
  plgpu.multimem_load_reduce(src, collective_axes=axes, reduction_op=reduction)``
  (``src`` reduced over every device along ``axes``);
- ``dot {dst, lhs, rhs}``: ``dst[...] = lhs @ rhs`` with float32 accumulation, exported
  in the simplest form the Mosaic GPU lowering accepts: ``plgpu.wgmma`` on SMEM
  operands into a ``plgpu.ACC`` accumulator (``pl.run_scoped``), stored into ``dst``;
- ``compute {dst, value}``: ``dst[...] = value``, an elementwise value computed in
  registers (the value language is :mod:`mpmd_lab.ops.values`).
"""

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Literal, NamedTuple

from mpmd_lab import dtypes
from mpmd_lab import expr as E
from mpmd_lab import layout_rules as L
from mpmd_lab.fields import AxisNames, RefName, axes_tuple, sub_path
from mpmd_lab.ops import values as V
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
from mpmd_lab.ops.statements import LANES, lower_splat_store
from pydantic import Field

REDUCTIONS = ("add", "min", "max", "and", "or", "xor")


class AtomicAdd(StatementOp):
    """``plgpu.atomic_add(dst, src[...])``: ``dst += src``, atomically."""

    HELP: ClassVar[str] = "dst += src, atomically (dst may be a peer's)"
    FAMILY: ClassVar[str] = "compute"
    INTERPRET_LIMITS: ClassVar[dict[str, str]] = {
        "gpu": "The GPU interpreter misreads plgpu.atomic_add (it fails with a swap of the "
        "wrong shape).",
        "hlo": "The HLO interpreter misreads plgpu.atomic_add (it fails unpacking its operands).",
    }
    REFS: ClassVar[tuple[tuple[str, str], ...]] = (("src", READ), ("dst", WRITE))

    op: Literal["atomic_add"]
    dst: RefName = Field(description="a GMEM ref (or a peer's view of one)")
    src: RefName = Field(description="the ref whose value is added")

    def label(self) -> str:
        return f"{self.dst} += {self.src} (atomic)"

    def source(self, g: SourceWriter) -> list[str]:
        return [f"plgpu.atomic_add({g.ref(self.dst)}, {g.ref(self.src)}[...])"]

    def trace(self, t: TraceContext) -> bool:
        """The value is loaded, then ``atomic_store``'s abstract eval: shape, then dtype
        (strict: no implicit integer cast, unlike a plain store)."""
        if t.use("src") or t.use("dst"):
            return True
        src, dst = t.info("src"), t.info("dst")
        if not dst.is_ref:
            return t.store_to_array()
        if src.shape != dst.shape:
            t.jax(
                "SWAP_SHAPE_MISMATCH",
                t.path,
                f"Invalid shape for `swap`. Ref shape: {tuple(dst.shape)!r}. Value shape: "
                f"{tuple(src.shape)!r}.",
            )
            return True
        if src.dtype != dst.dtype:
            t.jax(
                "SWAP_DTYPE_MISMATCH",
                t.path,
                f"Invalid dtype for `swap`. Ref dtype: {dst.dtype}. Value dtype: {src.dtype}.",
            )
            return True
        return False

    def lower(self, low: LowerContext) -> bool:
        # the value's load, then the atomic store (a peer's ref is fine, a multicast not)
        return low.access("src", "load") or low.access("dst", "store")

    def execute(self, x: ExecuteContext) -> None:
        """``dst += src`` as one atomic update (atomics do not race with each other)."""
        x.atomic_add("dst", x.read("src"))


class MultimemLoadReduce(StatementOp):
    """``dst[...] = plgpu.multimem_load_reduce(src, collective_axes, reduction_op)``."""

    HELP: ClassVar[str] = "dst = src reduced over every device along axes (multimem)"

    def cross_device(self) -> bool:
        return True

    FAMILY: ClassVar[str] = "compute"
    INTERPRET_LIMITS: ClassVar[dict[str, str]] = {
        "gpu": "The GPU interpreter cannot run multimem_load_reduce (TypeError: ref must be a "
        "reference).",
        "hlo": "The HLO interpreter has no rule for multimem_load_reduce.",
    }
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

    def source(self, g: SourceWriter) -> list[str]:
        return [
            f"{g.ref(self.dst)}[...] = plgpu.layout_cast(",
            f"    plgpu.multimem_load_reduce({g.ref(self.src)}, "
            f"collective_axes={g.axes(self.axes)}, reduction_op={self.reduction!r}),",
            f"    plgpu.Layout.WG_STRIDED({g.ref(self.dst)}.shape, vec_size=1),",
            ")",
        ]

    def trace(self, t: TraceContext) -> bool:
        """``multimem_load_reduce``'s abstract eval (a GMEM ref), then the store of the
        reduced value into ``dst``."""
        src = t.info("src")
        if not src.is_ref:
            t.jax(
                "MULTIMEM_DST_NOT_GMEM",
                (*t.path, "src"),
                f"ref must be a reference, got {src.dtype}[{','.join(map(str, src.shape))}]",
                jax_type="TypeError",
            )
            return True
        if t.root_space("src") != "GMEM":
            t.jax(
                "MULTIMEM_DST_NOT_GMEM",
                (*t.path, "src"),
                f"ref must be a GMEM reference, got {t.base_type('src')}",
            )
            return True
        if t.use("src") or t.use("dst"):
            return True
        return t.store("dst", src.shape, src.dtype)

    def lower(self, low: LowerContext) -> bool:
        """The device mesh and the axes, the ref's transforms (no peer, no multicast);
        what the reduction supports is checked when the module is verified; the layout
        cast wants a multiple of 128 elements (one per thread of the warpgroup)."""
        if low.collective(self.axes, "multimem_load_reduce"):
            return True
        if low.multimem_ref("src"):
            return True
        src = low.info("src")
        why = _reduction_problem(self.reduction, src.dtype)
        if why:
            low.later(
                "p1",
                "GPU_VERIFICATION",
                low.path,
                "Pallas encountered an internal verification error. Please file a bug at "
                "https://github.com/jax-ml/jax/issues/new/choose. Error details: "
                f"'mosaic_gpu.multimem_load_reduce' op {why}",
                f"multimem_load_reduce cannot {self.reduction}-reduce {src.dtype}: {why} "
                "(float32 reduces with add only; 16-bit floats with add, min, max; "
                "integers of 32 or 64 bits with any reduction).",
            )
        if src.size % LANES:
            low.later(
                "p1",
                "GPU_WG_STRIDED_SIZE",
                low.path,
                f"(WGStridedFragLayout(shape={tuple(src.shape)!r}, vec_size=1), {LANES})",
                f"The reduced value is laid out over the {LANES} threads of a warpgroup "
                f"(WG_STRIDED); {src.size} elements are not a multiple of {LANES}.",
            )
        elif dtypes.bits(src.dtype) < 32:
            low.later(
                "p3",
                "MULTIMEM_LOAD_WIDTH",
                low.path,
                "Only 32-, 64- and 128-bit loads are supported",
                f"Each thread loads one {src.dtype} element ({dtypes.bits(src.dtype)} bits); "
                "multimem loads move 32, 64 or 128 bits per thread.",
            )
        return low.access("dst", "store", check_layout=False)

    def execute(self, x: ExecuteContext) -> None:
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
    SMEM_LAYOUT_FROM_USE: ClassVar[tuple[str, ...]] = ("lhs", "rhs")

    op: Literal["dot"]
    dst: RefName = Field(description="the ref written with the product (float32)")
    lhs: RefName = Field(description="an SMEM ref [M, K]")
    rhs: RefName = Field(description="an SMEM ref [K, N]")

    def label(self) -> str:
        return f"{self.dst} <- {self.lhs} @ {self.rhs}"

    def source(self, g: SourceWriter) -> list[str]:
        acc = g.fresh("acc")
        fn = g.fresh("mma")
        return [
            f"def {fn}({acc}):",
            f"    plgpu.wgmma({acc}, {g.ref(self.lhs)}, {g.ref(self.rhs)})",
            f"    return {acc}[...]",
            "",
            f"{g.ref(self.dst)}[...] = pl.run_scoped(",
            f"    {fn}, plgpu.ACC(({g.ref(self.lhs)}.shape[0], {g.ref(self.rhs)}.shape[-1]), "
            "jnp.float32)",
            ")",
        ]

    def trace(self, t: TraceContext) -> bool:
        """``plgpu.wgmma``'s checks (two 2-D operands, K agreeing, one dtype), then the
        store of the float32 accumulator ``[M, N]`` into ``dst``."""
        if t.use("lhs") or t.use("rhs"):
            return True
        lhs, rhs = t.info("lhs"), t.info("rhs")
        for field, info in (("lhs", lhs), ("rhs", rhs)):
            if len(info.shape) != 2:
                msg = (
                    "too many values to unpack (expected 2)"
                    if len(info.shape) > 2
                    else f"not enough values to unpack (expected 2, got {len(info.shape)})"
                )
                t.jax("DOT_RANK", sub_path(t.path, field), msg)
                return True
        (m, k), (k2, n) = lhs.shape, rhs.shape
        if k != k2:
            t.jax(
                "DOT_SHAPE_MISMATCH",
                t.path,
                f"Incompatible shapes for matrix multiplication: lhs={tuple(lhs.shape)!r}, "
                f"rhs=b.shape={tuple(rhs.shape)!r}, acc={(m, n)!r}",
            )
            return True
        fp8 = ("float8_e4m3fn", "float8_e5m2")
        if lhs.dtype != rhs.dtype and not (lhs.dtype in fp8 and rhs.dtype in fp8):
            t.jax(
                "DOT_DTYPE_MISMATCH",
                t.path,
                "Mixed input dtypes for matrix multiplication unsupported: "
                f"lhs={lhs.dtype}, rhs={rhs.dtype}",
            )
            return True
        if t.use("dst"):
            return True
        return t.store("dst", (m, n), "float32")

    def lower(self, low: LowerContext) -> bool:
        """WGMMA as the Mosaic GPU lowering takes it: the module's verifier (M a multiple
        of 64), layout and transform inference (operands in SMEM, tileable), the dialect
        lowering (16-bit operands, N at most 256)."""
        lhs, rhs = low.info("lhs"), low.info("rhs")
        m, n = lhs.shape[0], rhs.shape[1]
        if m % 64:
            low.later(
                "p1",
                "GPU_VERIFICATION",
                low.path,
                "Pallas encountered an internal verification error. Please file a bug at "
                "https://github.com/jax-ml/jax/issues/new/choose. Error details: "
                "'mosaic_gpu.wgmma' op The accumulator's first dimension must be a multiple "
                f"of 64, but got {m}.",
                f"A WGMMA computes 64-row tiles: lhs has {m} rows.",
            )
        for field, info in (("lhs", lhs), ("rhs", rhs)):
            space = low.root_space(field)
            if space != "SMEM":
                if field == "lhs":
                    low.later(
                        "p2",
                        "DOT_OPERAND_NOT_SMEM",
                        (*low.path, "lhs"),
                        "Unsupported memory space for: "
                        f"memref<{'x'.join(map(str, info.shape))}x{_mlir(info.dtype)}>",
                        "plgpu.wgmma reads its operands from shared memory: copy lhs into SMEM "
                        "first (copy_gmem_to_smem).",
                    )
                else:
                    low.later(
                        "p2",
                        "GPU_CLUSTER_GMEM",
                        (*low.path, "rhs"),
                        "ValueSite(operation=<UnrealizedConversionCastOp>, "
                        "type=<VariableType.RESULT: 1>, index=0, region_index=None)",
                        "plgpu.wgmma reads its operands from shared memory: rhs is in GMEM, "
                        "and layout inference fails with an internal KeyError. Copy it into "
                        "SMEM first (copy_gmem_to_smem).",
                    )
                return False
        for field in ("lhs", "rhs"):
            if low.mma_operand(field):  # (its view's steps, commuted past its scratch's layout)
                return True
        mine = [_mma_operand(low, field) for field in ("lhs", "rhs")]
        a_op, b_op = mine
        k_group = 0  # (K elements a swizzle's group of instructions takes; 0: not known)
        if a_op is None or b_op is None:  # (a view or a layout of another form)
            for field, info in (("lhs", lhs), ("rhs", rhs)):
                if _scratch_transforms(low, field):
                    continue  # the user's own tiling and swizzle (of the scratch under the view)
                if not _mma_tilings(info.shape, dtypes.bits(info.dtype), False):
                    _no_mma_tiling(low, field, info, False)
                    return False
        else:
            # layout inference asks rhs for an MMA tiling (``mma_tiling_constraint``: 8
            # rows of a swizzle's width, 128, 64 or 32 bytes, the other way round for a
            # transposed view; none divides it: its ValueError; the user's own must be
            # one), and lhs for rhs's (``Equals``; transposed where exactly one operand
            # is): where lhs's own differ, or none of rhs's divides lhs, it finds none
            # (a window's subview asks its tiling to divide the window's offsets and
            # sizes: ``Divides`` of each operand's ``multiples``)
            rhs_fits = _mma_tilings(rhs.shape, dtypes.bits(rhs.dtype), b_op.transposed)
            if not rhs_fits:
                _no_mma_tiling(low, "rhs", rhs, b_op.transposed)
                return False
            wanted = [
                (tile if a_op.transposed == b_op.transposed else (tile[1], tile[0]), sw)
                for tile, sw in rhs_fits
                if b_op.layout in (None, (tile, sw)) and _divides(tile, b_op.multiples)
            ]
            if a_op.layout is not None:
                fits = [w for w in wanted if w == a_op.layout]
            else:
                fits = [w for w in wanted if _divides(w[0], lhs.shape)]
            fits = [w for w in fits if _divides(w[0], a_op.multiples)]
            if not fits:
                low.no_layout(
                    sub_path(low.path, "lhs"),
                    "A WGMMA's lhs takes rhs's SMEM tiling and swizzle: lhs "
                    f"{list(lhs.shape)} of {lhs.dtype} (its scratch's own or one that fits "
                    f"it) and rhs {list(rhs.shape)} share none (8 rows of 32, 64 or 128 "
                    "bytes, swizzled as wide).",
                )
                return False
            # (the widest layout that fits is layout inference's: fits[0])
            k_group = fits[0][1] * 8 // dtypes.bits(lhs.dtype)
        k = lhs.shape[1]
        if lhs.dtype in ("int8", "uint8"):
            signed = lhs.dtype == "int8"
            low.later(
                "p3",
                "DOT_INT_ACC",
                low.path,
                "is_signed must be non-None if and only if the MLIR type is an integer type, "
                f"got _is_signed={signed} for f32",
                f"An {lhs.dtype} WGMMA accumulates in int32, but `dot` accumulates in "
                "float32: multiply 16-bit floats instead.",
            )
        elif k_group and k % k_group and n <= 256 and n % 8 == 0:
            # (after N's check, before the transposes': WGMMA issues K in groups of the
            # swizzle's width; an lhs stored [K, M] is tiled along M, so K escapes it)
            low.later(
                "p3",
                "DOT_K_MULTIPLE",
                (*low.path, "lhs"),
                f"K must be a multiple of {k_group}, got: {k}",
                f"WGMMA takes K in groups of the operands' swizzle "
                f"({k_group * dtypes.bits(lhs.dtype) // 8} bytes: "
                f"{k_group} {lhs.dtype} elements); lhs is a transposed view, so its "
                f"layout does not tile K = {k}: make K a multiple of {k_group}.",
            )
        elif lhs.dtype in ("float32", "float8_e4m3fn", "float8_e5m2") and (
            # (the dialect's transposes: an lhs stored [K, M], an rhs stored [K, N])
            a_op is None or b_op is None or a_op.transposed or not b_op.transposed
        ):
            low.later(
                "p3",
                "DOT_DTYPE",
                low.path,
                "Only f16 WGMMA supports transposes",
                f"WGMMA on {lhs.dtype} operands needs a K-major (transposed) rhs; with an "
                "[K, N] rhs only 16-bit operands (float16, bfloat16) lower.",
            )
        elif n > 256 or n % 8:
            low.later(
                "p3",
                "DOT_N_TOO_LARGE",
                (*low.path, "rhs"),
                f"N must be a multiple of 8 and <= 256, got: {n}",
                "One WGMMA produces at most 256 columns: split the product along N.",
            )
        return low.access("dst", "store", check_layout=False)

    def execute(self, x: ExecuteContext) -> None:
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


def _no_mma_tiling(low: LowerContext, field: str, info: Any, transposed: bool) -> None:
    """``mma_tiling_constraint``'s ValueError: no MMA tiling divides the operand (its
    message names the last candidate, 8 rows of 32 bytes, transposed with the view)."""
    width = 32 * 8 // dtypes.bits(info.dtype)
    last = (width, 8) if transposed else (8, width)
    low.later(
        "p2",
        "DOT_SMEM_TILING",
        sub_path(low.path, field),
        f"No valid tiling found for SMEM reference. {tuple(info.shape)!r} not "
        f"divisible by candidate tiling {last!r}",
        f"WGMMA operands are tiled (8, 32..128 bytes) in SMEM: {field} "
        f"{list(info.shape)} of {info.dtype} fits no such tiling.",
    )


_Layout = tuple[tuple[int, int], int]


def _divides(tile: tuple[int, int], shape: Sequence[int]) -> bool:
    """The tile divides ``shape`` (its two dims; 0 is a multiple of any)."""
    return shape[0] % tile[0] == 0 and shape[1] % tile[1] == 0


def _mma_tilings(shape: Sequence[int], bits: int, transposed: bool) -> list[_Layout]:
    """The MMA SMEM layouts (``mma_tiling_constraint``: a tile of 8 rows of 128, 64 or 32
    bytes, swizzled as wide; of as many columns for a transposed view) whose tile
    divides an operand (a view) of ``shape``."""
    out = []
    for sw in (128, 64, 32):
        tile = (sw * 8 // bits, 8) if transposed else (8, sw * 8 // bits)
        if _divides(tile, shape):
            out.append((tile, sw))
    return out


class _MmaOperand(NamedTuple):
    """A WGMMA operand as layout inference sees it: whether its view transposes its
    scratch, its scratch's own layout as the view sees it (tile, swizzle; None: the
    scratch declares none), and what its windows ask the tile to divide (a subview's
    ``Divides``: the gcd of each window's offset, size and dim; 0: nothing)."""

    transposed: bool
    layout: _Layout | None
    multiples: tuple[int, int]


def _mma_operand(low: LowerContext, field: str) -> _MmaOperand | None:
    """A WGMMA operand that is SMEM scratch, or windows and transposes of
    it, whose scratch declares no layout or a 2-D tiling then a swizzle (None: another,
    which the per-operand rule keeps)."""
    b = low.binding(field)
    name = b.origin[0][8:] if b.origin and b.origin[0].startswith("scratch:") else ""
    sc = low.ctx.s.call.scratch.get(name)
    if sc is None or len(sc.shape) < 2:
        return None
    transposed = False
    shape = list(sc.shape)
    multiples = [0, 0]  # (of the two minor dims of the view so far)
    for _, t in b.stack:
        if t.LOWERS_AS == "transpose" and len(shape) == 2:
            transposed ^= list(t.perm) == [1, 0]
            shape.reverse()
            multiples.reverse()
            continue
        window = _window(t, shape)
        if window is None:
            return None
        shape = [size for size, kept in window if kept]
        for i in (-2, -1):
            multiples[i] = math.gcd(multiples[i], window[i][0])
    stack = list(sc.transforms)
    if len(shape) != 2:
        return None
    if not stack:
        return _MmaOperand(transposed, None, (multiples[0], multiples[1]))
    if [t.LOWERS_AS for t in stack] != ["tiling", "swizzle"] or len(stack[0].tile) != 2:
        return None
    rows, cols = stack[0].tile
    tile = (cols, rows) if transposed else (rows, cols)
    return _MmaOperand(transposed, (tile, stack[1].bytes), (multiples[0], multiples[1]))


def _window(t: Any, shape: Sequence[int]) -> list[tuple[int, bool]] | None:
    """An index step of static slices (and integers before the two minor dims) as the
    subview the lowering makes of a view of ``shape``: per dim, the gcd of its offset,
    size and dim (what a tiling of the view must divide), and whether it stays (None:
    another step, a strided slice, or an integer in the minor dims)."""
    if t.LOWERS_AS != "index":
        return None
    # (an index step resolved as the lowering reads it; its dtype does not matter)
    entries = L.jax_transforms(tuple(shape), "float32", [], [t])
    if not entries or len(entries) != 1 or entries[0].kind != "index":
        return None
    idx, _ = entries[0].value
    out = []
    for d, (ix, dim) in enumerate(zip(idx, shape, strict=False)):
        if ix.kind == "int":
            if d >= len(shape) - 2:
                return None
            out.append((1, False))
        elif ix.stride != 1:
            return None
        elif ix.start is None:  # (traced: the gcd layout inference proves of it)
            start = t.entries()[d].start
            out.append((_dynamic_gcd(math.gcd(ix.size, dim), start), True))
        else:
            out.append((math.gcd(ix.start, ix.size, dim), True))
    out += [(dim, True) for dim in shape[len(idx) :]]
    return out


def _dynamic_gcd(a: int, start: E.Expr) -> int:
    """Layout inference's ``dynamic_gcd``: the product of ``a``'s prime factors, taken
    in turn while the traced ``start`` is still known to divide by them."""
    out, n, p = 1, a, 2
    factors = []
    while p * p <= n:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    if n > 1:
        factors.append(n)
    for f in factors:
        if _known_divisible(start, out * f):
            out *= f
    return out


def _known_divisible(e: E.Expr, d: int) -> bool:
    """Mosaic GPU's ``is_known_divisible`` of the value ``e`` lowers to (after MLIR's
    canonicalizer folds a product's constant factors into one): a constant, a product
    whose constant or one other factor is, a sum, difference or remainder of two that
    are (a program id or a loop index alone: not known)."""
    if d == 1:
        return True
    if isinstance(e, E.Const):
        return e.value % d == 0
    if isinstance(e, E.BinOp) and e.op == "*":
        factors = list(_factors(e))
        const = math.prod(f.value for f in factors if isinstance(f, E.Const))
        return const % d == 0 or any(
            _known_divisible(f, d) for f in factors if not isinstance(f, E.Const)
        )
    if isinstance(e, E.BinOp) and e.op in ("+", "-", "%"):
        return _known_divisible(e.a, d) and _known_divisible(e.b, d)
    return False


def _factors(e: E.Expr) -> Iterator[E.Expr]:
    """The factors of a product of products."""
    if isinstance(e, E.BinOp) and e.op == "*":
        yield from _factors(e.a)
        yield from _factors(e.b)
    else:
        yield e


def _reduction_problem(reduction: str, dtype: str) -> str:
    """What the ``multimem_load_reduce`` op's verifier says of a reduction and dtype."""
    if dtype.startswith(("float", "bfloat")):
        if reduction not in ("add", "min", "max"):
            return "Only Add, Max and Min reductions are supported on float source."
        if dtype == "float32" and reduction != "add":
            return "Only Add is supported for F32 source type."
        return ""
    if dtypes.bits(dtype) not in (32, 64) or dtype == "bool":
        return "Only supported 32 and 64 bit integer operations"
    return ""


_MLIR = {
    "float32": "f32",
    "float16": "f16",
    "bfloat16": "bf16",
    "float64": "f64",
    "int8": "i8",
    "uint8": "i8",
    "int16": "i16",
    "uint16": "i16",
    "int32": "i32",
    "uint32": "i32",
    "int64": "i64",
    "bool": "i1",
    "float8_e4m3fn": "f8E4M3FN",
    "float8_e5m2": "f8E5M2",
}


def _mlir(dtype: str) -> str:
    """A dtype as an MLIR type prints (``f16``, ``i32``)."""
    return _MLIR.get(dtype, dtype)


def _scratch_transforms(low: LowerContext, field: str) -> bool:
    b = low.binding(field)
    name = b.origin[0][8:] if b.origin and b.origin[0].startswith("scratch:") else ""
    sc = low.ctx.s.call.scratch.get(name)
    return bool(sc is not None and sc.transforms)


def trace_value(t: TraceContext, tree: V.Node) -> V.Ty | None:
    """A computed value's abstract eval: its loads (in order) and semaphore reads, then its
    shape and dtype rules. Its type, or None where an error stops it."""
    refs: dict[str, V.Loaded] = {}
    for name in dict.fromkeys(tree.loads()):
        if t.use(f"value.{name}"):
            return None
        info = t.info(f"value.{name}")
        refs[name] = (tuple(info.shape), info.dtype, info.sharded)
    for name in dict.fromkeys(r.name for r in tree.sem_reads()):
        if t.use(f"value.{name}"):  # (JAX's semaphore_read checks nothing at trace)
            return None
    try:
        return tree.typed(refs)
    except V.ValueTypeError as e:
        t.jax(e.code, (*t.path, "value"), e.message, jax_type=e.jax_type)
        return None


def lower_value(
    low: LowerContext, tree: V.Node, stored_as_is: Callable[[], bool] | None = None
) -> dict[str, tuple[tuple[int, ...], str]] | None:
    """A computed value's lowering: each load and semaphore read, the bitcasts (one width
    only), the reductions, the arithmetic (none on 8-bit values). The loaded refs' shapes
    and dtypes, or None where an error stops it. ``stored_as_is``: whether a boolean load
    is stored as it is (asked only of such a load).

    MLIR folds the value's constant parts (``Node.constant``: an integer times 0, ...)
    after the lowering rules and before layout inference: the later phases see only the
    operations left (``_live``), and a load only they used is dropped."""
    refs = _loaded(low, tree)
    live = list(_live(tree, refs))
    kept = {n.name for n in live if isinstance(n, V.Load)}
    for name in refs:
        field = f"value.{name}"
        if low.access(field, "load") if name in kept else low.dropped_load(field):
            return None
    # (a value that broadcasts an array takes the broadcast's layout, in which a boolean
    # load's vectors hold less than a byte)
    broadcasts = any(_broadcast_operands(n, refs) for n in live)
    for name, (shape, dtype) in refs.items():
        if name not in kept:
            continue  # (folded away: no load to lay out)
        if dtype == "bool" and shape and (broadcasts or _vector(shape, "bool") < 8):
            if stored_as_is is not None and stored_as_is():
                # loaded and stored as it is: layout inference finds no layout for it
                low.no_layout(
                    (*low.path, "value"),
                    f"{name} holds {_vector(shape, 'bool')} booleans per thread and "
                    "vector, less than a byte: no register layout moves it.",
                )
            else:
                _bool_vector(low, (*low.path, "value"), f"a load of {name}")
    for name in dict.fromkeys(r.name for r in tree.sem_reads()):
        if low.root_space(f"value.{name}") == "SMEM":
            low.jax(
                "SEMAPHORE_READ_SMEM",
                (*low.path, "value"),
                "No layout inference rule defined for %0 = unrealized_conversion_cast "
                "... : memref<..., #gpu.address_space<workgroup>> to !llvm.struct<...>",
                explanation=f"pl.semaphore_read reads a word of GMEM by its address; "
                f"{name!r} is in shared memory, which the lowering cannot address that "
                "way. Read a semaphore (plgpu.SemaphoreType.REGULAR, pl.get_global).",
            )
            return None
    # the lowering rules' own errors, in the order JAX lowers the value's operations
    for node in _operations(tree):
        for operand, to in node.conversions(refs):
            was = operand.typed(refs).dtype
            if was in _FLOAT8 and to in _FLOAT8:
                low.jax(
                    "GPU_FLOAT8_CAST",
                    (*low.path, "value"),
                    "Conversion between float types of width other than 16 not supported",
                    jax_type="NotImplementedError",
                    explanation=f"{operand.source(V.LABEL)} is converted from {was} to {to}: "
                    "the Mosaic GPU lowering converts between floats of one width only "
                    "through float32, which it does for 16-bit floats only. Convert "
                    f"through float16: .astype(jnp.float16).astype(jnp.{to}).",
                )
                return None
        if (
            isinstance(node, V.Bin)
            and node.op in ("max", "min")
            and (V.promote(node.a.typed(refs), node.b.typed(refs))[0] == "bool")
        ):
            low.jax(
                "GPU_BOOL_MINMAX",
                (*low.path, "value"),
                f"{node.op} does not support bool and bool",
                jax_type="NotImplementedError",
                explanation=f"{node.source(V.LABEL)} takes the {node.op}imum of booleans "
                f"(lax.{node.op}); the Mosaic GPU lowering computes it of numbers only. "
                "Combine masks with | (maximum) or & (minimum), or compare numbers.",
            )
            return None
        if isinstance(node, V.Bitcast) and (src := node.widths_differ(refs)) is not None:
            new = dtypes.canonical(node.dtype)
            low.jax(
                "GPU_BITCAST_WIDTH",
                (*low.path, "value"),
                f"Cannot bitcast from {src} to {new} because they have different widths",
                jax_type="NotImplementedError",
                explanation=f"Mosaic GPU bitcasts a value only between dtypes of one "
                f"width; {src} is {dtypes.bits(src)} bits, {new} {dtypes.bits(new)}.",
            )
            return None
        if isinstance(node, V.Bitcast) and not node.a.typed(refs).shape:
            # (of one width: the bitcast's shape is its operand's)
            new = dtypes.canonical(node.dtype)
            low.jax(
                "GPU_SCALAR_BITCAST",
                (*low.path, "value"),
                f"Scalars must be represented by non-vector types, got: vector<{_mlir(new)}>",
                jax_type="AssertionError",
                explanation=f"{node.source(V.LABEL)} bitcasts a scalar: the Mosaic GPU "
                "lowering (warpgroup semantics) makes every bitcast a vector, a 0-d one "
                "here, where a scalar must stay a scalar, and fails its own assertion. "
                "Bitcast an array (a load of shape (1,) or more), or compute the scalar "
                "from numbers.",
            )
            return None
        if (
            isinstance(node, V.Reduce)
            and node.fn in ("max", "min")
            and node.a.typed(refs).dtype == "bool"
        ):
            low.jax(
                "GPU_REDUCE_BOOL",
                (*low.path, "value"),
                "Unsupported dtype bool",
                jax_type="NotImplementedError",
                explanation=f"{node.source(V.LABEL)} takes the {node.fn}imum of booleans; "
                "the Mosaic GPU lowering reduces numbers only. Reduce the mask as numbers "
                "(.astype(jnp.int32)) and compare the result.",
            )
            return None
        scalar = _selects_by_a_scalar(node, refs)
        if scalar:
            low.jax(
                "GPU_WHERE_BROADCAST",
                (*low.path, "value"),
                "Implicit broadcast not implemented with warpgroup semantics",
                jax_type="NotImplementedError",
                explanation=f"{node.source(V.LABEL)} selects between arrays by {scalar}, a "
                "scalar: jax.numpy hands lax.select a scalar condition as it is, and the "
                "Mosaic GPU lowering (warpgroup semantics) selects only between operands "
                "of the result's shape.",
            )
            return None
    for node in _operations(tree):
        if isinstance(node, V.Reduce) and not node.a.typed(refs).shape:
            low.later(  # (verifying the module the lowering rules built)
                "p1",
                "GPU_VERIFICATION",
                (*low.path, "value"),
                "Pallas encountered an internal verification error. Please file a bug at "
                "https://github.com/jax-ml/jax/issues/new/choose. Error details: "
                "'vector.shape_cast' op operand #0 must be vector of any non-token type "
                f"values, but got '{_mlir(node.computed_in(node.a.typed(refs).dtype))}'",
                f"{node.source(V.LABEL)} reduces a scalar: the lowering flattens its operand "
                "to a vector by vector.shape_cast, which takes vectors only. A scalar is "
                "its own sum, maximum and minimum: drop the reduction.",
            )
            break
    for node in _walk(tree):
        if isinstance(node, V.Iota) and node.dtype in _FLOAT8:
            low.later(  # (the dialect lowering makes the undef: verifying its module)
                "p4",
                "GPU_VERIFICATION",
                (*low.path, "value"),
                "Pallas encountered an internal verification error. Please file a bug at "
                "https://github.com/jax-ml/jax/issues/new/choose. Error details: "
                "'llvm.mlir.undef' op result #0 must be LLVM dialect-compatible type, but got "
                f"'{_mlir(node.dtype)}'",
                f"{node.source(V.LABEL)} counts in an 8-bit float, which the lowering "
                "builds from an LLVM value of that type, and LLVM has none. Count in "
                f"float32 and convert: lax.broadcasted_iota(jnp.float32, ...).astype("
                f"jnp.{node.dtype}).",
            )
            break
    for node in _walk(tree):
        if isinstance(node, V.Iota) and math.prod(node.shape) % LANES:
            # (an iota is laid out over a warpgroup's threads, WG_STRIDED)
            low.no_layout(
                (*low.path, "value"),
                f"lax.broadcasted_iota of shape {node.shape!r} is laid out over the "
                f"{LANES} threads of a warpgroup; its {math.prod(node.shape)} elements are "
                f"not a multiple of {LANES}: no register layout holds it.",
            )
            break
    for node in live:
        if isinstance(node, V.Reduce) and _reduces_along_an_axis(node, refs):
            low.no_layout(
                (*low.path, "value"),
                f"{node.source(V.LABEL)} reduces along an axis of a "
                f"{len(node.a.typed(refs).shape)}-D value in the register layout a plain "
                "load gives it, and layout inference finds no layout for the result. A "
                "reduction of the whole value lowers; JAX's kernels reduce along an axis "
                "of a value cast to the WGMMA layout (plgpu.layout_cast), which a compute "
                "value does not carry.",
            )
            break
    for node in live:
        inner = _inner_broadcast(node, refs)
        if inner is not None:
            low.no_layout(
                (*low.path, "value"),
                f"{node.source(V.LABEL)} broadcasts {inner.source(V.LABEL)} of shape "
                f"{inner.typed(refs).shape!r} to {node.typed(refs).shape!r} along a dim "
                "after one it keeps: the register layouts broadcast a value along its "
                "leading dims only. Load the operand in the result's shape, or move the "
                "broadcast dim first.",
            )
            break
    # the dialect lowering's own errors, in the order the value computes
    for node in live:
        problems = (
            _conversion_problem(a, to, refs)
            for a, to in node.conversions(refs)
            if not a.constant(refs)  # (a constant is converted as it is folded)
        )
        problem = next((p for p in problems if p is not None), None)
        if problem is not None:
            low.later("p3", problem[0], low.path, problem[1], problem[2])
            break
        if isinstance(node, V.Bin) and _float_remainder(node, refs):
            low.later(
                "p3",
                "GPU_FLOAT_REM",
                low.path,
                "unsupported operand type(s) for %: 'FragmentedArray' and 'FragmentedArray'",
                f"{node.source(V.LABEL)} takes a remainder of floats (jax.numpy's "
                "floor division of floats takes one too): lax.rem of floats becomes "
                "arith.remf, which the Mosaic GPU dialect lowering has no rule for (its "
                "register arrays take % of integers only).",
            )
            break
        if isinstance(node, V.Bin | V.Neg | V.Where) and _computes_8bit(node, refs):
            low.later(
                "p3",
                "GPU_8BIT_ARITH",
                low.path,
                "Pointwise operations on 8-bit types are unsupported (except bitwise "
                "operations). Upcast to a 16- or 32-bit type before performing the "
                "operation.",
            )
            break
    return refs


def eval_value(x: ExecuteContext, tree: V.Node) -> Any:
    """A computed value as JAX computes it (numpy, each step in JAX's dtype), its loads
    and semaphore reads made; None when the run carries no data."""
    got = _evaluated(x, tree)
    return None if got is None else got[0]


def _evaluated(x: ExecuteContext, tree: V.Node) -> tuple[Any, bool] | None:
    """``eval_value``'s value and whether it is weakly typed (a Python number's type)."""
    import numpy as np

    loaded = {name: x.read(f"value.{name}") for name in dict.fromkeys(tree.loads())}
    for idx in tree.indices():
        loaded[idx.key] = x.eval(idx.e, "value")
    for r in tree.sem_reads():
        loaded[r.key] = x.semaphore_value(f"value.{r.name}")
    if not x.data:
        return None
    value, weak = tree.eval(loaded)
    return np.asarray(value), weak


class Compute(StatementOp):
    """``dst[...] = value``: an elementwise value computed in registers, then stored."""

    PLAIN_STORE: ClassVar[bool] = True

    @classmethod
    def example(cls, fit: Fit) -> dict[str, Any]:
        src = fit.first(fit.refs, "x_ref")
        return {
            "op": "compute",
            "dst": fit.first(fit.outputs, fit.first(fit.refs, "out")),
            "value": f"{src}[...] * 2.0",
        }

    HELP: ClassVar[str] = "dst[...] = a value computed from loads (a[...] + b[...] * 2.0)"
    FAMILY: ClassVar[str] = "compute"
    #: the destination; the refs ``value`` loads are ``value.NAME`` (``ref_fields``)
    REFS: ClassVar[tuple[tuple[str, str], ...]] = (("dst", WRITE),)

    op: Literal["compute"]
    dst: RefName = Field(description="the ref written")
    value: V.ValueText = Field(
        description="the value, as JAX writes it: x_ref[...] * 2.0 + y_ref[...], jnp.where, "
        "jnp.maximum, .astype(jnp.float32), lax.broadcasted_iota(jnp.int32, (n,), 0), "
        "jnp.sum(x_ref[...]), jnp.max(x_ref[...], axis=0)"
    )

    @property
    def tree(self) -> V.Node:
        return V.parse(self.value)

    def load_names(self) -> list[str]:
        """The refs ``value`` loads, each once, in order."""
        return list(dict.fromkeys(self.tree.loads()))

    def sem_names(self) -> list[str]:
        """The semaphores ``value`` reads (``pl.semaphore_read``), each once, in order."""
        return list(dict.fromkeys(r.name for r in self.tree.sem_reads()))

    def ref_fields(self) -> list[tuple[str, str, str]]:
        """``value.NAME`` for each ref the value loads and each semaphore it reads (read),
        then ``dst`` (written)."""
        reads = [(f"value.{n}", n, READ) for n in [*self.load_names(), *self.sem_names()]]
        return [*reads, ("dst", self.dst, WRITE)]

    def exprs(self) -> Iterator[tuple[str, E.Expr]]:
        for idx in self.tree.indices():
            yield "value", idx.e

    def expr_kind(self, field: str) -> str:
        return "value"  # (where the kernel runs, as a number in the value)

    def loaded_before(self, field: str, name: str) -> list[str]:
        # (the value is computed left to right: ``s[...] + lax.axis_index('x')`` loads s
        # first)
        return [f"value.{n}" for n in V.loads_before(self.tree, name)]

    def ref_name(self, field: str) -> str:
        return field.removeprefix("value.") if field.startswith("value.") else self.dst

    def label(self) -> str:
        return f"{self.dst} <- {self.tree.source(V.LABEL)}"

    def source(self, g: SourceWriter) -> list[str]:
        return [f"{g.ref(self.dst)}[...] = {self.tree.source(g)}"]

    def trace(self, t: TraceContext) -> bool:
        """The loads (in order), the value's shape and dtype rules, then the store."""
        ty = trace_value(t, self.tree)
        if ty is None:
            return True
        if t.use("dst"):
            return True
        return t.store("dst", ty.shape, ty.dtype, weak=ty.weak)

    def lower(self, low: LowerContext) -> bool:
        """Each load and semaphore read, the bitcasts (one width only), the arithmetic (none
        on 8-bit values), the store."""
        tree = self.tree
        refs = lower_value(
            low,
            tree,
            lambda: isinstance(tree, V.Load) and low.info("dst").dtype == "bool",
        )
        if refs is None:
            return True
        if low.info("dst").shape and tree.constant(refs):
            # (MLIR folds the value to a constant, which is stored as one: a splat)
            return lower_splat_store(low, "dst", f"the constant {tree.source(V.LABEL)}")
        if low.access("dst", "store", check_layout=False):
            return True
        dst = low.info("dst")
        if dst.dtype == "bool" and dst.shape and not isinstance(self.tree, V.Load):
            # the value's register vectors are its first load's or iota's (strided, 64
            # bits at most per vector); a store moves whole bytes of them
            vec = _layout_vector(self.tree, refs)
            if vec < 8:
                _bool_vector(low, (*low.path, "dst"), f"the store into {self.dst}")
        return False

    def execute(self, x: ExecuteContext) -> None:
        """Load each ref, compute the value as JAX does (numpy, each step in JAX's
        dtype), store it."""
        import numpy as np

        dst = x.view("dst")
        got = _evaluated(x, self.tree)
        if got is None:
            x.write("dst", x.like(dst.shape, dst.dtype))
            return
        value, weak = got
        if value.shape != tuple(dst.shape):
            x.fail("SIM_SHAPE_MISMATCH", f"storing {value.shape} into {self.dst} {dst.shape}")
        if value.dtype != dst.dtype:
            if not _cast_by_store(value.dtype.name, np.dtype(dst.dtype).name, weak):
                x.fail("SIM_DTYPE_MISMATCH", f"storing {value.dtype} into {dst.dtype}")
            value = value.astype(dst.dtype)
        x.write("dst", value)


def _cast_by_store(value: str, ref: str, weak: bool) -> bool:
    """Whether a store (``ref_swap``) converts a value of dtype ``value`` to the ref's:
    an integer to an integer, a weakly typed float (a Python number's type) to a float."""
    if dtypes.is_int(value) and dtypes.is_int(ref):
        return True
    return weak and dtypes.is_float(value) and dtypes.is_float(ref)


def _loaded(low: LowerContext, tree: V.Node) -> dict[str, tuple[tuple[int, ...], str]]:
    """The shape and dtype of each ref ``tree`` loads, in the order it first loads them."""
    refs = {}
    for name in dict.fromkeys(tree.loads()):
        info = low.info(f"value.{name}")
        refs[name] = (tuple(info.shape), info.dtype)
    return refs


def _computes_8bit(
    node: V.Bin | V.Neg | V.Where, refs: Mapping[str, tuple[tuple[int, ...], str]]
) -> bool:
    """The operation computes on vectors of 8-bit numbers (its operands promoted; a
    scalar is computed as a scalar, which the lowering takes in any width, and ``==`` and
    ``!=`` compare bits, as the bitwise operations it allows do; ``jnp.where`` selects
    between vectors of its result's dtype)."""
    if not node.typed(refs).shape or (isinstance(node, V.Bin) and node.op in ("==", "!=")):
        return False
    if isinstance(node, V.Neg | V.Where):
        dtype = node.typed(refs).dtype
    elif node.op == "/":
        dtype = node.typed(refs).dtype  # (true division converts integers to float32 first)
    else:
        dtype = V.promote(node.a.typed(refs), node.b.typed(refs))[0]
    return dtype != "bool" and dtypes.bits(dtype) == 8


#: the 8-bit floats
_FLOAT8 = ("float8_e4m3fn", "float8_e5m2")


def _conversion_problem(
    operand: V.Node, new: str, refs: Mapping[str, tuple[tuple[int, ...], str]]
) -> tuple[str, str, str] | None:
    """What the dialect lowering says of converting ``operand`` to ``new``
    (``FragmentedArray.astype``): ``(code, message, why)``, or None where it converts.
    A scalar is converted as a scalar, in any dtype."""
    ty = operand.typed(refs)
    src, what = _folded_source(operand, new, refs), operand.source(V.LABEL)
    if not ty.shape:
        return None
    if src in _FLOAT8 and new not in _FLOAT8 and not dtypes.is_float(new):
        # the lowering clamps a float to the integer's range first (min and max of 8-bit
        # floats), unless both bounds are infinite in the 8-bit float (folded away)
        if not _unbounded_in(new, src):
            return (
                "GPU_8BIT_ARITH",
                "Pointwise operations on 8-bit types are unsupported (except bitwise "
                "operations). Upcast to a 16- or 32-bit type before performing the "
                "operation.",
                f"{what} is converted from {src} to {new}: the lowering first clamps it to "
                f"{new}'s range, a minimum and a maximum of 8-bit floats. Convert to "
                f"float32 first: .astype(jnp.float32).astype(jnp.{new}).",
            )
    vec = _layout_vector(operand, refs) if new == "bool" else 8
    if vec % 8:
        return (
            "GPU_CAST_BITWIDTH",
            f"Register bitwidth in target type must be divisible by 8, got {vec}",
            f"{what} is converted to booleans, {vec} per register vector (its layout's), "
            "and the lowering converts whole bytes of them. Compare instead "
            f"({what} != 0), which makes the same mask.",
        )
    pair = {src, new}
    if not pair & set(_FLOAT8) or pair & {"float32", "float16"}:
        return None
    if "bfloat16" in pair:
        return (
            "GPU_FLOAT8_BF16_CAST",
            f"Hardware has no support for converting from {_mlir(src)} to {_mlir(new)} (only "
            f"cast from {_mlir(src)} to f16 is supported). Cast to f32 first and then to the "
            "target type (expensive, but sufficient).",
            f"{what} is converted from {src} to {new}; the PTX this CUDA's ptxas accepts "
            "converts 8-bit floats to and from float16 and float32 only. Convert through "
            "float32.",
        )
    return (
        "GPU_NARROW_FLOAT_CAST",
        f"Unsupported conversion involving narrow float types: {_mlir(src)} to {_mlir(new)}",
        f"{what} is converted from {src} to {new}: Mosaic GPU converts 8-bit floats to and "
        "from floats only. Convert through float32 (integer to float32 to the 8-bit "
        "float, or back).",
    )


def _folded_source(
    operand: V.Node, new: str, refs: Mapping[str, tuple[tuple[int, ...], str]]
) -> str:
    """The dtype a conversion of ``operand`` to ``new`` converts from once MLIR has
    canonicalized it: a float narrowed (arith.truncf) from a conversion of integers
    (sitofp, uitofp) is converted from the integers, the float steps folded away
    (``x.astype(jnp.float32).astype(jnp.float8_e5m2)`` of int32 converts int32)."""
    dtype = operand.typed(refs).dtype
    narrows = dtypes.is_float(new) and dtypes.is_float(dtype)
    if not narrows or dtypes.bits(dtype) <= dtypes.bits(new):
        return dtype  # (not a narrowing of floats: nothing folds)
    node = operand
    while isinstance(node, V.Cast):
        was = node.a.typed(refs).dtype
        if not dtypes.is_float(was):
            return was
        if dtypes.bits(was) <= dtypes.bits(node.typed(refs).dtype):
            break  # (an extension: not folded)
        node = node.a
    return dtype


def _unbounded_in(integer: str, float8: str) -> bool:
    """Whether the range of ``integer`` (bool: 0 and 1) is from -inf to inf in ``float8``
    (its bounds rounded there as MLIR's constants are: too big is inf, or NaN where the
    dtype has no inf)."""
    import numpy as np

    info = np.iinfo(dtypes.np_dtype(integer)) if integer != "bool" else None
    bounds = (info.min, info.max) if info is not None else (0, 1)
    with np.errstate(all="ignore"):
        low, high = np.asarray(bounds, np.float64).astype(dtypes.np_dtype(float8))
    return bool(np.isneginf(low.astype(np.float64)) and np.isposinf(high.astype(np.float64)))


def _layout_vector(node: V.Node, refs: Mapping[str, tuple[tuple[int, ...], str]]) -> int:
    """Elements per register vector of a value: its first array load's or iota's (in the
    order it computes them; layout inference gives the operations that value's strided
    layout), not one a folded constant part holds; of a value of neither, int32's of its
    shape."""
    for leaf in _leaves(node, refs):
        ty = leaf.typed(refs)
        if ty.shape:
            return _vector(ty.shape, ty.dtype)
    return _vector(node.typed(refs).shape, "int32")


def _leaves(n: V.Node, refs: Mapping[str, tuple[tuple[int, ...], str]]) -> Iterator[V.Node]:
    """The loads and iotas of a value in the order it computes them, outside its constant
    parts (``Node.constant``)."""
    if n.constant(refs):
        return
    if isinstance(n, V.Load | V.Iota):
        yield n
    for c in n.children():
        yield from _leaves(c, refs)


def _selects_by_a_scalar(node: V.Node, refs: Mapping[str, tuple[tuple[int, ...], str]]) -> str:
    """What a select of arrays by a scalar condition is, where ``node`` makes one (else
    ""): ``jnp.where`` of a scalar condition, or the floor division of floats by a
    scalar (jax.numpy's ``_float_divmod`` selects by ``x2 == 0``)."""
    if not node.typed(refs).shape:
        return ""
    if isinstance(node, V.Where) and not node.c.typed(refs).shape:
        return f"its condition {node.c.source(V.LABEL)}"
    if isinstance(node, V.Bin) and node.op == "//" and not node.b.typed(refs).shape:
        dtype = V.promote(node.a.typed(refs), node.b.typed(refs))[0]
        if dtypes.is_float(dtype):
            return f"{node.b.source(V.LABEL)} == 0 (a float divided by a scalar)"
    return ""


def _float_remainder(node: V.Bin, refs: Mapping[str, tuple[tuple[int, ...], str]]) -> bool:
    """``%`` or ``//`` of float vectors (jax.numpy takes lax.rem of the operands)."""
    if node.op not in ("%", "//") or not node.typed(refs).shape:
        return False
    return dtypes.is_float(V.promote(node.a.typed(refs), node.b.typed(refs))[0])


def _vector(shape: tuple[int, ...], dtype: str) -> int:
    """Elements per register vector of a plain load of ``shape`` (the strided layout;
    a boolean is one bit)."""
    return L.strided_vec_size(shape, 1 if dtype == "bool" else dtypes.bits(dtype))


def _bool_vector(low: Any, path: Any, what: str) -> None:
    """A plain load or store of a boolean array whose register vectors hold less than a
    byte: the dialect lowering moves whole bytes, and a boolean is one bit there."""
    low.later(
        "p3",
        "GPU_BOOL_VECTOR",
        path,
        "Vector length should be a multiple of byte size",
        f"{what} moves an array of booleans between memory and registers, which the Mosaic "
        "GPU lowering does not do (booleans are bits in registers). Keep masks in registers, "
        "or store them as numbers (.astype(jnp.int32)).",
    )


def _broadcast_operands(
    node: V.Node, refs: Mapping[str, tuple[tuple[int, ...], str]]
) -> list[V.Node]:
    """The arrays an operation broadcasts to its result's shape (arithmetic, a
    comparison, jnp.where; a scalar is a splat, not broadcast)."""
    if not isinstance(node, V.Bin | V.Where):
        return []
    out = node.typed(refs).shape
    return [
        c
        for c in node.children()
        if c.typed(refs).shape not in ((), out) and not c.constant(refs)  # (a splat)
    ]


def _inner_broadcast(
    node: V.Node, refs: Mapping[str, tuple[tuple[int, ...], str]]
) -> V.Node | None:
    """The operand of ``node`` (an operation that broadcasts its operands: arithmetic,
    a comparison, jnp.where) broadcast along a dim that comes after a dim it keeps (of
    more than one element), as (4, 1, 128) to (4, 8, 128); None where there is none."""
    operands = _broadcast_operands(node, refs)
    if not operands:
        return None
    out = node.typed(refs).shape
    for operand in operands:
        shape = operand.typed(refs).shape
        ranked = (1,) * (len(out) - len(shape)) + tuple(shape)
        kept = False
        for d, o in zip(ranked, out, strict=True):
            if d == 1 and o > 1 and kept:
                return operand
            kept = kept or d > 1
    return None


def _reduces_along_an_axis(node: V.Reduce, refs: Mapping[str, tuple[tuple[int, ...], str]]) -> bool:
    """A reduction that keeps some axis of a value of rank 2 or more."""
    rank = len(node.a.typed(refs).shape)
    return rank >= 2 and node.partial(rank)


def _operations(n: V.Node) -> Iterator[V.Node]:
    """A value's operations in the order the kernel computes (and JAX lowers) them: each
    one's operands first, left to right."""
    for c in n.children():
        yield from _operations(c)
    yield n


def _live(n: V.Node, refs: Mapping[str, tuple[tuple[int, ...], str]]) -> Iterator[V.Node]:
    """The operations of a value left once MLIR has folded its constants, in the order
    the kernel computes them (``_operations``, no constant part: ``Node.constant``)."""
    if n.constant(refs):
        return
    for c in n.children():
        yield from _live(c, refs)
    yield n


def _walk(n: V.Node) -> Iterator[V.Node]:
    yield n
    for c in n.children():
        yield from _walk(c)


__all__ = ["REDUCTIONS", "AtomicAdd", "Dot", "MultimemLoadReduce"]


#: the numpy function each reduction is simulated with (MultimemLoadReduce.execute)
_REDUCE = {
    "add": "add",
    "min": "minimum",
    "max": "maximum",
    "and": "bitwise_and",
    "or": "bitwise_or",
    "xor": "bitwise_xor",
}
