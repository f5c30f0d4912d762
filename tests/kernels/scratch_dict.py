"""scratch_dict: plgpu.kernel's scratch given as a dict (``scratch_types={"smem_ref":
..., "barrier_ref": ...}``), as JAX's distributed tests write it. JAX binds the dict by
keyword, flattening its keys sorted (barrier_ref before smem_ref) while the kernel's
``def`` names smem_ref first: the import must keep each scratch under its own name
(a swap made a false DEADLOCK_BARRIER). Each device loads its peer's x into SMEM with a
TMA copy completing on the barrier, then stores it: out_d = x_{1-d}.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental.pallas import mosaic_gpu as plgpu

P = jax.P
DEVICES = 2
EXPECT = "valid"
ROWS, COLS = 8, 128


def kernel(x_ref, o_ref, smem_ref, barrier_ref):
    dev = lax.axis_index("dev")
    plgpu.copy_gmem_to_smem(plgpu.remote_ref(x_ref, 1 - dev), smem_ref, barrier_ref)
    plgpu.barrier_wait(barrier_ref)
    o_ref[...] = smem_ref[...]


def make():
    mesh = jax.make_mesh((DEVICES,), ("dev",))
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((ROWS, COLS), jnp.float32),
        scratch_types={
            "smem_ref": plgpu.SMEM((ROWS, COLS), jnp.float32),
            "barrier_ref": plgpu.Barrier(num_arrivals=1),
        },
    )
    fn = jax.jit(
        jax.shard_map(call, mesh=mesh, in_specs=P("dev"), out_specs=P("dev"), check_vma=False)
    )
    x = jnp.arange(DEVICES * ROWS * COLS, dtype=jnp.float32).reshape(DEVICES * ROWS, COLS)
    x = jax.device_put(x, jax.NamedSharding(mesh, P("dev")))
    return fn, (x,)


def expected(x):
    a, b = np.split(x, DEVICES)
    return {"out": np.concatenate([b, a])}
