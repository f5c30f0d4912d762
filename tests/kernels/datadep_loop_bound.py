"""datadep_loop_bound: one device, one block; a ``lax.fori_loop`` whose trip count is
loaded from an input (``n_ref[0]``): each trip adds x into the output.
"""

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl  # noqa: F401  (as JAX's kernels import it)
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = "valid"
N = 128


def kernel(x_ref, n_ref, o_ref):
    o_ref[...] = x_ref[...]

    def body(i, carry):
        o_ref[...] = o_ref[...] + x_ref[...]
        return carry

    lax.fori_loop(0, n_ref[0], body, None)


def make():
    call = plgpu.kernel(kernel, out_type=jax.ShapeDtypeStruct((N,), jnp.float32))
    x = jnp.arange(N, dtype=jnp.float32)
    n = jnp.array([3, 0, 0, 0], jnp.int32)
    return jax.jit(call), (x, n)


def expected(x, n):
    return {"out": x * (1 + int(n[0]))}
