"""sync_semaphore_read: one device, 2 blocks; each block signals a global semaphore,
then reads it with ``pl.semaphore_read`` and stores the value it saw (1 or 2, which
depends on the order the blocks run) -- a read takes nothing. Then each waits for one
signal, so the semaphore ends at 0. The value stored is data the schedule decides.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = "valid"
GPU_BEHAVIOUR = "schedule"  # (its results: the order the blocks run in decides)
N = 128


def kernel(x_ref, o_ref):
    sem = pl.get_global(plgpu.SemaphoreType.REGULAR)
    i = pl.program_id(0)
    pl.semaphore_signal(sem)
    seen = pl.semaphore_read(sem)
    o_ref[pl.ds(i * N, N)] = x_ref[pl.ds(i * N, N)] * 0 + seen
    pl.semaphore_wait(sem)


def make():
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((2 * N,), jnp.int32),
        grid=(2,),
        grid_names=("blocks",),
    )
    x = jnp.arange(2 * N, dtype=jnp.int32)
    return jax.jit(call), (x,)


def expected(x):
    return None  # 1 or 2 per block: the order the blocks run decides
