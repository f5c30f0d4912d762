"""values_traced_divisor: one device, 4 blocks along "b"; each block divides by a divisor
that depends on where it runs, ``lax.div(b + 4, b + 1)`` and ``lax.rem(b + 4, b + 1)``
(both operands never negative, so truncating is flooring), picks row q of x and adds r:
``out[b] = x[q] + r``. ``expected`` is numpy's.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = "valid"
BLOCKS, N = 4, 128


def kernel(x_ref, o_ref):
    b = lax.axis_index("b")
    q = lax.div(b + 4, b + 1)
    r = lax.rem(b + 4, b + 1)
    o_ref[b] = x_ref[q] + r.astype(jnp.float32)


def make():
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((BLOCKS, N), jnp.float32),
        grid=(BLOCKS,),
        grid_names=("b",),
    )
    x = jnp.arange(5 * N, dtype=jnp.float32).reshape(5, N)
    return jax.jit(call), (x,)


def expected(x):
    x = np.asarray(x)
    rows = [x[(b + 4) // (b + 1)] + (b + 4) % (b + 1) for b in range(BLOCKS)]
    return {"out": np.stack(rows).astype(np.float32)}
