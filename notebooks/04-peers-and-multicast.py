# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 · Peers and multicast
#
# *About 30 minutes.*
#
# Two transforms reach other devices' memory:
#
# - `plgpu.remote_ref(ref, device_id)`: a **peer** view, the same buffer on **one** other device
#   (`device_id` an int or `{"dev": index}`, often `(lax.axis_index("dev") + 1) % n`);
# - `plgpu.multicast_ref(ref, axes)`: a **multicast** view, the same buffer on **every** device
#   along `axes`: one store writes them all.
#
# A view can be one or the other, never both: JAX refuses a multicast view built on a peer view
# (`REF_PEER_TO_MULTICAST`), and its twin, a peer view built on a multicast view
# (`REF_MULTICAST_TO_PEER`).

# %%
# Simulated CPU devices: this must run before JAX is imported in this kernel.
import os

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"

# %%
# Run once: figures inline, and the repository importable when opened from notebooks/.
# %matplotlib inline
import sys
from pathlib import Path

ROOT = Path.cwd().parent if Path.cwd().name == "notebooks" else Path.cwd()
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
MPMD_LAB = Path(sys.executable).with_name("mpmd-lab")  # the command line, for `!` cells

# %% [markdown]
# ## 1. The rule in plain JAX

# %%
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

device_mesh = jax.make_mesh((4,), ("dev",))
mesh = plgpu.Mesh(grid=(1,), grid_names=("b",))
x = jax.device_put(jnp.arange(4 * 128, dtype=jnp.float32), NamedSharding(device_mesh, P("dev")))

def on_devices(body):
    kernel = pl.kernel(body, out_type=jax.ShapeDtypeStruct((128,), jnp.float32), mesh=mesh)
    return jax.jit(jax.shard_map(kernel, mesh=device_mesh, in_specs=P("dev"),
                                 out_specs=P("dev"), check_vma=False))

def right(ref):
    return plgpu.remote_ref(ref, {"dev": (lax.axis_index("dev") + 1) % 4})


# %% tags=["raises-exception"]
def peer_then_multicast(x_ref, out):
    plgpu.multicast_ref(right(out), "dev")

on_devices(peer_then_multicast).trace(x)


# %% tags=["raises-exception"]
def multicast_then_peer(x_ref, out):
    plgpu.remote_ref(plgpu.multicast_ref(out, "dev"), {"dev": 0})

on_devices(multicast_then_peer).trace(x)


# %% [markdown]
# A peer view alone is fine. JAX traces the ring shift and lowers it for the GPU (the real
# Mosaic GPU lowering runs on this CPU machine):

# %%
def ring_shift(x_ref, out):
    right(out)[...] = x_ref[...]

exported = jax.export.export(on_devices(ring_shift), platforms=["cuda"])(x)
print("lowered for", exported.platforms, "-", len(exported.mlir_module()), "characters of MLIR")

# %% [markdown]
# ## 2. The twins in the toolkit
#
# The static check names the failing step of the stack by its field path; the fix rebuilds the
# view from the base Ref.

# %%
import mpmd_lab
from mpmd_lab import deep, fixes, runtime, validate
from mpmd_lab.exercises import outline
from mpmd_lab.report import format_diagnostics
from mpmd_lab.scenario import load_scenario

ptm = load_scenario("peer-then-multicast")
print(outline(ptm))
diagnostics = validate.check(ptm)
print(format_diagnostics(ptm.name, diagnostics))

# %%
mpmd_lab.plot(ptm)

# %%
fixed, applied = fixes.apply_all(ptm, diagnostics)
print([f.description for f in applied])
print(format_diagnostics(fixed.name, validate.check(fixed)))
print(format_diagnostics("multicast-then-peer", validate.check(load_scenario("multicast-then-peer"))))

# %% [markdown]
# ## 3. A ring shift, simulated
#
# No CPU interpreter runs `remote_ref`. The simulator runs the scenario's semantics over every
# device and logs every access; with `x = iota`, device d's `out` must start at `(d-1)·256`.

# %%
ring = load_scenario("ring-shift")
sim = mpmd_lab.simulate(ring)
print(sim.summary())
x_host = np.arange(4 * 256, dtype=np.float32).reshape(4, 256)
assert np.array_equal(sim.outputs["out"].reshape(4, 256), np.roll(x_host, 1, axis=0))
print("device d's out == device d-1's x on every device")

# %% [markdown]
# ## 4. A multicast
#
# `multicast-2d`: every device of a 2 x 2 mesh stores its tile to `out` on all devices at
# once. A multicast view cannot be written by a plain store (`out[...] = …`): the GPU lowering
# refuses it. The store goes SMEM → GMEM with the TMA (`tma_store`), which is why the scenario
# stages `x` in SMEM scratch and uses `plgpu.kernel` (which allocates scratch itself).

# %%
mc = load_scenario("multicast-2d")
print(outline(mc))
mpmd_lab.plot(mc)

# %%
print("deep check:", [d.code for d in deep.deep_check(mc) if d.is_error] or "JAX accepts it")
sim = mpmd_lab.simulate(mc)
print(sim.summary())

# %% [markdown]
# The races the simulator reports are real: every device writes the *same* elements of `out`
# on every device (the static check warns about it too). Here all the values are equal (all ones), so nobody can tell; with different values
# the result would depend on timing. The all-gather exercise gives each device its own slot.
#
# Now the same store as a plain copy: the deep check asks JAX to lower it for the GPU.

# %%
plain = mc.to_dict()
body = plain["call"]["programs"][0]["body"]
body[2] = {"op": "copy", "src": "smem", "dst": "everyone"}
plain = load_scenario(plain)
print(format_diagnostics("multicast with a plain store", deep.deep_check(plain)))

# %% [markdown]
# ## Exercises for this notebook (in [06](06-exercises.ipynb))
#
# - **ring-left**: turn the ring around.
# - **multicast-then-peer**: a peer view, not a multicast one.
# - **peer-then-multicast**: an all-gather with one multicast.
#
# **Next:** [05 · prototyping](05-prototyping.ipynb).
