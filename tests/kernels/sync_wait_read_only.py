"""sync_wait_read_only: one device; x is staged in SMEM and TMA-stored to out twice
(out[0] and out[1]), reusing the SMEM buffer between the stores. Before the buffer is
refilled the kernel waits with ``plgpu.wait_smem_to_gmem(0, wait_read_only=True)``
(the TMA engine is done *reading* the SMEM; the GMEM write may still be in flight,
as in the pipelining helpers of jax/_src/pallas/mosaic_gpu/pipeline.py), and at the
end with a full ``wait_smem_to_gmem(0)``. out = [x, 2x].
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = "valid"


def kernel(x_ref, o_ref, smem_ref):
    smem_ref[...] = x_ref[...]
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(smem_ref, o_ref.at[0])
    plgpu.wait_smem_to_gmem(0, wait_read_only=True)  # smem_ref may be refilled
    smem_ref[...] = x_ref[...] + x_ref[...]
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(smem_ref, o_ref.at[1])
    plgpu.wait_smem_to_gmem(0)


def make():
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((2, 8, 128), jnp.float32),
        scratch_types=[plgpu.SMEM((8, 128), jnp.float32)],
    )
    x = jnp.arange(8 * 128, dtype=jnp.float32).reshape(8, 128)
    return jax.jit(call), (x,)


def expected(x):
    return {"out": np.stack([x, x + x])}
