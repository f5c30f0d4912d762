"""remote_tma_tuple_ids: test_copy_tma (tuple ids): mesh (1, 2) over ("x", "y"); device y=0 builds
a broadcasted iota in registers (layout_cast to WGMMA), stores it to a tiled and swizzled
SMEM buffer and TMA-copies it into its own out and the other device's; then each device
signals the other and waits. out (P("y")) = [iota; iota].
Written with plgpu.kernel, the form JAX 0.12 lowers (its pl.pallas_call has no Mosaic
GPU lowering). JAX's test has no plgpu.commit_smem() between the register store to
SMEM and the TMA copy that reads it; without it the check reports RACE_DETECTED.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

P = jax.sharding.PartitionSpec
DEVICES = 2
EXPECT = "valid"


def kernel(y_ref, smem_ref, sem):
    me = lax.axis_index("y")
    other = 1 - me
    zero = jnp.int32(0)

    @pl.when(me == zero)
    def _store():
        tile = plgpu.layout_cast(lax.broadcasted_iota(jnp.int32, (128, 128), 1), plgpu.Layout.WGMMA)
        smem_ref[...] = tile
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(smem_ref, plgpu.remote_ref(y_ref, (zero, me)))
        plgpu.copy_smem_to_gmem(smem_ref, plgpu.remote_ref(y_ref, (zero, other)))
        plgpu.wait_smem_to_gmem(0)

    pl.semaphore_signal(sem, 1, device_id=(zero, other))
    pl.semaphore_wait(sem)


def make():
    transforms = (plgpu.TilingTransform((8, 32)), plgpu.SwizzleTransform(128))
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((128, 128), jnp.int32),
        scratch_types=[
            plgpu.SMEM((128, 128), jnp.int32, transforms=transforms),
            plgpu.SemaphoreType.REGULAR,
        ],
    )
    mesh = jax.make_mesh((1, 2), ("x", "y"))
    fn = jax.jit(jax.shard_map(call, mesh=mesh, in_specs=(), out_specs=P("y"), check_vma=False))
    return fn, ()


def expected():
    ref = np.broadcast_to(np.arange(128, dtype=np.int32), (128, 128))
    return {"out": np.concatenate([ref, ref])}
