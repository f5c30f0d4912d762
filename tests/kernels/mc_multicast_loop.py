"""mc_multicast_loop: one device, a cluster of 2 blocks, a loop of 3 steps; at each step
both blocks share a multicast load of ``x_ref.at[i]`` into their SMEM (tiled and
swizzled, as JAX's matmul kernels lay out their tiles), wait on the barrier, and store
it scaled by ``c + 1`` into ``out[i, c]``. Each step's barrier phase completes once both
shares of that step have landed. out[i, c] = x[i] * (c + 1).
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = "valid"
STEPS, ROWS, COLS = 3, 64, 32
TRANSFORMS = (plgpu.TilingTransform((8, 32)), plgpu.SwizzleTransform(128))


def kernel(x_ref, o_ref, smem_ref, barrier):
    c = lax.axis_index("c")

    @pl_loop(STEPS)
    def _(i):
        plgpu.copy_gmem_to_smem(x_ref.at[i], smem_ref, barrier, collective_axes="c")
        plgpu.barrier_wait(barrier)
        o_ref[i, c] = smem_ref[...] * (c + 1).astype(jnp.float32)


def pl_loop(n):
    from jax.experimental import pallas as pl

    return pl.loop(0, n)


def make():
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((STEPS, 2, ROWS, COLS), jnp.float32),
        scratch_types=[
            plgpu.SMEM((ROWS, COLS), jnp.float32, transforms=TRANSFORMS),
            plgpu.Barrier(),
        ],
        cluster=(2,),
        cluster_names=("c",),
    )
    x = jnp.arange(STEPS * ROWS * COLS, dtype=jnp.float32).reshape(STEPS, ROWS, COLS) % 97
    return jax.jit(call), (x,)


def expected(x):
    x = np.asarray(x)
    return {"out": np.stack([np.stack([x[i], x[i] * 2]) for i in range(STEPS)])}
