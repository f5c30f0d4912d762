"""Build the workshop notebooks from this file: ``python notebooks/_build.py``.

The notebooks are written here as Python so that they can be reviewed as code; the
committed ``.ipynb`` files are this script's output and carry no outputs.
``--check`` exits 1 when a committed notebook differs from what this script builds.

Cells that show an error on purpose carry the ``raises-exception`` tag.
"""

# ruff: noqa: E501  (notebook text: long Markdown table rows)
from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent
RAISES = "raises-exception"


def md(text: str):
    return new_markdown_cell(text.strip("\n"))


def code(text: str, *tags: str):
    cell = new_code_cell(text.strip("\n"))
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


SETUP = code(
    """
# Run once: figures inline, and the repository importable when opened from notebooks/.
%matplotlib inline
import sys
from pathlib import Path

ROOT = Path.cwd().parent if Path.cwd().name == "notebooks" else Path.cwd()
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
MPMD_LAB = Path(sys.executable).with_name("mpmd-lab")  # the command line, for `!` cells
"""
)


def devices_setup(n: int):
    return code(
        f"""
# Simulated CPU devices: this must run before JAX is imported in this kernel.
import os

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count={n}"
"""
    )


# ====================================================================== 00 start here

NB00 = [
    md(
        """
# 00 · Start here: a tour of mpmd-lab

*About 20 minutes.*

mpmd-lab is a workbench for **Pallas MPMD kernels**: `pl.kernel` over a Mosaic GPU mesh of
blocks, inside `jax.shard_map` over a mesh of devices, with views of Refs made by
`ref.at[...]`, `reshape`, `bitcast`, `transpose`, `plgpu.remote_ref`, `plgpu.multicast_ref`…

A call is described by a **scenario**: plain JSON data. mpmd-lab can

| do | how |
| --- | --- |
| check it, before anything runs, with JAX's own codes and messages | `mpmd_lab.validate.check` |
| ask JAX itself (trace, and lower for the GPU, on this CPU) | `mpmd_lab.deep.deep_check` |
| draw who aliases what | `mpmd_lab.plot` |
| explain an error and fix it | `mpmd_lab.knowledge.lookup`, `mpmd_lab.fixes.apply_all` |
| run the real call (GPU, or Pallas' CPU interpreter) | `mpmd_lab.runtime.run` |
| simulate cross-device traffic no CPU interpreter runs | `mpmd_lab.simulate` |
| write it out as a plain JAX script | `mpmd_lab.codegen.generate`, `mpmd-lab export` |

## The workshop (half a day)

| notebook | what you learn | time |
| --- | --- | --- |
| 00 start here | the tour (this notebook) | 20 min |
| 01 meshes | kernel meshes (blocks) vs device meshes (GPUs) | 25 min |
| 02 refs and transforms | Refs, views, transform stacks, their shapes | 25 min |
| 03 calls and aliasing | why JAX refuses the same Ref twice, and the fix | 30 min |
| 04 peers and multicast | `remote_ref`, `multicast_ref`, a ring shift, an all-gather | 30 min |
| 05 prototyping | build, check, run, export, run the export | 25 min |
| 06 exercises | eleven scenarios to repair, each checked | 60 min |
"""
    ),
    SETUP,
    md(
        """
## 1. The gallery

mpmd-lab ships a gallery of scenarios: good calls, and calls JAX rejects (to learn from).
"""
    ),
    code(
        """
from mpmd_lab import gallery

for name in gallery.names():
    print(f"{name:28} {gallery.summary(name)}")
"""
    ),
    md(
        """
## 2. One scenario: the same Ref passed twice

`dup-ref` passes one mutable buffer (a `jax.new_ref`) to the kernel as two parameters,
`a_ref` and `b_ref`, and adds them. Here it is, in outline (the field paths on the left are
where you would edit it) and then as the JAX code mpmd-lab generates from it.
"""
    ),
    code(
        """
from mpmd_lab.exercises import outline
from mpmd_lab.scenario import load_scenario

s = load_scenario("dup-ref")
print(outline(s))
"""
    ),
    code(
        """
from mpmd_lab import codegen

source = codegen.generate(s)
print(source[source.index("def build"):source.index("def place")])
"""
    ),
    md(
        """
## 3. Check it before it runs

The static check predicts what JAX would say, in microseconds, without tracing anything:
a stable code, JAX's exact message, the field path, an explanation and a fix.
"""
    ),
    code(
        """
from mpmd_lab import validate
from mpmd_lab.report import format_diagnostics

diagnostics = validate.check(s)
print(format_diagnostics(s.name, diagnostics))
"""
    ),
    md("The aliasing graph shows where the problem is: two parameters, one buffer."),
    code(
        """
import mpmd_lab

mpmd_lab.plot(s)
"""
    ),
    md("What does `MPMD_DUP_REF` mean? The knowledge base has a card for every code."),
    code(
        """
from mpmd_lab import knowledge

print(knowledge.lookup("MPMD_DUP_REF").render())
"""
    ),
    md(
        """
## 4. The real thing

The prediction is not the ground truth: JAX is. `runtime.run` builds the real call and runs
it in a child process (on a GPU when there is one, else in Pallas' CPU interpreter). JAX's
error comes back as data, not as a crash of this notebook.
"""
    ),
    code(
        """
from mpmd_lab import runtime

result = runtime.run(s, backend="interpret")
print(result.summary())
"""
    ),
    md("## 5. Fix it, and run again"),
    code(
        """
from mpmd_lab import fixes

fixed, applied = fixes.apply_all(s, diagnostics)
for fix in applied:
    print("applied:", fix.description)
print(outline(fixed))
print(format_diagnostics(fixed.name, validate.check(fixed)))
"""
    ),
    code(
        """
import numpy as np

result = runtime.run(fixed, backend="interpret")
print(result.summary())
out = result.outputs["out"]
print(out[:8])
assert np.array_equal(out, 2 * np.arange(256, dtype=np.float32))  # acc + acc
"""
    ),
    md(
        """
## 6. The Lab

Everything above, as a UI: edit the call, the meshes and the views; see problems and the
graph update as you type; press Run. (Widgets need a live kernel: in a static page you see
only their description.)
"""
    ),
    code(
        """
from mpmd_lab.widgets import Lab

lab = Lab("dup-ref")
lab
"""
    ),
    md(
        """
## 7. The command line

The same operations from a terminal: `check` exits 0 (valid), 1 (problems) or 2 (not a
scenario); `run`, `graph`, `export` and `explain` work on a file or a gallery name.
"""
    ),
    code(
        """
!{MPMD_LAB} check dup-ref
!{MPMD_LAB} check dup-ref-fixed
!{MPMD_LAB} explain "Can't make a peer reference into a multicast reference."
"""
    ),
    md(
        """
**Next:** [01 · meshes](01-meshes.ipynb).
"""
    ),
]

# ====================================================================== 01 meshes

