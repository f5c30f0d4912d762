"""JAX's own rules for Mosaic GPU ref layouts, as pure functions (no JAX import).

Each function reproduces what jax 0.12 (``jax._src.pallas.mosaic_gpu``, ``jax._src.state``,
``jax.experimental.mosaic.gpu``) raises for one family of scenarios: the exception
type, its exact message (or the part before an IR dump, ``exact=False``), the stage
(``build``, ``trace``, ``gpu-lower``, ``interpret``) and the mpmd-lab code
``mpmd_lab.catalogue.classify`` gives that error. Every function is held against
real JAX in ``tests/test_layout_rules.py``; ``research/agree/FINDINGS.md`` says where in
JAX's source each rule comes from.

Transforms are the scenario's op objects (``mpmd_lab.ops``), read by the JAX transform
each lowers as (``TransformOp.LOWERS_AS``) and printed by its ``jax_repr``; no rule here
names an op. Dtype widths are in bits.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

from mpmd_lab import dtypes
from mpmd_lab import expr as E
from mpmd_lab.catalogue import LOWERING_PHASE
from mpmd_lab.smem_transfer import WGMMA_LAYOUT, transfer_layouts

SWIZZLES = (32, 64, 128)


class JaxError(NamedTuple):
    """What JAX raises: code, exception type, message, stage.

    ``exact``: the message is JAX's whole ``str(exception)``; False: JAX's message
    starts with it (an MLIR dump or a run-specific detail follows).
    """

    code: str
    jax_type: str
    message: str
    stage: str
    exact: bool = True

    def matches(self, jax_type: str, message: str) -> bool:
        """Whether a real JAX error (type name and ``str(e)``) is this one."""
        if jax_type.rsplit(".", 1)[-1] != self.jax_type:
            return False
        return message == self.message if self.exact else message.startswith(self.message)


#: When in the Mosaic GPU lowering each code of these rules is raised: a card's
#: ``phase`` (``catalogue.LOWERING_PHASE``); the rest, while the statement is lowered, in
#: program order:
#:
#: - ``verify-early``: MLIR's verifier over the module the Pallas lowering made;
#: - ``derive``: layout inference, deriving each op's constraints in program order;
#: - ``solve``: layout inference, once the whole kernel's constraints are known (what
#:   its search raises as it tries an assignment: a non-contiguous SMEM ref);
#: - ``unsat``: layout inference, when that search found no solution (after every
#:   ``solve`` error: the search raises those on its way, whatever the statement);
#: - ``assign``: layout inference, writing the solution back into each op;
#: - ``dialect``: lowering the Mosaic GPU dialect (the TMA rules);
#: - ``verify``: MLIR's verifier over the lowered module.


def lowering_phase(code: str, message: str = "") -> str:
    """``LOWERING_PHASE[code]``, or ``statement`` (raised while lowering the statement).
    A verification error of an op the Pallas lowering emits itself (``mosaic_gpu.*``) is
    found before layout inference; of one the dialect lowering emits (``vector.*``), at
    the end."""
    if code == "GPU_VERIFICATION" and "'mosaic_gpu." in message:
        return "verify-early"
    return LOWERING_PHASE.get(code, "statement")


def _kind(t: Any) -> str:
    """Which of JAX's transforms a view or layout step lowers as (the op's
    ``TransformOp.LOWERS_AS``): ``index``, ``reshape``, ``transpose``, ``bitcast``, the
    scratch layouts ``tiling`` and ``swizzle``, or ``other``."""
    return t.LOWERS_AS


def _get(t: Any, name: str, default: Any = None) -> Any:
    """A field of a transform or index entry, in its model or JSON (dict) form."""
    if isinstance(t, dict):
        return t.get(name, default)
    return getattr(t, name, default)


def _tuple(shape: Sequence[int]) -> str:
    """A shape as Python prints a tuple: ``(8, 128)``, ``(256,)``, ``()``."""
    return repr(tuple(int(d) for d in shape))


# ---------------------------------------------------------------- scratch types


def swizzle_elems(swizzle: int, dtype_bits: int) -> int:
    """Elements of one swizzle row: ``swizzle * 8 // bits`` (SwizzleTransform)."""
    return swizzle * 8 // dtype_bits


