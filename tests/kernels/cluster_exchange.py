"""cluster_exchange: 1 device, a cluster of 2 blocks that read each other's SMEM.

Modelled on test_cluster_ref_read (tests/pallas/mosaic_gpu_test.py): block c of
the cluster (``lax.axis_index("c")``) TMA-loads x[c] into its SMEM, arrives at
a ``plgpu.ClusterBarrier(collective_axes=("c",))`` and waits, so the peer's
SMEM is filled, then reads the peer's SMEM through ``plgpu.cluster_ref(smem,
{"c": 1 - c})`` (distributed shared memory) and writes it to out[c].  Unlike
the test, a second cluster barrier (``num_barriers=2``) keeps each block
alive until its peer has finished reading its SMEM.  out = x[::-1].
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
    plgpu.barrier_arrive(cluster_barriers.at[0])
    plgpu.barrier_wait(cluster_barriers.at[0])  # the peer's SMEM is filled
    peer_smem = plgpu.cluster_ref(smem_ref, {"c": 1 - c})
    o_ref[c] = peer_smem[...]
    plgpu.barrier_arrive(cluster_barriers.at[1])
    plgpu.barrier_wait(cluster_barriers.at[1])  # the peer is done with my SMEM


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
