"""red_row_sum_axis: ``o = jnp.sum(x, axis=1)`` of a plainly loaded 2-D value. JAX
traces it and its interpreter runs it, but the Mosaic GPU lowering finds no register
layout for the reduced rows (``Failed to infer a possible set of layouts``): the import
is faithful, the check says so at the line, and simulate still gives the sums.

x holds small integers (the sums are exact). ``expected`` runs JAX's interpreter.
"""

import jax
import jax.numpy as jnp
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = "valid"  # traces and interprets; the GPU lowering error is the finding

ROWS, COLS = 64, 128


def kernel(x_ref, o_ref):
    o_ref[...] = jnp.sum(x_ref[...], axis=1)


def build(interpret=None):
    return plgpu.kernel(
        kernel, out_type=jax.ShapeDtypeStruct((ROWS,), jnp.float32), interpret=interpret
    )


def make():
    x = (jnp.arange(ROWS * COLS, dtype=jnp.float32) % 5).reshape(ROWS, COLS)
    return jax.jit(build()), (x,)


def expected(x):
    return {"out": jax.device_get(jax.jit(build(interpret=True))(x))}
