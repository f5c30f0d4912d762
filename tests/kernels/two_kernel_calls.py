"""two_kernel_calls: test_remote_dma_several_mosaic_ops in small: two different plgpu.kernel calls
one after the other in one shard_map body (each swaps its input with the other device),
twice. Four swaps: out = x.
"""

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

P = jax.sharding.PartitionSpec
DEVICES = 2
EXPECT = "valid"


def one_sem(x_ref, y_ref, done):
    peer = 1 - lax.axis_index("x")
    pl.semaphore_signal(done, device_id=peer)
    pl.semaphore_wait(done)
    plgpu.remote_ref(y_ref, peer)[...] = x_ref[...]
    pl.semaphore_signal(done, device_id=peer)
    pl.semaphore_wait(done)


def two_sems(x_ref, y_ref, wait_sem, ready_sem):
    peer = 1 - lax.axis_index("x")
    pl.semaphore_signal(wait_sem, device_id=peer)
    pl.semaphore_wait(wait_sem)
    plgpu.remote_ref(y_ref, peer)[...] = x_ref[...]
    pl.semaphore_signal(ready_sem, device_id=peer)
    pl.semaphore_wait(ready_sem)


def _call(k, n):
    return plgpu.kernel(
        k,
        out_type=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        scratch_types=[plgpu.SemaphoreType.REGULAR] * n,
    )


def body(x):
    r = x
    for _ in range(2):
        r = _call(one_sem, 1)(r)
        r = _call(two_sems, 2)(r)
    return r


def make():
    mesh = jax.sharding.Mesh(jax.devices()[:2], ["x"])
    fn = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x"), check_vma=False))
    x = jnp.arange(2 * 8 * 128.0, dtype=jnp.float32).reshape(2 * 8, 128)
    return fn, (x,)


def expected(x):
    return {"out": x}
