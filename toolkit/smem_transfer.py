"""Whether Mosaic GPU can move a register array to or from tiled, swizzled SMEM in a
WGMMA layout: JAX's own schedule derivation, ported (no JAX import).

Layout inference lets a plain load or store of SMEM with a tiling and a swizzle have a
register layout only where ``FragmentedArray.transfer_tiled`` derives a transfer
schedule for it (``IsTransferableSmemRegisters._is_supported_smem_transfer``, jax 0.12,
``jax.experimental.mosaic.gpu``); on Hopper the candidates are ``WGMMA_LAYOUT`` and
``WGMMA_TRANSPOSED_LAYOUT`` (``_register_layouts_for_optimized_transfer_to_smem``).
The derivation tiles the SMEM ref's nested shape by the layout's tiling
(``Tiling.tile_nested_shape_strides``), asks that every stride but the vector dim's be
a multiple of the vector length and the vector dim be of unit stride, then plans the
transfer so that no vector crosses a swizzle tile and no two lanes of a wavefront hit
one bank, staggering the lanes over tiles where that helps (``plan_tiled_transfer``).
Each function here is that code's, step for step, on plain tuples.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import numpy as np

WARP_SIZE = 32
SMEM_BANKS = 32
SMEM_BANK_BYTES = 4

Nested = tuple[tuple[int, ...], ...]


class Untransferable(Exception):
    """``transfer_tiled`` found no schedule (JAX's ``TransferPlanDerivationError``,
    ``UnsupportedTransferError`` or ``ValueError`` for a tiling that does not apply)."""


class Layout(NamedTuple):
    """A ``TiledLayout``: its tiling (tiles), warp, lane and vector dims (negative)."""

    tiles: tuple[tuple[int, ...], ...]
    warp_dims: tuple[int, ...]
    lane_dims: tuple[int, ...]
    vector_dim: int

    @property
    def vector_length(self) -> int:
        base = self.tiles[0]
        return tile_shape_all(base, self.tiles)[len(base) :][self.vector_dim]


#: the register layouts layout inference tries for a tiled SMEM transfer on Hopper
WGMMA_LAYOUT = Layout(((64, 8), (16, 8), (8, 8), (2,)), (-7,), (-3, -2), -1)
WGMMA_TRANSPOSED_LAYOUT = Layout(
    ((64, 8), (16, 8), (8, 8), (2, 2), (2, 1)), (-10,), (-6, -3, -5), -2
)
CANDIDATES = (WGMMA_LAYOUT, WGMMA_TRANSPOSED_LAYOUT)


def tile_shape_all(shape: Sequence[int], tiles: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """``Tiling.tile_shape``: the shape after each tile in turn."""
    out = tuple(shape)
    for tile in tiles:
        if len(tile) > len(out):
            raise Untransferable("tiling does not apply")
        head, tail = out[: -len(tile)], out[-len(tile) :]
        if any(s % t for s, t in zip(tail, tile, strict=True)):
            raise Untransferable("tiling does not apply")
        out = (*head, *(d // t for d, t in zip(tail, tile, strict=True)), *tile)
    return out


def tile_strides(strides: Sequence[int], tiling: Sequence[int]) -> tuple[int, ...]:
    """``dialect_lowering.tile_strides``: the strides of a ref's tiled memref."""
    n = len(tiling)
    if len(strides) < n:
        raise Untransferable("strides of lower rank than the tiling")
    ordered = sorted(strides, reverse=True)
    if set(ordered[-n:]) != set(strides[-n:]):
        raise Untransferable("tiled dims transposed with untiled ones")
    untiled, tiled = list(strides[:-n]), list(strides[-n:])
    pairs = list(zip(tiled, tiling, strict=True))
    ordered_pairs = sorted(pairs, reverse=True)
    to_ordered = [ordered_pairs.index(pairs[i]) for i in range(n)]
    from_ordered = [pairs.index(ordered_pairs[i]) for i in range(n)]
    o_tiling = [tiling[from_ordered[i]] for i in range(n)]
    o_strides = [tiled[from_ordered[i]] for i in range(n)]
    out = [1]
    for t in reversed(o_tiling):
        out.append(out[-1] * t)
    prev = o_strides[-1]
    for s, t in zip(o_strides[:-1][::-1], o_tiling[1:][::-1], strict=True):
        d = prev * t
        prev = s
        if s % d:
            raise Untransferable("stride not divisible by the tile")
        out.append(s // d * out[-1])
    out.reverse()
    return (
        *untiled,
        *[out[to_ordered[i]] for i in range(n)],
        *[out[n + to_ordered[i]] for i in range(n)],
    )


def tile_nested(
    tiles: Sequence[Sequence[int]], shape: Nested, strides: Nested
) -> tuple[Nested, Nested]:
    """``Tiling.tile_nested_shape_strides``."""
    for tile in tiles:
        if len(tile) > len(shape):
            raise Untransferable("tiling does not apply")
        head_shape, tail_shape = shape[: -len(tile)], shape[-len(tile) :]
        head_strides, tail_strides = strides[: -len(tile)], strides[-len(tile) :]
        major_shapes, major_strides, minor_shapes, minor_strides = [], [], [], []
        for t0, dim_shape, dim_strides in zip(tile, tail_shape, tail_strides, strict=True):
            t = t0
            maj_sh: list[int] = []
            maj_st: list[int] = []
            min_sh: list[int] = []
            min_st: list[int] = []
            for d, s in zip(reversed(dim_shape), reversed(dim_strides), strict=True):
                if d < t:
                    if t % d:
                        raise Untransferable("tiling does not apply")
                    t //= d
                    min_sh.append(d)
                    min_st.append(s)
                elif t != 1:
                    if d % t:
                        raise Untransferable("tiling does not apply")
                    min_sh.append(t)
                    min_st.append(s)
                    if d != t:
                        maj_sh.append(d // t)
                        maj_st.append(s * t)
                    t = 1
                else:
                    maj_sh.append(d)
                    maj_st.append(s)
            if t != 1:
                raise Untransferable("tiling does not apply")
            major_shapes.append(tuple(maj_sh[::-1]))
            major_strides.append(tuple(maj_st[::-1]))
            minor_shapes.append(tuple(min_sh[::-1]))
            minor_strides.append(tuple(min_st[::-1]))
        shape = (*head_shape, *major_shapes, *minor_shapes)
        strides = (*head_strides, *major_strides, *minor_strides)
    return (
        tuple(d if d else (1,) for d in shape),
        tuple(d if d else (1,) for d in strides),
    )


def transferable(
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    tiling: tuple[int, ...],
    swizzle: int,
    bits: int,
) -> bool:
    """Whether a register array of ``shape`` moves to or from an SMEM view of that shape
    and ``strides`` (in elements of the untiled ref), tiled by ``tiling`` (the view's
    own: a transposed view's tiling is the ref's, transposed) and swizzled ``swizzle``
    bytes (16: none), in some candidate layout (``_is_supported_smem_transfer``)."""
    return bool(transfer_layouts(shape, strides, tiling, swizzle, bits))


@functools.lru_cache(maxsize=256)
def transfer_layouts(
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    tiling: tuple[int, ...],
    swizzle: int,
    bits: int,
) -> tuple[Layout, ...]:
    """The candidate layouts (in layout inference's order) with a transfer schedule:
    ``transfer_tiled`` with the txmatrix schedule first, then without (Hopper: an 8-bit
    transposed txmatrix is refused there)."""
    out = []
    for layout in CANDIDATES:
        for txmatrix in (True, False):
            try:
                _transfer_tiled(shape, strides, tiling, swizzle, bits, layout, txmatrix)
            except Untransferable:
                continue
            out.append(layout)
            break
    return tuple(out)


#: the layout the 16-bit transposed txmatrix schedule plans ``WGMMA_LAYOUT``'s
#: transfer in (``transfer_tiled``'s ``mem_layout``: its major lane dim's tile split
#: in 2 x 4; computed by JAX's ``subdivide_tile``, jax 0.12)
_COL_TXMATRIX_16 = Layout(((64, 8), (16, 8), (8, 8), (2, 8), (2,)), (-9,), (-2, -1, -5), -3)


def _transfer_tiled(
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    tiling: tuple[int, ...],
    swizzle: int,
    bits: int,
    layout: Layout,
    txmatrix: bool,
) -> None:
    """``FragmentedArray.transfer_tiled`` up to its schedule."""
    rank = len(tiling)
    ref_shape = tile_shape_all(shape, [tiling])
    ref_strides = tile_strides(strides, tiling)
    logical_rank = len(ref_shape) - rank
    first_tiled = logical_rank - rank
    nested_shape = tuple(
        (ref_shape[i], ref_shape[i + rank])
        if i >= first_tiled and ref_shape[i + rank] != 1
        else (ref_shape[i],)
        for i in range(logical_rank)
    )
    nested_strides = tuple(
        (ref_strides[i], ref_strides[i + rank])
        if i >= first_tiled and ref_shape[i + rank] != 1
        else (ref_strides[i],)
        for i in range(logical_rank)
    )
    t_shape, t_strides = tile_nested(layout.tiles, nested_shape, nested_strides)
    vec = layout.vector_length
    load_dim = layout.vector_dim
    mem_layout = layout
    if txmatrix:
        major, minor = layout.lane_dims[0], layout.lane_dims[-1]
        reg = bits * vec == 32 and math.prod(t_shape[minor]) % 4 == 0
        row = reg and t_shape[minor][-1] % 4 == 0 and t_strides[minor][-1] == vec
        col = (
            reg
            and bits in (8, 16)
            and len(layout.lane_dims) == 2
            and t_shape[major] == (8,)
            and t_strides[major] == (1,)
        )
        if col and bits == 8:
            raise Untransferable("Transposed 8-bit loads and stores need Blackwell")
        if not (row or col):
            raise Untransferable("Cannot use txmatrix for this layout")
        if not row:
            load_dim = major
            mem_layout = _COL_TXMATRIX_16
    n = len(t_shape)
    for i in range(n):
        if i - n == load_dim:
            continue
        if any(s % vec and d != 1 for s, d in zip(t_strides[i], t_shape[i], strict=True)):
            raise Untransferable("Tiled strides must be a multiple of the vector length")
    if t_strides[load_dim] != (1,):
        raise Untransferable("Vectorized dimension should not require further tiling")
    if (vec * bits) % 8:
        raise Untransferable("vector length not a multiple of bytes")
    t_shape, t_strides = tile_nested(mem_layout.tiles, nested_shape, nested_strides)
    trivial = _plan_tiled_transfer(t_shape, t_strides, mem_layout, bits, swizzle)
    if txmatrix and not trivial:
        raise Untransferable("txmatrix requires a trivial transfer plan")


def _plan_tiled_transfer(
    t_shape: Nested, t_strides: Nested, layout: Layout, bits: int, swizzle: int
) -> bool:
    """``plan_tiled_transfer`` on the tiled nested shape: whether the plan is trivial
    (every lane on the same tile); raises where no plan avoids bank conflicts."""
    import numpy as np  # (only here: the check imports no numpy until a transfer is planned)

    tiles_shape_n = list(t_shape)
    tiles_strides_n = list(t_strides)
    for d in (*layout.warp_dims, *layout.lane_dims, layout.vector_dim):
        tiles_shape_n[d] = (1,) * len(tiles_shape_n[d])
        tiles_strides_n[d] = (0,) * len(tiles_strides_n[d])
    tiles_shape = list(itertools.chain.from_iterable(tiles_shape_n))
    tiles_strides = list(itertools.chain.from_iterable(tiles_strides_n))
    warp_shape = list(itertools.chain.from_iterable(t_shape[d] for d in layout.warp_dims))
    warp_strides = list(itertools.chain.from_iterable(t_strides[d] for d in layout.warp_dims))
    lane_shape = list(itertools.chain.from_iterable(t_shape[d] for d in layout.lane_dims))
    lane_strides = list(itertools.chain.from_iterable(t_strides[d] for d in layout.lane_dims))
    vec = layout.vector_length
    swizzle_tile_elems = 128 // bits
    swizzle_group_elems = 1024 // bits
    transfer_bytes = vec * bits // 8
    alignment = math.gcd(
        *(
            s
            for s, d in zip(
                itertools.chain(tiles_strides, warp_strides, lane_strides),
                itertools.chain(tiles_shape, warp_shape, lane_shape),
                strict=True,
            )
            if d > 1
        )
    )
    if swizzle_tile_elems % alignment and vec <= alignment:
        raise Untransferable("vector transfers may cross swizzle tiles")
    if transfer_bytes > SMEM_BANK_BYTES * 4 or bits > SMEM_BANK_BYTES * 8:
        raise Untransferable("transfer too wide")
    bank_bytes = min(SMEM_BANK_BYTES, transfer_bytes)
    num_banks = SMEM_BANKS * (SMEM_BANK_BYTES // bank_bytes)
    elems_per_bank = bank_bytes * 8 // bits
    num_wavefronts = max(transfer_bytes // bank_bytes, 1)
    wavefront_lanes = WARP_SIZE // num_wavefronts
    lane_mask = np.full(lane_shape, False)
    lane_mask[tuple(slice(0, 1) if s == 0 else slice(None) for s in lane_strides)] = True
    wavefront_mask = lane_mask.reshape(num_wavefronts, wavefront_lanes)
    lane_offsets = np.dot(list(np.ndindex(*lane_shape)), lane_strides)
    shape_arr = np.array(tiles_shape)
    num_tiles = math.prod(tiles_shape)
    tile_idxs = np.expand_dims(np.stack(np.unravel_index(np.arange(num_tiles), tiles_shape), 1), 1)

    def conflicts(lane_tile_idx: np.ndarray) -> bool:
        offsets = np.dot(lane_tile_idx, tiles_strides) + lane_offsets
        groups = (offsets // swizzle_group_elems) % (swizzle // 16)
        banks = ((offsets ^ (groups * swizzle_tile_elems)) // elems_per_bank) % num_banks
        per_wave = banks.reshape(-1, num_wavefronts, wavefront_lanes).swapaxes(0, 1)
        for wave, mask in zip(per_wave, wavefront_mask, strict=True):
            sel = np.sort(wave[:, mask], axis=-1)
            if np.any(sel[..., 1:] == sel[..., :-1]):
                return True
        return False

    if not conflicts(tile_idxs):
        return True
    lane_id = np.arange(WARP_SIZE)[:, None]
    for dim, (s, d) in enumerate(zip(tiles_strides, tiles_shape, strict=True)):
        if d <= 1 or not s % (SMEM_BANKS * elems_per_bank):
            continue
        for group_stride in (1, 2, 4, 8, 16):
            lane_group = (lane_id // group_stride) % 2
            for stagger in range(1, d):
                offset = np.zeros(len(tiles_shape), np.int64)
                offset[dim] = stagger
                if not conflicts((tile_idxs + offset * lane_group) % shape_arr):
                    return False
    raise Untransferable("Failed to synthesize a transfer pattern that avoids bank conflicts")
