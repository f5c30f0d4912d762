"""datadep_short_peer: datadep_ring_table with the peer loaded as ``ids_ref[...]``: each
device's table is a 1-D ref of one entry, so ``ids_ref[...]`` is an int32[1] array, not
a scalar. JAX traces the kernel; its Mosaic GPU lowering refuses the array as a device
id (a bare assert that the id is an i32). The import keeps the load as written, and the
check says what JAX says, with the fix ``ids_ref[0]``.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

P = jax.P
DEVICES = 4
EXPECT = {"stage": "lower", "type": "AssertionError", "message": ""}
N = 128


def kernel(x_ref, ids_ref, o_ref, sem):
    peer = ids_ref[...]
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
    table = np.array([(d + 1) % DEVICES for d in range(DEVICES)], np.int32)
    ids = jax.device_put(jnp.asarray(table), spec)
    return fn, (x, ids)


def expected(x, ids):
    return None  # (JAX does not lower it)
