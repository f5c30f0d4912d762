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
# # 06 · Exercises
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
# Stuck? The solutions are in [06-exercises-solutions](06-exercises-solutions.ipynb).

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
check_exercise("race", s)  # the starting point: not yet

# %%
# Your turn: edit s here, then run the next cell.
s = start("race")

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
check_exercise("ring-2d", s)  # the starting point: not yet

# %%
# Your turn: edit s here, then run the next cell.
s = start("ring-2d")

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
check_exercise("program-id", s)  # the starting point: not yet

# %%
# Your turn: edit s here, then run the next cell.
s = start("program-id")

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
check_exercise("reshape", s)  # the starting point: not yet

# %%
# Your turn: edit s here, then run the next cell.
s = start("reshape")

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
check_exercise("oob-slice", s)  # the starting point: not yet

# %%
# Your turn: edit s here, then run the next cell.
s = start("oob-slice")

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
check_exercise("dup-ref", s)  # the starting point: not yet

# %%
# Your turn: edit s here, then run the next cell.
s = start("dup-ref")

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
check_exercise("dup-view", s)  # the starting point: not yet

# %%
# Your turn: edit s here, then run the next cell.
s = start("dup-view")

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
check_exercise("closed-ref", s)  # the starting point: not yet

# %%
# Your turn: edit s here, then run the next cell.
s = start("closed-ref")

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
check_exercise("ring-left", s)  # the starting point: not yet

# %%
# Your turn: edit s here, then run the next cell.
s = start("ring-left")

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
check_exercise("multicast-then-peer", s)  # the starting point: not yet

# %%
# Your turn: edit s here, then run the next cell.
s = start("multicast-then-peer")

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
check_exercise("peer-then-multicast", s)  # the starting point: not yet

# %%
# Your turn: edit s here, then run the next cell.
s = start("peer-then-multicast")

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
check_exercise("ring-wait", s)  # the starting point: not yet

# %%
# Your turn: edit s here, then run the next cell.
s = start("ring-wait")

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
check_exercise("ring-deadlock", s)  # the starting point: not yet

# %%
# Your turn: edit s here, then run the next cell.
s = start("ring-deadlock")

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
check_exercise("ring-index", s)  # the starting point: not yet

# %%
# Your turn: edit s here, then run the next cell.
s = start("ring-index")

# %%
check_exercise("ring-index", s)

# %% [markdown]
# ---
# Done? Build your own: take any gallery scenario (`mpmd-lab gallery`), break it in a way you
# have seen at work, and ask your neighbour to repair it.
