"""reduce_scatter_op: JAX's own ops/gpu/reduce_scatter_mgpu.reduce_scatter called in
shard_map as _test_reduce_scatter does: 2 devices, x [2*128, 64] int32 sharded P("x"),
reduction "add", scatter_dimension=0, tile_size=1024, vec_size=1, num_blocks=2.
out = x[:128] + x[128:] (global): device d holds rows d*64 .. d*64+63 of it.
"""

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.gpu import reduce_scatter_mgpu

P = jax.sharding.PartitionSpec
DEVICES = 2
EXPECT = "valid"


def body(x):
    return reduce_scatter_mgpu.reduce_scatter(
        x,
        axis_name="x",
        scatter_dimension=0,
        reduction="add",
        tile_size=1024,
        vec_size=1,
        num_blocks=2,
    )


def make():
    mesh = jax.sharding.Mesh(jax.devices()[:2], ["x"])
    fn = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x"), check_vma=False))
    x = ((jnp.arange(256 * 64, dtype=jnp.int32) * 37) % 2000 - 1000).reshape(256, 64)
    return fn, (x,)


def expected(x):
    return {"out": x[:128] + x[128:]}
