"""sync_read_in_when: one device, 2 blocks; block 1 signals a global semaphore, and
every block polls it once with ``pl.semaphore_read`` and copies its half only if it saw
the signal (``@pl.when(pl.semaphore_read(sem) > 0)``). A semaphore's value used as a
condition: the import carries it as the condition ``pl.semaphore_read(sem) > 0``, and
the check says it judged the read per schedule (DATA_DEPENDENT). Block 1 takes its own
signal back.
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

    @pl.when(i == 1)
    def _():
        pl.semaphore_signal(sem)

    @pl.when(pl.semaphore_read(sem) > 0)
    def _():
        o_ref[pl.ds(i * N, N)] = x_ref[pl.ds(i * N, N)]

    @pl.when(i == 1)
    def _():
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
    return None  # which halves are copied depends on the order the blocks run
