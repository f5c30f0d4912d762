"""err_gather_unbroadcastable: a view indexed by two index tables of 4 and 2 entries:
their shapes do not broadcast, and JAX's NDIndexer raises ValueError at trace
(INDEX_BROADCAST_SHAPES) from numpy's: the user's line is the view's, not numpy's.
"""

import jax
import jax.numpy as jnp
from jax.experimental.pallas import mosaic_gpu as plgpu

EXPECT = {"stage": "trace", "type": "ValueError", "message": "Cannot broadcast shapes"}


def kernel(x_ref, ids_ref, cols_ref, o_ref):
    v = x_ref.at[ids_ref[...], cols_ref[...]]
    o_ref[...] = v[...]


def make():
    call = plgpu.kernel(kernel, out_type=jax.ShapeDtypeStruct((4,), jnp.float32))
    return jax.jit(call), (
        jnp.zeros((8, 128), jnp.float32),
        jnp.array([1, 2, 3, 0], jnp.int32),
        jnp.array([0, 1], jnp.int32),
    )
