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
# # 01 · Meshes: blocks of a kernel, devices of a machine
#
# *About 25 minutes.*
#
# Two meshes meet in an MPMD kernel, and they are easy to confuse:
#
# | | **kernel mesh** | **device mesh** |
# | --- | --- | --- |
# | made by | `plgpu.Mesh(grid=…, grid_names=…, cluster=…, num_threads=…, thread_name=…)` | `jax.make_mesh(shape, names)` |
# | its points are | blocks (CTAs) of one kernel launch on **one GPU**, and warpgroups in a block | **GPUs** (here: simulated CPU devices) |
# | used by | `pl.kernel(…, mesh=…)` | `jax.shard_map(…, mesh=…)` |
# | "who am I?" | `lax.axis_index("b")` for grid axis `b` | `lax.axis_index("dev")` for device axis `dev` |
# | memory | SMEM per block, GMEM per device | each device has its own GMEM |
# | scenario field | `call.programs[i].mesh` | `device_mesh` |
#
# A kernel runs on every point of the kernel mesh, **on every device** of the device mesh.

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
# ## 1. A device mesh, in plain JAX

# %%
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

print(jax.devices())
device_mesh = jax.make_mesh((4,), ("dev",))
print(device_mesh)


# %% [markdown]
# Under `shard_map` every device runs the function on its shard; `lax.axis_index("dev")` is
# that device's position on the axis.

# %%
def who_am_i(x):
    return x * 0 + lax.axis_index("dev")

f = jax.jit(jax.shard_map(who_am_i, mesh=device_mesh, in_specs=P("dev"), out_specs=P("dev")))
x = jax.device_put(jnp.zeros(8), NamedSharding(device_mesh, P("dev")))
print(f(x))  # two elements per device

# %% [markdown]
# ## 2. A kernel mesh, in plain JAX
#
# `plgpu.Mesh(grid=(2,), grid_names=("b",))` launches 2 blocks. Each block copies its own half:
# it finds itself with `lax.axis_index("b")`. We run it with Pallas' GPU interpreter on the CPU.

# %%
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

kernel_mesh = plgpu.Mesh(grid=(2,), grid_names=("b",))
interpret = plgpu.InterpretGPUParams()

def halves(x_ref, out):
    b = lax.axis_index("b")
    out.at[pl.ds(b * 128, 128)][...] = x_ref.at[pl.ds(b * 128, 128)][...]

copy = pl.kernel(halves, out_type=jax.ShapeDtypeStruct((256,), jnp.float32),
                 mesh=kernel_mesh, interpret=interpret)
x = jnp.arange(256, dtype=jnp.float32)
print(copy(x)[124:132])


# %% [markdown]
# **A trap.** `pl.program_id(0)` looks like the same thing, but under the GPU interpreter it is
# 0 in every block. Both blocks write the first half; the second half keeps the interpreter's
# NaN fill. Nothing raises.

# %%
def halves_by_program_id(x_ref, out):
    b = pl.program_id(0)
    out.at[pl.ds(b * 128, 128)][...] = x_ref.at[pl.ds(b * 128, 128)][...]

copy_pid = pl.kernel(halves_by_program_id, out_type=jax.ShapeDtypeStruct((256,), jnp.float32),
                     mesh=kernel_mesh, interpret=interpret)
print(copy_pid(x)[124:132])

# %% [markdown]
# JAX checks a kernel mesh when you build it. A cluster has at most 3 dimensions:

# %% tags=["raises-exception"]
plgpu.Mesh(grid=(1,), grid_names=("b",), cluster=(1, 1, 1, 1), cluster_names=("a", "c", "d", "e"))

# %% [markdown]
# ## 3. The same kernels as scenarios
#
# The gallery's `two-block-copy` is the kernel above. `two-block-race` makes both blocks write
# `out[0:128]`. The static check sees the overlap; the real run with `detect_races` agrees.

# %%
from mpmd_lab import runtime, validate
from mpmd_lab.exercises import outline
from mpmd_lab.report import format_diagnostics
from mpmd_lab.scenario import load_scenario

race = load_scenario("two-block-race")
print(outline(race))
print()
print(format_diagnostics(race.name, validate.check(race)))

# %%
print(runtime.run(load_scenario("two-block-copy"), backend="interpret").summary())
print(runtime.run(race, backend="interpret").summary())

# %% [markdown]
# ## 4. A device mesh in a scenario: the ring shift
#
# `ring-shift` has `device_mesh: {"dev": 4}`. Each device writes its `x` into `out` on its
# right-hand neighbour, through a **peer view** `plgpu.remote_ref(out, {"dev": (me + 1) % 4})`.
# The graph draws the devices as a ring.

# %%
import mpmd_lab

ring = load_scenario("ring-shift")
print(outline(ring))
mpmd_lab.plot(ring)

# %% [markdown]
# JAX traces this call and lowers it for the GPU (deep check), but **no CPU interpreter runs
# cross-device traffic**: the run reports an interpreter limit. The simulator executes the
# scenario's semantics over the 4 devices instead, and says so.

# %%
import mpmd_lab
from mpmd_lab import deep

print("deep check:", [d.code for d in deep.deep_check(ring) if d.is_error] or "JAX accepts it")
print(runtime.run(ring, backend="interpret").summary())
sim = mpmd_lab.simulate(ring)
print(sim.summary())
per_device = sim.outputs["out"].reshape(4, 256)
for d in range(4):
    print(f"device {d}: out[0] = {per_device[d, 0]:4.0f}, the first x of device {(d - 1) % 4}")

# %% [markdown]
# ## Exercises for this notebook (in [06](06-exercises.ipynb))
#
# - **race**: two blocks, one half.
# - **program-id**: which block am I?
# - **ring-2d**: on a 2 x 2 device mesh, shift along the right axis.
#
# **Next:** [02 · refs and transforms](02-refs-and-transforms.ipynb).
