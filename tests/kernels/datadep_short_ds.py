"""datadep_short_ds: each block copies one row of x, at an offset loaded as
``off_ref[...]`` from a 1-element table: an int32[1] array, not a scalar. JAX traces
``pl.ds(off_ref[...], 1)``; its Mosaic GPU lowering refuses the array as an index
(INDEX_DTYPE). The import keeps the load as written.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

EXPECT = {"stage": "lower", "type": "ValueError", "message": "Unsupported index"}
N = 128


def kernel(x_ref, off_ref, o_ref):
    o_ref[pl.ds(0, 1)] = x_ref[pl.ds(off_ref[...], 1)]


def make():
    call = plgpu.kernel(kernel, out_type=jax.ShapeDtypeStruct((1, N), jnp.float32))
    x = jnp.arange(4 * N, dtype=jnp.float32).reshape(4, N)
    off = jnp.array([2], jnp.int32)
    return jax.jit(call), (x, off)


def expected(x, off):
    return None  # (JAX does not lower it)
