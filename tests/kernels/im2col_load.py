"""im2col_load: a TMA load of one pixel of 64 3x3 windows of a (2, 8, 8, 64) input.

``plgpu.im2col_ref(x_ref, window_shape=(3, 3), padding=((1, 1), (1, 1)))`` views the
input as (2 * 8 * 8, 3, 3, 64) windows; ``.at[pl.ds(0, 64), 0, 1, :]`` picks offset
(0, 1) of the first 64 windows, (64, 64), copied into SMEM by TMA. It traces; the
Mosaic GPU lowering refuses it under plgpu.kernel's warpgroup semantics
(NotImplementedError: im2col copies are not supported under Warpgroup lowering
semantics.), which the imported scenario reports as IM2COL_WARPGROUP.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = {
    "stage": "gpu-lower",
    "type": "NotImplementedError",
    "message": "im2col copies are not supported under Warpgroup lowering semantics.",
}


def kernel(x_ref, o_ref, smem, bar):
    windows = plgpu.im2col_ref(x_ref, window_shape=(3, 3), padding=((1, 1), (1, 1)))
    plgpu.copy_gmem_to_smem(windows.at[pl.ds(0, 64), 0, 1, :], smem, bar)
    plgpu.barrier_wait(bar)
    o_ref[...] = smem[...]


def make():
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((64, 64), jnp.float32),
        scratch_types=[plgpu.SMEM((64, 64), jnp.float32), plgpu.Barrier()],
        grid=(1,),
        grid_names=("b",),
    )
    x = jnp.arange(2 * 8 * 8 * 64, dtype=jnp.float32).reshape(2, 8, 8, 64)
    return jax.jit(call), (x,)


def expected(x):
    return None
