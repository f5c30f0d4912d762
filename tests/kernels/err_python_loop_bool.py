"""err_python_loop_bool: a Python loop up to a traced comparison (a bool): ``range``
asks it for an integer index, and JAX refuses a bool tracer with a TypeError at trace
(LOOP_PYTHON_NOT_INT), at the loop's line.
"""

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental.pallas import mosaic_gpu as plgpu

EXPECT = {"stage": "trace", "type": "TypeError", "message": "Only integer scalar arrays"}


def kernel(x_ref, o_ref):
    b = lax.axis_index("b")
    o_ref[b] = x_ref[b]
    for _i in range(0, b > 0):
        o_ref[b] = o_ref[b] + x_ref[b]


def make():
    call = plgpu.kernel(
        kernel, out_type=jax.ShapeDtypeStruct((2, 128), jnp.float32), grid=(2,), grid_names=("b",)
    )
    return jax.jit(call), (jnp.zeros((2, 128), jnp.float32),)
