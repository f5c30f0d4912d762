"""multicast_copy: 4 devices; device 0 broadcasts a tile to every device's out via multicast TMA.

Modelled on test_multimem_store_tma (tests/pallas/gpu_pallas_distributed_test.py):
device 0 fills an SMEM tile (its x plus 1), ``plgpu.commit_smem()``, then one
TMA store ``plgpu.copy_smem_to_gmem(smem, plgpu.multicast_ref(o_ref, "dev"))``
writes it to `out` on all devices of the "dev" axis, and
``plgpu.wait_smem_to_gmem(0)``.  Device 0 then signals every other device;
they wait, so none exits before the data landed.  A plain store
``plgpu.multicast_ref(o_ref, "dev")[...] = v`` is rejected by the lowering
(see err_multicast_plain_store).  out_d = x_0 + 1 for every d.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

P = jax.P
DEVICES = 4
EXPECT = "valid"
S = 512


def kernel(x_ref, o_ref, smem_ref, sem):
    dev = lax.axis_index("dev")

    @pl.when(dev == 0)
    def _broadcast():
        smem_ref[...] = x_ref[...] + 1.0
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(smem_ref, plgpu.multicast_ref(o_ref, "dev"))
        plgpu.wait_smem_to_gmem(0)
        for peer in range(1, DEVICES):
            pl.semaphore_signal(sem, device_id=peer)

    @pl.when(dev != 0)
    def _receive():
        pl.semaphore_wait(sem)


def make():
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((S,), jnp.float32),
        scratch_types=[plgpu.SMEM((S,), jnp.float32), plgpu.SemaphoreType.REGULAR],
    )
    fn = jax.jit(
        jax.shard_map(call, mesh=mesh, in_specs=P("dev"), out_specs=P("dev"), check_vma=False)
    )
    x = jnp.arange(DEVICES * S, dtype=jnp.float32)
    x = jax.device_put(x, jax.NamedSharding(mesh, P("dev")))
    return fn, (x,)


def expected(x):
    return {"out": np.tile(x[:S] + np.float32(1), DEVICES)}
