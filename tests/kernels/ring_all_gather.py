"""ring_all_gather: 4 devices, x[S] -> out[4*S] with a ring of remote stores.

Device d first puts its own chunk at out[d*S:(d+1)*S].  Then in D-1 steps of a
``lax.fori_loop`` it forwards to its right neighbour the chunk it received in
the previous step: at step s it sends chunk c = (d - s) mod D (its own chunk
at s = 0), stores it through ``plgpu.remote_ref(out_ref, right).at[pl.ds(c*S,
S)]``, signals the neighbour's per-step semaphore ``sem.at[s]`` and waits on
its own ``sem.at[s]`` for chunk (d - s - 1) mod D from the left, which it
forwards at step s + 1.  The step/index arithmetic is that of the ring
all-gather in docs/pallas/gpu/collective_matmul.md and
ops/gpu/collective_matmul_mgpu.py; the signal/wait idiom is that of
test_remote_dma_in_loop.  out_d = concat_j x_j on every device.
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
S = 256  # elements per shard


def kernel(x_ref, o_ref, sems):
    dev = lax.axis_index("dev")
    right = lax.rem(dev + 1, DEVICES)
    o_ref[pl.ds(dev * S, S)] = x_ref[...]
    right_out = plgpu.remote_ref(o_ref, right)

    def step(s, carry):
        chunk = lax.rem(dev + DEVICES - s, DEVICES)
        right_out.at[pl.ds(chunk * S, S)][...] = o_ref[pl.ds(chunk * S, S)]
        pl.semaphore_signal(sems.at[s], device_id=right)
        pl.semaphore_wait(sems.at[s])  # chunk (dev - s - 1) % D has arrived
        return carry

    lax.fori_loop(0, DEVICES - 1, step, None)


def make():
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((DEVICES * S,), jnp.float32),
        scratch_types=[plgpu.SemaphoreType.REGULAR((DEVICES - 1,))],
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
