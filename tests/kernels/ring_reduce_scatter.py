"""ring_reduce_scatter: 4 devices, x[D*S] -> out[S], out_d = sum_j x_j[d*S:(d+1)*S].

Ring reduce-scatter with remote stores.  Partial sums travel to the right; a
second kernel output ``recv[D-1, S]`` is the landing buffer (one slot per step,
so no slot is overwritten while still being read -- the same "extra output as
scratch" trick as ``scratch_ref`` in ops/gpu/collective_matmul_mgpu.py).
At step s device d sends the partial for chunk c_s = (d - s - 1) mod D:
step 0 sends its own x chunk, step s > 0 sends ``recv[s-1] + x[c_s]`` (the
partial that arrived from the left, accumulated with its own view
``x_ref.at[pl.ds(c*S, S)]``).  After the last step the partial of chunk d has
visited every other device; out = recv[D-2] + x[d*S:(d+1)*S].  Every step
signals the receiver's per-step semaphore and waits on its own.
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


def kernel(x_ref, o_ref, recv_ref, sems):
    dev = lax.axis_index("dev")
    right = lax.rem(dev + 1, DEVICES)
    right_recv = plgpu.remote_ref(recv_ref, right)

    def chunk_view(s):
        c = lax.rem(dev + 2 * DEVICES - s - 1, DEVICES)
        return x_ref.at[pl.ds(c * S, S)]

    # Step 0: send my own contribution to chunk (dev - 1) % D.
    right_recv.at[0][...] = chunk_view(0)[...]
    pl.semaphore_signal(sems.at[0], device_id=right)
    pl.semaphore_wait(sems.at[0])

    def step(s, carry):
        partial = recv_ref[s - 1] + chunk_view(s)[...]
        right_recv.at[s][...] = partial
        pl.semaphore_signal(sems.at[s], device_id=right)
        pl.semaphore_wait(sems.at[s])
        return carry

    lax.fori_loop(1, DEVICES - 1, step, None)
    o_ref[...] = recv_ref[DEVICES - 2] + x_ref[pl.ds(dev * S, S)]


def _body(x):
    out, _ = plgpu.kernel(
        kernel,
        out_type=(
            jax.ShapeDtypeStruct((S,), jnp.float32),
            jax.ShapeDtypeStruct((DEVICES - 1, S), jnp.float32),
        ),
        scratch_types=[plgpu.SemaphoreType.REGULAR((DEVICES - 1,))],
    )(x)
    return out


def make():
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    fn = jax.jit(
        jax.shard_map(_body, mesh=mesh, in_specs=P("dev"), out_specs=P("dev"), check_vma=False)
    )
    # Small integers: every partial sum is exact in float32, whatever the order.
    x = (jnp.arange(DEVICES * DEVICES * S) % 97).astype(jnp.float32)
    x = jax.device_put(x, jax.NamedSharding(mesh, P("dev")))
    return fn, (x,)


def expected(x):
    xs = x.reshape(DEVICES, DEVICES, S)  # [device j, chunk c, S]
    return {"out": xs.sum(axis=0).reshape(-1).astype(np.float32)}


def reference(x):
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    return jax.jit(
        jax.shard_map(
            lambda s: lax.psum_scatter(s, "dev", tiled=True),
            mesh=mesh,
            in_specs=P("dev"),
            out_specs=P("dev"),
        )
    )(x)
