"""mm_load_reduce_slice: test_multimem_load_reduce (int32, max, WG_STRIDED): each
device reduces x_ref.at[16:-16] (a slice with a negative stop) over "x" into its
out, then the devices signal each other.
out_d = max(x_0[16:-16], x_1[16:-16]).
Written with plgpu.kernel, the form JAX 0.12 lowers (its pl.pallas_call has no Mosaic
GPU lowering).
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


def kernel(x_ref, y_ref, sem_ref):
    y_ref[...] = plgpu.layout_cast(
        plgpu.multimem_load_reduce(x_ref.at[16:-16], collective_axes="x", reduction_op="max"),
        plgpu.Layout.WG_STRIDED((64, 32), vec_size=1),
    )
    other = 1 - lax.axis_index("x")
    pl.semaphore_signal(sem_ref, 1, device_id=other)
    pl.semaphore_wait(sem_ref)


def make():
    mesh = jax.sharding.Mesh(jax.devices()[:2], ("x",))
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((64, 32), jnp.int32),
        scratch_types=[plgpu.SemaphoreType.REGULAR],
    )
    fn = jax.jit(jax.shard_map(call, mesh=mesh, in_specs=P("x"), out_specs=P("x"), check_vma=False))
    x = ((jnp.arange(192 * 32, dtype=jnp.int32) * 7919) % 1000 - 500).reshape(192, 32)
    return fn, (x,)


def expected(x):
    r = np.maximum(x[16 : 64 + 16], x[64 + 48 : 128 + 48])
    return {"out": np.tile(r, (2, 1))}
