"""transposed_spec: 2 devices, the operand sharded on its second dim (``P(None, "dev")``).

Each device stores its shard into its peer's ``out`` through ``plgpu.remote_ref`` and
waits for the peer's store (one semaphore). The specs differ from mpmd-lab's
convention (dim 0 over every axis): the importer must cut each device's shard as the
spec does. out_d = x_{1-d}, put together the same way: the two column halves swap.
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
ROWS, COLS = 8, 128


def kernel(x_ref, o_ref, sem):
    other = 1 - lax.axis_index("dev")
    plgpu.remote_ref(o_ref, other)[...] = x_ref[...]
    pl.semaphore_signal(sem, device_id=other)
    pl.semaphore_wait(sem)


def make():
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    spec = P(None, "dev")
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((ROWS, COLS), jnp.float32),
        scratch_types=[plgpu.SemaphoreType.REGULAR],
    )
    fn = jax.jit(jax.shard_map(call, mesh=mesh, in_specs=spec, out_specs=spec, check_vma=False))
    x = (jnp.arange(ROWS * DEVICES * COLS) % 251).astype(jnp.float32)
    x = x.reshape(ROWS, DEVICES * COLS)
    x = jax.device_put(x, jax.NamedSharding(mesh, spec))
    return fn, (x,)


def expected(x):
    halves = np.split(x, DEVICES, axis=1)
    return {"out": np.concatenate(halves[::-1], axis=1)}
