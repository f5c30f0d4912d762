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
# # 07 · Bring your own kernel
#
# *About 15 minutes.*
#
# So far every kernel was a scenario written for mpmd-lab. Here you bring **your own JAX
# code**: a function that calls `plgpu.kernel` (or `pl.kernel`) inside `jax.shard_map`, the way
# JAX's distributed tests write kernels. `mpmd_lab.from_jax(fn, *args)` **traces** it (it never
# runs it: no device computation, no interpreter), finds the kernel call, and reads the kernel's
# jaxpr back into a scenario: buffers holding your arguments' values, the device mesh and the
# specs of your `shard_map`, scratch, semaphores, loops, conditions. Every statement remembers
# **your source line**, so every problem is shown where you wrote it.
#
# | you want | call |
# | --- | --- |
# | the scenario, JAX's errors at your lines, what could not be read | `mpmd_lab.from_jax(fn, *args)` |
# | the Lab on your kernel | `mpmd_lab.show(fn, *args)`, or `%%mpmd_lab` after `%load_ext mpmd_lab` |
# | what the kernel computes | `mpmd_lab.simulate(imported.scenario)` |
# | a scenario file from the shell | `mpmd-lab import MODULE.py:FUNCTION -o scenario.json` |

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

# %% [markdown]
# ## 1. A ring shift, as you would write it
#
# Device `d` stores its shard into `out` on device `d + 1`, with the handshake of JAX's
# `test_remote_dma_basic`: tell the device that writes into me that I am running, wait for my
# right neighbour, store, signal the receiver, wait until my own `out` has landed.

# %%
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

import mpmd_lab

D = 4


def ring_kernel(x_ref, o_ref, ready_sem, recv_sem):
    dev = lax.axis_index("dev")
    right = lax.rem(dev + 1, D)
    left = lax.rem(dev + D - 1, D)
    pl.semaphore_signal(ready_sem, device_id=left)
    pl.semaphore_wait(ready_sem)
    plgpu.remote_ref(o_ref, right)[...] = x_ref[...]
    pl.semaphore_signal(recv_sem, device_id=right)
    pl.semaphore_wait(recv_sem)


def ring_call(kernel=ring_kernel):
    mesh = jax.make_mesh((D,), ("dev",))
    call = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        scratch_types=[plgpu.SemaphoreType.REGULAR, plgpu.SemaphoreType.REGULAR],
    )
    fn = jax.jit(jax.shard_map(call, mesh=mesh, in_specs=jax.P("dev"), out_specs=jax.P("dev"), check_vma=False))
    x = (jnp.arange(D * 8 * 128) % 97).astype(jnp.float32).reshape(D * 8, 128)
    return fn, (jax.device_put(x, jax.NamedSharding(mesh, jax.P("dev"))),)


fn, args = ring_call()
imported = mpmd_lab.from_jax(fn, *args)
print(imported.summary())
print("unsupported:", imported.unsupported)

# %% [markdown]
# `imported.scenario` is an ordinary scenario. Its statements are your kernel's, each with the
# line it came from (`imported.source_of(path)` gives `FILE:LINE`):

# %%
s = imported.scenario
print("device mesh:", s.device_mesh, "| entry:", s.call.entry, "| scratch:", list(s.call.scratch))
print("x holds your values:", s.buffers["x"].init if isinstance(s.buffers["x"].init, str) else "explicit")
for i, st in enumerate(s.call.programs[0].body):
    path = f"call.programs[0].body[{i}]"
    print(f"{st.label():38}  <- line {imported.source_of(path).rsplit(':', 1)[1]}: {imported.line_of(path)}")

# %% [markdown]
# `lax.rem(dev + 1, D)` became `(dev + 1) % 4`: `lax.rem` truncates where the scenario's `%`
# floors, and the importer wrote it only because `dev + 1` is never negative. (Try
# `lax.rem(dev - 1, D)`: `imported.unsupported` names it instead of guessing.)
#
# ## 2. What the kernel computes
#
# The simulator runs the scenario over every device with GPU semantics: semaphores, remote
# stores, waits. `imported.outputs(...)` puts the result together as your `out_specs` do, so it
# compares directly with what you expect: `out_d = x_{d-1}`.

