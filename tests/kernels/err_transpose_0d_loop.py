"""err_transpose_0d_loop: a load through a transposed 0-D view inside a fori_loop body:
the Mosaic GPU lowering segfaults on it (TRANSPOSE_0D_CRASH), in a loop too.
"""

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental.pallas import mosaic_gpu as plgpu

EXPECT = {"stage": "gpu-lower", "type": "ChildProcessError", "message": "SIGSEGV"}


def kernel(x_ref, o_ref):
    def body(i, carry):
        v = x_ref.at[0, 0].transpose(())
        o_ref[...] = v[...]
        return carry

    lax.fori_loop(0, 2, body, None)


def make():
    call = plgpu.kernel(kernel, out_type=jax.ShapeDtypeStruct((), jnp.float32))
    return jax.jit(call), (jnp.zeros((8, 128), jnp.float32),)
