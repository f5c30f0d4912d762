"""values_axpy: ``o[...] = a[...] + b[...] * 2.0`` (issue 29: a kernel that computes).

One device, one block; the value is computed in registers between the loads and the
store. ``expected`` runs the kernel with JAX's interpreter (``interpret=True``).
"""

import jax
import jax.numpy as jnp
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = "valid"

N = 256


def kernel(a_ref, b_ref, o_ref):
    o_ref[...] = a_ref[...] + b_ref[...] * 2.0


def build(interpret=None):
    return plgpu.kernel(
        kernel, out_type=jax.ShapeDtypeStruct((N,), jnp.float32), interpret=interpret
    )


def make():
    a = jax.random.normal(jax.random.key(0), (N,), jnp.float32)
    b = jax.random.normal(jax.random.key(1), (N,), jnp.float32)
    return jax.jit(build()), (a, b)


def expected(a, b):
    return {"out": jax.device_get(jax.jit(build(interpret=True))(a, b))}