# %%
sim = mpmd_lab.simulate(imported.scenario)
print(sim.summary())
if sim.ok:
    (out,) = imported.outputs(sim.outputs)
    x = np.asarray(args[0])
    print("out == roll(x, 8 rows):", np.array_equal(out, np.roll(x, 8, axis=0)))


# %% [markdown]
# ## 3. Your mistake, at your line
#
# A multicast view of a peer view is refused by JAX while it traces the body. The importer
# catches JAX's own error, gives it its code and card, and points at the line that did it.
# The import is then partial: it holds what JAX traced without that line, and lists what it
# left out (never "valid" or "ok" about a kernel it did not carry):

# %%
def bad_kernel(x_ref, o_ref, ready_sem, recv_sem):
    dev = lax.axis_index("dev")
    right = lax.rem(dev + 1, D)
    dst = plgpu.multicast_ref(plgpu.remote_ref(o_ref, right), "dev")
    dst[...] = x_ref[...]


bad_fn, bad_args = ring_call(bad_kernel)
bad = mpmd_lab.from_jax(bad_fn, *bad_args)
d = bad.diagnostics[0]  # JAX's own error comes first, at your line
print(d.code)
print(d.message)
print("faithful:", bad.faithful, "| also listed:", [x.code for x in bad.diagnostics[1:]])
print()
print(mpmd_lab.explain(d.code).render()[:700])

# %% [markdown]
# ## 4. In the Lab
#
# `mpmd_lab.show(fn, *args)` opens the Lab on the import: the problems with your line shown and
# marked, the aliasing graph, the run panel (simulate). Edit the scenario there; **Export**
# writes it back as plain JAX.

# %%
mpmd_lab.show(bad_fn, *bad_args)


# %% [markdown]
# The cell magic does the same for a cell that defines `make()` (a function returning
# `(fn, args)`): it runs the cell, imports the call, keeps the import (here as `exchange`, with
# `-o`) and shows the Lab. This kernel swaps shards with the device two steps away.

# %%
# %load_ext mpmd_lab

# %%
# %%mpmd_lab make -o exchange
def exchange_kernel(x_ref, y_ref, ready_sem, recv_sem):
    other = (lax.axis_index("dev") + 2) % D
    y_ref[...] = x_ref[...]
    pl.semaphore_signal(ready_sem, device_id=other)
    pl.semaphore_wait(ready_sem)
    plgpu.remote_ref(y_ref, other)[...] = x_ref[...]
    pl.semaphore_signal(recv_sem, device_id=other)
    pl.semaphore_wait(recv_sem)


def make():
    return ring_call(exchange_kernel)


# %%
print(exchange.summary())
print(mpmd_lab.export(exchange.scenario).split("def program0")[1].split("kernel = ")[0])

# %% [markdown]
# ## 5. From the shell
#
# `mpmd-lab import MODULE.py:FUNCTION -o scenario.json` does the same for a module: `FUNCTION()`
# returns `(fn, args)`; the import runs in a child process with the device count set before JAX
# starts (`--devices`, else the module's `DEVICES`, else 8). Exit 0: a faithful scenario JAX
# accepts; 1: problems (each with its line) or constructs it could not read; 2: no such module
# or function.

# %%
import inspect
import subprocess
import tempfile
from pathlib import Path

work = Path(tempfile.mkdtemp())
module = work / "my_ring.py"
module.write_text(
    "import jax\nimport jax.numpy as jnp\nfrom jax import lax\n"
    "from jax.experimental import pallas as pl\nfrom jax.experimental.pallas import mosaic_gpu as plgpu\n\n"
    "DEVICES = 4\nD = 4\n\n"
    + inspect.getsource(ring_kernel)
    + "\n\n"
    + inspect.getsource(ring_call)
    + "\n\ndef make():\n    return ring_call()\n"
)
out = work / "ring.json"
# (a subprocess, as a terminal runs it: `!` would fork this kernel, which holds JAX's threads)
done = subprocess.run([MPMD_LAB, "import", f"{module}:make", "-o", out], capture_output=True, text=True)
print(done.stdout + done.stderr, "exit", done.returncode)
print(mpmd_lab.load(out).call.programs[0].body[0].label())
