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
# # 08 · Collectives: semaphores, rings and a fused matmul
#
# *About 45 minutes.*
#
# Notebook 04's ring shift writes into a neighbour's memory and stops there: nothing tells the
# neighbour that the data has landed, so on a GPU it may read `out` too early. Every real
# distributed kernel has a **completion handshake**. Here you build up, always with real JAX as
# the judge and the simulator for the values:
#
# | | scenario | what it adds |
# | --- | --- | --- |
# | 1 | `exchange-shards` | a semaphore handshake: `pl.semaphore_signal(sem, device_id=…)`, `pl.semaphore_wait(sem)` |
# | 2 | `ring-all-gather` | a loop (`lax.fori_loop`) of D−1 steps, one semaphore per step, index expressions `(dev + D - i) % D` |
# | 3 | `ring-all-gather-no-wait` | the same ring without its wait: **RACE_DETECTED** (JAX accepts it!) |
# | 4 | `ring-all-gather-deadlock` | a wait on a slot nobody signals: **DEADLOCK_SEMAPHORE**, a hang on a GPU |
# | 5 | `ring-reduce-scatter`, `collective-matmul` | an add into a view; TMA loads, barriers and WGMMA fused with the ring |
#
# JAX traces and lowers all of them, the broken ones too: **nothing in JAX matches signals to
# waits**. mpmd-lab's check runs the kernel the way a GPU does (every device, block and
# warpgroup as its own thread, ordered by happens-before: program order, signal → the wait that
# takes it, barriers) and reports what would go wrong.

# %%
# Run once: figures inline, and the repository importable when opened from notebooks/.
# %matplotlib inline
import sys
from pathlib import Path

ROOT = Path.cwd().parent if Path.cwd().name == "notebooks" else Path.cwd()
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
MPMD_LAB = Path(sys.executable).with_name("mpmd-lab")  # the command line, for `!` cells

# %%
# Simulated CPU devices: this must run before JAX is imported in this kernel.
import os

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"

# %%
import numpy as np
from IPython.display import Markdown, display

import mpmd_lab
from mpmd_lab import codegen, deep, exercises, fixes, validate
from mpmd_lab.exercises import check_exercise, outline, start
from mpmd_lab.report import format_diagnostics
from mpmd_lab.scenario import load_scenario

D, S = 4, 256

# %% [markdown]
# ## 1. A semaphore handshake
#
# `exchange-shards`: device d's `out` must hold device d+1's `x`. Device d *pulls* from its right
# neighbour through a remote view, but only once the neighbour says its `x` is ready (`ready`),
# and it tells the neighbour when it is done reading (`done`), so that neither returns while the
# other still reads its memory. A semaphore is a counter in GMEM: `semaphore_signal` adds to it
# on another device, `semaphore_wait` blocks until it is at least the value, then subtracts it.

# %%
ex = load_scenario("exchange-shards")
print(outline(ex))
print()
print(format_diagnostics(ex.name, validate.check(ex)))

# %% [markdown]
# In the graph, the dashed arrows go from each signal to the wait it satisfies and the dotted
# ones to the semaphore it names. The device panel shows the traffic between devices: the
# remote view to the right neighbour (blue) and the signals (orange dashes: `ready` to the left,
# `done` to the right).

# %%
mpmd_lab.plot(ex)

# %% [markdown]
# ## 2. The ring all-gather
#
# `x [S] → out [D·S]` on every device: each device puts its own shard in place, then in D−1 steps
# of a loop forwards to its right neighbour the chunk it received last (at step i: chunk
# `(dev − i) mod D`, written `(dev + axis_size(dev) - i) % axis_size(dev)` so that it stays
# non-negative), signals the neighbour's semaphore for that step, and waits on its own.
#
# The exported source is what a kernel author writes: semaphore scratch, `lax.fori_loop`,
# `pl.semaphore_signal(..., device_id=...)`, `pl.semaphore_wait`.

# %%
ring = load_scenario("ring-all-gather")
source = codegen.generate(ring)
print(source[source.index("def program0"):source.index("kernel = ")])

# %% [markdown]
# `deep_check` hands that source to real JAX: it traces it and lowers it for the GPU (the Mosaic
# GPU lowering, on this CPU machine). No error from JAX and no error or warning from the check;
# its one note is a fact of this machine, not of the kernel: JAX's CPU interpreter cannot run
# remote views or semaphores, so here the values come from the simulator (next cell).

# %%
print(format_diagnostics(ring.name, deep.deep_check(ring)))

# %% [markdown]
# No CPU interpreter runs semaphores across devices, so the values come from the simulator: it
# runs every device as its own thread and orders them only by what the kernel synchronises.
# With `x = iota`, every device's `out` must be `0, 1, …, D·S − 1`: numpy says so independently.

# %%
sim = mpmd_lab.simulate(ring)
print(sim.summary())
x = np.arange(D * S, dtype=np.float32)              # the global x: device d holds x[d*S:(d+1)*S]
want = np.tile(x, D)                                # out on every device: all of x
assert np.array_equal(sim.outputs["out"], want) and sim.races == []
print("every device's out is concat(x_0 ... x_3); no races")

# %%
mpmd_lab.plot(ring)

# %% [markdown]
# ## 3. The missing wait
#
# Take the wait out of the loop. JAX still traces and lowers it; on a GPU, at step i device d
# forwards a chunk that its left neighbour may still be writing. The check finds that race,
# names the two accesses, and offers the fix it has verified:

# %%
no_wait = load_scenario("ring-all-gather-no-wait")
found = validate.check(no_wait)
print(format_diagnostics(no_wait.name, [d for d in found if d.is_error]))

