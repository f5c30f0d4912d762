"""datadep_ring_table: 4 devices; each device reads its peer from a table it is given
(``ids_ref[0]``, an int32 GMEM input, one row per device) and writes its x into `out`
there, then signals the peer and waits for its own signal. The table is a ring
d -> (d + 1) % 4, written out as data: the peer id is loaded, not computed.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

P = jax.P
DEVICES = 4
EXPECT = "valid"
N = 128


def kernel(x_ref, ids_ref, o_ref, sem):
    peer = ids_ref[0]
    plgpu.remote_ref(o_ref, peer)[...] = x_ref[...]
    pl.semaphore_signal(sem, device_id=peer)
    pl.semaphore_wait(sem)


def make():
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((N,), jnp.float32),
        scratch_types=[plgpu.SemaphoreType.REGULAR],
    )
    fn = jax.jit(
        jax.shard_map(
            call, mesh=mesh, in_specs=(P("dev"), P("dev")), out_specs=P("dev"), check_vma=False
        )
    )
    spec = jax.NamedSharding(mesh, P("dev"))
    x = jax.device_put(jnp.arange(DEVICES * N, dtype=jnp.float32), spec)
    table = np.array([[(d + 1) % DEVICES, 0, 0, 0] for d in range(DEVICES)], np.int32)
    ids = jax.device_put(jnp.asarray(table.reshape(-1)), spec)
    return fn, (x, ids)


def expected(x, ids):
    shards = np.split(x, DEVICES)
    peers = ids.reshape(DEVICES, 4)[:, 0]
    out = [None] * DEVICES
    for d in range(DEVICES):
        out[peers[d]] = shards[d]
    return {"out": np.concatenate(out)}
