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
# # 00 · Start here: a tour of mpmd-lab
#
# *About 20 minutes.*
#
# mpmd-lab is a workbench for **Pallas MPMD kernels**: `pl.kernel` over a Mosaic GPU mesh of
# blocks, inside `jax.shard_map` over a mesh of devices, with views of Refs made by
# `ref.at[...]`, `reshape`, `bitcast`, `transpose`, `plgpu.remote_ref`, `plgpu.multicast_ref`…
#
# A call is described by a **scenario**: plain JSON data. mpmd-lab can
#
# | do | how |
# | --- | --- |
# | open one: a file, a gallery name, a dict or JSON text | `mpmd_lab.load` |
# | check it, before anything runs, with JAX's own codes and messages | `mpmd_lab.check` |
# | ask JAX itself (trace, and lower for the GPU, on this CPU) | `mpmd-lab check --deep` |
# | draw who aliases what | `mpmd_lab.plot` |
# | explain an error | `mpmd_lab.explain` |
# | fix it, undo, save: what the Lab edits | `mpmd_lab.Session` (`apply_fix`, `undo`, `save`) |
# | run the real call (GPU, or Pallas' CPU interpreter, else the simulator) | `mpmd_lab.run` |
# | simulate cross-device traffic no CPU interpreter runs | `mpmd_lab.simulate` |
# | write it out as a plain JAX script | `mpmd_lab.export`, `mpmd-lab export` |
# | read your own JAX kernel call into a scenario | `mpmd_lab.from_jax`, `mpmd_lab.show`, `%%mpmd_lab` |
#
# These are the names the README uses; `from mpmd_lab.widgets import Lab` opens the UI.
#
# ## The workshop (half a day)
#
# | notebook | what you learn | time |
# | --- | --- | --- |
# | 00 start here | the tour (this notebook) | 20 min |
# | 01 meshes | kernel meshes (blocks) vs device meshes (GPUs) | 25 min |
# | 02 refs and transforms | Refs, views, transform stacks, their shapes | 25 min |
# | 03 calls and aliasing | why JAX refuses the same Ref twice, and the fix | 30 min |
# | 04 peers and multicast | `remote_ref`, `multicast_ref`, a ring shift, an all-gather | 30 min |
# | 05 prototyping | build, check, run, export, run the export | 25 min |
# | 06 exercises | scenarios to repair, each checked (06 exercises — solutions: the key) | 60 min |
# | 07 bring your own kernel | your own `pl.kernel` call read into the Lab: `from_jax`, `show`, `%%mpmd_lab`, `mpmd-lab import` | 15 min |
# | 08 collectives | semaphores, ring all-gather, reduce-scatter, the collective matmul | 45 min |
# | 09 collective puzzles | fifteen graded puzzles on 4 devices, from a ring shift to the collective matmul | 60–90 min |

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
# ## 1. The gallery
#
# mpmd-lab ships a gallery of scenarios: good calls, and calls JAX rejects (to learn from).

# %%
from mpmd_lab import gallery

for name in gallery.names():
    print(f"{name:28} {gallery.summary(name)}")

# %% [markdown]
# ## 2. One scenario: the same Ref passed twice
#
# `dup-ref` passes one mutable buffer (a `jax.new_ref`) to the kernel as two parameters,
# `a_ref` and `b_ref`, and adds them. Here it is, in outline (the field paths on the left are
# where you would edit it) and then as the JAX code mpmd-lab generates from it.

# %%
import mpmd_lab
from mpmd_lab.exercises import outline

s = mpmd_lab.load("dup-ref")
print(outline(s))

# %%
source = mpmd_lab.export(s)
print(source[source.index("def build"):source.index("def place")])

# %% [markdown]
# ## 3. Check it before it runs
#
# The static check predicts what JAX would say, in microseconds, without tracing anything:
# a stable code, JAX's exact message, the field path, an explanation and a fix.

# %%
from mpmd_lab.report import format_diagnostics

diagnostics = mpmd_lab.check(s)
print(format_diagnostics(s.name, diagnostics))

# %% [markdown]
# The aliasing graph shows where the problem is: two parameters, one buffer.

# %%
mpmd_lab.plot(s)

# %% [markdown]
# What does `MPMD_DUP_REF` mean? The knowledge base has a card for every code.

# %%
print(mpmd_lab.explain("MPMD_DUP_REF").render())

# %% [markdown]
# ## 4. The real thing
#
# The prediction is not the ground truth: JAX is. `mpmd_lab.run` builds the real call and runs
# it in a child process (on a GPU when there is one, else in Pallas' CPU interpreter). JAX's
# error comes back as data, not as a crash of this notebook.

# %%
result = mpmd_lab.run(s, "interpret")
print(result.summary())

# %% [markdown]
# ## 5. Fix it, and run again
#
# A `Session` is what the Lab edits: each fix is one undoable step.

# %%
session = mpmd_lab.Session(s)
fix = session.diagnostics[0].fix
print("applying:", fix.description)
session.apply_fix(fix)
fixed = session.scenario
print(outline(fixed))
print(format_diagnostics(fixed.name, mpmd_lab.check(fixed)))

# %%
import numpy as np

result = mpmd_lab.run(fixed, "interpret")
print(result.summary())
out = result.outputs["out"]
print(out[:8])
assert np.array_equal(out, 2 * np.arange(256, dtype=np.float32))  # acc + acc

# %% [markdown]
# ## 6. The Lab
#
# Everything above, as a UI: edit the call, the meshes and the views; see problems and the
# graph update as you type; press Run. (Widgets need a live kernel: in a static page you see
# only their description.)

# %%
from mpmd_lab.widgets import Lab

lab = Lab("dup-ref")
lab

# %% [markdown]
# ## 7. The command line
#
# The same operations from a terminal: `check` exits 0 (valid), 1 (problems) or 2 (not a
# scenario); `run`, `graph`, `export` and `explain` work on a file or a gallery name.

# %%
# !{MPMD_LAB} check dup-ref
# !{MPMD_LAB} check dup-ref-fixed
# !{MPMD_LAB} explain "Can't make a peer reference into a multicast reference."

# %% [markdown]
# **Next:** [01 · meshes](01-meshes.ipynb). Your own kernel:
# [07 · bring your own kernel](07-bring-your-own-kernel.ipynb).