def tile_shape(shape: Sequence[int], tile: Sequence[int]) -> tuple[int, ...] | None:
    """``TilingTransform(tile).transform_type``: ``(*leading, *num_tiles, *tile)``, or
    None where its ``assert all(d % t == 0 ...)`` fails.

    JAX pairs the trailing ``len(tile)`` dims with the tile by ``zip``: a tile longer
    than the rank pairs the whole shape with the tile's first entries.
    """
    shape = tuple(shape)
    n = len(tile)
    leading = shape[:-n]
    tiled = shape[-n:]
    pairs = list(zip(tiled, tile, strict=False))
    if any(d % t for d, t in pairs):
        return None
    return (*leading, *(d // t for d, t in pairs), *tile)


def physical_shape(
    shape: Sequence[int], dtype_bits: int, stack: Sequence[Any]
) -> tuple[tuple[int, ...] | None, JaxError | None]:
    """The scratch ref's physical shape after its tiling / swizzle stack, in the order
    stacked (``state_types.transform_type(transforms, aval)`` in
    ``GPUMemoryRef.get_ref_aval``), or the first error that raises at trace.

    - tiling: ``TilingTransform.transform_type`` (an ``AssertionError`` with an empty
      message where the tile does not divide the trailing dims);
    - swizzle: ``SwizzleTransform.transform_type``: the *current* trailing dim (after
      any tiling before it) must be ``swizzle * 8 // bits`` elements, else
      ``ValueError: Swizzle S requires the trailing dimension to be of size E, but got
      shape: (...)``; a rank-0 shape has no trailing dim (``IndexError: tuple index out of
      range``).
    """
    cur, err, _ = physical_shape_at(shape, dtype_bits, stack)
    return cur, err


def physical_shape_at(
    shape: Sequence[int], dtype_bits: int, stack: Sequence[Any]
) -> tuple[tuple[int, ...] | None, JaxError | None, int | None]:
    """``physical_shape`` and the index in ``stack`` of the transform that fails (None)."""
    cur = tuple(shape)
    for k, t in enumerate(stack):
        kind = _kind(t)
        if kind == "tiling":
            nxt = tile_shape(cur, _get(t, "tile"))
            if nxt is None:
                return None, JaxError("JAX_ASSERTION", "AssertionError", "", "trace"), k
            cur = nxt
        elif kind == "swizzle":
            s = _get(t, "bytes")
            if not cur:
                return (
                    None,
                    JaxError(
                        "TRANSPOSE_BAD_AXIS", "IndexError", "tuple index out of range", "trace"
                    ),
                    k,
                )
            e = swizzle_elems(s, dtype_bits)
            if e != cur[-1]:
                return (
                    None,
                    JaxError(
                        "SWIZZLE_TRAILING_DIM",
                        "ValueError",
                        f"Swizzle {s} requires the trailing dimension to be of size {e}, but "
                        f"got shape: {_tuple(cur)}",
                        "trace",
                    ),
                    k,
                )
    return cur, None, None


def scratch_build_error(
    dtype_bits: int,
    memory_space: str,
    stack: Sequence[Any],
    packed: bool | None = None,
    collective: bool | None = None,
) -> JaxError | None:
    """What building one scratch type raises (``plgpu.SMEM/GMEM/TMEM(shape, dtype,
    transforms=..., packed=..., collective=...)``), in the order Python evaluates it:

    1. ``SwizzleTransform.__post_init__``: a swizzle other than 32, 64, 128;
    2. ``MemorySpace.__call__``: TMEM takes no transforms; a TMEM dtype narrower than
       32 bits needs ``packed``; ``packed`` / ``collective`` on SMEM or GMEM.
    """
    found = scratch_build_error_at(dtype_bits, memory_space, stack, packed, collective)
    return None if found is None else found[0]


def scratch_build_error_at(
    dtype_bits: int,
    memory_space: str,
    stack: Sequence[Any],
    packed: bool | None = None,
    collective: bool | None = None,
) -> tuple[JaxError, str] | None:
    """``scratch_build_error`` and the scratch field it is about (``transforms[1].bytes``,
    ``transforms``, ``dtype``, ``packed`` or ``collective``)."""
    for k, t in enumerate(stack):
        if _kind(t) == "swizzle" and _get(t, "bytes") not in SWIZZLES:
            return (
                JaxError(
                    "SWIZZLE_VALUE",
                    "ValueError",
                    f"Swizzle {_get(t, 'bytes')} is not supported. Only 32, 64 and 128 are "
                    "accepted.",
                    "build",
                ),
                f"transforms[{k}].bytes",
            )
    if memory_space == "TMEM":
        if stack:
            return (
                JaxError(
                    "TMEM_NO_TRANSFORMS",
                    "ValueError",
                    "transforms are not supported for TMEM",
                    "build",
                ),
                "transforms",
            )
        if packed is None and dtype_bits != 32:
            return (
                JaxError(
                    "TMEM_DTYPE_PACKED",
                    "ValueError",
                    "dtypes narrower than 32-bit require either the packed argument or an "
                    "explicit TMEM layout",
                    "build",
                ),
                "dtype",
            )
        return None
    if packed is not None or collective is not None:
        return (
            JaxError(
                "TMEM_ONLY_ARGS",
                "ValueError",
                "packed, collective and layout arguments are only supported for TMEM.",
                "build",
            ),
            "packed" if packed is not None else "collective",
        )
    return None


def tiling_swizzle_error(
    shape: Sequence[int],
    dtype_bits: int,
    memory_space: str,
    stack: Sequence[Any],
    *,
    entry: str = "plgpu.kernel",
    packed: bool | None = None,
    collective: bool | None = None,
) -> JaxError | None:
    """The first error JAX raises for one scratch buffer's type (build, then trace).

    After the build rules (``scratch_build_error``) and the physical type
    (``physical_shape``, both entries), ``pl.kernel`` (``mpmd_map``) meets scratch
    with any tiling or swizzle as a ``TransformedRef``, which it does not take: an
    ``AssertionError`` with an empty message, at trace.
    """
    err = scratch_build_error(dtype_bits, memory_space, stack, packed, collective)
    if err is not None:
        return err
    _, err = physical_shape(shape, dtype_bits, stack)
    if err is not None:
        return err
    if entry == "pl.kernel" and stack:
        return JaxError("JAX_ASSERTION", "AssertionError", "", "trace")
    return None


def gmem_scratch_error(entry: str, scratch: Sequence[tuple[str, str]]) -> JaxError | None:
    """``plgpu.kernel`` with GMEM scratch (``scratch``: ``(memory_space, dtype)`` pairs in
    order): the Mosaic GPU lowering's resource estimate (``_estimate_resources`` for
    ``run_scoped``) knows SMEM, TMEM, registers and GMEM semaphores only, so any GMEM
    array fails the lowering before a statement is lowered, used or not."""
    if entry != "plgpu.kernel":
        return None
    for space, _dtype in scratch:
        if space == "GMEM":
            return JaxError(
                "GPU_GMEM_SCRATCH",
                "NotImplementedError",
                "Unsupported memory space: gmem",
                "gpu-lower",
            )
    return None


#: shared memory a Mosaic GPU kernel may use on the lowering's target (sm_90a: 227 KiB)
MAX_SMEM_BYTES = 232448


#: every SMEM allocation of run_scoped is rounded up to this (``gpu_core.SMEM_ALIGNMENT``)
SMEM_ALIGNMENT = 1024
#: bytes of one mbarrier in SMEM (``mosaic.gpu.utils.MBARRIER_BYTES``)
MBARRIER_BYTES = 8


def smem_bytes(
    scratch: Sequence[tuple[Sequence[int], int, Sequence[Any]]], barriers: int = 0
) -> int:
    """Bytes of SMEM the lowering asks for: each scratch buffer's *physical* shape
    (after its tiling, which a tile longer than the rank inflates) times its width,
    rounded up to ``SMEM_ALIGNMENT`` (``Resources`` aligns each allocation), then
    ``barriers`` mbarriers. ``scratch``: ``(shape, dtype_bits, stack)`` per SMEM buffer."""
    total = 0
    for shape, bits, stack in scratch:
        # (no layout stack: the shape is its own physical shape, no walk of it)
        phys, err = physical_shape(shape, bits, stack) if stack else (shape, None)
        if err is None and phys is not None:
            n = math.prod(phys) * bits // 8
            total += -(-n // SMEM_ALIGNMENT) * SMEM_ALIGNMENT
    return total + barriers * MBARRIER_BYTES


def smem_capacity_error(
    scratch: Sequence[tuple[Sequence[int], int, Sequence[Any]]], barriers: int = 0
) -> JaxError | None:
    """``plgpu.kernel`` whose SMEM scratch is larger than the target's shared memory:
    ``ValueError: Mosaic GPU kernel exceeds available shared memory: smem_bytes=N >
    max_smem_bytes=232448`` when lowering (``smem_bytes``: several buffers and barriers)."""
    n = smem_bytes(scratch, barriers)
    if n <= MAX_SMEM_BYTES:
        return None
    return JaxError(
        "SMEM_CAPACITY",
        "ValueError",
        f"Mosaic GPU kernel exceeds available shared memory: smem_bytes={n} > "
        f"max_smem_bytes={MAX_SMEM_BYTES}",
        "gpu-lower",
    )


def _layout_repr(t: Any) -> str:
    """A layout transform as the Mosaic GPU dialect prints it (``TileTransform`` and
    ``SwizzlingMode``, ``layouts.from_transform_attr``)."""
    if _kind(t) == "swizzle":
        b = _get(t, "bytes")
        return f"<SwizzlingMode.k{b}ByteSwizzle: {b}>"
    return f"TileTransform(tiling={_tuple(_get(t, 'tile'))}, rounding=None)"


def smem_transforms_error(stack: Sequence[Any]) -> JaxError | None:
    """An access (a load, a store, a TMA copy) of SMEM scratch whose layout is not one
    the Mosaic GPU dialect takes: layout inference reads a ``with_transforms`` op's
    transforms in the order the scratch stacked them and knows ``[]``, ``[tile]``,
    ``[tile, swizzle]`` and ``[swizzle]`` only
    (``_extract_smem_transforms_from_custom_transform_attrs``): a swizzle before a tiling,
    or two tilings, raise ``NotImplementedError: Unsupported transforms [...]``."""
    kinds = [_kind(t) for t in stack]
    if kinds in ([], ["tiling"], ["tiling", "swizzle"], ["swizzle"]):
        return None
    items = ", ".join(_layout_repr(t) for t in stack)
    return JaxError(
        "SMEM_TRANSFORMS_ORDER",
        "NotImplementedError",
        f"Unsupported transforms [{items}]",
        "gpu-lower",
    )


def smem_assignment_error(
    shape: Sequence[int], dtype_bits: int, stack: Sequence[Any]
) -> JaxError | None:
    """An access (a load, a store, a TMA copy) of SMEM scratch of logical ``shape`` whose
    layout ``stack`` (of an order ``smem_transforms_error`` takes) does not fit the
    ref: layout inference derives the ``with_transforms`` op's constraints
    (``_with_transforms_constraint_system``) and refuses transforms that are not a valid
    assignment for the untransformed ref (``constraints._is_valid_smem_layout_assignment``,
    on the ref's logical shape and contiguous strides):

    - a rank-0 ref takes no tiling and no swizzle;
    - a tiling must tile the shape (``TileTransform.transform_shape``: a tile of more
      dims than the ref fails its ``zip(strict=True)``, a dim the tile does not divide
      fails its check); with a swizzle, a ref whose minor strides repeat (trailing unit
      dims) takes none, and the tile's minor dim (its last of more than one element)
      must be a multiple of the swizzle's row;
    - a swizzle alone: not over repeated minor strides, and the minor dim a multiple of
      the swizzle's row.

    ``ValueError: Cannot apply tiling TileTransform(...) with no swizzle to memref with
    shape (...)`` (``empty tiling``, ``N swizzle`` for the other forms). With a swizzle
    the trace's own rule (``physical_shape``: the row is the trailing dim) holds first,
    so it is a tile of more dims than the ref, unswizzled, that reaches here.
    """
    tile: tuple[int, ...] | None = None
    swz = None
    for t in stack:
        if _kind(t) == "tiling":
            tile = tuple(_get(t, "tile"))
        elif _kind(t) == "swizzle":
            swz = _get(t, "bytes")
    if tile is None and swz is None:
        return None
    if _valid_smem_assignment(tuple(shape), dtype_bits, tile, swz):
        return None
    tiling = (
        "empty tiling"
        if tile is None
        else f"tiling TileTransform(tiling={_tuple(tile)}, rounding=None)"
    )
    return JaxError(
        "TMA_TILING_NO_SWIZZLE",
        "ValueError",
        f"Cannot apply {tiling} with {'no' if swz is None else swz} swizzle to memref with "
        f"shape {_tuple(shape)}.",
        "gpu-lower",
    )


def _valid_smem_assignment(
    shape: tuple[int, ...], dtype_bits: int, tile: tuple[int, ...] | None, swz: int | None
) -> bool:
    """``constraints._is_valid_smem_layout_assignment`` for a ref of contiguous strides."""
    if not shape:
        return tile is None and swz is None
    strides = contiguous_strides(shape)
    row = None if swz is None else swizzle_elems(swz, dtype_bits)
    repeated = strides.count(1) > 1
    if tile is None:
        return row is None or (not repeated and shape[-1] % row == 0)
    if len(tile) > len(shape) or any(
        d % t for d, t in zip(shape[len(shape) - len(tile) :], tile, strict=True)
    ):
        return False
    if row is None:
        return True
    if repeated:
        return False
    # the tiled strides' minor dims are the tile's contiguous strides: the first of the
    # least (np.argmin) is the tile's first dim after which all are 1
    minor = contiguous_strides(tile).index(1)
    return tile[minor] % row == 0


def reinterpret_cast_error(
    shape: Sequence[int], dtype_bits: int, stack: Sequence[Any]
) -> JaxError | None:
    """An access of SMEM scratch whose physical shape (``physical_shape``) holds more
    elements than its logical one (a tile longer than the rank pairs the whole shape with
    the tile's first entries): the lowering reinterprets the allocation as the logical
    shape (``_reinterpret_cast`` in ``_handle_transforms``) and MLIR's verifier rejects
    the cast; JAX wraps it as a ``VerificationError`` (the op's IR follows)."""
    phys, err = physical_shape(shape, dtype_bits, stack)
    if err is not None or phys is None or math.prod(phys) == math.prod(shape):
        return None
    return JaxError(
        "GPU_VERIFICATION",  # (lowering_phase: verified before layout inference)
        "VerificationError",
        VERIFY_PREFIX + "'mosaic_gpu.reinterpret_cast' op source and result memrefs must "
        f"have the same number of elements, but got {math.prod(phys)} and {math.prod(shape)}",
        "gpu-lower",
        exact=False,
    )


def smem_register_error(
    stack: Sequence[Any],
    view_shape: Sequence[int],
    dtype_bits: int,
    minor_moved: bool,
    splat: bool = False,
    m: Memref | None = None,
    ref_shape: Sequence[int] | None = None,
) -> JaxError | None:
    """A plain load or store (``splat``: of a constant, ``fill``) of SMEM scratch with a
    layout, under warpgroup semantics: layout inference must find a register layout the
    tiled, swizzled SMEM can be transferred to (``IsTransferableSmemRegisters``, which
    tries ``FragmentedArray.transfer_tiled``):

    - a swizzle without a tiling: no layout fits (measured, jax 0.12);
    - the view's second-minor dim not a multiple of 64 (the WGMMA register tile's rows),
      or a view of rank < 2: no layout fits (measured);
    - otherwise JAX's transfer schedule decides (``smem_value_layouts``: the port of
      ``transfer_tiled`` and its bank-conflict plan, ``smem_transfer``; unswizzled SMEM
      is planned as a 16-byte swizzle, as JAX does; a transposed view's tiling is the
      scratch's, permuted with its tiled dims): no candidate layout with a schedule, no
      layout fits; the first is the value's: ``WGMMA_LAYOUT`` lowers here (its GMEM side is
      ``gmem_transfer_error``'s), ``WGMMA_TRANSPOSED_LAYOUT`` fails in the dialect
      lowering (``UnsupportedTransferError: Tiled strides must be a multiple of the
      vector length, except for the load vectorized dimension``) unless the value is a
      constant (``fill``). It decides, for instance, that a tile of one row is a tile of
      one dim, which fits a view whose minor dim holds ``k`` tiles only for some ``k``;
      that 2-row tiles fit some swizzles only; that a 16-bit transposed view moves in the
      WGMMA layout (the transposed txmatrix), an 8- or 32-bit one in the transposed one;
    - where the port is not asked (``smem_value_layouts`` None: a transposed view,
      not a permutation of the scratch's dims, of a tile of other than two dims; a view
      memref not followed), measured: without a swizzle, or with a tile of
      one dim or of one row, no layout fits; else an 8- or 32-bit value fails with the
      tiled strides error, a 16-bit one on the GMEM side; a constant is stored.
    """
    kinds = [_kind(t) for t in stack]
    if kinds == ["swizzle"]:
        return layout_inference_error()
    if kinds not in (["tiling"], ["tiling", "swizzle"]):
        return None
    tile = list(_get(stack[0], "tile"))
    swizzle = _get(stack[1], "bytes") if len(stack) > 1 else None
    if len(view_shape) < 2 or view_shape[-2] % 64:
        return layout_inference_error()
    layouts = smem_value_layouts(stack, view_shape, dtype_bits, m, ref_shape)
    if layouts is None and not minor_moved:
        return None
    if layouts is not None:
        if not layouts:
            return layout_inference_error()
        if splat or layouts[0] == WGMMA_LAYOUT:
            return None
        return _tiled_strides_error()
    if swizzle is None or len(tile) == 1 or tile[-2] == 1:
        return layout_inference_error()
    if not splat and dtype_bits != 16:
        return _tiled_strides_error()
    return None


def _tiled_strides_error() -> JaxError:
    return JaxError(
        "GPU_SMEM_TRANSFER",
        "UnsupportedTransferError",
        "Tiled strides must be a multiple of the vector length, except for the load "
        "vectorized dimension",
        "gpu-lower",
    )


#: more bits than any SMEM holds (256 KiB): ``smem_value_layouts`` plans no transfer
_SMEM_BITS = 256 * 1024 * 8


def smem_value_layouts(
    stack: Sequence[Any],
    view_shape: Sequence[int],
    dtype_bits: int,
    m: Memref | None,
    ref_shape: Sequence[int] | None = None,
) -> tuple[Any, ...] | None:
    """The register layouts (``smem_transfer.CANDIDATES``, in layout inference's order)
    a plain load or store of a view of tiled SMEM can move its value in
    (``smem_transfer.transfer_layouts``; layout inference takes the first): the view's
    tiling is the scratch's (of ``ref_shape``), permuted as the view permutes its tiled
    dims (``reduce_transpose_expression``; a tiled dim moved among untiled ones: no
    layout). None where the port is not asked: no tiling, a view memref not followed, a
    transposed view that is not a permutation of its scratch's dims (windows aside)
    with a tile of other than two dims, an empty view, one larger than any SMEM."""
    kinds = [_kind(t) for t in stack]
    if kinds not in (["tiling"], ["tiling", "swizzle"]):
        return None
    size = math.prod(view_shape)
    if not size or size * dtype_bits > _SMEM_BITS:
        return None  # (an empty view; one larger than any SMEM: other errors say so)
    tile = tuple(_get(stack[0], "tile"))
    swizzle = _get(stack[1], "bytes") if len(stack) > 1 else 16
    strides = tuple(m.strides) if m is not None else contiguous_strides(view_shape)
    ref_strides = contiguous_strides(ref_shape) if ref_shape is not None else None
    if (
        ref_strides is not None
        and sorted(strides) == sorted(ref_strides)
        and len(set(ref_strides)) == len(ref_strides)
    ):
        # (a permutation of the scratch's dims: the view's last dims come from its tiled
        # ones, or the transposed tiling is unsatisfiable)
        tiled = ref_strides[len(ref_strides) - len(tile) :]
        src = [tiled.index(x) if x in tiled else -1 for x in strides[len(strides) - len(tile) :]]
        if -1 in src:
            return ()
        tile = tuple(tile[k] for k in src)
    elif minor_strided(m):
        if len(tile) != 2 or len(strides) < 2 or strides[-2] != 1:
            return None
        tile = tile[::-1]  # (the tiled dims swapped: the view's minor is the ref's major)
    return transfer_layouts(tuple(view_shape), strides, tile, swizzle, dtype_bits)


def gmem_transfer_error(dtype_bits: int, wgmma: bool = True) -> JaxError | None:
    """The GMEM side of a plain copy whose value has the register layout of tiled
    SMEM (swizzled or not; the WGMMA layout: each thread holds 2 consecutive elements of a row,
    4 threads a row of 8): the dialect lowering plans the GMEM load / store of that
    layout and finds it uncoalesced for narrow dtypes (``_plan_tiled_gmem_transfer``):
    16-bit rows cover 16 bytes of a 32-byte sector, 8-bit threads move 2 bytes. A value
    the SMEM side moves in another layout (``wgmma`` False: ``smem_value_layouts``, e.g.
    an 8-bit value of a transposed SMEM view) fails on the SMEM side instead
    (``smem_register_error``)."""
    if not wgmma:
        return None
    if dtype_bits == 16:
        msg = "GMEM transfer does not access a whole number of complete 32 byte sectors"
    elif dtype_bits == 8:
        msg = "GMEM transfer width (2 bytes/thread) is smaller than 4 bytes"
    else:
        return None
    return JaxError("GPU_GMEM_TRANSFER", "TransferPlanDerivationError", msg, "gpu-lower")


def strided_vec_size(shape: Sequence[int], bits: int) -> int:
    """Elements per thread and vector of the strided register layout of a plain GMEM
    load or store (``WGStridedFragLayout.from_shaped_type``; 0: none fits)."""
    size = math.prod(shape)
    if size % 128:
        return 0
    per_thread = size // 128  # (the elements of each of the 128 threads)
    vec = 64 // bits
    if per_thread < vec:  # (min() is a call)
        vec = per_thread
    while vec > 1 and per_thread % vec:  # (1 always divides it)
        vec //= 2
    return vec


def strided_transfer_error(vec: int, m: Memref | None) -> JaxError | None:
    """A plain load or store of ``vec`` (> 1) elements a thread through a view whose
    memref ``m`` is not one contiguous run (``FragmentedArray.transfer_strided``, when
    the dialect is lowered): the memref's contiguous pairs of dims are folded (from the
    minor end), then a dim of unit stride must be a multiple of ``vec`` long, every other
    dim's stride (of more than one element) a multiple of ``vec``, and some dim must be of
    unit stride. What gets through is a ``vector`` op on the strided memref, which MLIR's
    verifier may still reject (``transposed_access_error``)."""
    if vec <= 1 or m is None or not m.shape or _contiguous(m):
        return None
    shape, strides = list(m.shape), list(m.strides)
    for i in reversed(range(len(shape) - 1)):
        if strides[i] == shape[i + 1] * strides[i + 1]:
            shape[i : i + 2] = [shape[i] * shape[i + 1]]
            strides[i : i + 2] = [strides[i + 1]]
    unit = False
    for size, stride in zip(shape, strides, strict=True):
        if stride == 1:
            unit = True
            if size % vec:
                return _strided_error(
                    "The contiguous dimension of the reference must be a multiple of the "
                    f"layout's vector size (got {size} and vector size {vec})"
                )
        elif size > 1 and stride % vec:
            return _strided_error(
                "Non-contiguous dimension of the reference must have strides that are "
                f"multiples of the layout's vector size (got {stride} and vector size {vec})"
            )
    if not unit:
        return _strided_error("The reference must have a contiguous dimension when vec_size > 1")
    return None


def _strided_error(message: str) -> JaxError:
    return JaxError("GPU_WG_STRIDED_SIZE", "ValueError", message, "gpu-lower")


def splat_vec_size(shape: Sequence[int], bits: int) -> int:
    """Elements per thread and vector of a store of a constant (``fill``):
    ``_store_untiled_splat`` stores it in the strided layout of ``gcd(64 // bits,
    size // 128)`` elements a thread (0: not a multiple of 128 elements)."""
    size = math.prod(shape)
    if size % 128:
        return 0
    return math.gcd(64 // bits, size // 128)


def transposed_access_error(vec: int, m: Memref | None, access: str) -> JaxError | None:
    """A plain load or store of a GMEM view whose memref ``m`` (``view_memref``) has a
    minor dim that is not unit-stride (a transpose moved the ref's): the lowering emits
    ``vector.load`` / ``vector.store`` of ``vec`` elements per thread on it (the view's
    ``strided_vec_size``). MLIR's verifier lets a one-element vector through (it is a
    scalar access) and rejects a longer one (``transpose_view_error``)."""
    if vec <= 1 or not minor_strided(m):
        return None
    return transpose_view_error(access)


# ---------------------------------------------------------------- TMEM


TMEM_PLAIN_ACCESS = (
    "Expected the same number of in_tmem_layouts (0) as TMEM ref operands (1). op=\n  "
)


def tmem_transpose_ref_error(transformed: bool, shape: Sequence[int], dtype: str) -> JaxError:
    """``plgpu.transpose_ref`` of a TMEM ref: of the raw ref, ``ref.memory_space`` is
    not an attribute of a traced ``Ref`` (a JAX bug: ``assert hasattr(ref,
    "memory_space")`` passes through ``__getattr__`` to the aval, which raises); of a
    transformed one, ``ValueError: Can't transpose a TMEM reference.``"""
    if not transformed:
        sh = ",".join(str(d) for d in shape)
        return JaxError(
            "TRANSPOSE_REF_RAW_BUG",
            "ValueError",
            "The 'memory_space' attribute is not available on traced array with shape "
            f"Ref<tmem>{{{dtype}[{sh}]}}. Use `jax.typeof(x).memory_space` instead.",
            "trace",
        )
    return JaxError("TRANSPOSE_TMEM", "ValueError", "Can't transpose a TMEM reference.", "trace")


def tmem_access_error(
    shape: Sequence[int], view: Sequence[Any], dtype: str = "float32", packing: int = 1
) -> JaxError | None:
    """A plain load or store (``ref[...]``, ``ref[...] = v``) through a TMEM ref, or
    a view of it made with the method forms (``.at``, ``.transpose``, ``.reshape``,
    ``.bitcast``), under ``plgpu.kernel`` (warpgroup lowering semantics), GPU lowering:

    - a bitcast anywhere: the warpgroup lowering has no rule for it
      (``Transforms are not yet implemented for warpgroup semantics``);
    - a reshape: layout inference's ``CollapseShape`` rule is SMEM-only
      (``NotImplementedError: CollapseShape is only implemented for variables in SMEM``);
    - a transpose (``ref.transpose``, any permutation, the identity too unless an ``at``
      came before it), an integer
      index, an ``at`` that slices the rows (the TMEM lanes), or one that slices the
      columns of TMEM of fewer than 128 rows, or of packed TMEM (``packing`` elements a
      32-bit column) at a start or of a size not a multiple of the packing (the
      subview's ``Divides`` constraint: the gcd of each dim's size, the dim and the
      start against the TMEM layout's base tile ``(128, packing)``; any slice of the
      columns of 128 unpacked rows is fine): layout inference finds no TMEM layout
      for the ``vector_load`` / ``vector_store`` of such a memref (``Failed to infer a
      possible set of layouts...``);
    - otherwise (every row, any columns): the ``vector_load`` / ``vector_store`` carries no TMEM
      layout: ``ValueError: Expected the same number of in_tmem_layouts (0) as TMEM
      ref operands (1). op=`` and the op's IR.

    TMEM is read and written with ``plgpu.async_load_tmem`` / ``async_store_tmem``;
    there is no plain access that lowers. Before all of these, the view's steps must
    commute as for any ref (``view_lowering_error``: a reshape after a transpose does
    not). (Stage order: the commute and bitcast errors are met while lowering the
    statement, the others in layout inference after the whole kernel is lowered.)
    """
    e = view_lowering_error(shape, dtype, [], view, "store")
    if e is not None and e.code != "GPU_WG_TRANSFORMS":
        return e
    cur: list[int] | None = list(shape)
    kinds: set[str] = set()
    first: str | None = None  # what layout inference meets first, deriving in order
    sliced = False
    # consecutive reshapes are one (MLIR folds an expand_shape into the collapse after it)
    merged: list[Any] = []
    for t in view:
        if _kind(t) == "reshape" and merged and _kind(merged[-1]) == "reshape":
            merged[-1] = t
        else:
            merged.append(t)
    for t in merged:
        kind = _kind(t)
        if kind == "bitcast":
            return JaxError(
                "GPU_WG_TRANSFORMS",
                "NotImplementedError",
                "Transforms are not yet implemented for warpgroup semantics",
                "gpu-lower",
            )
        if kind == "reshape":
            # a reshape lowers to folds (collapse_shape) and unfolds (expand_shape): layout
            # inference follows neither for TMEM; a collapse is refused outright
            target = None if cur is None else _resolve_reshape(_get(t, "shape"), math.prod(cur))
            if cur is None or target is None or _reshape_folds(cur, target):
                first = first or "reshape"
            elif tuple(target) != tuple(cur):
                kinds.add("strided")
            cur = None if target is None else list(target)
        elif kind == "transpose":
            perm = list(_get(t, "perm"))
            # a memref_transpose is emitted even for the identity; only an identity of a
            # view an ``at`` already made strided leaves the memref type as it was
            if not (sliced and perm == list(range(len(perm)))):
                kinds.add("strided")
            if cur is not None and sorted(perm) == list(range(len(cur))):
                cur = [cur[p] for p in perm]
        elif kind == "index":
            sliced = True
            ix = None if cur is None else _index_entries(list(_get(t, "index")), cur)
            # a slice of columns keeps a TMEM layout; a slice of the rows (the lanes), an
            # integer index or a view JAX cannot follow leaves none
            # (the subview's constraint is unsatisfiable at once, before any later step)
            if ix is None or any(i.kind == "int" for i in ix) or ix[0].size != shape[0]:
                first = first or "unsat"
            elif cur is not None and ix[-1].size != cur[-1]:
                # a subview (some columns): its Divides constraint asks each dim's gcd of
                # size, dim and start to be a multiple of the TMEM layout's base tile
                # (128 lanes, ``packing`` columns); the rows are whole here. A dynamic
                # start (a block's window: the index times the size) divides as the
                # size does (``dynamic_gcd``; a start JAX cannot prove a multiple of the
                # size divides less, which this does not see)
                col = ix[-1]
                start = col.size if col.start is None else col.start
                if cur[0] % 128 or math.gcd(col.size, cur[-1], start) % packing:
                    first = first or "unsat"
            cur = None if ix is None else [i.size for i in ix if i.kind != "int"]
    if first == "reshape":
        return JaxError(
            "TMEM_RESHAPE",
            "NotImplementedError",
            "CollapseShape is only implemented for variables in SMEM",
            "gpu-lower",
        )
    if first == "unsat" or "strided" in kinds:
        return layout_inference_error()
    return JaxError("TMEM_PLAIN_ACCESS", "ValueError", TMEM_PLAIN_ACCESS, "gpu-lower", exact=False)


def tiled_transpose_error(m: Memref | None, tile_rank: int) -> JaxError | None:
    """An access of a view of tiled SMEM whose transposes moved a tiled dim among the
    untiled ones: layout inference gives the view the scratch's tiling only where its
    ``tile_rank`` minor strides are its smallest (``lowering.tile_strides``, which
    ``_is_valid_smem_layout_assignment`` asks and whose ``ValueError`` makes the
    assignment invalid), so no layout fits (``Failed to infer a possible set of
    layouts``). A swap of tiled dims alone is the TMA rules' to refuse."""
    if m is None or len(m.strides) < tile_rank:
        return None
    strides = m.strides
    smallest = sorted(strides, reverse=True)[len(strides) - tile_rank :]
    if set(smallest) == set(strides[len(strides) - tile_rank :]):
        return None
    return layout_inference_error()


def layout_inference_error() -> JaxError:
    """``layout_inference.infer_layout`` when the constraint system has no solution."""
    return JaxError(
        "GPU_LAYOUT_INFERENCE",
        "ValueError",
        "Failed to infer a possible set of layouts. This should only happen if user-provided "
        "layout casts are unsatisfiable. To dump the constraint system for debugging, use "
        "`MOSAIC_GPU_DUMP_CONSTRAINT_SYSTEM=1`.",
        "gpu-lower",
    )


# ---------------------------------------------------------------- GMEM views


VERIFY_PREFIX = (
    "Pallas encountered an internal verification error. Please file a bug at "
    "https://github.com/jax-ml/jax/issues/new/choose. Error details: "
)


def transpose_view_error(first_access: str) -> JaxError:
    """A plain load or store through a transposed GMEM view whose minor dim moved:
    the lowering emits a ``vector.load`` (load) or ``vector.store`` (store) on a memref
    whose minor stride is not 1, and MLIR's verifier rejects the *first such op of the
    kernel in program order*; JAX wraps it as a ``VerificationError``.

    ``first_access``: ``"load"`` or ``"store"``, the kind of that first access. In
    ``dst[...] = src[...]`` the load of ``src`` comes before the store into ``dst``, so
    a copy whose source is such a view says ``vector.load`` even when its destination
    is one too; a ``fill`` or a copy from a plain ref into such a view says
    ``vector.store``. The op's IR follows (``\\n see current operation: ...``).
    """
    op = "vector.load" if first_access == "load" else "vector.store"
    return JaxError(
        "GPU_VERIFICATION",
        "VerificationError",
        VERIFY_PREFIX + f"'{op}' op most minor memref dim must have unit stride",
        "gpu-lower",
        exact=False,
    )


# ---------------------------------------------------------------- the GPU interpreter


MULTIMEM_INTERPRET = "ref must be a reference, got int32[6]"


def multimem_interpret_error() -> JaxError:
    """``plgpu.multimem_store`` under the GPU interpreter (``InterpretGPUParams``), with
    or without race detection: the interpreter has no rule for ``multimem_store_p``,
    so it binds the primitive again on its own representation of a ref, an ``int32[6]``
    allocation key, and the primitive's abstract eval (``_check_ref``) rejects it."""
    return JaxError("GPU_INTERP_NOT_A_REF", "TypeError", MULTIMEM_INTERPRET, "interpret")


def interpret_transform_error(transform_repr: str) -> JaxError:
    """A plain load or store through a view the GPU interpreter cannot follow.

    ``gpu_callbacks._validate_transforms`` takes static ``NDIndexer`` and
    ``TransposeTransform`` only; any other transform on a ``get`` / ``swap``
    (``ClusterRefTransform``, ``BitcastTransform``, ``ReshapeTransform``, ``PeerMemRef``,
    ``MulticastRef``) raises ``ValueError(f"Unsupported transform: {transform}")`` with
    the transform's dataclass repr, e.g. ``ClusterRefTransform(dims=('c',),
    idxs=(Array(1, dtype=int32),))``. It is raised in a host callback, so JAX reports a
    ``JaxRuntimeError`` whose innermost error is this one.
    """
    return JaxError(
        "GPU_INTERP_UNSUPPORTED_TRANSFORM",
        "ValueError",
        interpret_transform_message(transform_repr),
        "interpret",
    )


def interpret_transform_message(transform_repr: str) -> str:
    """``interpret_transform_error``'s message, for a view's interpreter limit (which
    reads the message only: once per view of a check)."""
    return f"Unsupported transform: {transform_repr}"


def cluster_ref_repr(block: dict[str, int]) -> str:
    """``ClusterRefTransform``'s repr for ``plgpu.cluster_ref(ref, block)``: the ids are
    concrete ``int32`` arrays inside the interpreter."""
    dims = tuple(block)
    idxs = ", ".join(f"Array({int(v)}, dtype=int32)" for v in block.values())
    return f"ClusterRefTransform(dims={dims!r}, idxs=({idxs},))"


RACE_PREFIX = "RACE DETECTED\n  "


def race_report(source: str, detect_races: bool) -> JaxError | None:
    """What the GPU interpreter reports for a race whose writes come from ``source``:

    - ``"store"`` (a plain store, ``copy`` / ``fill`` / ``add``) or ``"tma"``
      (``copy_smem_to_gmem``): with ``detect_races=True`` the race detector
      (``race_detection_state.check_write`` / ``check_read``, ``on_race="raise"``)
      raises ``RuntimeError("RACE DETECTED\\n  write of <buffer>[<range>] from
      <thread>, <frame>\\n  clock: ...")`` in a host callback; with it off nothing is
      reported and the run returns one of the racing results. The race is a property
      of the kernel either way: a GPU runs it with no detector.
    - ``"multimem"``: the interpreter cannot run ``multimem_store`` at all
      (``multimem_interpret_error``), so its races are never reported by JAX.
    - ``"cluster_ref"``: a plain access through ``plgpu.cluster_ref`` fails first
      (``interpret_transform_error``), so neither is that race.

    Returns the error JAX's interpreter raises (None: none).
    """
    if source == "multimem":
        return multimem_interpret_error()
    if source == "cluster_ref":
        return None  # interpret_transform_error(...) needs the block: see cluster_ref_repr
    if detect_races:
        return JaxError("RACE_DETECTED", "RuntimeError", RACE_PREFIX, "interpret", exact=False)
    return None


# ---------------------------------------------------------------- buffers


def init_shape(init: Any) -> tuple[int, ...] | None:
    """The shape of an explicit ``init`` as numpy reads it (``np.asarray(init).shape``):
    a bare number is rank 0, ``[3.0]`` is ``(1,)``; None when ragged or not numbers."""
    if isinstance(init, bool | int | float):
        return ()
    if not isinstance(init, list):
        return None
    if not init:
        return (0,)
    inner = [init_shape(v) for v in init]
    first = inner[0]
    if first is None or any(s != first for s in inner):
        return None
    return (len(init), *first)


def init_fits(shape: Sequence[int], init: Any) -> bool:
    """Whether an explicit ``init`` is one device's value of a buffer of ``shape``.

    ``callsupport.host_array`` does ``np.asarray(init).astype(dtype).reshape(shape)``:
    JAX is handed whatever numpy makes of it. The nested list of a rank-0 array is a
    scalar (``np.zeros(()).tolist() == 0.0``), so a rank-0 buffer's explicit ``init`` is
    a bare number; ``[3.0]`` has shape ``(1,)`` (numpy would reshape it, but it is not
    the nested list of a rank-0 array). A rank-0 buffer so made is passed to
    ``pl.kernel`` as a rank-0 GMEM ref: it traces, lowers and interprets.
    """
    got = init_shape(init)
    return got is not None and got == tuple(shape)


_MLIR_TYPES = {
    "bfloat16": "bf16",
    "bool": "i1",
    "float8_e4m3fn": "f8E4M3FN",
    "float8_e5m2": "f8E5M2",
}


def mlir_type(dtype: str) -> str:
    """A dtype as MLIR prints it (``f32``, ``bf16``; integers are signless: ``i32``)."""
    dt = dtypes.canonical(dtype)
    if dt in _MLIR_TYPES:
        return _MLIR_TYPES[dt]
    kind = "f" if dt.startswith("float") else "i"
    return f"{kind}{dtypes.bits(dt)}"


def captured_scalar_error(dtype: str) -> JaxError:
    """A kernel that closes over a rank-0 array (a traced scalar, not a Ref) and uses it:
    tracing takes it (a scalar may be closed over), but the Mosaic GPU lowering gets the
    constant as a GMEM memref where the kernel's jaxpr has a scalar, and its environment
    check fails before any statement is lowered (``lower_jaxpr_to_mosaic_gpu``,
    ``write_env``)."""
    t = mlir_type(dtype)
    return JaxError(
        "CAPTURED_SCALAR",
        "AssertionError",
        f"Scalar type must match ShapedArray dtype, got: memref<{t}> != {t}",
        "gpu-lower",
    )


# ---------------------------------------------------------------- helpers


#: Bit width of a scenario dtype as JAX sees it (64-bit types are 32-bit without x64):
#: ``dtypes.bits`` itself (no wrapper call in the rules' inner loops)
dtype_bits = dtypes.bits


def nbytes(shape: Sequence[int], dtype: str) -> int:
    return math.prod(shape) * dtype_bits(dtype) // 8


# ---------------------------------------------------------------- indexing, at trace


def index_bounds_error(shape: Sequence[int], entries: Sequence[Any]) -> JaxError | None:
    """``NDIndexer.__post_init__`` (``validate=True``) for ``ref.at[entries]`` on a view
    of ``shape``: entries are padded with whole slices, Python slices made ``Slice``s
    (``slice.indices``: clamped), then for each slice in dim order, with a static start::

        start >= dim                   -> Out of bound slice: start=S, dim=D.
        size and start + size-1 >= dim -> Out of bound slice: start=S, size=N, stride=1, dim=D.

    So even a whole slice (``None``, ``[None, None]``) of a dim of size 0 fails
    (``start=0, dim=0``): a view an empty slice made cannot be indexed again. Too many
    entries: ``ValueError: `indices` must not be longer than `shape```.
    """
    found = index_bounds_error_at(shape, entries)
    return None if found is None else found[0]


#: the index entries that are integers or expressions (a tuple: ``isinstance`` of a union
#: type built in place, ``bool | int | str``, builds the union on every test)
_INT_ENTRY = (bool, int, str)


def index_bounds_error_at(
    shape: Sequence[int], entries: Sequence[Any]
) -> tuple[JaxError, int] | None:
    """``index_bounds_error`` and the dim (the entry) it is about."""
    n = len(entries)
    if n > len(shape):
        return None  # AT_TOO_MANY_INDICES: its message needs JAX's reprs of the entries
    for k, d in enumerate(shape):
        e = entries[k] if k < n else None
        if e is None:
            start, size = 0, d
        elif (form := _entry_form(e.__class__)) == _BOOL or form == _INT:
            continue  # an integer (or an expression): not a slice
        elif form == _LIST:
            start, stop, _ = slice(e[0], e[1]).indices(d)
            size = max(0, stop - start)
        elif (ds := _entry_ds(e, form)) is not None and isinstance(ds[0], int):
            start, size = ds
        else:
            continue  # a dynamic start: not checked at trace
        bad = slice_bounds_error(start, size, d)
        if bad is not None:
            return bad, k
    return None


def slice_bounds_error(start: int, size: int, d: int) -> JaxError | None:
    """``index_bounds_error`` of one slice with a static start: ``size`` elements from
    ``start`` (``slice.indices``' for a Python slice, as written for ``pl.ds``) along a
    dim of size ``d`` (the type rule of ``at`` asks it per entry it has resolved)."""
    if start >= d:
        return JaxError(
            "AT_OOB_SLICE", "ValueError", f"Out of bound slice: start={start}, dim={d}.", "trace"
        )
    if size and start + size - 1 >= d:
        return JaxError(
            "AT_OOB_SLICE",
            "ValueError",
            f"Out of bound slice: start={start}, size={size}, stride=1, dim={d}.",
            "trace",
        )
    return None


# ---------------------------------------------------------------- views of refs, lowered
#
# ``lowering._handle_transforms`` under warpgroup semantics (the default of
# ``plgpu.kernel`` and ``pl.kernel`` on Mosaic GPU), for a plain load / store and for
# the SMEM side of a TMA copy: the ref's transforms are, in order, the undo of its
# scratch stack (``UnswizzleRef`` / ``UntilingTransform``, reversed), then the view's
# steps. *Pass 1* (``_bubble_up_transforms_for_lowering(handle_transposes=False)``)
# moves every index, reshape, peer, multicast and cluster step to the front, commuting
# it past each earlier transpose, bitcast, untiling and unswizzle (``_commute_transform``);
# *pass 2* moves the transposes too, past the bitcasts left. A pair with no commute rule
# raises ``NotImplementedError((t1, t2))``; the untiling and unswizzle rules raise their
# own errors (``UntilingTransform.commute_ndindexer`` / ``commute_reshape``,
# ``UnswizzleRef.commute_ndindexer`` / ``commute_reshape``). A bitcast left over fails
# the access itself.


class _Ix(NamedTuple):
    """One index of an NDIndexer: an int (``kind="int"``) or a slice (start may be
    dynamic: ``start=None``)."""

    kind: str
    start: int | None = 0
    size: int = 1
    stride: int = 1
    dyn: str = ""  # the repr of a dynamic start

    def repr(self) -> str:
        if self.kind == "int":
            return "JitTracer(~int32[])"
        start = self.dyn if self.start is None else str(self.start)
        return f"Slice(start={start}, size={self.size}, stride={self.stride})"


class _T(NamedTuple):
    """One JAX transform: kind in ``untile``, ``unswizzle``, ``index``, ``reshape``,
    ``transpose``, ``bitcast``, ``other`` (peer, multicast, cluster)."""

    kind: str
    value: Any = None  # tile, swizzle bytes, (indices, shape), shape, perm, dtype
    name: str = ""
    #: the position of the step in the view (-1: the undo of the scratch's layout)
    pos: int = -1

    def repr(self) -> str:
        if self.kind == "index":
            idx, shape = self.value
            inner = ", ".join(i.repr() for i in idx)
            if len(idx) == 1:
                inner += ","
            return (
                f"NDIndexer(indices=({inner}), shape={_tuple(shape)}, int_indexer_shape=(), "
                "validate=False)"
            )
        if self.kind == "reshape":
            return f"ReshapeTransform(shape={_tuple(self.value)})"
        if self.kind == "transpose":
            return f"TransposeTransform(permutation={_tuple(self.value)})"
        if self.kind == "bitcast":
            return f"BitcastTransform(dtype={_dtype_repr(self.value)})"
        if self.kind == "untile":
            return f"UntilingTransform(tiling={_tuple(self.value)})"
        if self.kind == "unswizzle":
            return f"UnswizzleRef(swizzle={self.value})"
        return self.name


#: dtypes numpy itself defines print as ``dtype('float32')``; ml_dtypes' as ``dtype(bfloat16)``
_NUMPY_DTYPES = {
    "float32", "float16", "int32", "int16", "int8", "uint32", "uint16", "uint8", "bool"
}  # fmt: skip


def _dtype_repr(dtype: str) -> str:
    dtype = {"float64": "float32", "int64": "int32", "uint64": "uint32"}.get(dtype, dtype)
    return f"dtype('{dtype}')" if dtype in _NUMPY_DTYPES else f"dtype({dtype})"


#: an integer index (immutable: one for every entry that is one)
_IX_INT = _Ix("int")
_DYN_START = "JitTracer(int32[])"


#: ``_entry_form``'s answers: the branch of the index rules an entry takes
_BOOL, _INT, _LIST, _MAPPING, _DS, _OTHER = range(6)


@functools.cache
def _entry_form(cls: type) -> int:
    """Which kind of index entry an instance of ``cls`` is: a bool, an integer or an
    expression, a Python slice (a list), an entry in its JSON form (a dict), an entry
    model with a ``ds`` field (``pl.ds``), or another (a block or pid entry: no ``ds``).
    Per class, not per entry: an entry model fails each ``isinstance`` test on the way to
    its branch, and asking a model without the field for ``ds`` raises inside pydantic's
    ``__getattr__``. (The isinstance tests of an entry are its class's: no entry object
    reports a ``__class__`` other than its type.)"""
    if issubclass(cls, bool):
        return _BOOL
    if issubclass(cls, _INT_ENTRY):
        return _INT
    if issubclass(cls, list):
        return _LIST
    if issubclass(cls, dict):
        return _MAPPING
    return _DS if "ds" in getattr(cls, "model_fields", ()) else _OTHER


def _entry_ds(e: Any, form: int) -> Any:
    """The ``[start, size]`` of a ``pl.ds`` entry of form ``form`` (``_entry_form``: a
    dict or an entry model), None for a block or pid entry. A start written as the text
    of a constant (``"1"``) is its int: JAX is given a Python int, which its trace checks
    as it checks any static start."""
    if form == _MAPPING:
        ds = e.get("ds")
    elif form == _DS:
        ds = e.ds
    else:
        return None
    if ds is not None and ds[0].__class__ is str and (v := _CONST_TEXT[ds[0]]) is not None:
        return [v, ds[1]]
    return ds


class _ConstTexts(dict[str, int | None]):
    """An expression's text -> its value when it is a constant (None: it is not one),
    parsed once per text (bounded as ``expr``'s own cache of parsed texts is). A
    constant expression (``"4 - 0"``) is one too: the generated code has Python compute
    it, and JAX is given the int."""

    def __missing__(self, text: str) -> int | None:
        try:
            e = E.parse(text)
        except E.ExprError:
            e = None
        if len(self) >= E.MAX_PARSED:
            self.clear()
        v = self[text] = None if e is None else e.python_int()
        return v


_CONST_TEXT = _ConstTexts()


def _index_entries(entries: Sequence[Any], shape: Sequence[int]) -> list[_Ix] | None:
    """An ``at``'s entries as ``NDIndexer.from_indices_shape`` makes them (padded with
    whole slices; Python slices clamped as ``slice.indices`` does), or None when the
    index is not one the trace accepts."""
    n = len(entries)
    if n > len(shape):
        return None
    out: list[_Ix] = []
    for k, d in enumerate(shape):
        e = entries[k] if k < n else None
        if e is None:
            out.append(_Ix("slice", 0, d, 1, ""))
            continue
        form = _entry_form(e.__class__)
        if form == _BOOL:
            return None
        elif form == _INT:  # a static or traced (an expression) integer
            out.append(_IX_INT)
        elif form == _LIST:
            start, stop, _ = slice(e[0], e[1]).indices(d)
            if start >= d:
                return None
            out.append(_Ix("slice", start, max(0, stop - start), 1, ""))
        else:
            ds = _entry_ds(e, form)
            if ds is not None and not isinstance(ds[0], int):  # pl.ds(expression, size)
                out.append(_Ix("slice", None, ds[1], 1, _DYN_START))
            elif ds is not None:
                if ds[0] >= d or (ds[1] and ds[0] + ds[1] - 1 >= d):
                    return None  # NDIndexer's own bounds check fails at trace
                out.append(_Ix("slice", ds[0], ds[1], 1, ""))
            else:
                out.append(_Ix("slice", None, _get(e, "size"), 1, _DYN_START))
    return out


def _resolve_reshape(target: Sequence[int], size: int) -> tuple[int, ...] | None:
    target = list(target)
    if target.count(-1) > 1:
        return None
    if -1 in target:
        rest = math.prod(d for d in target if d != -1)
        if rest == 0 or size % rest:
            return None
        target = [size // rest if d == -1 else d for d in target]
    return tuple(target) if math.prod(target) == size else None


def jax_transforms(
    shape: Sequence[int], dtype: str, scratch_stack: Sequence[Any], view: Sequence[Any]
) -> list[_T] | None:
    """The ``TransformedRef.transforms`` JAX builds for ``view`` of a ref of ``shape``
    with ``scratch_stack``; None when the trace itself fails (the trace rules say why)."""
    out: list[_T] = []
    for t in reversed(list(scratch_stack)):  # pallas_core.undo_transforms
        if _kind(t) == "tiling":
            out.append(_T("untile", tuple(_get(t, "tile")), "", -1))
        elif _kind(t) == "swizzle":
            out.append(_T("unswizzle", _get(t, "bytes"), "", -1))
    cur = tuple(shape)
    bits = dtype_bits(dtype)
    for i, t in enumerate(view):
        kind = _kind(t)
        if kind == "index":
            idx = _index_entries(list(_get(t, "index")), cur)
            if idx is None:
                return None
            out.append(_T("index", (tuple(idx), cur), "", i))
            cur = tuple([i.size for i in idx if i.kind != "int"])
        elif kind == "reshape":
            new = _resolve_reshape(_get(t, "shape"), math.prod(cur))
            if new is None:
                return None
            out.append(_T("reshape", new, "", i))
            cur = new
        elif kind == "transpose":
            perm = tuple(_get(t, "perm"))
            if sorted(perm) != list(range(len(cur))):
                return None
            out.append(_T("transpose", perm, "", i))
            cur = tuple([cur[p] for p in perm])
        elif kind == "bitcast":
            new = _get(t, "dtype")
            nb = dtype_bits(new)
            if len(cur) < 2 or (cur[-2] * bits) % nb:
                return None
            out.append(_T("bitcast", new, "", i))
            cur = (*cur[:-2], cur[-2] * bits // nb, cur[-1])
            bits = nb
        else:
            out.append(_T("other", None, t.jax_repr(), i))
    return out


def _commute_indexer_untile(t1: _T, t2: _T) -> tuple[_T, JaxError | None]:
    """``UntilingTransform.commute_ndindexer``."""
    tile = t1.value
    idx, shape = t2.value
    n = len(tile)
    untiled, tiled = idx[:-n], idx[-n:]
    leading, untiled_shape = shape[:-n], shape[-n:]
    after: list[_Ix] = []
    for ix, tl in zip(tiled, tile, strict=False):
        if ix.kind == "int":
            return t2, JaxError(
                "TILED_INDEX_TYPE",
                "TypeError",
                "Unsupported index type: <class 'jax._src.interpreters.partial_eval."
                "DynamicJaxprTracer'>",
                "gpu-lower",
            )
        if (ix.start is not None and ix.start % tl) or ix.size % tl:
            start = ix.dyn if ix.start is None else ix.start
            return t2, JaxError(
                "TILED_SLICE_ALIGN",
                "ValueError",
                f"Expected slice start ({start}) and slice size ({ix.size}) to be divisible by "
                f"the tile size ({tl})",
                "gpu-lower",
            )
        start = None if ix.start is None else -(-ix.start // tl)
        after.append(_Ix("slice", start, -(-ix.size // tl), dyn=ix.dyn))
    tiled_shape = (*(a // b for a, b in zip(untiled_shape, tile, strict=False)), *tile)
    new_shape = (*leading, *tiled_shape)
    new_idx = (*untiled, *after)
    new_idx += tuple(_Ix("slice", 0, d) for d in new_shape[len(new_idx) :])
    return _T("index", (new_idx, new_shape)), None


def _commute_indexer_unswizzle(t1: _T, t2: _T, bits: int) -> JaxError | None:
    """``UnswizzleRef.commute_ndindexer``: the two minor indices must be slices, the
    minor one the whole swizzled row."""
    idx, _shape = t2.value
    if not idx:
        return None
    if any(i.kind == "int" for i in idx[-2:]):
        inner = ", ".join(i.repr() for i in idx)
        return JaxError(
            "SWIZZLED_INDEX",
            "NotImplementedError",
            f"Non-slice indices are not supported in 2 minormost dims: ({inner})",
            "gpu-lower",
        )
    last = idx[-1]
    if last.start is None:
        # ``last_idx.start != 0`` on a traced start: a bool of a tracer
        return JaxError(
            "TRACED_BOOL",
            "TracerBoolConversionError",
            "Attempted boolean conversion of traced array with shape bool[].",
            "gpu-lower",
            exact=False,
        )
    if last.start != 0 or last.size != swizzle_elems(t1.value, bits):
        return JaxError(
            "SWIZZLED_SLICE", "ValueError", "Swizzled dims cannot be sliced", "gpu-lower"
        )
    return None


def _commute_transpose_indexer(t1: _T, t2: _T) -> tuple[_T, _T]:
    """``commute_transpose_indexer``: the index moves before the transpose."""
    perm = t1.value
    idx, shape = t2.value
    removed = [i for i, ix in enumerate(idx) if ix.kind == "int"]
    new_perm = tuple(p - sum(d < p for d in removed) for p in perm if p not in removed)
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    new_shape = tuple(shape[i] for i in inv)
    new_idx = tuple(idx[i] for i in inv)
    return _T("index", (new_idx, new_shape)), _T("transpose", new_perm)


def untile_reshape(
    tiling: tuple[int, ...], physical: tuple[int, ...], target: tuple[int, ...]
) -> tuple[tuple[int, ...] | None, JaxError | None]:
    """``UntilingTransform.commute_reshape``: the new tiling, or the error. Only folds of
    consecutive dims are supported, and a fold of tiled dims must have unit tiling in
    every dim but the minor one."""

    def err(t: str, m: str) -> tuple[None, JaxError]:
        return None, JaxError("TILED_RESHAPE", t, m, "gpu-lower")

    if not target:
        return err(
            "NotImplementedError",
            "Commuting a `UntilingTransform` with a `ReshapeTransform` is not supported when "
            "the target shape has 0 dimensions",
        )
    n = len(tiling)
    untiled = physical[:-n]
    untiled = (*untiled[:-n], *(b * t for b, t in zip(untiled[-n:], tiling, strict=False)))
    components: list[list[int]] = [[]]
    for d in untiled:
        if len(components) - 1 >= len(target):
            return None, JaxError("JAX_ASSERTION", "AssertionError", "", "gpu-lower")
        want = target[len(components) - 1]
        components[-1].append(d)
        size = math.prod(components[-1])
        if size == want:
            components.append([])
        elif size > want:
            return err(
                "NotImplementedError",
                "Unfolding dimensions is not supported when commuting an  `UntilingTransform` "
                "with a `ReshapeTransform`",
            )
    if components[-1]:
        return None, JaxError("JAX_ASSERTION", "AssertionError", "", "gpu-lower")
    components.pop()
    if len(components) != len(target):
        return None, JaxError("JAX_ASSERTION", "AssertionError", "", "gpu-lower")
    rev_tiling = list(tiling)[::-1]
    rev_shape = list(untiled[-n:])[::-1]
    new_tiling: list[int] = []
    new_dims: list[int] = []
    for comp in components[::-1]:
        k = len(comp)
        if len(rev_tiling) < k:
            return err(
                "NotImplementedError",
                "Folding tiled dimensions into untiled dimensions is not supported",
            )
        ts, ss = rev_tiling[:k], rev_shape[:k]
        tile_dim = math.prod(ts)
        elems = math.prod(ss)
        tiled_dim = elems // tile_dim
        if any(t != 1 for t in ts[1:]):
            before = (*[s // t for s, t in zip(ss, ts, strict=False)], *ts)
            return err(
                "ValueError",
                "Cannot commute `UntilingTransform` with `ReshapeTransform` when any of the "
                "dimensions being collapsed other than the minormost one has non-unit tiling. "
                f"Attempted to reshape tiled slice of shape {_tuple(before)} into shape "
                f"{_tuple((tiled_dim, tile_dim))}",
            )
        new_tiling.append(tile_dim)
        new_dims.append(tiled_dim)
        rev_tiling, rev_shape = rev_tiling[k:], rev_shape[k:]
        if not rev_tiling:
            break
    if rev_tiling or rev_shape:
        # (``assert not rev_tiling_to_process``: a tile of more dims than the ref left
        # tile entries no dim of the ref pairs with)
        return None, JaxError("JAX_ASSERTION", "AssertionError", "", "gpu-lower")
    return tuple(new_tiling[::-1]), None


def _apply_physical(shape: tuple[int, ...], t: _T) -> tuple[int, ...]:
    """A bubbled transform applied to the (physical) shape."""
    if t.kind == "index":
        idx, _ = t.value
        return tuple(i.size for i in idx if i.kind != "int")
    if t.kind == "reshape":
        return tuple(t.value)
    return shape


def _not_commutable(t1: _T, t2: _T) -> JaxError:
    return JaxError(
        "GPU_TRANSFORMS_UNSUPPORTED",
        "NotImplementedError",
        f"({t1.repr()}, {t2.repr()})",
        "gpu-lower",
        exact=t2.kind != "other",
    )


def view_lowering_error(
    shape: Sequence[int],
    dtype: str,
    scratch_stack: Sequence[Any],
    view: Sequence[Any],
    access: str = "load",
) -> JaxError | None:
    """What the warpgroup lowering raises for a load / store (``access="load"`` or
    ``"store"``) or the SMEM source of a TMA copy (``access="tma"``) through ``view`` of
    a ref of logical ``shape`` (after its scratch ``tiling`` / ``swizzle`` stack), in
    the order the lowering meets it; None when the transforms are handled (the access
    may still fail later: layout inference, the TMA rules, IR verification).

    Pass 1 (every commute the lowering tries, transposes left in place):

    - an index past a ``tiling``: an int index in one of the ``len(tile)`` minor dims
      fails (``TypeError: Unsupported index type: <class '...DynamicJaxprTracer'>``: the
      index is traced); a slice there must start and stop on tile boundaries
      (``ValueError: Expected slice start (S) and slice size (N) to be divisible by the
      tile size (T)``; a dynamic start prints as ``JitTracer(int32[])``, only its size is
      checked);
    - an index past a ``swizzle``: the two minor indices must be slices
      (``NotImplementedError: Non-slice indices are not supported in 2 minormost dims:
      (...)``), the minor one the whole swizzled row (``ValueError: Swizzled dims cannot
      be sliced``). After a tiling this always holds (the tile's dims are whole);
    - a reshape past a ``tiling``: ``untile_reshape``; past a ``swizzle``: the ref's
      minor dim must still be the swizzle row;
    - an index or reshape past a transpose: an index commutes (the transpose loses the
      int-indexed dims), a reshape does not;
    - anything past a bitcast: nothing commutes.

    Pass 2: a transpose past a bitcast does not commute. A bitcast left over:
    ``Transforms are not yet implemented for warpgroup semantics`` for a plain
    access, ``<class 'jax._src.state.types.BitcastTransform'>`` for a TMA copy.
    """
    found = view_lowering_error_at(shape, dtype, scratch_stack, view, access)
    return None if found is None else found[0]


#: the codes ``view_lowering_error`` gives for a bitcast left over once every other step
#: is handled: raised by the access itself, after the view's steps are lowered
LEFTOVER_CODES = ("GPU_WG_TRANSFORMS", "TMA_SRC_TRANSFORM")


def view_lowering_error_at(
    shape: Sequence[int],
    dtype: str,
    scratch_stack: Sequence[Any],
    view: Sequence[Any],
    access: str = "load",
) -> tuple[JaxError, int | None] | None:
    """``view_lowering_error`` and the position in ``view`` of the step the lowering was
    moving when it failed (None: the access itself, a bitcast left over)."""
    ts = jax_transforms(shape, dtype, scratch_stack, view)
    if ts is None:
        return None
    bits = dtype_bits(dtype)
    phys, err, _ = physical_shape_at(shape, bits, scratch_stack)
    if err is not None or phys is None:
        return None
    remaining: list[_T] = []
    cur = phys
    for t in ts:
        if t.kind not in ("index", "reshape", "other"):
            remaining.append(t)
            continue
        new_rem: list[_T] = []
        at = t.pos
        for r in reversed(remaining):
            if r.kind == "untile" and t.kind == "index":
                t, e = _commute_indexer_untile(r, t)
                if e:
                    return e, at
                new_rem.append(r)
            elif r.kind == "unswizzle" and t.kind == "index":
                e = _commute_indexer_unswizzle(r, t, bits)
                if e:
                    return e, at
                new_rem.append(r)
            elif r.kind == "transpose" and t.kind == "index":
                t, r2 = _commute_transpose_indexer(r, t)
                new_rem.append(r2)
            elif r.kind == "unswizzle" and t.kind == "reshape":
                e_ = swizzle_elems(r.value, bits)
                if not cur or cur[-1] != e_:
                    return JaxError(
                        "SWIZZLED_RESHAPE",
                        "ValueError",
                        f"Reshape shape {_tuple(cur)} is not divisible by swizzle elements {e_}",
                        "gpu-lower",
                    ), at
                new_rem.append(r)
            elif r.kind == "untile" and t.kind == "reshape":
                new_tiling, e = untile_reshape(r.value, cur, t.value)
                if e:
                    return e, at
                assert new_tiling is not None
                lead = len(t.value) - len(new_tiling)
                sizes = [d // tl for d, tl in zip(t.value[lead:], new_tiling, strict=False)]
                t = _T("reshape", (*t.value[:lead], *sizes, *new_tiling))
                new_rem.append(_T("untile", new_tiling))
            elif r.kind in ("untile", "unswizzle") and t.kind == "other":
                new_rem.append(r)
            else:
                return _not_commutable(r, t), at
        remaining = new_rem[::-1]
        cur = _apply_physical(cur, t)
    # pass 2: the view's own steps (the scratch undo is handed to the dialect)
    left: list[_T] = []
    for t in ts:
        if t.kind in ("untile", "unswizzle"):
            continue
        if t.kind == "bitcast":
            left.append(t)
            continue
        for r in reversed(left):
            return _not_commutable(r, t), t.pos
    if left:
        if access == "tma":
            return JaxError(
                "TMA_SRC_TRANSFORM",
                "NotImplementedError",
                "<class 'jax._src.state.types.BitcastTransform'>",
                "gpu-lower",
            ), None
        return JaxError(
            "GPU_WG_TRANSFORMS",
            "NotImplementedError",
            "Transforms are not yet implemented for warpgroup semantics",
            "gpu-lower",
        ), None
    return None


# ---------------------------------------------------------------- memrefs of views
#
# After the commutes, ``_handle_transforms`` applies a view's steps to the memref in
# order: an index is ``memref_slice`` (a strided subview), a transpose
# ``memref_transpose`` (permuted strides), a reshape ``memref_reshape`` (parallel folds
# and unfolds; a fold needs its dims contiguous). ``view_memref`` follows the strides
# (in elements of the untransformed ref) the same way.


class Memref(NamedTuple):
    """A memref as the lowering types it: its ``shape`` and ``strides`` (in elements of
    the untransformed ref), ``identity`` whether its layout is still the identity (the
    untransformed ref: folds need no contiguity check)."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    identity: bool


class Unmade(NamedTuple):
    """The first reshape of a view the lowering cannot make: its error and position."""

    error: JaxError
    pos: int


class MemrefFold(NamedTuple):
    """What ``view_memref`` says of a view: its ``memref`` (None where it is not
    followed: a bitcast, a step the trace rejects) and the first reshape the lowering
    cannot make (``unmade``, None: none)."""

    memref: Memref | None
    unmade: Unmade | None


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    # (the loop's own answers for rank 0, 1 and 2, without it: most refs are of these)
    if len(shape) < 2:
        return (1,) * len(shape)
    if len(shape) == 2:
        return (1 * shape[1], 1)
    out = [1] * len(shape)
    s = 1
    for k in range(len(shape) - 1, 0, -1):
        s *= shape[k]
        out[k - 1] = s
    return tuple(out)


def _contiguous(m: Memref, lo: int = 0, hi: int | None = None) -> bool:
    """``_is_contiguous_shape_slice``: each dim fits exactly in the next larger stride."""
    shape, strides, identity = m
    if identity:
        return True
    hi = len(shape) if hi is None else hi
    for k in range(lo + 1, hi):
        if strides[k] * shape[k] != strides[k - 1]:
            return False
    return True


def _fold(m: Memref, dim: int, rank: int) -> tuple[Memref | None, JaxError | None]:
    """``memref_fold``: the ``rank`` dims from ``dim`` become one."""
    shape, strides = list(m.shape), list(m.strides)
    identity = m.identity
    if not (identity or (len(shape) == 1 and strides == [1])) and not _contiguous(
        m, dim, dim + rank
    ):
        return None, JaxError(
            "GPU_RESHAPE_STRIDED",
            "ValueError",
            f"strides={strides}, ref_ty.shape={shape}, dim={dim}, fold_rank={rank}",
            "gpu-lower",
        )
    shape[dim : dim + rank] = [math.prod(shape[dim : dim + rank])]
    strides[dim : dim + rank] = [strides[dim + rank - 1]]
    return Memref(tuple(shape), tuple(strides), identity), None


def _unfold(m: Memref, dim: int, factors: Sequence[int]) -> Memref:
    """``memref_unfold``: dim ``dim`` becomes ``factors``."""
    shape, strides = list(m.shape), list(m.strides)
    prev = strides[dim]
    inserted = []
    for f in reversed(list(factors)):
        inserted.append(prev)
        prev *= f
    shape[dim : dim + 1] = list(factors)
    strides[dim : dim + 1] = list(reversed(inserted))
    return Memref(tuple(shape), tuple(strides), m.identity)


def memref_reshape(m: Memref, target: Sequence[int]) -> tuple[Memref | None, JaxError | None]:
    """``mosaic.gpu.utils.memref_reshape``: parallel folds and unfolds of the original
    dims (``_reshape``), else, for a contiguous memref, one fold and one unfold; a
    reshape neither does raises ``NotImplementedError: Can't reshape [..] to [..] by
    composing independent folds/unfolds.``; a fold of dims that are not contiguous
    raises ``ValueError: strides=[..], ref_ty.shape=[..], dim=D, fold_rank=K``."""
    if m.identity:
        # the untransformed ref (contiguous): every parallel fold and unfold, or the one
        # fold and unfold of a contiguous memref, gives the target's contiguous strides
        target = tuple(target)
        return Memref(target, contiguous_strides(target), True), None
    out, e, _ = _memref_reshape(m, target)
    return out, e


def _memref_reshape(
    m: Memref, target: Sequence[int]
) -> tuple[Memref | None, JaxError | None, bool]:
    """``memref_reshape`` and whether it folds any dims."""
    target = tuple(target)
    if m.shape == target:
        return m, None, False
    if not m.shape or not target:
        return Memref(target, (1,) * len(target), m.identity), None, not target
    sh0, sh1 = list(m.shape), list(target)
    cur = m
    i0 = i1 = 0

    def fold_until(shape: list[int], off: int, want: int) -> int | None:
        dim = 1
        for to in range(off, len(shape)):
            dim *= shape[to]
            if dim == want:
                return to + 1
            if dim > want:
                return None
        return None

    folds = False

    def not_parallel() -> tuple[Memref | None, JaxError | None, bool]:
        if _contiguous(m):
            flat = contiguous_strides(target)
            minor = m.strides[-1] if m.strides else 1
            return Memref(target, tuple(s * minor for s in flat), m.identity), None, True
        return (
            None,
            JaxError(
                "GPU_RESHAPE_STRIDED",
                "NotImplementedError",
                f"Can't reshape {sh0} to {sh1} by composing independent folds/unfolds.",
                "gpu-lower",
            ),
            True,
        )

    while i0 < len(sh0) and i1 < len(sh1):
        if sh0[i0] > sh1[i1]:
            idx = fold_until(sh1, i1, sh0[i0])
            if idx is None:
                return not_parallel()
            cur = _unfold(cur, i0, sh1[i1:idx])
            sh0[i0 : i0 + 1] = sh1[i1:idx]
            i0 += idx - i1
            i1 = idx
        elif sh0[i0] < sh1[i1]:
            idx = fold_until(sh0, i0, sh1[i1])
            if idx is None:
                return not_parallel()
            folded, e = _fold(cur, i0, idx - i0)
            if e is not None:
                return None, e, True
            assert folded is not None
            cur, folds = folded, True
            sh0[i0:idx] = [math.prod(sh0[i0:idx])]
            i0 += 1
            i1 += 1
        else:
            i0 += 1
            i1 += 1
    if i0 < len(sh0):
        folded, e = _fold(cur, i0 - 1, len(sh0) - i0 + 1)
        if e is not None:
            return None, e, True
        assert folded is not None
        cur, folds = folded, True
    if i1 < len(sh1):
        cur = _unfold(cur, i0 - 1, [sh0[i0 - 1]] + [1] * (len(sh1) - i1))
    return cur, None, folds


def _reshape_folds(shape: Sequence[int], target: Sequence[int]) -> bool:
    """Whether ``memref_reshape`` of ``shape`` into ``target`` folds (collapses) dims, or
    only unfolds (expands) them."""
    m = Memref(tuple(shape), contiguous_strides(shape), False)
    return _memref_reshape(m, target)[2]


#: a view whose memref is not followed
_UNFOLLOWED = MemrefFold(None, None)


def view_memref(shape: Sequence[int], view: Sequence[Any]) -> MemrefFold:
    """The memref a view of an untransformed ref of ``shape`` lowers to (None where it is
    not followed: a bitcast, a step the trace rejects), and the first reshape the
    lowering cannot make, with its position in ``view``."""
    return view_memref_from(Memref(tuple(shape), contiguous_strides(shape), True), view)


def view_memref_from(m: Memref | None, view: Sequence[Any], offset: int = 0) -> MemrefFold:
    """``view_memref`` continued: the steps ``view`` applied to the memref ``m`` of the
    view they extend (``offset``: how many steps came before them, for the position)."""
    for i, t in enumerate(view, offset):
        if m is None:
            return _UNFOLLOWED
        kind = t.LOWERS_AS
        if kind == "index":
            # (the op's own index, read directly, not copied: it is only read)
            index: Any = t.index
            # (the dims after the index's entries are whole slices: kept as they are)
            n = len(index)
            shape, strides, _ = m
            ix = _index_entries(index, shape[:n])
            if ix is None:
                return _UNFOLLOWED
            # the dims an integer index leaves (one pass, both lists)
            sizes: list[int] = []
            kept: list[int] = []
            for k, (kind, _start, size, _stride, _dyn) in enumerate(ix):
                if kind != "int":
                    sizes.append(size)
                    kept.append(strides[k])
            m = Memref((*sizes, *shape[n:]), (*kept, *strides[n:]), False)
        elif kind == "transpose":
            # (an op's perm is a list of ints already: its field is StrictInt)
            perm = t.perm
            shape, strides, _ = m
            if sorted(perm) != list(range(len(shape))):
                return _UNFOLLOWED
            m = Memref(tuple([shape[p] for p in perm]), tuple([strides[p] for p in perm]), False)
        elif kind == "reshape":
            target = _resolve_reshape(_get(t, "shape"), math.prod(m.shape))
            if target is None:
                return _UNFOLLOWED
            m, e = memref_reshape(m, target)
            if e is not None:
                return MemrefFold(None, Unmade(e, i))
        elif kind == "bitcast":
            return _UNFOLLOWED
    return MemrefFold(m, None)


def minor_strided(m: Memref | None) -> bool:
    """Whether the memref's minor dim is not unit-stride (True when unknown)."""
    return m is None or (bool(m.shape) and m.strides[-1] != 1)


# ---------------------------------------------------------------- TMA copies from SMEM


def _tiled_view_memref(
    shape: Sequence[int], tile: Sequence[int], view: Sequence[Any]
) -> Memref | None:
    """The physical memref of a view of tiled SMEM made of ``at`` steps only (the TMA
    copies the tiled allocation): leading dims sliced as they are, a tiled dim's slice
    becomes a slice of its tile-index dim (the commute rules hold it to tile multiples).
    None for any other view."""
    n = len(tile)
    if n > len(shape):
        return None
    lead = len(shape) - n
    phys = [*shape[:lead], *(d // t for d, t in zip(shape[lead:], tile, strict=True)), *tile]
    strides = list(contiguous_strides(phys))
    sizes = list(phys)
    # which physical dim each logical dim of the view is (its tile size, 1 if untiled)
    dims: list[tuple[int, int]] = [(k, 1) for k in range(lead)]
    dims += [(lead + j, t) for j, t in enumerate(tile)]
    logical = list(shape)
    for t in view:
        if _kind(t) != "index":
            return None
        ix = _index_entries(list(_get(t, "index")), logical)
        if ix is None:
            return None
        keep: list[tuple[int, int]] = []
        new_logical: list[int] = []
        for (pd, tl), e, d in zip(dims, ix, logical, strict=True):
            if e.kind == "int":
                if tl != 1:
                    return None
                sizes[pd] = 0  # dropped
                continue
            if tl != 1 and e.size % tl:
                return None
            sizes[pd] = e.size // tl
            keep.append((pd, tl))
            new_logical.append(e.size)
            del d
        dims, logical = keep, new_logical
    out = [(sz, st) for sz, st in zip(sizes, strides, strict=True) if sz != 0]
    return Memref(tuple(s for s, _ in out), tuple(st for _, st in out), False)


def tma_smem_error(
    shape: Sequence[int],
    dtype_bits: int,
    stack: Sequence[Any],
    view: Sequence[Any],
    m: Memref | None,
    dst_shape: Sequence[int],
    dst_strides: Sequence[int],
    load: bool = False,
    gmem_base: Sequence[int] | None = None,
) -> JaxError | None:
    """What a TMA copy (``copy_smem_to_gmem``) from ``view`` of SMEM of logical ``shape``
    (scratch layout ``stack``; ``m``: the view's ``view_memref``) into a GMEM ref of
    ``dst_shape`` / ``dst_strides`` raises when the Mosaic GPU dialect lowers it
    (``LaunchContext.async_copy``), once the view lowered (``view_lowering_error``):

    - the GMEM ref's strides (but the minor; of the whole ref ``gmem_base`` the view
      slices, where known, else of the view) not multiples of 16 bytes, the box's minor
      dim (the tile's, else the view's) not a multiple of 128 bits, or not the swizzle's
      row (``_check_tma_strides_and_swizzle``);
    - a view whose minor dim is not the SMEM ref's (a transpose): the GMEM ref is
      transformed to match and its minor stride is not 1: ``TMA requires the stride of
      the last dimension after transforming the GMEM reference to be 1, but it is N.``
      (N: the stride of the GMEM dim the SMEM minor dim lands on);
    - an SMEM view that is not one contiguous block (dims of size 1 aside): ``async_copy
      needs the SMEM reference to be contiguous, but got strides [...] for shape [...]``
      (of the physical, tiled memref, without its unit dims);
    - a box (the slice as the SMEM tiling arranges it) of more than 5 dims, unit dims
      aside: ``Async copies only support striding up to 5 dimensions``;
    - a copy through a tensor map (a load, whose out-of-bounds elements are zero-filled,
      or a swizzled store, or a store into a strided GMEM slice; ``load``) of a box
      longer than 256 elements along a dim:
      ``Async copies only support copying <=256 elements along each dimension, got
      (...)``. (An unswizzled store of a contiguous GMEM slice is one bulk copy, with no
      such limit; a tiled unswizzled store of a strided one is not checked.)
    """
    # the layout's kinds, its (first) tiling's tile and swizzle's bytes, in one pass
    kinds: list[str] = []
    tile: list[int] | None = None
    swz = None
    for t in stack:
        kind = _kind(t)
        kinds.append(kind)
        if kind == "tiling" and tile is None:
            tile = list(_get(t, "tile"))
        elif kind == "swizzle" and swz is None:
            swz = _get(t, "bytes")
    if m is None or not m.shape:
        return None
    m_shape, m_strides = m.shape, m.strides
    moved = m_strides[-1] != 1
    # (an unswizzled store of a contiguous GMEM slice is one bulk copy; of an untiled,
    # untransposed view, the slice is the GMEM view itself)
    tiled_copy = (
        load
        or swz is not None
        or (tile is None and not moved and not _contiguous_slice(dst_shape, dst_strides))
    )
    # (a tile of one row is a tile of two dims: the TMA rules' to refuse, as measured)
    if moved and kinds == ["tiling", "swizzle"] and tile is not None and len(tile) == 1:
        return layout_inference_error()  # (no SMEM layout for the transposed view)
    # the copy moves the view's transposes to the GMEM side: the SMEM memref it copies
    # is the view's with its dims in memory order
    # (stable: dims of equal strides keep their order)
    order = sorted(range(len(m_shape)), key=m_strides.__getitem__, reverse=True)
    ms = Memref(tuple([m_shape[k] for k in order]), tuple([m_strides[k] for k in order]), False)
    tiled = None if tile is None else _tiled_view_memref(shape, tile, view)
    pm = ms if tile is None else tiled
    if pm is not None:
        full = list(pm.shape)
    else:  # a view of more than indices: the box is the tiled allocation's
        full = list(physical_shape(shape, dtype_bits, stack)[0] or tile or m_shape)
    box = [d for d in full if d != 1] or [1]  # (unit dims are dropped from the box)
    if len(box) > 5:  # (_prepare_tma, once the unit dims are dropped)
        return JaxError(
            "TMA_GMEM_STRIDES",
            "ValueError",
            "Async copies only support striding up to 5 dimensions",
            "gpu-lower",
        )
    # _check_tma_strides_and_swizzle, on the GMEM ref and the (tiled) box
    for st in contiguous_strides(gmem_base or dst_shape)[:-1]:
        if st * dtype_bits % 128:
            return JaxError(
                "TMA_GMEM_STRIDES",
                "ValueError",
                "Async copies require all GMEM strides except the last one to be a multiple "
                "of 16 bytes",
                "gpu-lower",
            )
    if (bits_error := tma_last_dim_error(box[-1], dtype_bits)) is not None:
        return bits_error
    if swz is not None and box[-1] != swizzle_elems(swz, dtype_bits):
        e = swizzle_elems(swz, dtype_bits)
        return JaxError(
            "TMA_GMEM_STRIDES",
            "ValueError",
            f"Async copies with swizzle=<SwizzlingMode.k{swz}ByteSwizzle: {swz}> require the "
            f"last dimension of the slice to be exactly k{swz}ByteSwizzle bytes i.e.  {e} "
            f"elements, but got {box[-1]} elements.",
            "gpu-lower",
        )
    transposed = "transpose" in [_kind(t) for t in view]
    phys = ms if tile is None else (None if transposed else tiled)
    if phys is not None:
        kept = [(d, s) for d, s in zip(phys[0], phys[1], strict=True) if d != 1]
        if tuple([s for _, s in kept]) != contiguous_strides([d for d, _ in kept]):
            return JaxError(
                "TMA_SMEM_NOT_CONTIGUOUS",
                "ValueError",
                "async_copy needs the SMEM reference to be contiguous, but got strides "
                f"{[s for _, s in kept]} for shape {[d for d, _ in kept]}",
                "gpu-lower",
            )
    if moved and 1 in m_strides and len(dst_strides) == len(m_shape):
        q = m_strides.index(1)
        return JaxError(
            "TMA_MINOR_STRIDE",
            "ValueError",
            "TMA requires the stride of the last dimension after transforming the GMEM "
            f"reference to be 1, but it is {dst_strides[q]}.",
            "gpu-lower",
        )
    if tiled_copy and max(full, default=1) > TMA_BOX_DIM:
        # (JAX prints the slice with unit dims dropped where the GMEM ref has them too:
        # with a unit dim in the box, only the message's start is known)
        exact = 1 not in full
        return JaxError(
            "TMA_GMEM_STRIDES",
            "ValueError",
            TMA_BOX_MESSAGE + (_tuple(full) if exact else ""),
            "gpu-lower",
            exact=exact,
        )
    return None


def _contiguous_slice(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """``async_copy``'s ``check_contiguous_slice``: the slice is one run of the GMEM ref
    (its minor stride 1, each dim's stride the elements of the dims inside it; unit dims
    aside)."""
    if not strides or strides[-1] != 1:
        return False
    expected = 1
    for d, st in zip(reversed(shape), reversed(strides), strict=True):
        if d != 1 and st != expected:
            return False
        expected *= d
    return True


#: the most elements a TMA box (a tensor-map copy) takes along one dimension
TMA_BOX_DIM = 256
TMA_BOX_MESSAGE = (
    f"Async copies only support copying <={TMA_BOX_DIM} elements along each dimension, got "
)


def tma_last_dim_error(minor: int, dtype_bits: int) -> JaxError | None:
    """``_check_tma_strides_and_swizzle`` (every TMA copy, load or store): the box's minor
    dim of ``minor`` elements must be a whole number of 16-byte units."""
    if minor * dtype_bits % 128 == 0:
        return None
    return JaxError(
        "TMA_LAST_DIM_BITS",
        "ValueError",
        "Async copies require the number of bits copied along the last dimension to be "
        f"divisible by 128, but got {minor * dtype_bits}",
        "gpu-lower",
    )


def smem_contiguity_error(shape: Sequence[int], view: Sequence[Any]) -> JaxError | None:
    """An SMEM view with no unit-stride dim (an integer index dropped the minor dim):
    layout inference cannot place a swizzle on it (``_is_valid_smem_layout_assignment``:
    ``NotImplementedError: We cannot apply swizzle to non-contiguous refs``)."""
    return smem_memref_contiguity_error(view_memref(shape, view)[0])


def smem_memref_contiguity_error(m: Memref | None) -> JaxError | None:
    """``smem_contiguity_error`` of the view's memref (``view_memref``), where the caller
    has it."""
    if m is None or not m.shape or 1 in m.strides:
        return None
    return JaxError(
        "SMEM_NOT_CONTIGUOUS",
        "NotImplementedError",
        "We cannot apply swizzle to non-contiguous refs",
        "gpu-lower",
    )
