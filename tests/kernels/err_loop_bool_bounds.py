"""err_loop_bool_bounds: ``lax.fori_loop`` over two comparisons (bools): its while_loop
counts in bool, and the counter's ``+ 1`` (lax.add) refuses it at trace
(LOOP_BOUND_BOOL), at the loop's line.
"""

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental.pallas import mosaic_gpu as plgpu

EXPECT = {"stage": "trace", "type": "TypeError", "message": "add does not accept dtype bool"}


def kernel(x_ref, o_ref):
    b = lax.axis_index("b")
    o_ref[b] = x_ref[b]

    def body(i, carry):
        o_ref[b] = o_ref[b] + x_ref[b]
        return carry

    lax.fori_loop(b > 0, b > 1, body, None)


def make():
    call = plgpu.kernel(
        kernel, out_type=jax.ShapeDtypeStruct((2, 128), jnp.float32), grid=(2,), grid_names=("b",)
    )
    return jax.jit(call), (jnp.zeros((2, 128), jnp.float32),)
