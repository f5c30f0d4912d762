"""ring_gather_left: 4 devices pass chunks to the LEFT; at step s a device forwards
chunk ``(dev + step) % D``.

Each device starts with its own chunk at out[dev*S:(dev+1)*S]. In a ``lax.fori_loop``
of D - 1 steps it stores chunk (dev + step) % D into its left neighbour's output
(``plgpu.remote_ref(o_ref, left).at[pl.ds(...)]``), signals that neighbour's
semaphore for the step and waits for its own: the right neighbour has then written
chunk (dev + step + 1) % D here, which is the one this device forwards next. The
indices use Python's ``%`` on traced integers (jnp.remainder: it floors), the ring
the collective matmul of JAX's GPU docs walks. Every device ends holding all chunks.
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
S = 128


def kernel(x_ref, o_ref, step_sems):
    dev = lax.axis_index("ring")
    left = (dev + DEVICES - 1) % DEVICES
    o_ref[pl.ds(dev * S, S)] = x_ref[...]

    def step(step, _):
        chunk = (dev + step) % DEVICES
        there = plgpu.remote_ref(o_ref, left).at[pl.ds(chunk * S, S)]
        there[...] = o_ref[pl.ds(chunk * S, S)]
        pl.semaphore_signal(step_sems.at[step], device_id=left)
        pl.semaphore_wait(step_sems.at[step])
        return _

    lax.fori_loop(0, DEVICES - 1, step, None)


def make():
    mesh = jax.make_mesh((DEVICES,), ("ring",))
    gather = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((DEVICES * S,), jnp.float32),
        scratch_types=[plgpu.SemaphoreType.REGULAR((DEVICES - 1,))],
    )
    fn = jax.jit(
        jax.shard_map(gather, mesh=mesh, in_specs=P("ring"), out_specs=P("ring"), check_vma=False)
    )
    x = (jnp.arange(DEVICES * S) % 89).astype(jnp.float32) - 40.0
    return fn, (jax.device_put(x, jax.NamedSharding(mesh, P("ring"))),)


def expected(x):
    # every device's output is the whole input; the out_spec stacks the four
    return {"out": np.concatenate([x] * DEVICES)}
