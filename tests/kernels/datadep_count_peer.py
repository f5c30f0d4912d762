"""datadep_count_peer: test_remote_dma_dynamic_index: the peer's id is counted from the data
(jnp.sum(x_ref[...] == 1, dtype=jnp.int32)); device 0's shard holds one 1, device 1's none,
so device 0 writes to 1 and device 1 to 0. out_d = x_{1-d}.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

P = jax.sharding.PartitionSpec
DEVICES = 2
EXPECT = "valid"


def kernel(x_ref, y_ref, ready_sem, recv_sem):
    peer = jnp.sum(x_ref[...] == 1, dtype=jnp.int32)
    y_ref[...] = x_ref[...]
    pl.semaphore_signal(ready_sem, device_id=peer)
    pl.semaphore_wait(ready_sem)
    plgpu.remote_ref(y_ref, peer)[...] = x_ref[...]
    pl.semaphore_signal(recv_sem, device_id=peer)
    pl.semaphore_wait(recv_sem)


def body(x):
    return plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((1, 128), jnp.int32),
        scratch_types=[plgpu.SemaphoreType.REGULAR, plgpu.SemaphoreType.REGULAR],
    )(x)


def make():
    mesh = jax.sharding.Mesh(jax.devices()[:2], ["x"])
    fn = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x"), check_vma=False))
    x = jnp.zeros((2, 128), dtype=jnp.int32).at[0, 0].set(1)
    return fn, (x,)


def expected(x):
    return {"out": np.concatenate([x[1:], x[:1]])}