NB01 = [
    md(
        """
# 01 · Meshes: blocks of a kernel, devices of a machine

*About 25 minutes.*

Two meshes meet in an MPMD kernel, and they are easy to confuse:

| | **kernel mesh** | **device mesh** |
| --- | --- | --- |
| made by | `plgpu.Mesh(grid=…, grid_names=…, cluster=…, num_threads=…, thread_name=…)` | `jax.make_mesh(shape, names)` |
| its points are | blocks (CTAs) of one kernel launch on **one GPU**, and warpgroups in a block | **GPUs** (here: simulated CPU devices) |
| used by | `pl.kernel(…, mesh=…)` | `jax.shard_map(…, mesh=…)` |
| "who am I?" | `lax.axis_index("b")` for grid axis `b` | `lax.axis_index("dev")` for device axis `dev` |
| memory | SMEM per block, GMEM per device | each device has its own GMEM |
| scenario field | `call.programs[i].mesh` | `device_mesh` |

A kernel runs on every point of the kernel mesh, **on every device** of the device mesh.
"""
    ),
    devices_setup(4),
    SETUP,
    md("## 1. A device mesh, in plain JAX"),
    code(
        """
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

print(jax.devices())
device_mesh = jax.make_mesh((4,), ("dev",))
print(device_mesh)
"""
    ),
    md(
        """
Under `shard_map` every device runs the function on its shard; `lax.axis_index("dev")` is
that device's position on the axis.
"""
    ),
    code(
        """
def who_am_i(x):
    return x * 0 + lax.axis_index("dev")

f = jax.jit(jax.shard_map(who_am_i, mesh=device_mesh, in_specs=P("dev"), out_specs=P("dev")))
x = jax.device_put(jnp.zeros(8), NamedSharding(device_mesh, P("dev")))
print(f(x))  # two elements per device
"""
    ),
    md(
        """
## 2. A kernel mesh, in plain JAX

`plgpu.Mesh(grid=(2,), grid_names=("b",))` launches 2 blocks. Each block copies its own half:
it finds itself with `lax.axis_index("b")`. We run it with Pallas' GPU interpreter on the CPU.
"""
    ),
    code(
        """
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
"""
    ),
    md(
        """
**A trap.** `pl.program_id(0)` looks like the same thing, but under the GPU interpreter it is
0 in every block. Both blocks write the first half; the second half keeps the interpreter's
NaN fill. Nothing raises.
"""
    ),
    code(
        """
def halves_by_program_id(x_ref, out):
    b = pl.program_id(0)
    out.at[pl.ds(b * 128, 128)][...] = x_ref.at[pl.ds(b * 128, 128)][...]

copy_pid = pl.kernel(halves_by_program_id, out_type=jax.ShapeDtypeStruct((256,), jnp.float32),
                     mesh=kernel_mesh, interpret=interpret)
print(copy_pid(x)[124:132])
"""
    ),
    md("JAX checks a kernel mesh when you build it. A cluster has at most 3 dimensions:"),
    code(
        """
plgpu.Mesh(grid=(1,), grid_names=("b",), cluster=(1, 1, 1, 1), cluster_names=("a", "c", "d", "e"))
""",
        RAISES,
    ),
    md(
        """
## 3. The same kernels as scenarios

The gallery's `two-block-copy` is the kernel above. `two-block-race` makes both blocks write
`out[0:128]`. The static check sees the overlap; the real run with `detect_races` agrees.
"""
    ),
    code(
        """
from mpmd_lab import runtime, validate
from mpmd_lab.exercises import outline
from mpmd_lab.report import format_diagnostics
from mpmd_lab.scenario import load_scenario

race = load_scenario("two-block-race")
print(outline(race))
print()
print(format_diagnostics(race.name, validate.check(race)))
"""
    ),
    code(
        """
print(runtime.run(load_scenario("two-block-copy"), backend="interpret").summary())
print(runtime.run(race, backend="interpret").summary())
"""
    ),
    md(
        """
## 4. A device mesh in a scenario: the ring shift

`ring-shift` has `device_mesh: {"dev": 4}`. Each device writes its `x` into `out` on its
right-hand neighbour, through a **peer view** `plgpu.remote_ref(out, {"dev": (me + 1) % 4})`.
The graph draws the devices as a ring.
"""
    ),
    code(
        """
import mpmd_lab

ring = load_scenario("ring-shift")
print(outline(ring))
mpmd_lab.plot(ring)
"""
    ),
    md(
        """
JAX traces this call and lowers it for the GPU (deep check), but **no CPU interpreter runs
cross-device traffic**: the run reports an interpreter limit. The simulator executes the
scenario's semantics over the 4 devices instead, and says so.
"""
    ),
    code(
        """
import mpmd_lab
from mpmd_lab import deep

print("deep check:", [d.code for d in deep.deep_check(ring) if d.is_error] or "JAX accepts it")
print(runtime.run(ring, backend="interpret").summary())
sim = mpmd_lab.simulate(ring)
print(sim.summary())
per_device = sim.outputs["out"].reshape(4, 256)
for d in range(4):
    print(f"device {d}: out[0] = {per_device[d, 0]:4.0f}, the first x of device {(d - 1) % 4}")
"""
    ),
    md(
        """
## Exercises for this notebook (in [06](06-exercises.ipynb))

- **race**: two blocks, one half.
- **program-id**: which block am I?
- **ring-2d**: on a 2 x 2 device mesh, shift along the right axis.

**Next:** [02 · refs and transforms](02-refs-and-transforms.ipynb).
"""
    ),
]

# ====================================================================== 02 refs and transforms

