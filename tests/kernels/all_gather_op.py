"""all_gather_op: JAX's own multimem all-gather, ops/gpu/all_gather_mgpu.all_gather.

The installed jax (0.12.0.1) ships
``jax.experimental.pallas.ops.gpu.all_gather_mgpu.all_gather``; it is called
here inside shard_map as in _test_all_gather of
tests/pallas/gpu_pallas_distributed_test.py: 2 devices on mesh axis "x",
per-device x [16, 128] f32, gather_dimension=0, num_blocks=2 (passed
explicitly: the default queries ``backend.get_default_device().core_count``),
tile_size=1024, vec_size=1.  Internally: a grid of 2 blocks with
``plgpu.nd_loop(..., collective_axes="blocks")``, ``plgpu.multimem_store`` of
each tile into every device's output, then
``semaphore_signal_multicast`` + ``semaphore_wait(done, D, decrement=False)``.

The axis is named "x", as in JAX's tests: with a multi-character axis name
the op does not lower (see all_gather_op_long_axis_name).
out = tile(x, 2) globally.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental.pallas.ops.gpu import all_gather_mgpu

P = jax.P
DEVICES = 2
EXPECT = "valid"
AXIS = "x"


def _body(x):
    return all_gather_mgpu.all_gather(
        x, axis_name=AXIS, gather_dimension=0, num_blocks=2, tile_size=1024, vec_size=1
    )


def make():
    mesh = jax.make_mesh((DEVICES,), (AXIS,))
    fn = jax.jit(
        jax.shard_map(_body, mesh=mesh, in_specs=P(AXIS), out_specs=P(AXIS), check_vma=False)
    )
    x = jnp.arange(DEVICES * 16 * 128, dtype=jnp.float32).reshape(DEVICES * 16, 128)
    x = jax.device_put(x, jax.NamedSharding(mesh, P(AXIS)))
    return fn, (x,)


def expected(x):
    return {"out": np.tile(x, (DEVICES, 1))}


def reference(x):
    mesh = jax.make_mesh((DEVICES,), (AXIS,))
    return jax.jit(
        jax.shard_map(
            lambda s: lax.all_gather(s, AXIS, tiled=True),
            mesh=mesh,
            in_specs=P(AXIS),
            out_specs=P(AXIS),
        )
    )(x)
