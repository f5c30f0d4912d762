"""mm_store_tma_iota: test_multimem_store_tma: device 0 stores a register iota to a
tiled, swizzled SMEM buffer and TMA-copies it to out on every device through
multicast_ref; then the devices signal each other. out (P("x")) = [iota; iota].
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
    @pl.when(lax.axis_index("x") == 0)
    def _store():
        v = plgpu.layout_cast(lax.broadcasted_iota(jnp.int32, (128, 128), 1), plgpu.Layout.WGMMA)
        smem_ref[...] = v
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(smem_ref, plgpu.multicast_ref(y_ref, "x"))
        plgpu.wait_smem_to_gmem(0)

    peer = 1 - lax.axis_index("x")
    pl.semaphore_signal(sem, 1, device_id=peer)
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
    mesh = jax.sharding.Mesh(jax.devices(), ["x"])
    fn = jax.jit(jax.shard_map(call, mesh=mesh, in_specs=(), out_specs=P("x"), check_vma=False))
    return fn, ()


def expected():
    ref = np.broadcast_to(np.arange(128, dtype=np.int32), (128, 128))
    return {"out": np.concatenate([ref, ref])}