NB02 = [
    md(
        """
# 02 · Refs and transform stacks

*About 25 minutes.*

Inside a kernel every parameter is a **Ref**: a mutable buffer you read with `ref[...]` and
write with `ref[...] = value`. A **view** is a Ref seen through a stack of transforms, applied
first to last; each step has a shape and a dtype:

| transform | JAX | shape rule |
| --- | --- | --- |
| `at` | `ref.at[0:128]`, `ref.at[pl.ds(start, size)]` | the slice (an out-of-range `pl.ds` is an error) |
| `reshape` | `ref.reshape(16, 16)` | same number of elements |
| `bitcast` | `ref.bitcast(jnp.int16)` | the second-minor dim scales with the width |
| `transpose` | `ref.transpose((1, 0))` | permuted |
| `remote_ref`, `multicast_ref` | `plgpu.remote_ref(ref, dev)` … | same shape, other devices (notebook 04) |
"""
    ),
    SETUP,
    md(
        """
## 1. Views in plain JAX

While JAX traces a kernel, Python runs: a `print` inside the kernel shows each view's shape
and dtype as JAX computes them.
"""
    ),
    code(
        """
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
"""
    ),
    md("A view of the wrong size is refused while JAX traces the kernel:"),
    code(
        """
def bad_reshape(x_ref, out):
    out[...] = x_ref.reshape(128)[...]

jax.jit(pl.kernel(bad_reshape, out_type=jax.ShapeDtypeStruct((128,), jnp.float32), mesh=mesh)).trace(
    jnp.zeros((16, 16), jnp.float32))
""",
        RAISES,
    ),
    md(
        """
## 2. The same, without tracing

The static check propagates shapes through every transform stack itself, so it can say the
same thing while you type, with the field path of the failing step.
"""
    ),
    code(
        """
from mpmd_lab import exercises, validate
from mpmd_lab.exercises import outline
from mpmd_lab.report import format_diagnostics

bad = exercises.start("reshape")
print(outline(bad))
print()
print(format_diagnostics(bad.name, validate.check(bad)))
"""
    ),
    md(
        """
## 3. Running views

The gallery has one scenario per view. Not every CPU interpreter runs every view: the GPU
interpreter (`run.interpret = "gpu"`) runs static `at` and `transpose` views, the older HLO
interpreter (`"hlo"`) runs `reshape` and `bitcast`. A run first lowers the call for the GPU,
so a run here also means "this compiles for a GPU".
"""
    ),
    code(
        """
from mpmd_lab import runtime
from mpmd_lab.scenario import load_scenario

reshape_view = load_scenario("reshape-view")
reshape_view.run.interpret = "hlo"
result = runtime.run(reshape_view, backend="interpret")
print(result.summary())
assert np.array_equal(result.outputs["out"], np.arange(256, dtype=np.float32))
"""
    ),
    md(
        """
## 4. The interpreter is not the GPU

`transpose-view` writes `out` through `out.transpose((1, 0))`. Pallas' GPU interpreter runs
it, and the numbers are right: here is the exported script, run on the CPU interpreter.
"""
    ),
    code(
        """
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
"""
    ),
    md(
        """
But JAX's Mosaic GPU lowering **rejects** a transposed view of GMEM. The deep check asks JAX
itself (here on the CPU) and finds it.
"""
    ),
    code(
        """
from mpmd_lab import deep
from mpmd_lab.report import format_diagnostics

print(format_diagnostics(transposed.name, deep.deep_check(transposed)))
"""
    ),
    md(
        """
Lesson: a kernel that runs in the interpreter can still fail on the GPU. Check deep before
you trust an interpreter run.

## Exercises for this notebook (in [06](06-exercises.ipynb))

- **reshape**: flatten a Ref.
- **oob-slice**: stay in bounds.

**Next:** [03 · calls and aliasing](03-calls-and-aliasing.ipynb).
"""
    ),
]

# ====================================================================== 03 calls and aliasing

NB03 = [
    md(
        """
# 03 · Calls and aliasing: the same Ref, twice

*About 30 minutes.*

`Cannot pass the same ref into a mpmd map multiple times` is the error this notebook takes
apart: what JAX checks, why it must, and how to write the call instead.
"""
    ),
    SETUP,
    md("## 1. See it happen"),
    code(
        """
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
"""
    ),
    code(
        """
add(acc, acc)
""",
        RAISES,
    ),
    md(
        """
Read the traceback: JAX's whole check is the few lines shown from `mpmd_map`'s wrapper. It
remembers `id(arg)` of every Ref argument and refuses one it has seen. It looks at
**identity**, before it even traces the kernel body.

The same **array** twice is fine: arrays are values, nobody can write them.
"""
    ),
    code(
        """
x = jnp.arange(8, dtype=jnp.float32)
print(add(x, x))
"""
    ),
    md(
        """
## 2. Why JAX forbids it

JAX is functional underneath. Before a call with Refs is compiled, JAX **discharges** the
state: every Ref the kernel writes becomes a plain value going in, and a new value coming
out, with `input_output_aliases` telling the compiler that the new value may reuse the old
buffer. Let us look at that with a kernel that writes its Ref (JAX's internal
`discharge_state`, used here only to look):
"""
    ),
    code(
        """
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
"""
    ),
    md(
        """
One Ref in, two results out: `out`, and the Ref's **new value** (output 1), aliased to input 0.

Now imagine `acc` passed as both `a_ref` and `b_ref`. After discharge there would be two
inputs holding copies of `acc`, and two "new values of `acc`" coming out. A write through
`a_ref` would not be seen through `b_ref`, though on a GPU they are the same memory; and which
of the two new values is `acc` afterwards? There is no right answer, so JAX refuses before
it traces the kernel: it compares the arguments' **identity** (`id(ref)`), not their contents
or extents. In plain numpy terms:
"""
    ),
    code(
        """
acc_np = np.arange(4.0)
a, b = acc_np.copy(), acc_np.copy()  # what discharge would hand the kernel
a[0] = 100.0                          # the kernel writes through a_ref...
print("b_ref reads", b[0], "but on a GPU it would read", a[0])
print("new acc from a_ref:", a, " new acc from b_ref:", b, " -> which one?")
"""
    ),
    md(
        """
Two consequences worth knowing:

- **Two views of one Ref are one Ref.** `acc.at[0:4]` and `acc.at[4:8]` don't overlap, but
  both are `acc` with a transform attached; JAX flattens them to the same Ref.
- **A captured Ref is a passed Ref too.** If the kernel closes over `acc` *and* takes it as
  a parameter, JAX refuses with `Closed-over ref aliases with a passed-in ref`.
"""
    ),
    code(
        """
add(acc.at[0:4], acc.at[4:8])
""",
        RAISES,
    ),
    code(
        """
def add_captured(a_ref, out):
    out[...] = a_ref[...] + acc[...]  # acc closed over

pl.kernel(add_captured, out_type=jax.ShapeDtypeStruct((8,), jnp.float32), mesh=mesh,
          interpret=interpret)(acc)
""",
        RAISES,
    ),
    md(
        """
## 3. The fix

Pass the Ref **once** and use it as often as you like inside the kernel; make views inside
the kernel, not at the call.
"""
    ),
    code(
        """
def add_self(a_ref, out):
    out[...] = a_ref[...] + a_ref[...]

print(pl.kernel(add_self, out_type=jax.ShapeDtypeStruct((8,), jnp.float32), mesh=mesh,
                interpret=interpret)(acc))

def add_halves(a_ref, out):
    out[...] = a_ref.at[0:4][...] + a_ref.at[4:8][...]

print(pl.kernel(add_halves, out_type=jax.ShapeDtypeStruct((4,), jnp.float32), mesh=mesh,
                interpret=interpret)(acc))
"""
    ),
    md(
        """
## 4. With the toolkit

The static check finds the duplicate wherever it hides (a repeated argument, a tuple
argument, two views, a capture) and points at the second use. The graph draws the alias.
"""
    ),
    code(
        """
import mpmd_lab
from mpmd_lab import exercises, fixes, runtime, validate
from mpmd_lab.report import format_diagnostics
from mpmd_lab.scenario import load_scenario

for scenario in [load_scenario("dup-ref"), exercises.start("dup-view"), exercises.start("closed-ref")]:
    print(format_diagnostics(scenario.name, validate.check(scenario)), end="\\n\\n")
"""
    ),
    code(
        """
mpmd_lab.plot(exercises.start("dup-view"))
"""
    ),
    md("The fix, as the toolkit makes it, and the real run of the result:"),
    code(
        """
dup = load_scenario("dup-ref")
fixed, applied = fixes.apply_all(dup, validate.check(dup))
print([f.description for f in applied])
result = runtime.run(fixed, backend="interpret")
print(result.summary())
"""
    ),
    md(
        """
## Exercises for this notebook (in [06](06-exercises.ipynb))

- **dup-ref**: pass a Ref once.
- **dup-view**: two views are still one Ref.
- **closed-ref**: captured and passed.

**Next:** [04 · peers and multicast](04-peers-and-multicast.ipynb).
"""
    ),
]

