"""values_iota_cast: ``jnp.arange``, ``astype``, ``//`` and ``%`` on integers, a float
scale and a where: values computed from an index vector and a loaded int32 ref.

``expected`` runs the kernel with JAX's interpreter (``interpret=True``).
"""

import jax
import jax.numpy as jnp
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = "valid"

N = 256


def kernel(x_ref, o_ref):
    i = jnp.arange(N, dtype=jnp.int32)
    k = (x_ref[...] + i) // 3 % 7
    o_ref[...] = jnp.where(k > 2, k.astype(jnp.float32) * 0.5, -1.0)


def build(interpret=None):
    return plgpu.kernel(
        kernel, out_type=jax.ShapeDtypeStruct((N,), jnp.float32), interpret=interpret
    )


def make():
    x = jax.random.randint(jax.random.key(2), (N,), -50, 50, jnp.int32)
    return jax.jit(build()), (x,)


def expected(x):
    return {"out": jax.device_get(jax.jit(build(interpret=True))(x))}
