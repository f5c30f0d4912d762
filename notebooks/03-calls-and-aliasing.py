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
# # 03 · Calls and aliasing: the same Ref, twice
#
# *About 30 minutes.*
#
# `Cannot pass the same ref into a mpmd map multiple times` is the error this notebook takes
# apart: what JAX checks, why it must, and how to write the call instead.

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
# ## 1. See it happen

# %%
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

mesh = plgpu.Mesh(grid=(1,), grid_names=("b",))
interpret = plgpu.InterpretGPUParams()

def add_two(a_ref, b_ref, out):
    out[...] = a_ref[...] + b_ref[...]

add = pl.kernel(add_two, out_type=jax.ShapeDtypeStruct((8,), jnp.float32), mesh=mesh,
                interpret=interpret)
acc = jax.new_ref(jnp.arange(8, dtype=jnp.float32))  # a mutable buffer

# %% tags=["raises-exception"]
add(acc, acc)

# %% [markdown]
# Read the traceback: JAX's whole check is the few lines shown from `mpmd_map`'s wrapper. It
# remembers `id(arg)` of every Ref argument and refuses one it has seen. It looks at
# **identity**, before it even traces the kernel body.
#
# The same **array** twice is fine: arrays are values, nobody can write them.

# %%
x = jnp.arange(8, dtype=jnp.float32)
print(add(x, x))

# %% [markdown]
# ## 2. Why JAX forbids it
#
# JAX is functional underneath. Before a call with Refs is compiled, JAX **discharges** the
# state: every Ref the kernel writes becomes a plain value going in, and a new value coming
# out, with `input_output_aliases` telling the compiler that the new value may reuse the old
# buffer. Let us look at that with a kernel that writes its Ref (JAX's internal
# `discharge_state`, used here only to look):

# %%
from jax._src.state.discharge import discharge_state  # internal: for looking only

def bump(a_ref, out):
    out[...] = a_ref[...]
    a_ref[...] = a_ref[...] + 1

bump_kernel = pl.kernel(bump, out_type=jax.ShapeDtypeStruct((8,), jnp.float32), mesh=mesh)

def f(a):
    r = jax.new_ref(a)
    out = bump_kernel(r)
    return out, r[...]

closed = jax.make_jaxpr(f)(jnp.zeros(8, jnp.float32))
discharged = discharge_state(closed)
discharged = discharged[0] if isinstance(discharged, tuple) else getattr(discharged, "jaxpr", discharged)
eqn = next(e for e in discharged.eqns if e.primitive.name == "mpmd_map")
print("inputs :", [str(v.aval) for v in eqn.invars])
print("outputs:", [str(v.aval) for v in eqn.outvars])
print("input_output_aliases:", dict(eqn.params["input_output_aliases"]))

# %% [markdown]
# One Ref in, two results out: `out`, and the Ref's **new value** (output 1), aliased to input 0.
#
# Now imagine `acc` passed as both `a_ref` and `b_ref`. After discharge there would be two
# inputs holding copies of `acc`, and two "new values of `acc`" coming out. A write through
# `a_ref` would not be seen through `b_ref`, though on a GPU they are the same memory; and which
# of the two new values is `acc` afterwards? There is no right answer, so JAX refuses before
# it traces the kernel: it compares the arguments' **identity** (`id(ref)`), not their contents
# or extents. In plain numpy terms:

# %%
acc_np = np.arange(4.0)
a, b = acc_np.copy(), acc_np.copy()  # what discharge would hand the kernel
a[0] = 100.0                          # the kernel writes through a_ref...
print("b_ref reads", b[0], "but on a GPU it would read", a[0])
print("new acc from a_ref:", a, " new acc from b_ref:", b, " -> which one?")

# %% [markdown]
# Two consequences worth knowing:
#
# - **Two views of one Ref are one Ref.** `acc.at[0:4]` and `acc.at[4:8]` don't overlap, but
#   both are `acc` with a transform attached; JAX flattens them to the same Ref.
# - **A captured Ref is a passed Ref too.** If the kernel closes over `acc` *and* takes it as
#   a parameter, JAX refuses with `Closed-over ref aliases with a passed-in ref`.

# %% tags=["raises-exception"]
add(acc.at[0:4], acc.at[4:8])


# %% tags=["raises-exception"]
def add_captured(a_ref, out):
    out[...] = a_ref[...] + acc[...]  # acc closed over

pl.kernel(add_captured, out_type=jax.ShapeDtypeStruct((8,), jnp.float32), mesh=mesh,
          interpret=interpret)(acc)


# %% [markdown]
# ## 3. The fix
#
# Pass the Ref **once** and use it as often as you like inside the kernel; make views inside
# the kernel, not at the call.

# %%
def add_self(a_ref, out):
    out[...] = a_ref[...] + a_ref[...]

print(pl.kernel(add_self, out_type=jax.ShapeDtypeStruct((8,), jnp.float32), mesh=mesh,
                interpret=interpret)(acc))

def add_halves(a_ref, out):
    out[...] = a_ref.at[0:4][...] + a_ref.at[4:8][...]

print(pl.kernel(add_halves, out_type=jax.ShapeDtypeStruct((4,), jnp.float32), mesh=mesh,
                interpret=interpret)(acc))

# %% [markdown]
# ## 4. With the toolkit
#
# The static check finds the duplicate wherever it hides (a repeated argument, a tuple
# argument, two views, a capture) and points at the second use. The graph draws the alias.

# %%
import mpmd_lab
from mpmd_lab import exercises, fixes, runtime, validate
from mpmd_lab.report import format_diagnostics
from mpmd_lab.scenario import load_scenario

for scenario in [load_scenario("dup-ref"), exercises.start("dup-view"), exercises.start("closed-ref")]:
    print(format_diagnostics(scenario.name, validate.check(scenario)), end="\n\n")

# %%
mpmd_lab.plot(exercises.start("dup-view"))

# %% [markdown]
# The fix, as the toolkit makes it, and the real run of the result:

# %%
dup = load_scenario("dup-ref")
fixed, applied = fixes.apply_all(dup, validate.check(dup))
print([f.description for f in applied])
result = runtime.run(fixed, backend="interpret")
print(result.summary())

# %% [markdown]
# ## Exercises for this notebook (in [06](06-exercises.ipynb))
#
# - **dup-ref**: pass a Ref once.
# - **dup-view**: two views are still one Ref.
# - **closed-ref**: captured and passed.
#
# **Next:** [04 · peers and multicast](04-peers-and-multicast.ipynb).
