"""red_max_exchange: two devices trade the maxima of their shards, as JAX's distributed
tests trade data: each device reduces its shard (``jnp.max``), stores it into its own
slot of the result and into the same slot on the other device
(``plgpu.remote_ref(o_ref, other).at[dev]``), signals the other device's semaphore and
waits for its signal. Every device ends with both maxima: out[d] = [max x0, max x1].
``expected`` is numpy's.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu
from jax.sharding import PartitionSpec as P

DEVICES = 2
EXPECT = "valid"

N = 256


def kernel(x_ref, o_ref, sem):
    dev = lax.axis_index("x")
    other = 1 - dev
    m = jnp.max(x_ref[...])
    o_ref[dev] = m
    plgpu.remote_ref(o_ref, other)[dev] = m
    pl.semaphore_signal(sem, 1, device_id={"x": other})
    pl.semaphore_wait(sem, 1)


def build(mesh):
    k = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((DEVICES,), jnp.float32),
        scratch_types=[plgpu.SemaphoreType.REGULAR],
    )
    return jax.jit(jax.shard_map(k, mesh=mesh, in_specs=P("x"), out_specs=P("x"), check_vma=False))


def _mesh():
    return jax.make_mesh((DEVICES,), ("x",))


def make():
    x = jax.random.normal(jax.random.key(7), (DEVICES * N,), jnp.float32)
    x = jax.device_put(x, jax.NamedSharding(_mesh(), P("x")))
    return build(_mesh()), (x,)


def expected(x):
    maxima = np.asarray(x).reshape(DEVICES, N).max(axis=1)
    return {"out": np.concatenate([maxima] * DEVICES)}
