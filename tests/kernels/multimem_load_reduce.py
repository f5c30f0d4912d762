"""multimem_load_reduce: 4 devices; all-reduce (sum) through ``plgpu.multimem_load_reduce``.

``plgpu.multimem_load_reduce(x_ref, collective_axes=("dev",), reduction_op="add")``
loads x from every device of the axis through the NVLink switch and returns
the elementwise sum; each device stores it into its own out.  The result is
``plgpu.layout_cast`` to a WG_STRIDED layout as in test_multimem_load_reduce
and ops/gpu/reduce_scatter_mgpu.py.  Completion barrier (nobody exits while
others may still read its x): semaphore_signal_multicast + wait(DEVICES,
decrement=False).  out_d = sum_j x_j.

collective_axes is the tuple ("dev",): a bare string is taken apart into its
characters by the lowering (see err_multimem_str_axis).
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
ROWS, COLS = 64, 32


def kernel(x_ref, o_ref, done_sem):
    o_ref[...] = plgpu.layout_cast(
        plgpu.multimem_load_reduce(x_ref, collective_axes=("dev",), reduction_op="add"),
        plgpu.Layout.WG_STRIDED((ROWS, COLS), vec_size=1),
    )
    plgpu.semaphore_signal_multicast(done_sem, collective_axes="dev")
    pl.semaphore_wait(done_sem, DEVICES, decrement=False)


def make():
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((ROWS, COLS), jnp.float32),
        scratch_types=[plgpu.SemaphoreType.REGULAR],
    )
    fn = jax.jit(
        jax.shard_map(call, mesh=mesh, in_specs=P("dev"), out_specs=P("dev"), check_vma=False)
    )
    # Small integers: the f32 sum is exact in any order.
    x = (jnp.arange(DEVICES * ROWS * COLS) % 101).astype(jnp.float32).reshape(DEVICES * ROWS, COLS)
    x = jax.device_put(x, jax.NamedSharding(mesh, P("dev")))
    return fn, (x,)


def expected(x):
    total = x.reshape(DEVICES, ROWS, COLS).sum(axis=0, dtype=np.float32)
    return {"out": np.tile(total, (DEVICES, 1))}


def reference(x):
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    return jax.jit(
        jax.shard_map(
            lambda s: lax.psum(s, "dev"), mesh=mesh, in_specs=P("dev"), out_specs=P("dev")
        )
    )(x)
