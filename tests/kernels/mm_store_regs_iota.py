"""mm_store_regs_iota: test_multimem_store_regs: device 0 multimem-stores a register
iota (broadcasted along columns, layout_cast to WGMMA) into out on every device of "x";
then the devices signal each other. out (P("x")) = [iota; iota].
Written with plgpu.kernel, the form JAX 0.12 lowers (its pl.pallas_call has no Mosaic
GPU lowering).
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


def kernel(y_ref, sem):
    @pl.when(lax.axis_index("x") == 0)
    def _store():
        v = plgpu.layout_cast(lax.broadcasted_iota(jnp.int32, (128, 128), 1), plgpu.Layout.WGMMA)
        plgpu.multimem_store(v, y_ref, "x")

    peer = 1 - lax.axis_index("x")
    pl.semaphore_signal(sem, 1, device_id=peer)
    pl.semaphore_wait(sem)


def make():
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((128, 128), jnp.int32),
        scratch_types=[plgpu.SemaphoreType.REGULAR],
    )
    mesh = jax.sharding.Mesh(jax.devices(), ["x"])
    fn = jax.jit(jax.shard_map(call, mesh=mesh, in_specs=(), out_specs=P("x"), check_vma=False))
    return fn, ()


def expected():
    ref = np.broadcast_to(np.arange(128, dtype=np.int32), (128, 128))
    return {"out": np.concatenate([ref, ref])}