# ====================================================================== 04 peers and multicast

NB04 = [
    md(
        """
# 04 · Peers and multicast

*About 30 minutes.*

Two transforms reach other devices' memory:

- `plgpu.remote_ref(ref, device_id)`: a **peer** view, the same buffer on **one** other device
  (`device_id` an int or `{"dev": index}`, often `(lax.axis_index("dev") + 1) % n`);
- `plgpu.multicast_ref(ref, axes)`: a **multicast** view, the same buffer on **every** device
  along `axes`: one store writes them all.

A view can be one or the other, never both: JAX refuses a multicast view built on a peer view
(`REF_PEER_TO_MULTICAST`), and its twin, a peer view built on a multicast view
(`REF_MULTICAST_TO_PEER`).
"""
    ),
    devices_setup(4),
    SETUP,
    md("## 1. The rule in plain JAX"),
    code(
        """
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
"""
    ),
    code(
        """
def peer_then_multicast(x_ref, out):
    plgpu.multicast_ref(right(out), "dev")

on_devices(peer_then_multicast).trace(x)
""",
        RAISES,
    ),
    code(
        """
def multicast_then_peer(x_ref, out):
    plgpu.remote_ref(plgpu.multicast_ref(out, "dev"), {"dev": 0})

on_devices(multicast_then_peer).trace(x)
""",
        RAISES,
    ),
    md(
        """
A peer view alone is fine. JAX traces the ring shift and lowers it for the GPU (the real
Mosaic GPU lowering runs on this CPU machine):
"""
    ),
    code(
        """
def ring_shift(x_ref, out):
    right(out)[...] = x_ref[...]

exported = jax.export.export(on_devices(ring_shift), platforms=["cuda"])(x)
print("lowered for", exported.platforms, "-", len(exported.mlir_module()), "characters of MLIR")
"""
    ),
    md(
        """
## 2. The twins in the toolkit

The static check names the failing step of the stack by its field path; the fix rebuilds the
view from the base Ref.
"""
    ),
    code(
        """
import mpmd_lab
from mpmd_lab import deep, fixes, runtime, validate
from mpmd_lab.exercises import outline
from mpmd_lab.report import format_diagnostics
from mpmd_lab.scenario import load_scenario

ptm = load_scenario("peer-then-multicast")
print(outline(ptm))
diagnostics = validate.check(ptm)
print(format_diagnostics(ptm.name, diagnostics))
"""
    ),
    code(
        """
mpmd_lab.plot(ptm)
"""
    ),
    code(
        """
fixed, applied = fixes.apply_all(ptm, diagnostics)
print([f.description for f in applied])
print(format_diagnostics(fixed.name, validate.check(fixed)))
print(format_diagnostics("multicast-then-peer", validate.check(load_scenario("multicast-then-peer"))))
"""
    ),
    md(
        """
## 3. A ring shift, simulated

No CPU interpreter runs `remote_ref`. The simulator runs the scenario's semantics over every
device and logs every access; with `x = iota`, device d's `out` must start at `(d-1)·256`.
"""
    ),
    code(
        """
ring = load_scenario("ring-shift")
sim = mpmd_lab.simulate(ring)
print(sim.summary())
x_host = np.arange(4 * 256, dtype=np.float32).reshape(4, 256)
assert np.array_equal(sim.outputs["out"].reshape(4, 256), np.roll(x_host, 1, axis=0))
print("device d's out == device d-1's x on every device")
"""
    ),
    md(
        """
## 4. A multicast

`multicast-2d`: every device of a 2 x 2 mesh stores its tile to `out` on all devices at
once. A multicast view cannot be written by a plain store (`out[...] = …`): the GPU lowering
refuses it. The store goes SMEM → GMEM with the TMA (`tma_store`), which is why the scenario
stages `x` in SMEM scratch and uses `plgpu.kernel` (which allocates scratch itself).
"""
    ),
    code(
        """
mc = load_scenario("multicast-2d")
print(outline(mc))
mpmd_lab.plot(mc)
"""
    ),
    code(
        """
print("deep check:", [d.code for d in deep.deep_check(mc) if d.is_error] or "JAX accepts it")
sim = mpmd_lab.simulate(mc)
print(sim.summary())
"""
    ),
    md(
        """
The races the simulator reports are real: every device writes the *same* elements of `out`
on every device (the static check warns about it too). Here all the values are equal (all ones), so nobody can tell; with different values
the result would depend on timing. The all-gather exercise gives each device its own slot.

Now the same store as a plain copy: the deep check asks JAX to lower it for the GPU.
"""
    ),
    code(
        """
plain = mc.to_dict()
body = plain["call"]["programs"][0]["body"]
body[2] = {"op": "copy", "src": "smem", "dst": "everyone"}
plain = load_scenario(plain)
print(format_diagnostics("multicast with a plain store", deep.deep_check(plain)))
"""
    ),
    md(
        """
## Exercises for this notebook (in [06](06-exercises.ipynb))

- **ring-left**: turn the ring around.
- **multicast-then-peer**: a peer view, not a multicast one.
- **peer-then-multicast**: an all-gather with one multicast.

**Next:** [05 · prototyping](05-prototyping.ipynb).
"""
    ),
]

# ====================================================================== 05 prototyping

