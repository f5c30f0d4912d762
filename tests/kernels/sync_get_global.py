"""sync_get_global: one device, a grid of 2 blocks that meet at a semaphore shared by
every block, ``pl.get_global(plgpu.SemaphoreType.REGULAR)``.

Each block copies its half, signals the global semaphore once and waits for one
signal (taking it off), so the semaphore is back at 0 when the kernel ends (a global
semaphore outlives the call: JAX's docs ask kernels to leave it as they found it).
out = x.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = "valid"
N = 128


def kernel(x_ref, o_ref):
    sem = pl.get_global(plgpu.SemaphoreType.REGULAR)
    i = pl.program_id(0)
    o_ref[pl.ds(i * N, N)] = x_ref[pl.ds(i * N, N)]
    pl.semaphore_signal(sem)
    pl.semaphore_wait(sem)


def make():
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((2 * N,), jnp.float32),
        grid=(2,),
        grid_names=("blocks",),
    )
    x = jnp.arange(2 * N, dtype=jnp.float32)
    return jax.jit(call), (x,)


def expected(x):
    return {"out": x.copy()}
