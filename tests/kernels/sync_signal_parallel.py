"""sync_signal_parallel: 4 devices in a ring; each device stores x into out on its
right neighbour, then signals both neighbours at once with
``plgpu.semaphore_signal_parallel`` (one fence for both signals, no order between
them) and waits for both: one from its left neighbour (whose store into my out has
landed), one from its right (so no device returns while a peer still signals it).
out_d = x_{(d-1) mod 4}.
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


def kernel(x_ref, o_ref, ready_sem, recv_sem, done_sem):
    dev = lax.axis_index("dev")
    right = lax.rem(dev + 1, DEVICES)
    left = lax.rem(dev + DEVICES - 1, DEVICES)
    pl.semaphore_signal(ready_sem, device_id=left)
    pl.semaphore_wait(ready_sem)  # my right neighbour is running
    plgpu.remote_ref(o_ref, right)[...] = x_ref[...]
    plgpu.semaphore_signal_parallel(
        plgpu.SemaphoreSignal(recv_sem, device_id=right),
        plgpu.SemaphoreSignal(done_sem, device_id=left),
    )
    pl.semaphore_wait(recv_sem)
    pl.semaphore_wait(done_sem)


def make():
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((ROWS, COLS), jnp.float32),
        scratch_types=[plgpu.SemaphoreType.REGULAR] * 3,
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
