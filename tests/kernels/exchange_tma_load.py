"""exchange_tma_load: 2 devices; TMA-load the peer's x (remote GMEM -> SMEM), store it.

Modelled on test_remote_dma_tma_load (tests/pallas/gpu_pallas_distributed_test.py):
ready handshake, ``plgpu.copy_gmem_to_smem(plgpu.remote_ref(x_ref, other),
scratch, barrier)`` + ``plgpu.barrier_wait``, a "recv" signal telling the peer
that its x has been read, ``plgpu.copy_smem_to_gmem`` + ``plgpu.wait_smem_to_gmem``
into the local out, and a final wait so that the peer is not left reading
from a device whose kernel has exited.  out_d = x_{1-d}.
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


def kernel(x_ref, y_ref, ready_sem, recv_sem, scratch_ref, barrier):
    other_dev_id = 1 - lax.axis_index("dev")
    pl.semaphore_signal(ready_sem, device_id=other_dev_id)
    pl.semaphore_wait(ready_sem)

    neighbor_ptr = plgpu.remote_ref(x_ref, other_dev_id)
    plgpu.copy_gmem_to_smem(neighbor_ptr, scratch_ref, barrier)
    plgpu.barrier_wait(barrier)
    pl.semaphore_signal(recv_sem, device_id=other_dev_id)

    plgpu.copy_smem_to_gmem(scratch_ref, y_ref)
    plgpu.wait_smem_to_gmem(0)
    pl.semaphore_wait(recv_sem)


def make():
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        scratch_types=[
            plgpu.SemaphoreType.REGULAR,
            plgpu.SemaphoreType.REGULAR,
            plgpu.SMEM((8, 128), jnp.float32),
            plgpu.Barrier(),
        ],
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