NB05 = [
    md(
        """
# 05 · Prototyping a kernel: build, check, run, export

*About 25 minutes.*

The loop a kernel author follows with mpmd-lab:

1. **build** the call as a scenario (in code, in the Lab, or as a JSON file);
2. **check** it statically (instant), then **deep** (JAX traces it and lowers it for the GPU);
3. **run** it (GPU, or the CPU interpreter) and compare with numpy;
4. **export** it as a plain JAX script, and run that script on its own.

Our kernel: `out = x + y` over a grid of 4 blocks, each block adding its quarter.
"""
    ),
    SETUP,
    md("## 1. Build"),
    code(
        """
from mpmd_lab.exercises import outline
from mpmd_lab.scenario import load_scenario


def quarter_add(n: int) -> dict:
    \"\"\"out = x + y on n-element arrays, each of 4 blocks adding its quarter.\"\"\"
    quarter = [{"op": "at", "index": [{"block": "b", "size": n // 4}]}]
    return {
        "schema": "mpmd-lab/scenario@1",
        "name": "quarter-add",
        "description": "out = x + y, each of 4 blocks adding its quarter.",
        "buffers": {
            "x": {"shape": [n], "dtype": "float32", "init": "iota"},
            "y": {"shape": [n], "dtype": "float32", "init": "random", "seed": 7},
        },
        "call": {
            "entry": "pl.kernel",
            "args": [{"buffer": "x", "param": "x_ref"}, {"buffer": "y", "param": "y_ref"}],
            "outputs": {"out": {"shape": [n], "dtype": "float32"}},
            "programs": [{
                "mesh": {"grid": {"b": 4}, "cluster": {}, "threads": None},
                "body": [
                    {"let": "xq", "ref": "x_ref", "transforms": quarter},
                    {"let": "yq", "ref": "y_ref", "transforms": quarter},
                    {"let": "oq", "ref": "out", "transforms": quarter},
                    {"op": "add", "dst": "oq", "lhs": "xq", "rhs": "yq"},
                ],
            }],
        },
        "run": {"interpret": "gpu", "detect_races": True},
    }


s = load_scenario(quarter_add(256))
print(outline(s))
"""
    ),
    md("## 2. Check, then check deep"),
    code(
        """
from mpmd_lab import deep, validate
from mpmd_lab.report import format_diagnostics

print(format_diagnostics(s.name, validate.check(s)))
"""
    ),
    md(
        """
Quarters of 64 float32 are too small for the GPU: a loaded array lives in the registers of a
warpgroup of 128 threads. The static check knows this rule; the deep check asks JAX's own
Mosaic GPU lowering, which agrees. The interpreter alone would have run it happily.
"""
    ),
    code(
        """
print(format_diagnostics(s.name + " (deep)", deep.deep_check(s)))
"""
    ),
    md("Make the arrays 512 elements long, so every quarter holds 128, and check again."),
    code(
        """
s = load_scenario(quarter_add(512))
print(format_diagnostics(s.name, validate.check(s)))
print(format_diagnostics(s.name + " (deep)", deep.deep_check(s)))
"""
    ),
    md("## 3. Run, and compare with numpy"),
    code(
        """
import numpy as np

from mpmd_lab import runtime
from mpmd_lab.exercises import inputs_of

result = runtime.run(s, backend="interpret")
print(result.summary())
inputs = inputs_of(s)  # the host values the call was given
assert np.allclose(result.outputs["out"], inputs["x"] + inputs["y"])
print("out == x + y")
"""
    ),
    md(
        """
## 4. Export, and run the export as a script

`codegen.generate` is the one way a scenario becomes JAX code: the runtime executes exactly
this source. The file needs only jax and numpy; `--json` prints its outputs.
"""
    ),
    code(
        """
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from mpmd_lab import codegen

source = codegen.generate(s)
print(source[source.index("def build"):source.index("def place")])
script = Path(tempfile.mkdtemp()) / "quarter_add.py"
script.write_text(source)
print("written to", script)
"""
    ),
    code(
        """
done = subprocess.run([sys.executable, str(script), "--json"], capture_output=True, text=True,
                      timeout=300)
print("exit status", done.returncode)
exported = json.loads(done.stdout)["out"]
print(exported["shape"], exported["dtype"], exported["values"][:4])
assert np.array_equal(np.array(exported["values"], np.float32), result.outputs["out"])
print("the exported script gives the same out as the run")
"""
    ),
    md("The command line does the same: `mpmd-lab export FILE -o OUT.py`."),
    code(
        """
from mpmd_lab.scenario import save_scenario

path = save_scenario(s, script.with_name("quarter-add.json"))
!{MPMD_LAB} check {path}
!{MPMD_LAB} export {path} -o {script.with_name("exported.py")}
!cmp {script} {script.with_name("exported.py")} && echo "the same script as codegen.generate wrote"
"""
    ),
    md(
        """
## 5. Keep going in the Lab

Open your scenario in the Lab to change it by clicks: add a block axis, change a view,
press Run. `lab.state.scenario` is the edited scenario.
"""
    ),
    code(
        """
from mpmd_lab.widgets import Lab

lab = Lab(s)
lab
"""
    ),
    md("**Next:** [06 · exercises](06-exercises.ipynb)."),
]

# ====================================================================== 06 exercises


def _exercise_cells(solutions: bool) -> list:
    from mpmd_lab import exercises

    cells = [
        md(
            """
# 06 · Exercises"""
            + (" — solutions" if solutions else "")
            + """

*About 60 minutes.* Each exercise is a scenario to repair. `start(name)` gives you the
starting scenario; edit it (in code, as below, or in the Lab with `Lab(s)` and then
`s = lab.state.scenario`); `check_exercise(name, s)` judges it **the way JAX would**: the
static check, a deep check or the real interpreter run, and the outputs against numpy. There
is more than one right answer to most exercises: any that JAX accepts and that computes the
right thing passes. A wrong answer comes with a hint.

Edits in code: the scenario is a pydantic model, so `s.call.args = s.call.args[:1]` or
`s.call.programs[0].body[0].rhs = "a_ref"` work, and a wrong value is refused at once.
"""
            + (
                "\nThis notebook shows one solution to each (and a second one to some)."
                if solutions
                else "\nStuck? The solutions are in [06-exercises-solutions](06-exercises-solutions.ipynb)."
            )
        ),
        SETUP,
        code(
            """
from IPython.display import Markdown, display

from mpmd_lab import exercises
from mpmd_lab.exercises import check_exercise, outline, start

print(len(exercises.names()), "exercises:", ", ".join(exercises.names()))
"""
        ),
    ]
    for i, name in enumerate(exercises.names(), 1):
        ex = exercises.get(name)
        cells.append(md(f"---\n## {i}. {ex.title} (`{name}`)\n\n*From notebook {ex.notebook}.*"))
        cells.append(
            code(
                f"""
display(Markdown(exercises.get("{name}").describe(title=False)))
s = start("{name}")
print(outline(s))
"""
            )
        )
        if solutions:
            cells.append(code(SOLUTIONS[name][0]))
            cells.append(code(f'check_exercise("{name}", s)'))
            for alt in SOLUTIONS[name][1:]:
                cells.append(md("Another right answer:"))
                cells.append(code(alt))
                cells.append(code(f'check_exercise("{name}", s)'))
        else:
            cells.append(code(f'check_exercise("{name}", s)  # the starting point: not yet'))
            cells.append(
                code(
                    f"""
# Your turn: edit s here, then run the next cell.
s = start("{name}")
"""
                )
            )
            cells.append(code(f'check_exercise("{name}", s)'))
    cells.append(
        md(
            """
---
Done? Build your own: take any gallery scenario (`mpmd-lab gallery`), break it in a way you
have seen at work, and ask your neighbour to repair it.
"""
        )
    )
    return cells


