"""allreduce_pull: 4 devices, each reads every peer's shard with remote loads and
sums them: out_d = x_d + x_{d+1} + x_{d+2} + x_{d+3} (indices mod 4), in that order.

A "ready" round (each device signals all three peers and waits for 3) makes sure
every peer is in the kernel; the sum is a Python loop of ``acc = acc + remote_ref(x_ref,
peer)[...]`` (three additions, left to right); a "done" round keeps each device's
input alive until the peers have read it. Integer-valued data keeps the float sums
exact, so the order only has to match JAX's, which the importer keeps.
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
N = 256


def kernel(x_ref, o_ref, ready, done):
    me = lax.axis_index("d")
    peers = [(me + k) % DEVICES for k in range(1, DEVICES)]
    for p in peers:
        pl.semaphore_signal(ready, device_id=p)
    pl.semaphore_wait(ready, DEVICES - 1)
    acc = x_ref[...]
    for p in peers:
        acc = acc + plgpu.remote_ref(x_ref, p)[...]
    o_ref[...] = acc
    for p in peers:
        pl.semaphore_signal(done, device_id=p)
    pl.semaphore_wait(done, DEVICES - 1)


def make():
    mesh = jax.sharding.Mesh(jax.devices()[:DEVICES], ["d"])
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((N,), jnp.float32),
        scratch_types=[plgpu.SemaphoreType.REGULAR, plgpu.SemaphoreType.REGULAR],
    )
    fn = jax.jit(jax.shard_map(call, mesh=mesh, in_specs=P("d"), out_specs=P("d"), check_vma=False))
    x = (jnp.arange(DEVICES * N) % 23).astype(jnp.float32)
    return fn, (x,)


def expected(x):
    s = x.reshape(DEVICES, N)
    rows = []
    for d in range(DEVICES):
        acc = s[d].copy()
        for k in range(1, DEVICES):
            acc = acc + s[(d + k) % DEVICES]
        rows.append(acc)
    return {"out": np.concatenate(rows)}
