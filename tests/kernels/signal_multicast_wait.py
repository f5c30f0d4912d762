"""signal_multicast_wait: test_semaphore_signal_collective_axes: every device signals the
semaphore on all devices of "x" at once, then waits for 2; out (replicated) is ones.
Written with plgpu.kernel, the form JAX 0.12 lowers (its pl.pallas_call has no Mosaic
GPU lowering).
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

P = jax.sharding.PartitionSpec
DEVICES = 2
EXPECT = "valid"


def kernel(y_ref, sem):
    plgpu.semaphore_signal_multicast(sem, collective_axes="x")
    pl.semaphore_wait(sem, 2)
    y_ref[...] = jnp.ones_like(y_ref)


def make():
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        scratch_types=[plgpu.SemaphoreType.REGULAR],
    )
    mesh = jax.sharding.Mesh(jax.devices()[:2], ["x"])
    fn = jax.jit(jax.shard_map(call, mesh=mesh, in_specs=(), out_specs=P(None), check_vma=False))
    return fn, ()


def expected():
    return {"out": np.ones((8, 128), np.float32)}
