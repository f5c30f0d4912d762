"""err_short_when: a flag loaded as ``flag_ref[...]`` from a 1-element 1-D ref is an
array (bool[1] once compared), and ``pl.when`` wants a scalar: JAX refuses it at trace
(COND_PRED_SHAPE, lax.cond's message), at the condition's line.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

EXPECT = {"stage": "trace", "type": "TypeError", "message": "Pred must be a scalar"}
N = 128


def kernel(x_ref, flag_ref, o_ref):
    o_ref[...] = x_ref[...]

    @pl.when(flag_ref[...] > 0)
    def _():
        o_ref[...] = x_ref[...] + x_ref[...]


def make():
    call = plgpu.kernel(kernel, out_type=jax.ShapeDtypeStruct((N,), jnp.float32))
    x = jnp.arange(N, dtype=jnp.float32)
    flag = jnp.array([1], jnp.int32)
    return jax.jit(call), (x, flag)
