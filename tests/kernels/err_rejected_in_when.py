"""err_rejected_in_when: JAX rejects a store inside a ``pl.when`` body at trace (an
int32 value stored into a float32 ref: ``Invalid dtype for `swap```), after a store it
accepts. The import opens on what was traced: the first store and the ``when``, the
rejected store left out (an error at its line), never "valid" or "ok".
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = {"stage": "trace", "type": "ValueError", "message": "Invalid dtype for `swap`"}
N = 256


def kernel(x_ref, o_ref):
    b = pl.program_id(0)
    o_ref[b] = x_ref[...] * 2.0

    @pl.when(b == 0)
    def _():
        o_ref[b] = x_ref[...].astype(jnp.int32)


def make():
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((2, N), jnp.float32),
        grid=(2,),
        grid_names=("b",),
    )
    return jax.jit(call), (jnp.arange(N, dtype=jnp.float32),)


def expected(x):
    return None