# %%
mpmd_lab.plot(no_wait)

# %% [markdown]
# The simulator sees it as it happens: the read on device d and the write from device d−1 are
# not ordered by anything (a signal orders the writes *before* it; only a wait orders the reads
# *after* it). Apply the fix and it is the ring again:

# %%
sim = mpmd_lab.simulate(no_wait, check=False)
print(len(sim.races), "races, e.g.", sim.races[0].describe())
fixed, applied = fixes.apply_all(no_wait, found)
print("applied:", [f.description for f in applied])
print(format_diagnostics("fixed", [d for d in validate.check(fixed) if d.is_error]))
assert np.array_equal(mpmd_lab.simulate(fixed).outputs["out"], want)
print("the fixed ring gathers")

# %% [markdown]
# ## 4. The deadlock
#
# Now every step signals `sems[0]` but waits on `sems[i]`. Step 0 completes; at step 1 every
# device waits on `sems[1]`, which nobody signals. On a GPU the kernel never returns. The check
# names who waits on what, and where the signals went:

# %%
stuck = load_scenario("ring-all-gather-deadlock")
found = validate.check(stuck)
print(format_diagnostics(stuck.name, [d for d in found if d.is_error]))
mpmd_lab.plot(stuck)

# %% [markdown]
# The simulator reports the deadlock (and exits 1 on the command line) instead of hanging:

# %%
import time

t = time.perf_counter()
sim = mpmd_lab.simulate(stuck)
print(f"{time.perf_counter() - t:.2f} s:", sim.error.code)
# !{MPMD_LAB} run ring-all-gather-deadlock --backend simulate; echo "exit status $?"

# %%
fixed, applied = fixes.apply_all(stuck, found)
print("applied:", [f.description for f in applied])
assert np.array_equal(mpmd_lab.simulate(fixed).outputs["out"], want)
print("unblocked: the ring gathers again")

# %% [markdown]
# ## 5. Reduce-scatter and the collective matmul
#
# `ring-reduce-scatter`: `x [D·S] → out [S]`, device d's `out` is the sum over all devices j of
# chunk d of `x_j`. Partial sums travel round the ring; each step *adds into a view*.

# %%
rs = load_scenario("ring-reduce-scatter")
sim = mpmd_lab.simulate(rs)
xs = np.arange(D * D * S, dtype=np.float32).reshape(D, D, S)   # [device j, chunk c, S]
assert np.array_equal(sim.outputs["out"].reshape(D, S), xs.sum(axis=0))
print("out_d == sum_j x_j[d*S:(d+1)*S] on every device")

# %% [markdown]
# `collective-matmul`: the all-gather of `lhs` fused with the matmul, `out = concat_j(lhs_j) @
# rhs_d`. Each step TMA-loads a tile into SMEM (`copy_gmem_to_smem`, completing on a barrier),
# multiplies it with one WGMMA into a float32 accumulator, and TMA-stores the tile into the left
# neighbour's landing buffer, signalling it. The graph shows the barriers (copy → wait) next to
# the semaphores.

# %%
cm = load_scenario("collective-matmul")
sim = mpmd_lab.simulate(cm)
lhs = np.arange(D * 64 * 64).reshape(D * 64, 64).astype(np.float16).astype(np.float64)
rhs = np.arange(D * 64 * 128).reshape(D, 64, 128).astype(np.float16).astype(np.float64)
exact = np.concatenate([lhs @ rhs[d] for d in range(D)])
err = np.abs(sim.outputs["out"] - exact).max() / np.abs(exact).max()
print(f"largest error relative to the exact product: {err:.1e} (float32 accumulation)")
assert err < 64 * 2.0**-24
mpmd_lab.plot(cm)

# %% [markdown]
# ## 6. Exercises
#
# Each is a broken ring, judged the way the rest of the workshop is: the static check (races and
# deadlocks included), JAX's trace and GPU lowering, then the simulator's values against numpy.
# Solutions: [06-exercises-solutions](06-exercises-solutions.ipynb).

# %% [markdown]
# ### Exercise 1. Add the missing wait (`ring-wait`)

# %%
display(Markdown(exercises.get("ring-wait").describe(title=False)))
s = start("ring-wait")
print(outline(s))
check_exercise("ring-wait", s)  # the starting point: not yet

# %%
# Your turn: edit s here (the loop body is s.call.programs[0].body[3].body), then run it.
s = start("ring-wait")
check_exercise("ring-wait", s)

# %% [markdown]
# ### Exercise 2. Break the deadlock (`ring-deadlock`)

# %%
display(Markdown(exercises.get("ring-deadlock").describe(title=False)))
s = start("ring-deadlock")
print(outline(s))
check_exercise("ring-deadlock", s)  # the starting point: not yet

# %%
# Your turn: edit s here (the loop body is s.call.programs[0].body[3].body), then run it.
s = start("ring-deadlock")
check_exercise("ring-deadlock", s)

# %% [markdown]
# ### Exercise 3. Fix the ring's index (`ring-index`)

# %%
display(Markdown(exercises.get("ring-index").describe(title=False)))
s = start("ring-index")
print(outline(s))
check_exercise("ring-index", s)  # the starting point: not yet

# %%
# Your turn: edit s here (the loop body is s.call.programs[0].body[3].body), then run it.
s = start("ring-index")
check_exercise("ring-index", s)

# %% [markdown]
# ---
# The Lab edits all of it (loops, semaphores, barriers, conditions): `from mpmd_lab.widgets
# import Lab; Lab("ring-all-gather")`.
