"""sync_alloc_semaphore: one device, 2 blocks meet at a semaphore allocated outside the
kernel with ``plgpu.alloc_semaphore(())`` and passed in as an operand (the way to keep a
semaphore across kernel calls): each block copies its half, signals it once and waits
for one signal, leaving it at 0. out = x.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = "valid"
N = 128


def kernel(sem_ref, x_ref, o_ref):
    i = pl.program_id(0)
    o_ref[pl.ds(i * N, N)] = x_ref[pl.ds(i * N, N)]
    pl.semaphore_signal(sem_ref)
    pl.semaphore_wait(sem_ref)


def run(x):
    sem = plgpu.alloc_semaphore(())
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((2 * N,), jnp.float32),
        grid=(2,),
        grid_names=("blocks",),
    )
    return call(sem, x)


def make():
    x = jnp.arange(2 * N, dtype=jnp.float32)
    return jax.jit(run), (x,)


def expected(x):
    return {"out": x.copy()}
