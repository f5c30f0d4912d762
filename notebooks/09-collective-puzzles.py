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
# # 09 · Collective puzzles: from a ring shift to the collective matmul
#
# *About 60–90 minutes; after notebook 08.*
#
# Fifteen graded puzzles on kernels that span **4 devices**: each starts from a kernel with one
# hole in it (a wrong device, a missing statement, a missing wait, a signal to the wrong slot…).
# Repair it; **Check** grades your kernel on this laptop, in milliseconds:
#
# 1. the static check says what JAX would raise, and runs the kernel the way a GPU does, over
#    **every schedule** of its devices that matters: a race, a deadlock, a semaphore left
#    raised, an index or device out of range all fail;
# 2. the simulator computes the outputs, and they are compared with numpy's, **device by
#    device**: a wrong answer names the device, the output and the elements.
#
# | levels | topic | what you practise |
# | --- | --- | --- |
# | 1–2 | ring shift | `remote_ref` to a neighbour, wrapping with `% axis_size(dev)` |
# | 3–5 | handshake | `semaphore_signal(..., device=…)` and `semaphore_wait`: balanced, in order |
# | 6–10 | all-gather | a ring in a loop: own shard, signal target, slots, chunk index, trip count |
# | 11–12 | reduce-scatter | partial sums travelling right, and their waits |
# | 13 | double buffering | two landing slots reused, handed back with a credit semaphore |
# | 14–15 | collective matmul | TMA, WGMMA and the ring fused: rows and waits |
#
# Hints come one at a time (**Hint**); the last one gives the answer away. Other correct
# answers than the facilitator's pass too: nothing compares text.

# %%
# Run once: the repository importable when opened from notebooks/.
import sys
from pathlib import Path

ROOT = Path.cwd().parent if Path.cwd().name == "notebooks" else Path.cwd()
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# %%
from mpmd_lab import puzzles
from mpmd_lab.exercises import outline
from mpmd_lab.widgets.puzzle import PuzzleBoard

for name in puzzles.names():
    p = puzzles.get(name)
    print(f"{p.level:2}. {p.title:36} {p.topic:18} ({name})")

# %% [markdown]
# ## The board
#
# Pick a puzzle, read its goal, edit the kernel in the Lab below it (the **Call** tab has the
# statements; the problems and the graph update as you type), then **Check**. **Start over**
# puts the starting point back (undo works too).

# %%
board = PuzzleBoard()
board

# %% [markdown]
# ## The same in code
#
# Everything the board does is a library call. A puzzle's starting point is a scenario;
# `outline` prints it with the field path of every statement, which is where you edit it.

# %%
start = puzzles.start("shift-right")
print(outline(start))
print()
print(puzzles.grade("shift-right", start))

# %% [markdown]
# The values are wrong on every device: each device's `out` holds its own `x`, because the
# remote view `p` points at offset 0, this very device. Ask for a hint, then repair the field
# `call.programs[0].body[0].transforms[0].device` and grade again:

# %%
print(puzzles.hint("shift-right", 0))

answer = start.to_dict()
answer["call"]["programs"][0]["body"][0]["transforms"][0]["device"] = {"dev": {"offset": 1}}
verdict = puzzles.grade("shift-right", answer)
print(verdict)
assert verdict.right

# %% [markdown]
# ## Right numbers are not enough
#
# Puzzle 5's kernel gives the right numbers when the simulator runs it once, in its default
# order: the left neighbour's copy happens to land before the `add` reads it. On a GPU nothing
# makes it so, and the grade, which looks at every schedule, says where it goes wrong:

# %%
import numpy as np
from mpmd_lab import simulate

racy = puzzles.start("shift-add-wait")
once = simulate(racy, check=False)
want = puzzles.get("shift-add-wait").expected(puzzles.inputs_of(racy))
print("one run's values right:", np.array_equal(once.outputs["out"], want["out"]))
print(puzzles.grade("shift-add-wait", racy))

# %% [markdown]
# ## Your turn
#
# Work through the board from puzzle 1, or grade your own edits in code with
# `puzzles.grade(name, scenario)`. Facilitators: the key of every puzzle is
# `puzzles.key(name)`, and `docs/PUZZLES.md` lists each hole and its fix.
