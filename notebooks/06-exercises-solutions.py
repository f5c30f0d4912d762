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
# # 06 · Exercises — solutions
#
# *About 60 minutes.* Each exercise is a scenario to repair. `start(name)` gives you the
# starting scenario; edit it (in code, as below, or in the Lab with `Lab(s)` and then
# `s = lab.state.scenario`); `check_exercise(name, s)` judges it **the way JAX would**: the
# static check, a deep check or the real interpreter run, and the outputs against numpy. There
# is more than one right answer to most exercises: any that JAX accepts and that computes the
# right thing passes. A wrong answer comes with a hint.
#
# Edits in code: the scenario is a pydantic model, so `s.call.args = s.call.args[:1]` or
# `s.call.programs[0].body[0].rhs = "a_ref"` work, and a wrong value is refused at once.
#
# This notebook shows one solution to each (and a second one to some).

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
from IPython.display import Markdown, display

from mpmd_lab import exercises
from mpmd_lab.exercises import check_exercise, outline, start

print(len(exercises.names()), "exercises:", ", ".join(exercises.names()))

# %% [markdown]
# ---
# ## 1. Two blocks, one half (`race`)
#
# *From notebook 01-meshes.*

# %%
display(Markdown(exercises.get("race").describe(title=False)))
s = start("race")
print(outline(s))

# %%
s.call.programs[0].body[1].transforms = [{"op": "at", "index": [{"block": "b", "size": 128}]}]

# %%
check_exercise("race", s)

# %% [markdown]
# ---
# ## 2. Pick the right axis (`ring-2d`)
#
# *From notebook 01-meshes.*

# %%
display(Markdown(exercises.get("ring-2d").describe(title=False)))
s = start("ring-2d")
print(outline(s))

# %%
s.call.programs[0].body[0].transforms[0].device = {"y": {"offset": 1}}

# %%
check_exercise("ring-2d", s)

# %% [markdown]
# ---
# ## 3. Which block am I? (`program-id`)
#
# *From notebook 01-meshes.*

# %%
display(Markdown(exercises.get("program-id").describe(title=False)))
s = start("program-id")
print(outline(s))

# %%
by_block = [{"op": "at", "index": [{"block": "b", "size": 128}]}]
s.call.programs[0].body[0].transforms = by_block
s.call.programs[0].body[1].transforms = by_block

# %%
check_exercise("program-id", s)

# %% [markdown]
# ---
# ## 4. Flatten a Ref (`reshape`)
#
# *From notebook 02-refs-and-transforms.*

# %%
display(Markdown(exercises.get("reshape").describe(title=False)))
s = start("reshape")
print(outline(s))

# %%
s.call.programs[0].body[0].transforms[0].shape = [256]

# %%
check_exercise("reshape", s)

# %% [markdown]
# Another right answer:

# %%
s = start("reshape")
s.call.programs[0].body[0].transforms[0].shape = [-1]

# %%
check_exercise("reshape", s)

# %% [markdown]
# ---
# ## 5. Stay in bounds (`oob-slice`)
#
# *From notebook 02-refs-and-transforms.*

# %%
display(Markdown(exercises.get("oob-slice").describe(title=False)))
s = start("oob-slice")
print(outline(s))

# %%
s.call.programs[0].body[0].transforms[0].index = [{"ds": [128, 128]}]

# %%
check_exercise("oob-slice", s)

# %% [markdown]
# Another right answer:

# %%
s = start("oob-slice")
s.call.programs[0].body[0].transforms[0].index = [[128, 256]]  # a plain slice

# %%
check_exercise("oob-slice", s)

# %% [markdown]
# ---
# ## 6. Pass a Ref once (`dup-ref`)
#
# *From notebook 03-calls-and-aliasing.*

# %%
display(Markdown(exercises.get("dup-ref").describe(title=False)))
s = start("dup-ref")
print(outline(s))

# %%
s.call.args = s.call.args[:1]             # pass acc once...
s.call.programs[0].body[0].rhs = "a_ref"  # ...and read it twice
print(outline(s))

# %%
check_exercise("dup-ref", s)

# %% [markdown]
# Another right answer:

# %%
# acc as a plain array: arrays are values, the same one may be passed twice
s = start("dup-ref")
s.buffers["acc"].as_ref = False

# %%
check_exercise("dup-ref", s)

# %% [markdown]
# ---
# ## 7. Two views are still one Ref (`dup-view`)
#
# *From notebook 03-calls-and-aliasing.*

# %%
display(Markdown(exercises.get("dup-view").describe(title=False)))
s = start("dup-view")
print(outline(s))

