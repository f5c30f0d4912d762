"""pair_swap_where: 4 devices in pairs (0, 1) and (2, 3); each sends its shard to its
partner, chosen with ``jnp.where`` and placed at an offset chosen with ``lax.cond``.

``partner = jnp.where(me % 2 == 0, me + 1, me - 1)`` and ``off = lax.cond(me < 2,
lambda: 0, lambda: N)`` are integers picked by a traced condition: the scenario's
expressions have no conditional, so the importer writes the pick in arithmetic
(``a + int(cond) * (b - a)``). The first pair fills the low half of its outputs, the
second pair the high half; each device zeroes the other half after the handshake.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

P = jax.sharding.PartitionSpec
DEVICES = 4
EXPECT = "valid"
N = 128


def kernel(x_ref, o_ref, arrived):
    me = lax.axis_index("pairs")
    partner = jnp.where(me % 2 == 0, me + 1, me - 1)
    off = lax.cond(me < 2, lambda: 0, lambda: N)
    plgpu.remote_ref(o_ref, partner).at[pl.ds(off, N)][...] = x_ref[...]
    pl.semaphore_signal(arrived, device_id=partner)
    pl.semaphore_wait(arrived)
    o_ref[pl.ds(N - off, N)] = jnp.zeros((N,), jnp.float32)


def make():
    mesh = jax.sharding.Mesh(jax.devices()[:DEVICES], ["pairs"])
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((2 * N,), jnp.float32),
        scratch_types=[plgpu.SemaphoreType.REGULAR],
    )
    fn = jax.jit(
        jax.shard_map(call, mesh=mesh, in_specs=P("pairs"), out_specs=P("pairs"), check_vma=False)
    )
    return fn, ((jnp.arange(DEVICES * N) % 50).astype(jnp.float32) + 1.0,)


def expected(x):
    shards = x.reshape(DEVICES, N)
    out = np.zeros((DEVICES, 2 * N), np.float32)
    for d in range(DEVICES):
        partner = d + 1 if d % 2 == 0 else d - 1
        off = 0 if d < 2 else N
        out[partner, off : off + N] = shards[d]
    return {"out": out.reshape(-1)}
