"""err_transpose_0d: a load through a transpose of a view indexed down to 0-D. JAX traces
it; its Mosaic GPU lowering segfaults (memref.transpose with the empty permutation), so
the import's check reports TRANSPOSE_0D_CRASH at the transpose.
"""

import jax
import jax.numpy as jnp
from jax.experimental.pallas import mosaic_gpu as plgpu

EXPECT = {"stage": "gpu-lower", "type": "ChildProcessError", "message": "SIGSEGV"}


def kernel(x_ref, o_ref):
    v = x_ref.at[0, 0].transpose(())
    o_ref[...] = v[...]


def make():
    call = plgpu.kernel(kernel, out_type=jax.ShapeDtypeStruct((), jnp.float32))
    return jax.jit(call), (jnp.zeros((8, 128), jnp.float32),)
