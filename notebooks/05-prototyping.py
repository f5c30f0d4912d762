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
# # 05 · Prototyping a kernel: build, check, run, export
#
# *About 25 minutes.*
#
# The loop a kernel author follows with mpmd-lab:
#
# 1. **build** the call as a scenario (in code, in the Lab, or as a JSON file);
# 2. **check** it statically (instant), then **deep** (JAX traces it and lowers it for the GPU);
# 3. **run** it (GPU, or the CPU interpreter) and compare with numpy;
# 4. **export** it as a plain JAX script, and run that script on its own.
#
# Our kernel: `out = x + y` over a grid of 4 blocks, each block adding its quarter.

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
# ## 1. Build

# %%
import mpmd_lab
from mpmd_lab.exercises import outline


def quarter_add(n: int) -> dict:
    """out = x + y on n-element arrays, each of 4 blocks adding its quarter."""
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


s = mpmd_lab.load(quarter_add(256))
print(outline(s))

# %% [markdown]
# ## 2. Check, then check deep

# %%
from mpmd_lab import deep
from mpmd_lab.report import format_diagnostics

print(format_diagnostics(s.name, mpmd_lab.check(s)))

# %% [markdown]
# Quarters of 64 float32 are too small for the GPU: a loaded array lives in the registers of a
# warpgroup of 128 threads. The static check knows this rule; the deep check asks JAX's own
# Mosaic GPU lowering, which agrees. The interpreter alone would have run it happily.

# %%
print(format_diagnostics(s.name + " (deep)", deep.deep_check(s)))

# %% [markdown]
# Make the arrays 512 elements long, so every quarter holds 128, and check again.

# %%
s = mpmd_lab.load(quarter_add(512))
print(format_diagnostics(s.name, mpmd_lab.check(s)))
print(format_diagnostics(s.name + " (deep)", deep.deep_check(s)))

# %% [markdown]
# ## 3. Run, and compare with numpy

# %%
import numpy as np

from mpmd_lab.exercises import inputs_of

result = mpmd_lab.run(s, "interpret")
print(result.summary())
inputs = inputs_of(s)  # the host values the call was given
assert np.allclose(result.outputs["out"], inputs["x"] + inputs["y"])
print("out == x + y")

# %% [markdown]
# ## 4. Export, and run the export as a script
#
# `mpmd_lab.export` is the one way a scenario becomes JAX code: the runtime executes exactly
# this source. The file needs only jax and numpy; `--json` prints its outputs.

# %%
import json
import subprocess
import sys
import tempfile
from pathlib import Path


source = mpmd_lab.export(s)
print(source[source.index("def build"):source.index("def place")])
script = Path(tempfile.mkdtemp()) / "quarter_add.py"
script.write_text(source)
print("written to", script)

# %%
done = subprocess.run([sys.executable, str(script), "--json"], capture_output=True, text=True,
                      timeout=300)
print("exit status", done.returncode)
exported = json.loads(done.stdout)["out"]
print(exported["shape"], exported["dtype"], exported["values"][:4])
assert np.array_equal(np.array(exported["values"], np.float32), result.outputs["out"])
print("the exported script gives the same out as the run")

# %% [markdown]
# The command line does the same: `mpmd-lab export FILE -o OUT.py`.

# %%
path = mpmd_lab.save(s, script.with_name("quarter-add.json"))
# !{MPMD_LAB} check {path}
# !{MPMD_LAB} export {path} -o {script.with_name("exported.py")}
# !cmp {script} {script.with_name("exported.py")} && echo "the same script as mpmd_lab.export wrote"

# %% [markdown]
# ## 5. Keep going in the Lab
#
# Open your scenario in the Lab to change it by clicks: add a block axis, change a view,
# press Run. `lab.state.scenario` is the edited scenario.

# %%
from mpmd_lab.widgets import Lab

lab = Lab(s)
lab

# %% [markdown]
# **Next:** [06 · exercises](06-exercises.ipynb).
