"""values_max_bf16: bfloat16 arithmetic with ``jnp.maximum``, ``jnp.minimum``, negation,
division and a comparison, stored as bfloat16; ``expected`` is JAX's interpreter.
"""

import jax
import jax.numpy as jnp
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = "valid"

N = 256


def kernel(a_ref, b_ref, o_ref):
    a, b = a_ref[...], b_ref[...]
    o_ref[...] = jnp.maximum(a, -b) / 3.0 - jnp.minimum(a * b, 0.25)


def build(interpret=None):
    return plgpu.kernel(
        kernel, out_type=jax.ShapeDtypeStruct((N,), jnp.bfloat16), interpret=interpret
    )


def make():
    a = jax.random.normal(jax.random.key(3), (N,), jnp.bfloat16)
    b = jax.random.normal(jax.random.key(4), (N,), jnp.bfloat16)
    return jax.jit(build()), (a, b)


def expected(a, b):
    return {"out": jax.device_get(jax.jit(build(interpret=True))(a, b))}
