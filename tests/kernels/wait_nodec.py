"""wait_nodec: test_wait_nodec: signal by 2, wait without decrementing for 1 then 2,
then wait 2 with the decrement; out (replicated) is ones.
Written with plgpu.kernel, the form JAX 0.12 lowers (its pl.pallas_call has no Mosaic
GPU lowering).
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

P = jax.sharding.PartitionSpec
DEVICES = 2
EXPECT = "valid"


def kernel(y_ref, sem):
    peer = 1 - lax.axis_index("x")
    pl.semaphore_signal(sem, 2, device_id=peer)
    pl.semaphore_wait(sem, decrement=False)
    pl.semaphore_wait(sem, 2, decrement=False)
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
