"""sync_scoped_smem_pl_kernel: one device, ``pl.kernel`` whose body allocates an SMEM
staging buffer and a TMA barrier with ``pl.run_scoped`` (as the Mosaic GPU tests do
for kernels launched through ``pl.kernel``): x is TMA-loaded into SMEM, then stored
to out with a TMA store. out = x.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = "valid"


def kernel(x_ref, o_ref):
    def scoped(smem_ref, barrier):
        plgpu.copy_gmem_to_smem(x_ref, smem_ref, barrier)
        plgpu.barrier_wait(barrier)
        plgpu.copy_smem_to_gmem(smem_ref, o_ref)
        plgpu.wait_smem_to_gmem(0)

    pl.run_scoped(scoped, plgpu.SMEM((8, 128), jnp.float32), plgpu.Barrier())


def make():
    call = pl.kernel(
        kernel, out_type=jax.ShapeDtypeStruct((8, 128), jnp.float32), mesh=plgpu.Mesh()
    )
    x = jnp.arange(8 * 128, dtype=jnp.float32).reshape(8, 128)
    return jax.jit(call), (x,)


def expected(x):
    return {"out": x.copy()}
