"""negative_rem: ``lax.rem(dev - 1, D)`` for the left neighbour: negative on device 0.

``lax.rem`` truncates (C's ``%``): on device 0 it gives -1, not D - 1, and the remote
store names a device outside the mesh. The scenario's ``%`` floors, so the importer
cannot write this index as an expression and must say so (``jnp`` / Python ``%``,
which floors, translates: ``right`` below).
"""

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

P = jax.P
DEVICES = 4
EXPECT = "valid"


def kernel(x_ref, o_ref, sem):
    dev = lax.axis_index("dev")
    left = lax.rem(dev - 1, DEVICES)
    right = (dev + 1) % DEVICES
    plgpu.remote_ref(o_ref, left)[...] = x_ref[...]
    pl.semaphore_signal(sem, device_id=right)
    pl.semaphore_wait(sem)


def make():
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((256,), jnp.float32),
        scratch_types=[plgpu.SemaphoreType.REGULAR],
    )
    fn = jax.jit(
        jax.shard_map(call, mesh=mesh, in_specs=P("dev"), out_specs=P("dev"), check_vma=False)
    )
    x = jnp.arange(DEVICES * 256, dtype=jnp.float32)
    x = jax.device_put(x, jax.NamedSharding(mesh, P("dev")))
    return fn, (x,)


def expected(x):
    return None
