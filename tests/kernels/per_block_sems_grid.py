"""per_block_sems_grid: 2 devices x a grid of 2 blocks; block b swaps its half with
block b of the peer.

Multi-device *and* multi-block: the kernel has ``grid=(2,), grid_names=("blocks",)``
and each block owns half of the shard (``pl.ds(b * N, N)``).  Scratch
semaphores are per block ("The semaphore array is scaled up by the grid
size", test_basic in tests/pallas/mosaic_gpu_test.py), so the ready/recv
handshake of test_remote_dma_basic runs independently per block:
``pl.semaphore_signal(sem, device_id=other)`` from block b increments block
b's semaphore on the other device.  out_d = x_{1-d} (each half moved by its
own block).
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
N = 256  # elements per block


def kernel(x_ref, o_ref, ready_sem, recv_sem):
    b = lax.axis_index("blocks")
    other = 1 - lax.axis_index("dev")
    half = pl.ds(b * N, N)
    pl.semaphore_signal(ready_sem, device_id=other)
    pl.semaphore_wait(ready_sem)
    plgpu.remote_ref(o_ref, other).at[half][...] = x_ref[half]
    pl.semaphore_signal(recv_sem, device_id=other)
    pl.semaphore_wait(recv_sem)


def make():
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((2 * N,), jnp.float32),
        scratch_types=[plgpu.SemaphoreType.REGULAR, plgpu.SemaphoreType.REGULAR],
        grid=(2,),
        grid_names=("blocks",),
    )
    fn = jax.jit(
        jax.shard_map(call, mesh=mesh, in_specs=P("dev"), out_specs=P("dev"), check_vma=False)
    )
    x = jnp.arange(DEVICES * 2 * N, dtype=jnp.float32)
    x = jax.device_put(x, jax.NamedSharding(mesh, P("dev")))
    return fn, (x,)


def expected(x):
    return {"out": np.concatenate([x[2 * N :], x[: 2 * N]])}


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
