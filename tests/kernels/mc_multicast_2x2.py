"""mc_multicast_2x2: one device, a 2 x 2 cluster (axes "x", "y"). The two blocks of
each row of the cluster (same y) share a multicast load along "x" of the slab
``x_ref.at[y]``: each issues half of it and both receive all of it
(``plgpu.copy_gmem_to_smem(..., collective_axes="x")``). Each block then writes what it
received to ``out[y, x]``. out[y, x] = slabs[y].
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = "valid"
ROWS, COLS = 64, 32


def kernel(x_ref, o_ref, smem_ref, barrier):
    bx = lax.axis_index("x")
    by = lax.axis_index("y")
    plgpu.copy_gmem_to_smem(x_ref.at[by], smem_ref, barrier, collective_axes="x")
    plgpu.barrier_wait(barrier)
    o_ref[by, bx] = smem_ref[...]


def make():
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((2, 2, ROWS, COLS), jnp.float32),
        scratch_types=[plgpu.SMEM((ROWS, COLS), jnp.float32), plgpu.Barrier()],
        cluster=(2, 2),
        cluster_names=("x", "y"),
    )
    slabs = jnp.arange(2 * ROWS * COLS, dtype=jnp.float32).reshape(2, ROWS, COLS)
    return jax.jit(call), (slabs,)


def expected(slabs):
    s = np.asarray(slabs)
    return {"out": np.stack([np.stack([s[0], s[0]]), np.stack([s[1], s[1]])])}
