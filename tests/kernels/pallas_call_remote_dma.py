"""pallas_call_remote_dma: test_remote_dma_basic as JAX's test writes it: pl.pallas_call with
GMEM block specs and compiler_params, mesh axis "x" from jax.sharding.Mesh; each of 2
devices swaps its shard with the other. out_d = x_{1-d}.
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


def kernel(x_ref, y_ref, ready_sem, recv_sem):
    peer = 1 - lax.axis_index("x")
    y_ref[...] = x_ref[...]
    pl.semaphore_signal(ready_sem, device_id=peer)
    pl.semaphore_wait(ready_sem)
    theirs = plgpu.remote_ref(y_ref, peer)
    theirs[...] = x_ref[...]
    pl.semaphore_signal(recv_sem, device_id=peer)
    pl.semaphore_wait(recv_sem)


def body(x):
    return pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=plgpu.GMEM)],
        out_specs=pl.BlockSpec(memory_space=plgpu.GMEM),
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        scratch_shapes=[plgpu.SemaphoreType.REGULAR, plgpu.SemaphoreType.REGULAR],
        compiler_params=plgpu.CompilerParams(),
    )(x)


def make():
    mesh = jax.sharding.Mesh(jax.devices()[:2], ["x"])
    fn = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x"), check_vma=False))
    x = jnp.arange(2 * 8 * 128.0, dtype=jnp.float32).reshape(2 * 8, 128)
    return fn, (x,)


def expected(x):
    return {"out": np.concatenate([x[8:], x[:8]])}
