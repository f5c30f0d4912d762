"""logical_ring_2x2: a (2, 2) device mesh addressed with LOGICAL device ids.

``lax.axis_index(("x", "y"))`` is the device's row-major index r; each device stores
x + 1 into the output of device (r + 1) % 4, named by that index with
``device_id_type=pl.DeviceIdType.LOGICAL`` for both the ``remote_ref`` and the
semaphore signal, then waits for the store from (r - 1) % 4.
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
    r = lax.axis_index(("x", "y"))
    nxt = lax.rem(r + 1, DEVICES)
    logical = pl.DeviceIdType.LOGICAL
    plgpu.remote_ref(o_ref, nxt, device_id_type=logical)[...] = x_ref[...] + 1.0
    pl.semaphore_signal(arrived, device_id=nxt, device_id_type=logical)
    pl.semaphore_wait(arrived)


def make():
    devices = np.asarray(jax.devices()[:DEVICES]).reshape(2, 2)
    mesh = jax.sharding.Mesh(devices, ["x", "y"])
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((N,), jnp.float32),
        scratch_types=[plgpu.SemaphoreType.REGULAR],
    )
    spec = P(("x", "y"))
    fn = jax.jit(jax.shard_map(call, mesh=mesh, in_specs=spec, out_specs=spec, check_vma=False))
    return fn, (jnp.arange(DEVICES * N, dtype=jnp.float32),)


def expected(x):
    s = x.reshape(DEVICES, N)
    return {"out": np.concatenate([s[(r - 1) % DEVICES] + 1 for r in range(DEVICES)])}
