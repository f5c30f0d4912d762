"""mesh_2x2_partial_dict: 2x2 mesh; device ids as *partial* dicts -- swap along one axis only.

The form of test_remote_dma_2d_mesh (tests/pallas/gpu_pallas_distributed_test.py):
``other = {"x": 1 - lax.axis_index("x")}`` names only the "x" coordinate; the
missing "y" coordinate defaults to the caller's own (``_device_id_dict_to_mesh``
in jax/_src/pallas/primitives.py fills it with ``axis_index("y")``), so (i, j)
writes to (1 - i, j).  The logical id is the row-major sum(coord * stride).
Operand sharded P(("x", "y")): device (i, j) holds block 2*i + j and receives
block 2*(1 - i) + j.  (A flat scalar id on this 2-D mesh is rejected, see
err_scalar_id_2d_mesh; a tuple (i, j) is accepted like the dict.)
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


def kernel(x_ref, y_ref, recv_sem):
    other_dev_id = {"x": 1 - lax.axis_index("x")}
    other_y_ref = plgpu.remote_ref(y_ref, other_dev_id)
    other_y_ref[...] = x_ref[...]
    pl.semaphore_signal(recv_sem, device_id=other_dev_id)
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
    b = np.split(x, 4)
    return {"out": np.concatenate([b[2], b[3], b[0], b[1]])}


def reference(x):
    mesh = jax.make_mesh((2, 2), ("x", "y"))
    spec = P(("x", "y"))
    return jax.jit(
        jax.shard_map(
            lambda s: lax.ppermute(s, "x", [(0, 1), (1, 0)]),
            mesh=mesh,
            in_specs=spec,
            out_specs=spec,
        )
    )(x)
