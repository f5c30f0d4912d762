"""pallas_call_wait_nodec: test_wait_nodec: signal by 2, wait without decrementing for 1 then 2,
then wait 2 with the decrement; out (replicated) is ones.
JAX 0.12 traces this call but does not lower it for the GPU (no Mosaic GPU rule for
pl.pallas_call); ``expected`` is what the kernel computes as plgpu.kernel.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

P = jax.sharding.PartitionSpec
DEVICES = 2
#: JAX 0.12 has no Mosaic GPU lowering rule for pl.pallas_call: gpu_lowering asserts
EXPECT = {"stage": "lower", "type": "AssertionError", "message": ""}


def kernel(y_ref, sem):
    peer = 1 - lax.axis_index("x")
    pl.semaphore_signal(sem, 2, device_id=peer)
    pl.semaphore_wait(sem, decrement=False)
    pl.semaphore_wait(sem, 2, decrement=False)
    pl.semaphore_wait(sem, 2)
    y_ref[...] = jnp.ones_like(y_ref)


def make():
    call = pl.pallas_call(
        kernel,
        out_specs=pl.BlockSpec(memory_space=plgpu.GMEM),
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        scratch_shapes=[plgpu.SemaphoreType.REGULAR],
        compiler_params=plgpu.CompilerParams(),
    )
    mesh = jax.sharding.Mesh(jax.devices()[:2], ["x"])
    fn = jax.jit(jax.shard_map(call, mesh=mesh, in_specs=(), out_specs=P(None), check_vma=False))
    return fn, ()


def expected():
    return {"out": np.ones((8, 128), np.float32)}
