"""red_count_and_min: one device, one block, two scalar outputs: how many elements are
positive (``jnp.sum`` of a comparison: an int32 count) and the smallest element times
two (``jnp.min``), each stored into a rank-0 output (issue 29: reductions).

``expected`` runs the kernel with JAX's interpreter (``interpret=True``).
"""

import jax
import jax.numpy as jnp
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = "valid"

N = 512


def kernel(x_ref, count_ref, low_ref):
    count_ref[...] = jnp.sum(x_ref[...] > 0.0)
    low_ref[...] = jnp.min(x_ref[...]) * 2.0


def build(interpret=None):
    return plgpu.kernel(
        kernel,
        out_type=(
            jax.ShapeDtypeStruct((), jnp.int32),
            jax.ShapeDtypeStruct((), jnp.float32),
        ),
        interpret=interpret,
    )


def make():
    x = jax.random.normal(jax.random.key(3), (N,), jnp.float32)
    return jax.jit(build()), (x,)


def expected(x):
    count, low = jax.device_get(jax.jit(build(interpret=True))(x))
    return {"count": count, "low": low}
