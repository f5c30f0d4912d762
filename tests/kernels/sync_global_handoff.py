"""sync_global_handoff: one device, 2 blocks; block 1 writes its half, then signals a
global semaphore (``pl.get_global``) twice; block 0 waits for 2 and copies block 1's
half into the first half of out. Block 1 never waits: the handoff only works because
the semaphore is shared by every block (a per-block scratch semaphore would leave
block 0 waiting forever). out = [x1, x1].
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = "valid"
N = 128


def kernel(x_ref, o_ref):
    sem = pl.get_global(plgpu.SemaphoreType.REGULAR)
    i = pl.program_id(0)

    @pl.when(i == 1)
    def _():
        o_ref[pl.ds(N, N)] = x_ref[pl.ds(N, N)]
        pl.semaphore_signal(sem, 2)

    @pl.when(i == 0)
    def _():
        pl.semaphore_wait(sem, 2)
        o_ref[pl.ds(0, N)] = o_ref[pl.ds(N, N)]


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
    return {"out": np.concatenate([x[N:], x[N:]])}