# %%
body = s.call.programs[0].body
s.call.args = [{"buffer": "acc", "param": "a_ref"}]
s.call.programs[0].body = [
    {"let": "lo", "ref": "a_ref", "transforms": [{"op": "at", "index": [[0, 128]]}]},
    {"let": "hi", "ref": "a_ref", "transforms": [{"op": "at", "index": [[128, 256]]}]},
    *body,
]
print(outline(s))

# %%
check_exercise("dup-view", s)

# %% [markdown]
# ---
# ## 8. Captured and passed (`closed-ref`)
#
# *From notebook 03-calls-and-aliasing.*

# %%
display(Markdown(exercises.get("closed-ref").describe(title=False)))
s = start("closed-ref")
print(outline(s))

# %%
s.call.captures = []
s.call.programs[0].body[0].rhs = "a_ref"

# %%
check_exercise("closed-ref", s)

# %% [markdown]
# ---
# ## 9. Turn the ring around (`ring-left`)
#
# *From notebook 04-peers-and-multicast.*

# %%
display(Markdown(exercises.get("ring-left").describe(title=False)))
s = start("ring-left")
print(outline(s))

# %%
s.call.programs[0].body[0].transforms[0].device = {"dev": {"offset": -1}}

# %%
check_exercise("ring-left", s)

# %% [markdown]
# Another right answer:

# %%
s = start("ring-left")
s.call.programs[0].body[0].transforms[0].device = {"dev": {"offset": 3}}  # 3 right = 1 left

# %%
check_exercise("ring-left", s)

# %% [markdown]
# ---
# ## 10. A peer view, not a multicast one (`multicast-then-peer`)
#
# *From notebook 04-peers-and-multicast.*

# %%
display(Markdown(exercises.get("multicast-then-peer").describe(title=False)))
s = start("multicast-then-peer")
print(outline(s))

# %%
view = s.call.programs[0].body[0]
view.transforms = [t for t in view.transforms if t.op != "multicast_ref"]
print(outline(s))

# %%
check_exercise("multicast-then-peer", s)

# %% [markdown]
# ---
# ## 11. All-gather with one multicast (`peer-then-multicast`)
#
# *From notebook 04-peers-and-multicast.*

# %%
display(Markdown(exercises.get("peer-then-multicast").describe(title=False)))
s = start("peer-then-multicast")
print(outline(s))

# %%
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

# %%
check_exercise("peer-then-multicast", s)

# %% [markdown]
# Another right answer:

# %%
s = start("peer-then-multicast")
slot = s.call.programs[0].body[0]
slot.transforms = [slot.transforms[0]]  # just this device's slot of out
s.call.programs[0].body = [
    slot,
    {"op": "multimem_store", "src": "x_ref", "dst": "slot", "axes": ["dev"]},
]
print(outline(s))

# %%
check_exercise("peer-then-multicast", s)

# %% [markdown]
# ---
# ## 12. Add the missing wait (`ring-wait`)
#
# *From notebook 08-collectives.*

# %%
display(Markdown(exercises.get("ring-wait").describe(title=False)))
s = start("ring-wait")
print(outline(s))

# %%
loop = s.call.programs[0].body[3]
loop.body = [*loop.body, {"op": "semaphore_wait", "sem": "sent"}]  # after the signal
print(outline(s))

# %%
check_exercise("ring-wait", s)

# %% [markdown]
# ---
# ## 13. Break the deadlock (`ring-deadlock`)
#
# *From notebook 08-collectives.*

# %%
display(Markdown(exercises.get("ring-deadlock").describe(title=False)))
s = start("ring-deadlock")
print(outline(s))

# %%
loop = s.call.programs[0].body[3]
loop.body[3].transforms = [{"op": "at", "index": ["i"]}]  # sent = sems.at[i], like arrived

# %%
check_exercise("ring-deadlock", s)

# %% [markdown]
# Another right answer:

# %%
# or take the fix the check offers (verified before it is offered)
from mpmd_lab import fixes

s = start("ring-deadlock")
s, applied = fixes.apply_all(s)
print([f.description for f in applied])

# %%
check_exercise("ring-deadlock", s)

# %% [markdown]
# ---
# ## 14. Fix the ring's index (`ring-index`)
#
# *From notebook 08-collectives.*

# %%
display(Markdown(exercises.get("ring-index").describe(title=False)))
s = start("ring-index")
print(outline(s))

# %%
for let in s.call.programs[0].body[3].body[:2]:  # chunk and to_right
    let.transforms[0].index = [{"ds": ["(dev + 4 - i) % 4 * 256", 256]}]

# %%
check_exercise("ring-index", s)

# %% [markdown]
# ---
# Done? Build your own: take any gallery scenario (`mpmd-lab gallery`), break it in a way you
# have seen at work, and ask your neighbour to repair it.
