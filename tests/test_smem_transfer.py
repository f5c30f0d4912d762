"""``mpmd_lab.smem_transfer`` (JAX's transfer schedule, ported) against what real JAX
was measured to do (jax 0.12; the recorded cases under tests/agreement hold the rest)."""

from __future__ import annotations

import pytest
from mpmd_lab.layout_rules import contiguous_strides
from mpmd_lab.smem_transfer import transferable


def _one_dim_tiles_fit(k: int, bits: int, swizzle: int) -> bool:
    """The table measured before the port: a swizzled view of ``k`` one-dim tiles a row."""
    if bits == 32 and swizzle >= 64:
        return k == 1 or (k % 2 == 0 and k % 8 != 0)
    return k % 4 != 0


@pytest.mark.parametrize(
    "rows",
    [64, pytest.param(128, marks=pytest.mark.slow), pytest.param(192, marks=pytest.mark.slow)],
)
@pytest.mark.parametrize("bits", [8, 16, 32])
@pytest.mark.parametrize("swizzle", [32, 64, 128])
def test_one_dim_tiles_as_measured(bits: int, swizzle: int, rows: int) -> None:
    """(The rows were measured not to matter: 64 in the fast tier, 128 and 192 slow.)"""
    c = swizzle * 8 // bits
    for k in range(1, 17):
        shape = (rows, k * c)
        got = transferable(shape, contiguous_strides(shape), (c,), swizzle, bits)
        assert got == _one_dim_tiles_fit(k, bits, swizzle), k
        # a tile of one row is a tile of one dim
        assert transferable(shape, contiguous_strides(shape), (1, c), swizzle, bits) == got


#: (bits, swizzle) -> the tile rows (of 1, 2, 4, 8, 16, 64) with no schedule, for a
#: 128 x 128 ref tiled (rows, swizzle's width): measured with real JAX
NO_SCHEDULE = {
    (32, 32): {1},
    (32, 64): {1},
    (32, 128): {2},
    (16, 32): {1, 2},
    (16, 64): {1, 2},
    (16, 128): set(),
    (8, 32): {1, 2},
    (8, 64): set(),
    (8, 128): set(),
}


@pytest.mark.parametrize(("bits", "swizzle"), sorted(NO_SCHEDULE))
def test_tile_rows_as_measured(bits: int, swizzle: int) -> None:
    c = swizzle * 8 // bits
    for rows in (1, 2, 4, 8, 16, 64):
        got = transferable((128, 128), (128, 1), (rows, c), swizzle, bits)
        assert got == (rows not in NO_SCHEDULE[bits, swizzle]), rows


def test_unswizzled_narrow_tile() -> None:
    """Without a swizzle (planned as 16 bytes): a float32 tile narrower than 8 has none."""
    assert not transferable((128, 128), (128, 1), (8, 4), 16, 32)
    assert transferable((128, 128), (128, 1), (8, 8), 16, 32)


def test_transposed_view_layouts() -> None:
    """A transposed view (strides (1, C), the (8, 8) tile transposed, no swizzle), as
    measured: a 16-bit value moves in the WGMMA layout (the transposed txmatrix), an
    8-bit one (Hopper: no 8-bit transposed txmatrix) in the transposed layout only, a
    32-bit one in none."""
    from mpmd_lab.smem_transfer import WGMMA_LAYOUT, WGMMA_TRANSPOSED_LAYOUT, transfer_layouts

    assert transfer_layouts((64, 256), (1, 64), (8, 8), 16, 16)[0] == WGMMA_LAYOUT
    assert transfer_layouts((64, 256), (1, 64), (8, 8), 16, 8) == (WGMMA_TRANSPOSED_LAYOUT,)
    assert transfer_layouts((64, 256), (1, 64), (8, 8), 16, 32) == ()


def test_empty_and_oversized_views_are_not_planned() -> None:
    """An empty view, or one larger than any SMEM, is left to the other rules (the port
    would divide by zero, or search for seconds)."""
    from mpmd_lab.layout_rules import Memref, smem_value_layouts
    from mpmd_lab.ops import Transform
    from pydantic import TypeAdapter

    stack = [
        TypeAdapter(Transform).validate_python(t)
        for t in ({"op": "tiling", "tile": [8, 32]}, {"op": "swizzle", "bytes": 128})
    ]
    for shape in ((0, 128), (4096, 4096)):
        m = Memref(shape, contiguous_strides(shape), True)
        assert smem_value_layouts(stack, shape, 32, m) is None
    m = Memref((128, 128), (128, 1), True)
    assert smem_value_layouts(stack, (128, 128), 32, m)
