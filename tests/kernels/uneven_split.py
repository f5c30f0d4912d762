"""uneven_split: 3 chunks of work over 2 devices, the way ``plgpu.nd_loop`` splits a
grid: device d runs ``3 // 2 + (d < 3 % 2)`` steps (2 on device 0, 1 on device 1).

The loop bound converts a comparison to an integer (``.astype(jnp.int32)``); the
scenario's expressions have no cast, so the importer must write that 0/1 in arithmetic
(a bare ``dev < 1`` as a ``fori_loop`` bound is a bool, which JAX refuses). At step s
a device copies chunk ``s * 2 + d`` of the (replicated) input into the same chunk of its
output, which it zeroed first.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

P = jax.sharding.PartitionSpec
DEVICES = 2
EXPECT = "valid"
CHUNKS, C = 3, 128


def kernel(x_ref, o_ref):
    d = lax.axis_index("dev")
    o_ref[...] = jnp.zeros_like(o_ref)
    steps = CHUNKS // DEVICES + (d < CHUNKS % DEVICES).astype(jnp.int32)

    def step(s, _):
        chunk = pl.ds((s * DEVICES + d) * C, C)
        o_ref[chunk] = x_ref[chunk]

    lax.fori_loop(0, steps, step, None)


def make():
    mesh = jax.sharding.Mesh(jax.devices()[:DEVICES], ["dev"])
    call = plgpu.kernel(kernel, out_type=jax.ShapeDtypeStruct((CHUNKS * C,), jnp.float32))
    fn = jax.jit(jax.shard_map(call, mesh=mesh, in_specs=P(), out_specs=P("dev"), check_vma=False))
    return fn, (jnp.arange(CHUNKS * C, dtype=jnp.float32) + 1.0,)


def expected(x):
    out = np.zeros((DEVICES, CHUNKS * C), np.float32)
    for d in range(DEVICES):
        for chunk in range(d, CHUNKS, DEVICES):
            out[d, chunk * C : (chunk + 1) * C] = x[chunk * C : (chunk + 1) * C]
    return {"out": out.reshape(-1)}
