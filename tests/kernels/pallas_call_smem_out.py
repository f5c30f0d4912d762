"""pallas_call_smem_out: test_multimem_load_reduce (int32, max, WG_STRIDED): each
device reduces x_ref.at[16:-16] (a slice with a negative stop) over "x" into an SMEM
out (out_specs memory_space=SMEM), then the devices signal each other.
out_d = max(x_0[16:-16], x_1[16:-16]).
JAX 0.12 traces this call but does not lower it for the GPU (no Mosaic GPU rule for
pl.pallas_call); ``expected`` is what the kernel computes as plgpu.kernel.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

P = jax.sharding.PartitionSpec
DEVICES = 2
#: JAX 0.12 has no Mosaic GPU lowering rule for pl.pallas_call: gpu_lowering asserts
EXPECT = {"stage": "lower", "type": "AssertionError", "message": ""}


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
    call = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(memory_space=plgpu.GMEM)],
        out_specs=pl.BlockSpec(memory_space=plgpu.SMEM),
        out_shape=jax.ShapeDtypeStruct((64, 32), jnp.int32),
        scratch_shapes=[plgpu.SemaphoreType.REGULAR],
        compiler_params=plgpu.CompilerParams(),
    )
    fn = jax.jit(jax.shard_map(call, mesh=mesh, in_specs=P("x"), out_specs=P("x"), check_vma=False))
    x = ((jnp.arange(192 * 32, dtype=jnp.int32) * 7919) % 1000 - 500).reshape(192, 32)
    return fn, (x,)


def expected(x):
    r = np.maximum(x[16 : 64 + 16], x[64 + 48 : 128 + 48])
    return {"out": np.tile(r, (2, 1))}
