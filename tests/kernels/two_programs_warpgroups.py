"""two_programs_warpgroups: 1 device, 2 warpgroups (``num_threads=2, thread_name="wg"``).

Two Pallas "threads" (warpgroups) of one block run different code, selected
with ``pl.when`` on ``lax.axis_index("wg")``: warpgroup 0 writes x[:N] + 1
into the first half of out, warpgroup 1 writes x[N:] * 2 into the second half.
The warp-specialised form of tests/pallas/mosaic_gpu_test.py
(``self.kernel(..., num_threads=2, thread_name="wg")``).
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = "valid"
N = 128


def kernel(x_ref, o_ref):
    wg = lax.axis_index("wg")

    @pl.when(wg == 0)
    def _first_half():
        o_ref[pl.ds(0, N)] = x_ref[pl.ds(0, N)] + 1.0

    @pl.when(wg == 1)
    def _second_half():
        o_ref[pl.ds(N, N)] = x_ref[pl.ds(N, N)] * 2.0


def make():
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((2 * N,), jnp.float32),
        num_threads=2,
        thread_name="wg",
    )
    x = jnp.arange(2 * N, dtype=jnp.float32)
    return jax.jit(call), (x,)


def expected(x):
    return {"out": np.concatenate([x[:N] + 1, x[N:] * 2]).astype(np.float32)}
