"""err_gather_mixed: a view indexed by an array next to a scalar (``x_ref.at[ids_ref[...],
0]``): JAX broadcasts the 0 with the broadcast_to primitive, which the Mosaic GPU lowering
does not lower (GPU_INDEX_BROADCAST); the importer takes no gather, and says so at the view.
"""

import jax
import jax.numpy as jnp
from jax.experimental.pallas import mosaic_gpu as plgpu

EXPECT = {"stage": "gpu-lower", "type": "NotImplementedError", "message": "broadcast_to"}


def kernel(x_ref, ids_ref, o_ref):
    v = x_ref.at[ids_ref[...], 0]
    o_ref[...] = v[...]


def make():
    call = plgpu.kernel(kernel, out_type=jax.ShapeDtypeStruct((4,), jnp.float32))
    return jax.jit(call), (jnp.zeros((8, 128), jnp.float32), jnp.array([1, 2, 3, 0], jnp.int32))
