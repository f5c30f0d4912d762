"""exchange_2dev: 2 devices swap their shards, other = 1 - axis_index.

A faithful re-write of test_remote_dma_basic
(tests/pallas/gpu_pallas_distributed_test.py): each device first writes x into
its own `out`, signals `ready` on the other device and waits for the other's
ready (so the peer's local write is done), then overwrites the peer's `out`
through ``plgpu.remote_ref`` and does the recv handshake.  out_d = x_{1-d}.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

P = jax.P
DEVICES = 2
EXPECT = "valid"


def kernel(x_ref, y_ref, ready_sem, recv_sem):
    other_dev_id = 1 - lax.axis_index("dev")
    y_ref[...] = x_ref[...]
    pl.semaphore_signal(ready_sem, device_id=other_dev_id)
    pl.semaphore_wait(ready_sem)
    neighbor_ptr = plgpu.remote_ref(y_ref, other_dev_id)
    neighbor_ptr[...] = x_ref[...]
    pl.semaphore_signal(recv_sem, device_id=other_dev_id)
    pl.semaphore_wait(recv_sem)


def make():
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        scratch_types=[plgpu.SemaphoreType.REGULAR, plgpu.SemaphoreType.REGULAR],
    )
    fn = jax.jit(
        jax.shard_map(call, mesh=mesh, in_specs=P("dev"), out_specs=P("dev"), check_vma=False)
    )
    x = jnp.arange(2 * 8 * 128, dtype=jnp.float32).reshape(2 * 8, 128)
    x = jax.device_put(x, jax.NamedSharding(mesh, P("dev")))
    return fn, (x,)


def expected(x):
    return {"out": np.concatenate([x[8:], x[:8]])}


def reference(x):
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    return jax.jit(
        jax.shard_map(
            lambda s: lax.ppermute(s, "dev", [(0, 1), (1, 0)]),
            mesh=mesh,
            in_specs=P("dev"),
            out_specs=P("dev"),
        )
    )(x)
