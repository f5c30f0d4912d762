"""exchange_shards_4: 4 devices, pull-style: out_d = x_{(d+1) mod 4}.

Each device reads its right neighbour's x straight out of remote GMEM
(``plgpu.remote_ref(x_ref, right)[...]``, a remote *load*, where
ring_shift_sem does a remote *store*) and writes it into its own out.  The
semaphore handshake: "ready" to the left neighbour (who reads from me) and a
wait before reading; after reading, "done" to the right neighbour (whose x I
read) and a wait for my own reader's done before exiting.  Modelled on
test_remote_dma_basic / test_remote_dma_tma_load.
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


def kernel(x_ref, o_ref, ready_sem, done_sem):
    dev = lax.axis_index("dev")
    right = lax.rem(dev + 1, DEVICES)
    left = lax.rem(dev + DEVICES - 1, DEVICES)
    pl.semaphore_signal(ready_sem, device_id=left)  # left may read my x now
    pl.semaphore_wait(ready_sem)  # right's x is readable
    o_ref[...] = plgpu.remote_ref(x_ref, right)[...]
    pl.semaphore_signal(done_sem, device_id=right)  # finished reading right's x
    pl.semaphore_wait(done_sem)  # left finished reading mine


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
    x = jnp.arange(DEVICES * 8 * 128, dtype=jnp.float32).reshape(DEVICES * 8, 128)
    x = jax.device_put(x, jax.NamedSharding(mesh, P("dev")))
    return fn, (x,)


def expected(x):
    s = np.split(x, DEVICES)
    return {"out": np.concatenate([s[(d + 1) % DEVICES] for d in range(DEVICES)])}


def reference(x):
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    perm = [(d, (d - 1) % DEVICES) for d in range(DEVICES)]
    return jax.jit(
        jax.shard_map(
            lambda s: lax.ppermute(s, "dev", perm), mesh=mesh, in_specs=P("dev"), out_specs=P("dev")
        )
    )(x)
