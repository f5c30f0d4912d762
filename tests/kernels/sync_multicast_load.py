"""sync_multicast_load: one device, a cluster of 2 blocks; both load the same x with a
cluster-multicast TMA load, ``plgpu.copy_gmem_to_smem(..., collective_axes="c")``
(each block issues its share; the data lands in the SMEM of every block of the
cluster), wait on their barrier and store their SMEM into out[c]. out = [x, x].
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = "valid"
ROWS, COLS = 64, 32
TRANSFORMS = (plgpu.TilingTransform((8, 32)), plgpu.SwizzleTransform(128))


def kernel(x_ref, o_ref, smem_ref, barrier):
    c = lax.axis_index("c")
    plgpu.copy_gmem_to_smem(x_ref, smem_ref, barrier, collective_axes="c")
    plgpu.barrier_wait(barrier)
    o_ref[c] = smem_ref[...]


def make():
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((2, ROWS, COLS), jnp.float32),
        scratch_types=[
            plgpu.SMEM((ROWS, COLS), jnp.float32, transforms=TRANSFORMS),
            plgpu.Barrier(),
        ],
        cluster=(2,),
        cluster_names=("c",),
    )
    x = jnp.arange(ROWS * COLS, dtype=jnp.float32).reshape(ROWS, COLS)
    return jax.jit(call), (x,)


def expected(x):
    return {"out": np.stack([x, x])}
