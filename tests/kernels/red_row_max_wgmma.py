"""red_row_max_wgmma: the row maxima the way JAX's attention kernels take them: the
loaded tile cast to the WGMMA register layout (``plgpu.layout_cast``), then
``jnp.max(..., axis=1)``. JAX lowers it; a compute value has no register layouts, so
the import is partial and says so at the reduction's line (never "valid" or "ok").
"""

import jax
import jax.numpy as jnp
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = "valid"

ROWS, COLS = 64, 128


def kernel(x_ref, o_ref):
    x = plgpu.layout_cast(x_ref[...], plgpu.Layout.WGMMA)
    o_ref[...] = jnp.max(x, axis=1)


def make():
    call = plgpu.kernel(kernel, out_type=jax.ShapeDtypeStruct((ROWS,), jnp.float32))
    x = jax.random.normal(jax.random.key(2), (ROWS, COLS), jnp.float32)
    return jax.jit(call), (x,)


def expected(x):
    return None
