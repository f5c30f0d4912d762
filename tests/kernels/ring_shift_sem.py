"""ring_shift_sem: 4 devices; device d writes its x into `out` on device (d+1)%4.

Push-style ring shift through ``plgpu.remote_ref``.  Handshake as in
test_remote_dma_basic (tests/pallas/gpu_pallas_distributed_test.py): first a
"ready" signal to the device that will write into me (my left neighbour) and a
wait for my right neighbour's ready, then the remote store, then a "recv"
signal to the receiver and a wait for my own recv, so that no device returns
before the write into its `out` has landed.  out_d = x_{(d-1) mod 4}.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

P = jax.P
DEVICES = 4
EXPECT = "valid"
ROWS, COLS = 8, 128


def kernel(x_ref, o_ref, ready_sem, recv_sem):
    dev = lax.axis_index("dev")
    right = lax.rem(dev + 1, DEVICES)
    left = lax.rem(dev + DEVICES - 1, DEVICES)
    # Tell the device that writes into my `out` that I am running.
    pl.semaphore_signal(ready_sem, device_id=left)
    pl.semaphore_wait(ready_sem)  # my right neighbour is running
    plgpu.remote_ref(o_ref, right)[...] = x_ref[...]
    pl.semaphore_signal(recv_sem, device_id=right)
    pl.semaphore_wait(recv_sem)  # my left neighbour's write has landed


def make():
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((ROWS, COLS), jnp.float32),
        scratch_types=[plgpu.SemaphoreType.REGULAR, plgpu.SemaphoreType.REGULAR],
    )
    fn = jax.jit(
        jax.shard_map(call, mesh=mesh, in_specs=P("dev"), out_specs=P("dev"), check_vma=False)
    )
    x = jnp.arange(DEVICES * ROWS * COLS, dtype=jnp.float32).reshape(DEVICES * ROWS, COLS)
    x = jax.device_put(x, jax.NamedSharding(mesh, P("dev")))
    return fn, (x,)


def expected(x):
    shards = np.split(x, DEVICES)
    return {"out": np.concatenate([shards[(d - 1) % DEVICES] for d in range(DEVICES)])}


def reference(x):
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    perm = [(d, (d + 1) % DEVICES) for d in range(DEVICES)]
    return jax.jit(
        jax.shard_map(
            lambda s: lax.ppermute(s, "dev", perm), mesh=mesh, in_specs=P("dev"), out_specs=P("dev")
        )
    )(x)
