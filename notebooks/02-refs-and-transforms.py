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
# # 02 · Refs and transform stacks
#
# *About 25 minutes.*
#
# Inside a kernel every parameter is a **Ref**: a mutable buffer you read with `ref[...]` and
# write with `ref[...] = value`. A **view** is a Ref seen through a stack of transforms, applied
# first to last; each step has a shape and a dtype:
#
# | transform | JAX | shape rule |
# | --- | --- | --- |
# | `at` | `ref.at[0:128]`, `ref.at[pl.ds(start, size)]` | the slice (an out-of-range `pl.ds` is an error) |
# | `reshape` | `ref.reshape(16, 16)` | same number of elements |
# | `bitcast` | `ref.bitcast(jnp.int16)` | the second-minor dim scales with the width |
# | `transpose` | `ref.transpose((1, 0))` | permuted |
# | `remote_ref`, `multicast_ref` | `plgpu.remote_ref(ref, dev)` … | same shape, other devices (notebook 04) |

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
# ## 1. Views in plain JAX
#
# While JAX traces a kernel, Python runs: a `print` inside the kernel shows each view's shape
# and dtype as JAX computes them.

# %%
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

mesh = plgpu.Mesh(grid=(1,), grid_names=("b",))

def show_views(x_ref, out):
    print("x_ref                         ", x_ref.shape, x_ref.dtype)
    print("x_ref.at[2:6]                 ", x_ref.at[2:6].shape)
    print("x_ref.reshape(4, 256)         ", x_ref.reshape(4, 256).shape)
    print("x_ref.bitcast(jnp.int16)      ", x_ref.bitcast(jnp.int16).shape, x_ref.bitcast(jnp.int16).dtype)
    print("x_ref.transpose((1, 0))       ", x_ref.transpose((1, 0)).shape)
    print("x_ref.at[0:4].reshape(512)    ", x_ref.at[0:4].reshape(512).shape)
    out[...] = x_ref[...]

kernel = pl.kernel(show_views, out_type=jax.ShapeDtypeStruct((8, 128), jnp.float32), mesh=mesh)
jax.jit(kernel).trace(jnp.zeros((8, 128), jnp.float32));


# %% [markdown]
# A view of the wrong size is refused while JAX traces the kernel:

# %% tags=["raises-exception"]
def bad_reshape(x_ref, out):
    out[...] = x_ref.reshape(128)[...]

jax.jit(pl.kernel(bad_reshape, out_type=jax.ShapeDtypeStruct((128,), jnp.float32), mesh=mesh)).trace(
    jnp.zeros((16, 16), jnp.float32))

# %% [markdown]
# ## 2. The same, without tracing
#
# The static check propagates shapes through every transform stack itself, so it can say the
# same thing while you type, with the field path of the failing step.

# %%
from mpmd_lab import exercises, validate
from mpmd_lab.exercises import outline
from mpmd_lab.report import format_diagnostics

bad = exercises.start("reshape")
print(outline(bad))
print()
print(format_diagnostics(bad.name, validate.check(bad)))

# %% [markdown]
# ## 3. Running views
#
# The gallery has one scenario per view. Not every CPU interpreter runs every view: the GPU
# interpreter (`run.interpret = "gpu"`) runs static `at` and `transpose` views, the older HLO
# interpreter (`"hlo"`) runs `reshape` and `bitcast`. A run first lowers the call for the GPU,
# so a run here also means "this compiles for a GPU".

# %%
from mpmd_lab import runtime
from mpmd_lab.scenario import load_scenario

reshape_view = load_scenario("reshape-view")
reshape_view.run.interpret = "hlo"
result = runtime.run(reshape_view, backend="interpret")
print(result.summary())
assert np.array_equal(result.outputs["out"], np.arange(256, dtype=np.float32))

# %% [markdown]
# ## 4. The interpreter is not the GPU
#
# `transpose-view` writes `out` through `out.transpose((1, 0))`. Pallas' GPU interpreter runs
# it, and the numbers are right: here is the exported script, run on the CPU interpreter.

# %%
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from mpmd_lab import codegen

transposed = load_scenario("transpose-view")
script = Path(tempfile.mkdtemp()) / "transpose_view.py"
script.write_text(codegen.generate(transposed))
done = subprocess.run([sys.executable, str(script), "--json"], capture_output=True, text=True,
                      timeout=300)
x_host = np.arange(32 * 64, dtype=np.float32).reshape(32, 64)
want = hashlib.sha256(np.ascontiguousarray(x_host.T).tobytes()).hexdigest()
print("the GPU interpreter ran it; out == x.T:", json.loads(done.stdout)["out"]["sha256"] == want)

# %% [markdown]
# But JAX's Mosaic GPU lowering **rejects** a transposed view of GMEM. The deep check asks JAX
# itself (here on the CPU) and finds it.

# %%
from mpmd_lab import deep
from mpmd_lab.report import format_diagnostics

print(format_diagnostics(transposed.name, deep.deep_check(transposed)))

# %% [markdown]
# Lesson: a kernel that runs in the interpreter can still fail on the GPU. Check deep before
# you trust an interpreter run.
#
# ## Exercises for this notebook (in [06](06-exercises.ipynb))
#
# - **reshape**: flatten a Ref.
# - **oob-slice**: stay in bounds.
#
# **Next:** [03 · calls and aliasing](03-calls-and-aliasing.ipynb).
