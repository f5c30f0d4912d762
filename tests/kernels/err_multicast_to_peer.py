"""err_multicast_to_peer: ``plgpu.remote_ref(plgpu.multicast_ref(...))`` -> trace error.

A multicast ref cannot be turned into a peer (remote) ref:
``remote_ref`` (jax/_src/pallas/mosaic_gpu/core.py) raises ValueError
"Can't make a multicast reference into a peer reference." while the kernel
body is traced.  Otherwise the multicast_copy kernel, 2 devices.
"""

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

P = jax.P
DEVICES = 2
EXPECT = {
    "stage": "trace",
    "type": "ValueError",
    "message": "Can't make a multicast reference into a peer reference.",
}
S = 512


def kernel(x_ref, o_ref, smem_ref, sem):
    other = 1 - lax.axis_index("dev")
    smem_ref[...] = x_ref[...]
    plgpu.commit_smem()
    dst = plgpu.remote_ref(plgpu.multicast_ref(o_ref, "dev"), other)
    plgpu.copy_smem_to_gmem(smem_ref, dst)
    plgpu.wait_smem_to_gmem(0)
    pl.semaphore_signal(sem, device_id=other)
    pl.semaphore_wait(sem)


def make():
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((S,), jnp.float32),
        scratch_types=[plgpu.SMEM((S,), jnp.float32), plgpu.SemaphoreType.REGULAR],
    )
    fn = jax.jit(
        jax.shard_map(call, mesh=mesh, in_specs=P("dev"), out_specs=P("dev"), check_vma=False)
    )
    x = jnp.arange(DEVICES * S, dtype=jnp.float32)
    x = jax.device_put(x, jax.NamedSharding(mesh, P("dev")))
    return fn, (x,)


def expected(x):
    return None
