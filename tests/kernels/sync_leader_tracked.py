"""sync_leader_tracked: one device, a cluster of 2 blocks sharing a partitioned load,
``plgpu.copy_gmem_to_smem(..., collective_axes="c",
leader_tracked=plgpu.CopyPartition.PARTITIONED(0))``: each block receives its half of
the rows, and only the leader (block 0) arrives on the barrier. JAX lowers it; the
scenario language does not carry a leader-tracked copy yet, so the import says so at
the line (a partial import, never "ok").
"""

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = "valid"
ROWS, COLS = 128, 32


def kernel(x_ref, o_ref, smem_ref, barrier):
    c = lax.axis_index("c")
    plgpu.copy_gmem_to_smem(
        x_ref,
        smem_ref,
        barrier,
        collective_axes="c",
        leader_tracked=plgpu.CopyPartition.PARTITIONED(0),
    )

    @pl.when(c == 0)
    def _():
        plgpu.barrier_wait(barrier)

    o_ref[c] = smem_ref[...]


def make():
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((2, ROWS // 2, COLS), jnp.float32),
        scratch_types=[plgpu.SMEM((ROWS // 2, COLS), jnp.float32), plgpu.Barrier()],
        cluster=(2,),
        cluster_names=("c",),
    )
    x = jnp.arange(ROWS * COLS, dtype=jnp.float32).reshape(ROWS, COLS)
    return jax.jit(call), (x,)


def expected(x):
    return None
