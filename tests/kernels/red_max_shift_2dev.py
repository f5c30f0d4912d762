"""red_max_shift_2dev: two devices under ``jax.shard_map``; each shifts its shard so its
largest element is the device's index, ``o = x - jnp.max(x) + dev`` (a reduction of the
whole shard and an axis index in one value). ``expected`` runs the kernel with JAX's
interpreter (``interpret=True``).
"""

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental.pallas import mosaic_gpu as plgpu
from jax.sharding import PartitionSpec as P

DEVICES = 2
EXPECT = "valid"

N = 256


def kernel(x_ref, o_ref):
    dev = lax.axis_index("dev")
    x = x_ref[...]
    o_ref[...] = x - jnp.max(x) + dev.astype(jnp.float32)


def build(mesh, interpret=None):
    k = plgpu.kernel(kernel, out_type=jax.ShapeDtypeStruct((N,), jnp.float32), interpret=interpret)
    return jax.jit(
        jax.shard_map(k, mesh=mesh, in_specs=P("dev"), out_specs=P("dev"), check_vma=False)
    )


def _mesh():
    return jax.make_mesh((DEVICES,), ("dev",))


def _sharded(x):
    return jax.device_put(jnp.asarray(x), jax.NamedSharding(_mesh(), P("dev")))


def make():
    x = jax.random.normal(jax.random.key(5), (DEVICES * N,), jnp.float32)
    return build(_mesh()), (_sharded(x),)


def expected(x):
    return {"out": jax.device_get(build(_mesh(), interpret=True)(_sharded(x)))}