#: One solution per exercise (and alternatives), as edits a learner would type.
SOLUTIONS: dict[str, list[str]] = {
    "dup-ref": [
        """
s.call.args = s.call.args[:1]             # pass acc once...
s.call.programs[0].body[0].rhs = "a_ref"  # ...and read it twice
print(outline(s))
""",
        """
# acc as a plain array: arrays are values, the same one may be passed twice
s = start("dup-ref")
s.buffers["acc"].as_ref = False
""",
    ],
    "dup-view": [
        """
body = s.call.programs[0].body
s.call.args = [{"buffer": "acc", "param": "a_ref"}]
s.call.programs[0].body = [
    {"let": "lo", "ref": "a_ref", "transforms": [{"op": "at", "index": [[0, 128]]}]},
    {"let": "hi", "ref": "a_ref", "transforms": [{"op": "at", "index": [[128, 256]]}]},
    *body,
]
print(outline(s))
""",
    ],
    "closed-ref": [
        """
s.call.captures = []
s.call.programs[0].body[0].rhs = "a_ref"
""",
    ],
    "ring-left": [
        """
s.call.programs[0].body[0].transforms[0].device = {"dev": {"offset": -1}}
""",
        """
s = start("ring-left")
s.call.programs[0].body[0].transforms[0].device = {"dev": {"offset": 3}}  # 3 right = 1 left
""",
    ],
    "multicast-then-peer": [
        """
view = s.call.programs[0].body[0]
view.transforms = [t for t in view.transforms if t.op != "multicast_ref"]
print(outline(s))
""",
    ],
    "peer-then-multicast": [
        """
s.call.entry = "plgpu.kernel"  # allocates SMEM scratch itself
s.call.scratch = {"smem": {"shape": [128], "dtype": "float32", "memory_space": "SMEM"}}
slot = s.call.programs[0].body[0]
slot.transforms = [t for t in slot.transforms if t.op != "remote_ref"]
s.call.programs[0].body = [
    {"op": "copy", "src": "x_ref", "dst": "smem"},
    slot,
    {"op": "tma_store", "src": "smem", "dst": "slot"},
]
print(outline(s))
""",
        """
s = start("peer-then-multicast")
slot = s.call.programs[0].body[0]
slot.transforms = [slot.transforms[0]]  # just this device's slot of out
s.call.programs[0].body = [
    slot,
    {"op": "multimem_store", "src": "x_ref", "dst": "slot", "axes": ["dev"]},
]
print(outline(s))
""",
    ],
    "race": [
        """
s.call.programs[0].body[1].transforms = [{"op": "at", "index": [{"block": "b", "size": 128}]}]
""",
    ],
    "ring-2d": [
        """
s.call.programs[0].body[0].transforms[0].device = {"y": {"offset": 1}}
""",
    ],
    "program-id": [
        """
by_block = [{"op": "at", "index": [{"block": "b", "size": 128}]}]
s.call.programs[0].body[0].transforms = by_block
s.call.programs[0].body[1].transforms = by_block
""",
    ],
    "reshape": [
        """
s.call.programs[0].body[0].transforms[0].shape = [256]
""",
        """
s = start("reshape")
s.call.programs[0].body[0].transforms[0].shape = [-1]
""",
    ],
    "oob-slice": [
        """
s.call.programs[0].body[0].transforms[0].index = [{"ds": [128, 128]}]
""",
        """
s = start("oob-slice")
s.call.programs[0].body[0].transforms[0].index = [[128, 256]]  # a plain slice
""",
    ],
    "ring-wait": [
        """
loop = s.call.programs[0].body[3]
loop.body = [*loop.body, {"op": "semaphore_wait", "sem": "sent"}]  # after the signal
print(outline(s))
""",
    ],
    "ring-deadlock": [
        """
loop = s.call.programs[0].body[3]
loop.body[3].transforms = [{"op": "at", "index": ["i"]}]  # sent = sems.at[i], like arrived
""",
        """
# or take the fix the check offers (verified before it is offered)
from mpmd_lab import fixes

s = start("ring-deadlock")
s, applied = fixes.apply_all(s)
print([f.description for f in applied])
""",
    ],
    "ring-index": [
        """
for let in s.call.programs[0].body[3].body[:2]:  # chunk and to_right
    let.transforms[0].index = [{"ds": ["(dev + 4 - i) % 4 * 256", 256]}]
""",
    ],
}


# ====================================================================== 07 bring your own kernel

NB07 = [
    md(
        """
# 07 · Bring your own kernel

*About 15 minutes.*

So far every kernel was a scenario written for mpmd-lab. Here you bring **your own JAX
code**: a function that calls `plgpu.kernel` (or `pl.kernel`) inside `jax.shard_map`, the way
JAX's distributed tests write kernels. `mpmd_lab.from_jax(fn, *args)` **traces** it (it never
runs it: no device computation, no interpreter), finds the kernel call, and reads the kernel's
jaxpr back into a scenario: buffers holding your arguments' values, the device mesh and the
specs of your `shard_map`, scratch, semaphores, loops, conditions. Every statement remembers
**your source line**, so every problem is shown where you wrote it.

| you want | call |
| --- | --- |
| the scenario, JAX's errors at your lines, what could not be read | `mpmd_lab.from_jax(fn, *args)` |
| the Lab on your kernel | `mpmd_lab.show(fn, *args)`, or `%%mpmd_lab` after `%load_ext mpmd_lab` |
| what the kernel computes | `mpmd_lab.simulate(imported.scenario)` |
| a scenario file from the shell | `mpmd-lab import MODULE.py:FUNCTION -o scenario.json` |
"""
    ),
    SETUP,
    devices_setup(4),
    md(
        """
## 1. A ring shift, as you would write it

Device `d` stores its shard into `out` on device `d + 1`, with the handshake of JAX's
`test_remote_dma_basic`: tell the device that writes into me that I am running, wait for my
right neighbour, store, signal the receiver, wait until my own `out` has landed.
"""
    ),
    code(
        """
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
"""
    ),
    md(
        """
`imported.scenario` is an ordinary scenario. Its statements are your kernel's, each with the
line it came from (`imported.source_of(path)` gives `FILE:LINE`):
"""
    ),
    code(
        """
s = imported.scenario
print("device mesh:", s.device_mesh, "| entry:", s.call.entry, "| scratch:", list(s.call.scratch))
print("x holds your values:", s.buffers["x"].init if isinstance(s.buffers["x"].init, str) else "explicit")
for i, st in enumerate(s.call.programs[0].body):
    path = f"call.programs[0].body[{i}]"
    print(f"{st.label():38}  <- line {imported.source_of(path).rsplit(':', 1)[1]}: {imported.line_of(path)}")
"""
    ),
    md(
        """
`lax.rem(dev + 1, D)` became `(dev + 1) % 4`: `lax.rem` truncates where the scenario's `%`
floors, and the importer wrote it only because `dev + 1` is never negative. (Try
`lax.rem(dev - 1, D)`: `imported.unsupported` names it instead of guessing.)

## 2. What the kernel computes

The simulator runs the scenario over every device with GPU semantics: semaphores, remote
stores, waits. `imported.outputs(...)` puts the result together as your `out_specs` do, so it
compares directly with what you expect: `out_d = x_{d-1}`.
"""
    ),
    code(
        """
sim = mpmd_lab.simulate(imported.scenario)
print(sim.summary())
if sim.ok:
    (out,) = imported.outputs(sim.outputs)
    x = np.asarray(args[0])
    print("out == roll(x, 8 rows):", np.array_equal(out, np.roll(x, 8, axis=0)))
"""
    ),
    md(
        """
## 3. Your mistake, at your line

A multicast view of a peer view is refused by JAX while it traces the body. The importer
catches JAX's own error, gives it its code and card, and points at the line that did it:
"""
    ),
    code(
        """
def bad_kernel(x_ref, o_ref, ready_sem, recv_sem):
    dev = lax.axis_index("dev")
    right = lax.rem(dev + 1, D)
    dst = plgpu.multicast_ref(plgpu.remote_ref(o_ref, right), "dev")
    dst[...] = x_ref[...]


bad_fn, bad_args = ring_call(bad_kernel)
bad = mpmd_lab.from_jax(bad_fn, *bad_args)
(d,) = bad.diagnostics
print(d.code, "at", d.source.rsplit("/", 1)[-1])
print(d.message)
print()
print(mpmd_lab.explain(d.code).render()[:700])
"""
    ),
    md(
        """
## 4. In the Lab

`mpmd_lab.show(fn, *args)` opens the Lab on the import: the problems with your line shown and
marked, the aliasing graph, the run panel (simulate). Edit the scenario there; **Export**
writes it back as plain JAX.
"""
    ),
    code(
        """
mpmd_lab.show(bad_fn, *bad_args)
"""
    ),
    md(
        """
The cell magic does the same for a cell that defines `make()` (a function returning
`(fn, args)`): it runs the cell, imports the call, keeps the import (here as `exchange`, with
`-o`) and shows the Lab. This kernel swaps shards with the device two steps away.
"""
    ),
    code(
        """
%load_ext mpmd_lab
"""
    ),
    code(
        """
%%mpmd_lab make -o exchange
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
"""
    ),
    code(
        """
print(exchange.summary())
print(mpmd_lab.export(exchange.scenario).split("def program0")[1].split("kernel = ")[0])
"""
    ),
    md(
        """
## 5. From the shell

`mpmd-lab import MODULE.py:FUNCTION -o scenario.json` does the same for a module: `FUNCTION()`
returns `(fn, args)`; the import runs in a child process with the device count set before JAX
starts (`--devices`, else the module's `DEVICES`, else 8). Exit 0: a faithful scenario JAX
accepts; 1: problems (each with its line) or constructs it could not read; 2: no such module
or function.
"""
    ),
    code(
        """
import inspect
import subprocess
import tempfile
from pathlib import Path

work = Path(tempfile.mkdtemp())
module = work / "my_ring.py"
module.write_text(
    "import jax\\nimport jax.numpy as jnp\\nfrom jax import lax\\n"
    "from jax.experimental import pallas as pl\\nfrom jax.experimental.pallas import mosaic_gpu as plgpu\\n\\n"
    "DEVICES = 4\\nD = 4\\n\\n"
    + inspect.getsource(ring_kernel)
    + "\\n\\n"
    + inspect.getsource(ring_call)
    + "\\n\\ndef make():\\n    return ring_call()\\n"
)
out = work / "ring.json"
# (a subprocess, as a terminal runs it: `!` would fork this kernel, which holds JAX's threads)
done = subprocess.run([MPMD_LAB, "import", f"{module}:make", "-o", out], capture_output=True, text=True)
print(done.stdout + done.stderr, "exit", done.returncode)
print(mpmd_lab.load(out).call.programs[0].body[0].label())
"""
    ),
]

