"""two_block_copy: one device, a grid of 2 blocks; block i copies x[i*n:(i+1)*n].

Single-device multi-program baseline: the kernel is launched as 2 CUDA blocks
(``grid=(2,)``), each block indexes its half of the operand with
``pl.ds(pl.program_id(0) * n, n)``.  Modelled on the grid kernels of
tests/pallas/mosaic_gpu_test.py (``self.kernel(..., grid=..., grid_names=...)``).
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = "valid"

N = 128  # elements per block


def kernel(x_ref, o_ref):
    i = pl.program_id(0)
    o_ref[pl.ds(i * N, N)] = x_ref[pl.ds(i * N, N)]


def make():
    f = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((2 * N,), jnp.float32),
        grid=(2,),
        grid_names=("blocks",),
    )
    x = jnp.arange(2 * N, dtype=jnp.float32)
    return jax.jit(f), (x,)


def expected(x):
    return {"out": x.copy()}
