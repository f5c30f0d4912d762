"""red_sum_normalize: one device, one block; ``o = x / jnp.sum(x)``: a reduction of the
whole loaded value (2-D), broadcast back over it (issue 29: reductions).

x holds small integers, so the sum is exact in any order and the quotient is the one
JAX's interpreter computes. ``expected`` runs the kernel with ``interpret=True``.
"""

import jax
import jax.numpy as jnp
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = "valid"

ROWS, COLS = 64, 128


def kernel(x_ref, o_ref):
    x = x_ref[...]
    o_ref[...] = x / jnp.sum(x)


def build(interpret=None):
    return plgpu.kernel(
        kernel, out_type=jax.ShapeDtypeStruct((ROWS, COLS), jnp.float32), interpret=interpret
    )


def make():
    x = (jnp.arange(ROWS * COLS, dtype=jnp.float32) % 7 + 1).reshape(ROWS, COLS)
    return jax.jit(build()), (x,)


def expected(x):
    return {"out": jax.device_get(jax.jit(build(interpret=True))(x))}
