"""err_dup_ref: the same ``jax.new_ref`` passed twice into one kernel call -> trace error.

Inside a jitted function a GMEM ref is made with
``jax.new_ref(x, memory_space=plgpu.GMEM)`` (the idiom of
test_copy_smem_to_gmem_reduction in tests/pallas/mosaic_gpu_test.py) and
handed to the kernel as both of its operands.  The kernel is called with
``pl.kernel(body, mesh=plgpu.Mesh(), out_type=())`` -- the form of
test_passing_in_duplicate_refs_errors (tests/pallas/tpu_pallas_mpmd_test.py)
-- which goes straight to ``mpmd_map``, and mpmd_map refuses aliased ref
arguments: NotImplementedError "Cannot pass the same ref into a mpmd map
multiple times".

Surprise: ``plgpu.kernel(body, out_type=())(x_ref, x_ref)`` does NOT raise.
plgpu.kernel wraps the call in ``custom_batching.custom_vmap``, so mpmd_map
sees two distinct tracers and its ``id()`` check passes; it traces and lowers
(to a custom call with the same operand twice), see dup_ref_plgpu_kernel.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = {
    "stage": "trace",
    "type": "NotImplementedError",
    "message": "Cannot pass the same ref into a mpmd map multiple times",
}


def kernel(a_ref, b_ref):
    b_ref[...] = a_ref[...] + 1.0


def run(x):
    x_ref = jax.new_ref(x, memory_space=plgpu.GMEM)
    pl.kernel(kernel, mesh=plgpu.Mesh(), out_type=())(x_ref, x_ref)
    return jax.freeze(x_ref)


def make():
    x = jnp.arange(256, dtype=jnp.float32)
    return jax.jit(run), (x,)


def expected(x):
    return None
