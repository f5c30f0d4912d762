"""mesh_2x2_dict_ids: 2x2 device mesh ("x", "y"); device (i, j) sends its x to (1-i, 1-j).

Device ids given as dicts of mesh coordinates, the form of test_remote_dma_2d_mesh
and test_copy_tma (use_dict=True): ``plgpu.remote_ref(o_ref, {"x": 1 - i,
"y": 1 - j})`` and ``pl.semaphore_signal(sem, device_id={"x": ..., "y": ...})``.
The operand is sharded over both axes, P(("x", "y")), so device (i, j) holds
block 2*i + j and receives block 3 - (2*i + j).  The single "recv" semaphore
handshake of test_remote_dma_2d_mesh keeps the receiver alive until the write
landed.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

P = jax.P
DEVICES = 4
EXPECT = "valid"


def kernel(x_ref, o_ref, recv_sem):
    opposite = {"x": 1 - lax.axis_index("x"), "y": 1 - lax.axis_index("y")}
    plgpu.remote_ref(o_ref, opposite)[...] = x_ref[...]
    pl.semaphore_signal(recv_sem, device_id=opposite)
    pl.semaphore_wait(recv_sem)


def make():
    mesh = jax.make_mesh((2, 2), ("x", "y"))
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        scratch_types=[plgpu.SemaphoreType.REGULAR],
    )
    spec = P(("x", "y"))
    fn = jax.jit(jax.shard_map(call, mesh=mesh, in_specs=spec, out_specs=spec, check_vma=False))
    x = jnp.arange(4 * 8 * 128, dtype=jnp.float32).reshape(4 * 8, 128)
    x = jax.device_put(x, jax.NamedSharding(mesh, spec))
    return fn, (x,)


def expected(x):
    return {"out": np.concatenate(np.split(x, 4)[::-1])}


def reference(x):
    mesh = jax.make_mesh((2, 2), ("x", "y"))
    spec = P(("x", "y"))

    def flip(s):
        return lax.ppermute(lax.ppermute(s, "x", [(0, 1), (1, 0)]), "y", [(0, 1), (1, 0)])

    return jax.jit(jax.shard_map(flip, mesh=mesh, in_specs=spec, out_specs=spec))(x)
