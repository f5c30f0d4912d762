"""collective_matmul_op: JAX's own ops/gpu/collective_matmul_mgpu.all_gather_lhs_matmul
on 2 devices: lhs [2*128, 64] sharded P("x", None), rhs [64, 2*128] sharded P(None, "x"),
out = all_gather(lhs) @ rhs, P(None, "x"). Small integer-valued f16 operands so the f32
accumulation is exact. ``all_gather_lhs_matmul`` reads ``jax.devices()[0].core_count``
while tracing: a CPU device has none, so on this host JAX's op stops there (AttributeError)
before any kernel is made; the import says so and where.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas.ops.gpu import collective_matmul_mgpu, hopper_matmul_mgpu

P = jax.sharding.PartitionSpec
DEVICES = 2
#: on a CPU host the op asks the first device for its SM count, which a CPU device has not
EXPECT = {"stage": "trace", "type": "AttributeError", "message": ""}


def make():
    mesh = jax.sharding.Mesh(jax.devices()[:2], ["x"])
    cfg = hopper_matmul_mgpu.TuningConfig(tile_m=64, tile_n=64, tile_k=64, max_concurrent_steps=2)
    fn = jax.jit(
        jax.shard_map(
            functools.partial(
                collective_matmul_mgpu.all_gather_lhs_matmul,
                axis_name="x",
                config=cfg,
                dtype=jnp.float16,
            ),
            mesh=mesh,
            in_specs=(P("x", None), P(None, "x")),
            out_specs=P(None, "x"),
            check_vma=False,
        )
    )
    a = ((jnp.arange(256 * 64) % 5) - 2).astype(jnp.float16).reshape(256, 64)
    b = ((jnp.arange(64 * 256) % 3) - 1).astype(jnp.float16).reshape(64, 256)
    return fn, (a, b)


def expected(a, b):
    return {"out": (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)}
