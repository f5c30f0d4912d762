"""sync_run_scoped_sem: 2 devices swap shards under ``pl.kernel``; the semaphores are
allocated in the body with ``pl.run_scoped`` (the mpmd_map lowering takes no scratch
operands, so a ``pl.kernel`` body allocates its own).

The handshake of test_remote_dma_basic (tests/pallas/gpu_pallas_distributed_test.py):
ready to the peer, wait for the peer's ready, the remote store, recv to the peer,
wait for my recv. out_d = x_{1-d}.
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


def kernel(x_ref, y_ref):
    def scoped(ready_sem, recv_sem):
        other = 1 - lax.axis_index("dev")
        pl.semaphore_signal(ready_sem, device_id=other)
        pl.semaphore_wait(ready_sem)
        plgpu.remote_ref(y_ref, other)[...] = x_ref[...]
        pl.semaphore_signal(recv_sem, device_id=other)
        pl.semaphore_wait(recv_sem)

    pl.run_scoped(scoped, plgpu.SemaphoreType.REGULAR, plgpu.SemaphoreType.REGULAR)


def make():
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    call = pl.kernel(
        kernel, out_type=jax.ShapeDtypeStruct((8, 128), jnp.float32), mesh=plgpu.Mesh()
    )
    fn = jax.jit(
        jax.shard_map(call, mesh=mesh, in_specs=P("dev"), out_specs=P("dev"), check_vma=False)
    )
    x = jnp.arange(2 * 8 * 128, dtype=jnp.float32).reshape(2 * 8, 128)
    x = jax.device_put(x, jax.NamedSharding(mesh, P("dev")))
    return fn, (x,)


def expected(x):
    return {"out": np.concatenate([x[8:], x[:8]])}