# ====================================================================== 08 collectives


def _collective_exercise_cells() -> list:
    from mpmd_lab import exercises

    cells = []
    names = [n for n in exercises.names() if exercises.get(n).notebook.startswith("08")]
    for i, name in enumerate(names, 1):
        ex = exercises.get(name)
        cells.append(md(f"### Exercise {i}. {ex.title} (`{name}`)"))
        cells.append(
            code(
                f"""
display(Markdown(exercises.get("{name}").describe(title=False)))
s = start("{name}")
print(outline(s))
check_exercise("{name}", s)  # the starting point: not yet
"""
            )
        )
        cells.append(
            code(
                f"""
# Your turn: edit s here (the loop body is s.call.programs[0].body[3].body), then run it.
s = start("{name}")
check_exercise("{name}", s)
"""
            )
        )
    return cells


NB08 = [
    md(
        """
# 08 · Collectives: semaphores, rings and a fused matmul

*About 45 minutes.*

Notebook 04's ring shift writes into a neighbour's memory and stops there: nothing tells the
neighbour that the data has landed, so on a GPU it may read `out` too early. Every real
distributed kernel has a **completion handshake**. Here you build up, always with real JAX as
the judge and the simulator for the values:

| | scenario | what it adds |
| --- | --- | --- |
| 1 | `exchange-shards` | a semaphore handshake: `pl.semaphore_signal(sem, device_id=…)`, `pl.semaphore_wait(sem)` |
| 2 | `ring-all-gather` | a loop (`lax.fori_loop`) of D−1 steps, one semaphore per step, index expressions `(dev + D - i) % D` |
| 3 | `ring-all-gather-no-wait` | the same ring without its wait: **RACE_DETECTED** (JAX accepts it!) |
| 4 | `ring-all-gather-deadlock` | a wait on a slot nobody signals: **DEADLOCK_SEMAPHORE**, a hang on a GPU |
| 5 | `ring-reduce-scatter`, `collective-matmul` | an add into a view; TMA loads, barriers and WGMMA fused with the ring |

JAX traces and lowers all of them, the broken ones too: **nothing in JAX matches signals to
waits**. mpmd-lab's check runs the kernel the way a GPU does (every device, block and
warpgroup as its own thread, ordered by happens-before: program order, signal → the wait that
takes it, barriers) and reports what would go wrong.
"""
    ),
    SETUP,
    devices_setup(4),
    code(
        """
import numpy as np
from IPython.display import Markdown, display

import mpmd_lab
from mpmd_lab import codegen, deep, exercises, fixes, validate
from mpmd_lab.exercises import check_exercise, outline, start
from mpmd_lab.report import format_diagnostics
from mpmd_lab.scenario import load_scenario

D, S = 4, 256
"""
    ),
    md(
        """
## 1. A semaphore handshake

`exchange-shards`: device d's `out` must hold device d+1's `x`. Device d *pulls* from its right
neighbour through a remote view, but only once the neighbour says its `x` is ready (`ready`),
and it tells the neighbour when it is done reading (`done`), so that neither returns while the
other still reads its memory. A semaphore is a counter in GMEM: `semaphore_signal` adds to it
on another device, `semaphore_wait` blocks until it is at least the value, then subtracts it.
"""
    ),
    code(
        """
ex = load_scenario("exchange-shards")
print(outline(ex))
print()
print(format_diagnostics(ex.name, validate.check(ex)))
"""
    ),
    md(
        """
In the graph, the dashed arrows go from each signal to the wait it satisfies and the dotted
ones to the semaphore it names. The device panel shows the traffic between devices: the
remote view to the right neighbour (blue) and the signals (orange dashes: `ready` to the left,
`done` to the right).
"""
    ),
    code(
        """
mpmd_lab.plot(ex)
"""
    ),
    md(
        """
## 2. The ring all-gather

`x [S] → out [D·S]` on every device: each device puts its own shard in place, then in D−1 steps
of a loop forwards to its right neighbour the chunk it received last (at step i: chunk
`(dev − i) mod D`, written `(dev + axis_size(dev) - i) % axis_size(dev)` so that it stays
non-negative), signals the neighbour's semaphore for that step, and waits on its own.

The exported source is what a kernel author writes: semaphore scratch, `lax.fori_loop`,
`pl.semaphore_signal(..., device_id=...)`, `pl.semaphore_wait`.
"""
    ),
    code(
        """
ring = load_scenario("ring-all-gather")
source = codegen.generate(ring)
print(source[source.index("def program0"):source.index("kernel = ")])
"""
    ),
    md(
        """
`deep_check` hands that source to real JAX: it traces it and lowers it for the GPU (the Mosaic
GPU lowering, on this CPU machine). No error from JAX, and nothing from the check:
"""
    ),
    code(
        """
print(format_diagnostics(ring.name, deep.deep_check(ring)))
"""
    ),
    md(
        """
No CPU interpreter runs semaphores across devices, so the values come from the simulator: it
runs every device as its own thread and orders them only by what the kernel synchronises.
With `x = iota`, every device's `out` must be `0, 1, …, D·S − 1`: numpy says so independently.
"""
    ),
    code(
        """
sim = mpmd_lab.simulate(ring)
print(sim.summary())
x = np.arange(D * S, dtype=np.float32)              # the global x: device d holds x[d*S:(d+1)*S]
want = np.tile(x, D)                                # out on every device: all of x
assert np.array_equal(sim.outputs["out"], want) and sim.races == []
print("every device's out is concat(x_0 ... x_3); no races")
"""
    ),
    code(
        """
mpmd_lab.plot(ring)
"""
    ),
    md(
        """
## 3. The missing wait

Take the wait out of the loop. JAX still traces and lowers it; on a GPU, at step i device d
forwards a chunk that its left neighbour may still be writing. The check finds that race,
names the two accesses, and offers the fix it has verified:
"""
    ),
    code(
        """
no_wait = load_scenario("ring-all-gather-no-wait")
found = validate.check(no_wait)
print(format_diagnostics(no_wait.name, [d for d in found if d.is_error]))
"""
    ),
    code(
        """
mpmd_lab.plot(no_wait)
"""
    ),
    md(
        """
The simulator sees it as it happens: the read on device d and the write from device d−1 are
not ordered by anything (a signal orders the writes *before* it; only a wait orders the reads
*after* it). Apply the fix and it is the ring again:
"""
    ),
    code(
        """
sim = mpmd_lab.simulate(no_wait, check=False)
print(len(sim.races), "races, e.g.", sim.races[0].describe())
fixed, applied = fixes.apply_all(no_wait, found)
print("applied:", [f.description for f in applied])
print(format_diagnostics("fixed", [d for d in validate.check(fixed) if d.is_error]))
assert np.array_equal(mpmd_lab.simulate(fixed).outputs["out"], want)
print("the fixed ring gathers")
"""
    ),
    md(
        """
## 4. The deadlock

Now every step signals `sems[0]` but waits on `sems[i]`. Step 0 completes; at step 1 every
device waits on `sems[1]`, which nobody signals. On a GPU the kernel never returns. The check
names who waits on what, and where the signals went:
"""
    ),
    code(
        """
stuck = load_scenario("ring-all-gather-deadlock")
found = validate.check(stuck)
print(format_diagnostics(stuck.name, [d for d in found if d.is_error]))
mpmd_lab.plot(stuck)
"""
    ),
    md(
        """
The simulator reports the deadlock (and exits 1 on the command line) instead of hanging:
"""
    ),
    code(
        """
import time

t = time.perf_counter()
sim = mpmd_lab.simulate(stuck)
print(f"{time.perf_counter() - t:.2f} s:", sim.error.code)
!{MPMD_LAB} run ring-all-gather-deadlock --backend simulate; echo "exit status $?"
"""
    ),
    code(
        """
fixed, applied = fixes.apply_all(stuck, found)
print("applied:", [f.description for f in applied])
assert np.array_equal(mpmd_lab.simulate(fixed).outputs["out"], want)
print("unblocked: the ring gathers again")
"""
    ),
    md(
        """
## 5. Reduce-scatter and the collective matmul

`ring-reduce-scatter`: `x [D·S] → out [S]`, device d's `out` is the sum over all devices j of
chunk d of `x_j`. Partial sums travel round the ring; each step *adds into a view*.
"""
    ),
    code(
        """
rs = load_scenario("ring-reduce-scatter")
sim = mpmd_lab.simulate(rs)
xs = np.arange(D * D * S, dtype=np.float32).reshape(D, D, S)   # [device j, chunk c, S]
assert np.array_equal(sim.outputs["out"].reshape(D, S), xs.sum(axis=0))
print("out_d == sum_j x_j[d*S:(d+1)*S] on every device")
"""
    ),
    md(
        """
`collective-matmul`: the all-gather of `lhs` fused with the matmul, `out = concat_j(lhs_j) @
rhs_d`. Each step TMA-loads a tile into SMEM (`copy_gmem_to_smem`, completing on a barrier),
multiplies it with one WGMMA into a float32 accumulator, and TMA-stores the tile into the left
neighbour's landing buffer, signalling it. The graph shows the barriers (copy → wait) next to
the semaphores.
"""
    ),
    code(
        """
cm = load_scenario("collective-matmul")
sim = mpmd_lab.simulate(cm)
lhs = np.arange(D * 64 * 64).reshape(D * 64, 64).astype(np.float16).astype(np.float64)
rhs = np.arange(D * 64 * 128).reshape(D, 64, 128).astype(np.float16).astype(np.float64)
exact = np.concatenate([lhs @ rhs[d] for d in range(D)])
err = np.abs(sim.outputs["out"] - exact).max() / np.abs(exact).max()
print(f"largest error relative to the exact product: {err:.1e} (float32 accumulation)")
assert err < 64 * 2.0**-24
mpmd_lab.plot(cm)
"""
    ),
    md(
        """
## 6. Exercises

Each is a broken ring, judged the way the rest of the workshop is: the static check (races and
deadlocks included), JAX's trace and GPU lowering, then the simulator's values against numpy.
Solutions: [06-exercises-solutions](06-exercises-solutions.ipynb).
"""
    ),
    *_collective_exercise_cells(),
    md(
        """
---
The Lab edits all of it (loops, semaphores, barriers, conditions): `from mpmd_lab.widgets
import Lab; Lab("ring-all-gather")`.
"""
    ),
]


def notebooks() -> dict[str, list]:
    return {
        "00-start-here": NB00,
        "01-meshes": NB01,
        "02-refs-and-transforms": NB02,
        "03-calls-and-aliasing": NB03,
        "04-peers-and-multicast": NB04,
        "05-prototyping": NB05,
        "06-exercises": _exercise_cells(solutions=False),
        "06-exercises-solutions": _exercise_cells(solutions=True),
        "07-bring-your-own-kernel": NB07,
        "08-collectives": NB08,
    }


def build(name: str, cells: list) -> str:
    """The notebook as the text committed to the repository."""
    nb = new_notebook(cells=cells)
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{name[:2]}-{i:02d}"  # stable ids: rebuilding changes nothing
    nbformat.validate(nb)
    return nbformat.writes(nb) + "\n"


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(HERE.parent))
    check = "--check" in argv
    stale = []
    for name, cells in notebooks().items():
        path = HERE / f"{name}.ipynb"
        text = build(name, cells)
        if check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(path.name)
        else:
            path.write_text(text, encoding="utf-8")
            print(path)
    if stale:
        print("out of date (run python notebooks/_build.py):", ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
