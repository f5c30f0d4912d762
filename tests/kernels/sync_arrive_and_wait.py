"""sync_arrive_and_wait: one device, a cluster of 2 blocks that read each other's SMEM,
meeting with ``plgpu.barrier_arrive_and_wait`` on a ``plgpu.ClusterBarrier``.

cluster_exchange with the arrive/wait pairs fused: block c TMA-loads x[c] into its
SMEM, arrives and waits (the peer's SMEM is filled), reads the peer's SMEM through
``plgpu.cluster_ref`` into out[c], arrives and waits again (the peer is done with
mine). out = x[::-1].
"""

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = "valid"
ROWS, COLS = 64, 32
TRANSFORMS = (plgpu.TilingTransform((8, 32)), plgpu.SwizzleTransform(128))


def kernel(x_ref, o_ref, smem_ref, copy_barrier, cluster_barriers):
    c = lax.axis_index("c")
    plgpu.copy_gmem_to_smem(x_ref.at[c], smem_ref, copy_barrier)
    plgpu.barrier_wait(copy_barrier)
    plgpu.barrier_arrive_and_wait(cluster_barriers.at[0])
    o_ref[c] = plgpu.cluster_ref(smem_ref, {"c": 1 - c})[...]
    plgpu.barrier_arrive_and_wait(cluster_barriers.at[1])


def make():
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((2, ROWS, COLS), jnp.float32),
        scratch_types=[
            plgpu.SMEM((ROWS, COLS), jnp.float32, transforms=TRANSFORMS),
            plgpu.Barrier(),
            plgpu.ClusterBarrier(collective_axes=("c",), num_barriers=2),
        ],
        cluster=(2,),
        cluster_names=("c",),
    )
    x = jnp.arange(2 * ROWS * COLS, dtype=jnp.float32).reshape(2, ROWS, COLS)
    return jax.jit(call), (x,)


def expected(x):
    return {"out": x[::-1].copy()}
