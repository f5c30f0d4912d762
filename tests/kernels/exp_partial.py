"""exp_partial: a kernel whose only store computes ``jnp.exp`` of its input, a primitive
no scenario statement computes (JAX traces it and the Mosaic GPU lowering takes it). The
import must be partial, never "valid" or "ok": an IMPORT_UNSUPPORTED error at the line of
the exp, simulate and run refusing the scenario (it would leave the output unwritten).
"""

import jax
import jax.numpy as jnp
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = "valid"


def kernel(x_ref, o_ref):
    o_ref[...] = jnp.exp(x_ref[...])


def make():
    call = plgpu.kernel(kernel, out_type=jax.ShapeDtypeStruct((256,), jnp.float32))
    return jax.jit(call), (jnp.arange(256, dtype=jnp.float32) / 256,)


def expected(x):
    import numpy as np

    return {"o": np.exp(x)}
