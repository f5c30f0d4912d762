"""multimem_store: 4 devices; each device multimem-stores its shard into every device's out.

An all-gather built from ``plgpu.multimem_store(value, o_ref.at[pl.ds(dev*S, S)],
("dev",))``: one store per device, broadcast by the NVLink switch to `out` on all
devices of the axis.  Completion barrier as in ops/gpu/all_gather_mgpu.py:
``plgpu.semaphore_signal_multicast(done, collective_axes="dev")`` then
``pl.semaphore_wait(done, DEVICES, decrement=False)`` -- every device waits
until all devices have finished storing into its memory.  Modelled on
test_multimem_store_regs and all_gather_mgpu.  out_d = concat_j x_j.

collective_axes is the tuple ("dev",): a bare multi-character string is taken
apart into its characters by the lowering (see err_multimem_str_axis).
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
S = 256


def kernel(x_ref, o_ref, done_sem):
    dev = lax.axis_index("dev")
    plgpu.multimem_store(x_ref[...], o_ref.at[pl.ds(dev * S, S)], ("dev",))
    plgpu.semaphore_signal_multicast(done_sem, collective_axes="dev")
    pl.semaphore_wait(done_sem, DEVICES, decrement=False)


def make():
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((DEVICES * S,), jnp.float32),
        scratch_types=[plgpu.SemaphoreType.REGULAR],
    )
    fn = jax.jit(
        jax.shard_map(call, mesh=mesh, in_specs=P("dev"), out_specs=P("dev"), check_vma=False)
    )
    x = jnp.arange(DEVICES * S, dtype=jnp.float32)
    x = jax.device_put(x, jax.NamedSharding(mesh, P("dev")))
    return fn, (x,)


def expected(x):
    return {"out": np.tile(x, DEVICES)}


def reference(x):
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    return jax.jit(
        jax.shard_map(
            lambda s: lax.all_gather(s, "dev", tiled=True),
            mesh=mesh,
            in_specs=P("dev"),
            out_specs=P("dev"),
        )
    )(x)
