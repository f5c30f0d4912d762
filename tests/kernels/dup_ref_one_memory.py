"""dup_ref_one_memory: one ``jax.new_ref`` given to ``plgpu.kernel`` twice (JAX accepts
it: plgpu.kernel's custom_vmap hides the alias from mpmd_map's check).

The body writes ``b_ref[...] = a_ref[...] + 1.0`` where a_ref and b_ref are the same
memory. The scenario's ``add`` reads two refs, so the constant would have to be put in
the destination first, which is the source too: the importer must say that it cannot
translate this (never a silently wrong scenario, whose simulation would give 1.0
everywhere instead of x + 1).
"""

import jax
import jax.numpy as jnp
from jax.experimental.pallas import mosaic_gpu as plgpu

DEVICES = 1
EXPECT = "valid"


def kernel(a_ref, b_ref):
    b_ref[...] = a_ref[...] + 1.0


def run(x):
    ref = jax.new_ref(x, memory_space=plgpu.GMEM)
    plgpu.kernel(kernel, out_type=())(ref, ref)
    return jax.freeze(ref)


def make():
    return jax.jit(run), (jnp.arange(512, dtype=jnp.float32) * 0.5,)


def expected(x):
    return {"x": x + 1.0}
