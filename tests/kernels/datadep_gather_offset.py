"""datadep_gather_offset: an all-gather on 2 devices whose slots are loaded: each device
reads its slot from a table (``slot_ref[0]``) and writes its x into that slot of `out`
on every device (its own and its peer, ``1 - dev``), signalling the peer; then waits
for the peer's signal. The slots are a permutation, so every slot is written once.
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
N = 128


def kernel(x_ref, slot_ref, o_ref, sem):
    dev = lax.axis_index("dev")
    slot = slot_ref[0]
    o_ref[slot] = x_ref[...]
    plgpu.remote_ref(o_ref, 1 - dev)[slot] = x_ref[...]
    pl.semaphore_signal(sem, device_id=1 - dev)
    pl.semaphore_wait(sem)


def make():
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((DEVICES, N), jnp.float32),
        scratch_types=[plgpu.SemaphoreType.REGULAR],
    )
    fn = jax.jit(
        jax.shard_map(
            call,
            mesh=mesh,
            in_specs=(P("dev"), P("dev")),
            out_specs=P("dev"),
            check_vma=False,
        )
    )
    spec = jax.NamedSharding(mesh, P("dev"))
    x = jax.device_put(jnp.arange(DEVICES * N, dtype=jnp.float32), spec)
    slots = jax.device_put(jnp.array([1, 0, 0, 0, 0, 0, 0, 0], jnp.int32), spec)
    return fn, (x, slots)


def expected(x, slots):
    shards = np.split(x, DEVICES)
    mine = slots.reshape(DEVICES, 4)[:, 0]
    one = np.zeros((DEVICES, N), np.float32)
    for d in range(DEVICES):
        one[mine[d]] = shards[d]
    return {"out": np.concatenate([one, one])}
