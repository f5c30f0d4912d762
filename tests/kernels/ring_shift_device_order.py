"""ring_shift_device_order: the ring shift of ring_shift_sem on a device mesh that lists
its devices as 2, 0, 3, 1 (``jax.sharding.Mesh(np.array(devices)[perm], ("dev",))``).
JAX traces it; the Mosaic GPU lowering refuses the order for a kernel that talks to other
devices (MESH_DEVICE_ORDER). The import keeps the order (``device_order``), and the check
reports the lowering's error.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

P = jax.P
DEVICES = 4
EXPECT = "gpu-lower"
ROWS, COLS = 8, 128
ORDER = [2, 0, 3, 1]


def kernel(x_ref, o_ref, ready_sem, recv_sem):
    dev = lax.axis_index("dev")
    right = lax.rem(dev + 1, DEVICES)
    left = lax.rem(dev + DEVICES - 1, DEVICES)
    pl.semaphore_signal(ready_sem, device_id=left)
    pl.semaphore_wait(ready_sem)
    plgpu.remote_ref(o_ref, right)[...] = x_ref[...]
    pl.semaphore_signal(recv_sem, device_id=right)
    pl.semaphore_wait(recv_sem)


def make():
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:DEVICES])[ORDER], ("dev",))
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((ROWS, COLS), jnp.float32),
        scratch_types=[plgpu.SemaphoreType.REGULAR, plgpu.SemaphoreType.REGULAR],
    )
    fn = jax.jit(
        jax.shard_map(call, mesh=mesh, in_specs=P("dev"), out_specs=P("dev"), check_vma=False)
    )
    x = jnp.arange(DEVICES * ROWS * COLS, dtype=jnp.float32).reshape(DEVICES * ROWS, COLS)
    x = jax.device_put(x, jax.NamedSharding(mesh, P("dev")))
    return fn, (x,)
