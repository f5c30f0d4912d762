"""The workshop's exercises, as data: for each, a starting scenario, a goal, a hint, one
solution, what else the answer must do, and the outputs it must give (worked out with
numpy from the inputs). The judge is :mod:`mpmd_lab.exercises`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpmd_lab import scenario_json as J
from mpmd_lab.ops import Let, MulticastRef, MultimemStore
from mpmd_lab.scenario import Scenario

Arrays = dict[str, np.ndarray]


# ---------------------------------------------------------------- data model


@dataclass(frozen=True)
class Requirement:
    """Something the answer must do besides giving the right outputs."""

    description: str
    holds: Callable[[Scenario], bool]


@dataclass(frozen=True)
class Exercise:
    """One exercise: where it starts, what it asks, a hint, a solution, the expected outputs."""

    name: str
    notebook: str
    title: str
    goal: str
    hint: str
    start: dict[str, Any]
    solution: dict[str, Any]
    expected: Callable[[Arrays], Arrays]
    requirements: tuple[Requirement, ...] = ()
    backend: str = "interpret"  # "interpret" (real JAX) or "simulate" (cross-device)

    def describe(self, title: bool = True) -> str:
        """The exercise as Markdown: title, goal (no hint: that comes with a wrong answer)."""
        lines = ([f"### {self.title} (`{self.name}`)", ""] if title else []) + [self.goal]
        if self.requirements:
            lines += ["", "Also:"] + [f"- {r.description}" for r in self.requirements]
        return "\n".join(lines)


# ---------------------------------------------------------------- scenario builders


def _by_device(a: np.ndarray, n: int) -> np.ndarray:
    """A global array split per device: shape (n, per-device dim 0, ...)."""
    return a.reshape(n, a.shape[0] // n, *a.shape[1:])


# ---------------------------------------------------------------- requirements


def _grid_blocks(n: int) -> Requirement:
    def holds(s: Scenario) -> bool:
        return any(int(np.prod(list(p.mesh.grid.values()) or [1])) == n for p in s.call.programs)

    return Requirement(f"the kernel runs on a grid of {n} blocks", holds)


def _writes_through_multicast() -> Requirement:
    def holds(s: Scenario) -> bool:
        for p in s.call.programs:
            multicast_views: set[str] = set()
            for st in p.body:
                if isinstance(st, Let):
                    if st.ref in multicast_views or any(
                        isinstance(t, MulticastRef) for t in st.transforms
                    ):
                        multicast_views.add(st.let)
                elif isinstance(st, MultimemStore):
                    return True
                elif getattr(st, "dst", None) in multicast_views:
                    return True
        return False

    return Requirement(
        "out is written on every device by a multicast store "
        "(through a multicast view, or multimem_store)",
        holds,
    )


# ---------------------------------------------------------------- the exercises


def _exercises() -> list[Exercise]:
    ex: list[Exercise] = []

    # --- 03: calls and aliasing -------------------------------------------------------
    acc = {"acc": J.buffer([256], as_ref=True)}
    ex.append(
        Exercise(
            name="dup-ref",
            notebook="03-calls-and-aliasing",
            title="Pass a Ref once",
            goal="The kernel should compute `out = acc + acc`, but the call passes the Ref "
            "`acc` twice and JAX refuses (MPMD_DUP_REF). Repair the call so JAX accepts it "
            "and `out` holds `acc + acc`.",
            hint="A Ref may be passed to a kernel only once. Drop the second argument and "
            "let the body read the one parameter twice.",
            start=J.scenario(
                "ex-dup-ref",
                "acc passed twice: two kernel parameters alias one Ref.",
                buffers=acc,
                args=[J.arg("acc", "a_ref"), J.arg("acc", "b_ref")],
                outputs={"out": J.output([256])},
                body=[J.add("out", "a_ref", "b_ref")],
            ),
            solution=J.scenario(
                "ex-dup-ref",
                "acc passed once; the body reads the one parameter twice.",
                buffers=acc,
                args=[J.arg("acc", "a_ref")],
                outputs={"out": J.output([256])},
                body=[J.add("out", "a_ref", "a_ref")],
            ),
            expected=lambda i: {"out": i["acc"] + i["acc"]},
        )
    )
    ex.append(
        Exercise(
            name="dup-view",
            notebook="03-calls-and-aliasing",
            title="Two views are still one Ref",
            goal="`out` should be the sum of the two halves of `acc` "
            "(`acc[:128] + acc[128:]`). The call passes two disjoint views of `acc`, "
            "`acc.at[0:128]` and `acc.at[128:256]`, as two arguments. Repair it.",
            hint="To JAX two views of one Ref are the same Ref, even when they don't "
            "overlap. Pass `acc` once and make both views inside the kernel with `let`.",
            start=J.scenario(
                "ex-dup-view",
                "Two disjoint views of one Ref passed as two arguments.",
                buffers=acc,
                args=[
                    J.arg("acc", "lo", J.at([0, 128])),
                    J.arg("acc", "hi", J.at([128, 256])),
                ],
                outputs={"out": J.output([128])},
                body=[J.add("out", "lo", "hi")],
            ),
            solution=J.scenario(
                "ex-dup-view",
                "acc passed once; the halves are views made inside the kernel.",
                buffers=acc,
                args=[J.arg("acc", "a_ref")],
                outputs={"out": J.output([128])},
                body=[
                    J.let("lo", "a_ref", J.at([0, 128])),
                    J.let("hi", "a_ref", J.at([128, 256])),
                    J.add("out", "lo", "hi"),
                ],
            ),
            expected=lambda i: {"out": i["acc"][:128] + i["acc"][128:]},
        )
    )

    ex.append(
        Exercise(
            name="closed-ref",
            notebook="03-calls-and-aliasing",
            title="Captured and passed",
            goal="`out` should be `acc + acc`. The kernel reads `acc` through its "
            "parameter `a_ref` *and* through `c`, the same Ref captured from the "
            "enclosing scope. JAX refuses (MPMD_CLOSED_REF_ALIAS). Repair it.",
            hint="A captured Ref and a passed-in Ref are two names for one buffer, like a "
            "Ref passed twice. Keep one name: drop the capture and read `a_ref` twice.",
            start=J.scenario(
                "ex-closed-ref",
                "acc captured by the kernel and also passed in.",
                buffers=acc,
                args=[J.arg("acc", "a_ref")],
                captures={"c": "acc"},
                outputs={"out": J.output([256])},
                body=[J.add("out", "a_ref", "c")],
            ),
            solution=J.scenario(
                "ex-closed-ref",
                "acc passed once, no capture.",
                buffers=acc,
                args=[J.arg("acc", "a_ref")],
                outputs={"out": J.output([256])},
                body=[J.add("out", "a_ref", "a_ref")],
            ),
            expected=lambda i: {"out": i["acc"] + i["acc"]},
        )
    )

    # --- 04: peers and multicast --------------------------------------------------------
    ring = {"x": J.buffer([256])}
    ex.append(
        Exercise(
            name="ring-left",
            notebook="04-peers-and-multicast",
            title="Turn the ring around",
            goal="On a ring of 4 devices this kernel writes each device's `x` into `out` on "
            "its right-hand neighbour. Make it go the other way: device d's `out` must hold "
            "device d+1's `x` (device 3's holds device 0's).",
            hint="The peer view's device is an offset from this device's own index along "
            "`dev`, wrapped around the ring. Which neighbour should device d write to?",
            start=J.scenario(
                "ex-ring-left",
                "A ring shift to the right.",
                device_mesh={"dev": 4},
                buffers=ring,
                args=[J.arg("x", "x_ref")],
                outputs={"out": J.output([256])},
                body=[J.let("p", "out", J.peer(1)), J.copy("x_ref", "p")],
            ),
            solution=J.scenario(
                "ex-ring-left",
                "A ring shift to the left.",
                device_mesh={"dev": 4},
                buffers=ring,
                args=[J.arg("x", "x_ref")],
                outputs={"out": J.output([256])},
                body=[J.let("p", "out", J.peer(-1)), J.copy("x_ref", "p")],
            ),
            expected=lambda i: {"out": np.roll(_by_device(i["x"], 4), -1, axis=0).ravel()},
            backend="simulate",
        )
    )
    pair = {"x": J.buffer([128])}
    ex.append(
        Exercise(
            name="multicast-then-peer",
            notebook="04-peers-and-multicast",
            title="A peer view, not a multicast one",
            goal="Each of 2 devices should write its `x` into `out` on the other device. The "
            "view `nb` stacks a peer step on top of a multicast step, which JAX refuses "
            "(REF_MULTICAST_TO_PEER). Repair the view.",
            hint="A multicast view already means every device; a peer view means one. This "
            "kernel talks to one neighbour: the multicast step has no business here.",
            start=J.scenario(
                "ex-multicast-then-peer",
                "A peer view built on a multicast view.",
                device_mesh={"dev": 2},
                buffers=pair,
                args=[J.arg("x", "x_ref")],
                outputs={"out": J.output([128])},
                body=[J.let("nb", "out", J.multicast(), J.peer(1)), J.copy("x_ref", "nb")],
            ),
            solution=J.scenario(
                "ex-multicast-then-peer",
                "A plain peer view.",
                device_mesh={"dev": 2},
                buffers=pair,
                args=[J.arg("x", "x_ref")],
                outputs={"out": J.output([128])},
                body=[J.let("nb", "out", J.peer(1)), J.copy("x_ref", "nb")],
            ),
            expected=lambda i: {"out": np.roll(_by_device(i["x"], 2), 1, axis=0).ravel()},
            backend="simulate",
        )
    )
    mine = {"block": "dev", "size": 128}
    ex.append(
        Exercise(
            name="peer-then-multicast",
            notebook="04-peers-and-multicast",
            title="All-gather with one multicast",
            goal="Each of 2 devices should write its `x` (128 elements) into its own slot of "
            "`out` (slot d is elements d*128 .. d*128+127) on *every* device at once, so "
            "that every device ends with all the `x`s: an all-gather. The view `slot` "
            "stacks a multicast step on a peer step, which JAX refuses "
            "(REF_PEER_TO_MULTICAST). Make a multicast store that JAX accepts, including "
            "when it lowers the kernel for the GPU.",
            hint="Build the multicast view from `out`'s own slot, with no peer step. A "
            "multicast view cannot be written by a plain copy: stage `x` in SMEM scratch "
            "and `tma_store` it (scratch needs `entry: plgpu.kernel`), or use "
            "`multimem_store` with `axes: ['dev']`.",
            start=J.scenario(
                "ex-peer-then-multicast",
                "A multicast view built on a peer view.",
                device_mesh={"dev": 2},
                buffers=pair,
                args=[J.arg("x", "x_ref")],
                outputs={"out": J.output([256])},
                body=[
                    J.let("slot", "out", J.at(mine), J.peer(1), J.multicast()),
                    J.copy("x_ref", "slot"),
                ],
            ),
            solution=J.scenario(
                "ex-peer-then-multicast",
                "x staged in SMEM and TMA-stored through a multicast view of its slot.",
                device_mesh={"dev": 2},
                entry="plgpu.kernel",
                buffers=pair,
                args=[J.arg("x", "x_ref")],
                outputs={"out": J.output([256])},
                scratch={"smem": {"shape": [128], "dtype": "float32", "memory_space": "SMEM"}},
                body=[
                    J.copy("x_ref", "smem"),
                    J.let("slot", "out", J.at(mine), J.multicast()),
                    {"op": "tma_store", "src": "smem", "dst": "slot"},
                ],
            ),
            expected=lambda i: {"out": np.concatenate([i["x"], i["x"]])},
            requirements=(_writes_through_multicast(),),
            backend="simulate",
        )
    )

    # --- 01: meshes (blocks of the kernel mesh) -----------------------------------------
    x256 = {"x": J.buffer([256])}
    half = {"block": "b", "size": 128}
    ex.append(
        Exercise(
            name="race",
            notebook="01-meshes",
            title="Two blocks, one half",
            goal="Two blocks should each copy their own half of `x` to `out`, so that "
            "`out == x`. Both blocks write the *first* half of `out` instead: a race. "
            "Repair it, keeping two blocks.",
            hint="The source view already picks this block's half with the block index; "
            "the destination view should pick the same half.",
            start=J.scenario(
                "ex-race",
                "Two blocks both write out[0:128].",
                grid={"b": 2},
                buffers=x256,
                args=[J.arg("x", "x_ref")],
                outputs={"out": J.output([256])},
                body=[
                    J.let("src", "x_ref", J.at(half)),
                    J.let("dst", "out", J.at([0, 128])),
                    J.copy("src", "dst"),
                ],
                detect_races=True,
            ),
            solution=J.scenario(
                "ex-race",
                "Each block writes its own half.",
                grid={"b": 2},
                buffers=x256,
                args=[J.arg("x", "x_ref")],
                outputs={"out": J.output([256])},
                body=[
                    J.let("src", "x_ref", J.at(half)),
                    J.let("dst", "out", J.at(half)),
                    J.copy("src", "dst"),
                ],
                detect_races=True,
            ),
            expected=lambda i: {"out": i["x"]},
            requirements=(_grid_blocks(2),),
        )
    )
    grid2 = {"x": J.buffer([128])}
    ex.append(
        Exercise(
            name="ring-2d",
            notebook="01-meshes",
            title="Pick the right axis",
            goal="The device mesh is 2 x 2 with axes `x` and `y`. Each device should "
            "send its `x` to its neighbour along `y`: device (i, j)'s `out` must hold "
            "device (i, j-1)'s `x`. The kernel shifts along the wrong axis.",
            hint="A peer view names a device by device-mesh axes: `{axis: {offset: k}}` "
            "moves k steps along that axis only and keeps the others.",
            start=J.scenario(
                "ex-ring-2d",
                "A shift along x.",
                device_mesh={"x": 2, "y": 2},
                buffers=grid2,
                args=[J.arg("x", "x_ref")],
                outputs={"out": J.output([128])},
                body=[J.let("p", "out", J.peer(1, "x")), J.copy("x_ref", "p")],
            ),
            solution=J.scenario(
                "ex-ring-2d",
                "A shift along y.",
                device_mesh={"x": 2, "y": 2},
                buffers=grid2,
                args=[J.arg("x", "x_ref")],
                outputs={"out": J.output([128])},
                body=[J.let("p", "out", J.peer(1, "y")), J.copy("x_ref", "p")],
            ),
            expected=lambda i: {"out": np.roll(i["x"].reshape(2, 2, -1), 1, axis=1).ravel()},
            backend="simulate",
        )
    )
    pid = {"pid": 0, "size": 128}
    ex.append(
        Exercise(
            name="program-id",
            notebook="01-meshes",
            title="Which block am I?",
            goal="Two blocks copy their halves of `x` to `out`, choosing the half with "
            "`pl.program_id(0)`. Under the GPU interpreter half of `out` never arrives. Make "
            "`out == x` when the GPU interpreter runs it, keeping two blocks.",
            hint="Under `InterpretGPUParams` `pl.program_id` is always 0. A Mosaic GPU "
            "kernel names its blocks by mesh axis: index with the grid axis `b` "
            "(`lax.axis_index`), i.e. `{'block': 'b', 'size': 128}`.",
            start=J.scenario(
                "ex-program-id",
                "Halves chosen by pl.program_id.",
                grid={"b": 2},
                buffers=x256,
                args=[J.arg("x", "x_ref")],
                outputs={"out": J.output([256])},
                body=[
                    J.let("src", "x_ref", J.at(pid)),
                    J.let("dst", "out", J.at(pid)),
                    J.copy("src", "dst"),
                ],
            ),
            solution=J.scenario(
                "ex-program-id",
                "Halves chosen by the grid axis index.",
                grid={"b": 2},
                buffers=x256,
                args=[J.arg("x", "x_ref")],
                outputs={"out": J.output([256])},
                body=[
                    J.let("src", "x_ref", J.at(half)),
                    J.let("dst", "out", J.at(half)),
                    J.copy("src", "dst"),
                ],
            ),
            expected=lambda i: {"out": i["x"]},
            requirements=(_grid_blocks(2),),
        )
    )

    # --- 02: refs and transform stacks ---------------------------------------------------
    ex.append(
        Exercise(
            name="reshape",
            notebook="02-refs-and-transforms",
            title="Flatten a Ref",
            goal="Copy the (16, 16) input `x` into the flat 256-element `out` through a "
            "reshape view of `x_ref`. The reshape asks for the wrong size (RESHAPE_SIZE).",
            hint="A reshape keeps the number of elements: 16 x 16 is 256. `-1` lets JAX "
            "work one dimension out.",
            start=J.scenario(
                "ex-reshape",
                "A reshape view of the wrong size.",
                buffers={"x": J.buffer([16, 16])},
                args=[J.arg("x", "x_ref")],
                outputs={"out": J.output([256])},
                body=[
                    J.let("flat", "x_ref", {"op": "reshape", "shape": [128]}),
                    J.copy("flat", "out"),
                ],
                interpret="hlo",
            ),
            solution=J.scenario(
                "ex-reshape",
                "A reshape view of 256 elements.",
                buffers={"x": J.buffer([16, 16])},
                args=[J.arg("x", "x_ref")],
                outputs={"out": J.output([256])},
                body=[
                    J.let("flat", "x_ref", {"op": "reshape", "shape": [256]}),
                    J.copy("flat", "out"),
                ],
                interpret="hlo",
            ),
            expected=lambda i: {"out": i["x"].reshape(-1)},
        )
    )
    ex.append(
        Exercise(
            name="oob-slice",
            notebook="02-refs-and-transforms",
            title="Stay in bounds",
            goal="`out` (128 elements) should hold the second half of `x` (256 elements). "
            "The view `hi` is `x_ref.at[pl.ds(192, 128)]`, which runs past the end "
            "(AT_OOB_SLICE). Repair the view.",
            hint="`pl.ds(start, size)` covers start .. start+size-1. The second half of 256 "
            "elements starts at 128.",
            start=J.scenario(
                "ex-oob-slice",
                "A pl.ds view past the end.",
                buffers=x256,
                args=[J.arg("x", "x_ref")],
                outputs={"out": J.output([128])},
                body=[J.let("hi", "x_ref", J.at({"ds": [192, 128]})), J.copy("hi", "out")],
            ),
            solution=J.scenario(
                "ex-oob-slice",
                "The second half, in bounds.",
                buffers=x256,
                args=[J.arg("x", "x_ref")],
                outputs={"out": J.output([128])},
                body=[J.let("hi", "x_ref", J.at({"ds": [128, 128]})), J.copy("hi", "out")],
            ),
            expected=lambda i: {"out": i["x"][128:]},
        )
    )
    ex += _collective_exercises()
    return ex


# ---------------------------------------------------------------- 08: collectives


def _ring(name: str, description: str, edit: Callable[[list[dict[str, Any]]], None]) -> dict:
    """The gallery's ring all-gather (or one of its broken forms), renamed, with ``edit``
    applied to its loop body."""
    import copy

    from mpmd_lab import gallery

    data = copy.deepcopy(gallery.load(name).to_dict())
    data["name"], data["description"] = f"ex-{name}", description
    edit(data["call"]["programs"][0]["body"][3]["body"])
    return data


def _keep(body: list[dict[str, Any]]) -> None:
    del body[:0]


def _add_wait(body: list[dict[str, Any]]) -> None:
    body.insert(5, {"op": "semaphore_wait", "sem": "sent"})


def _signal_slot_i(body: list[dict[str, Any]]) -> None:
    body[3]["transforms"] = [J.at("i")]


def _chunk_from(expr: str) -> Callable[[list[dict[str, Any]]], None]:
    def edit(body: list[dict[str, Any]]) -> None:
        for let in body[:2]:
            let["transforms"][0]["index"][0]["ds"][0] = f"{expr} * 256"

    return edit


def _gathered(i: Arrays) -> Arrays:
    """The all-gather: every device's out is the concatenation of all the x shards."""
    return {"out": np.tile(i["x"], 4)}


def uses_semaphores() -> Requirement:
    def holds(s: Scenario) -> bool:
        ops = {getattr(st, "op", None) for st in walk_statements(s.call.programs[0].body)}
        return {"semaphore_signal", "semaphore_wait", "loop"} <= ops

    return Requirement("the ring keeps its loop, its signals and its waits", holds)


def walk_statements(body: list[Any]) -> list[Any]:
    out = []
    for st in body:
        out.append(st)
        out += walk_statements(getattr(st, "body", None) or [])
    return out


def _collective_exercises() -> list[Exercise]:
    ring = "ring-all-gather"
    return [
        Exercise(
            name="ring-wait",
            notebook="08-collectives",
            title="Add the missing wait",
            goal="This ring all-gather (4 devices, 3 steps) signals its right neighbour "
            "after each remote copy, but never waits for its own semaphore: at step i a "
            "device forwards a chunk that may not have landed yet (RACE_DETECTED). Make "
            "every device wait until its left neighbour's chunk has arrived before the next "
            "step reads it.",
            hint="A signal orders the writes before it; only a wait orders the reads after "
            "it. Each step signals `sent` on the right neighbour: wait on `sent` (your own "
            "copy of it) right after signalling.",
            start=_ring("ring-all-gather-no-wait", "A ring without its wait.", _keep),
            solution=_ring("ring-all-gather-no-wait", "The ring, with its wait.", _add_wait),
            expected=_gathered,
            requirements=(uses_semaphores(),),
            backend="simulate",
        ),
        Exercise(
            name="ring-deadlock",
            notebook="08-collectives",
            title="Break the deadlock",
            goal="This ring signals `sems[0]` on its right neighbour at every step but waits "
            "on `sems[i]`: at step 1 every device waits for a signal that never comes "
            "(DEADLOCK_SEMAPHORE), and on a GPU the kernel hangs. Make each step's signal "
            "reach the semaphore the neighbour waits on.",
            hint="The signal and the wait of one step must name the same slot of `sems`: "
            "the view `sent` should be `sems.at[i]`, like `arrived`.",
            start=_ring("ring-all-gather-deadlock", "A ring that deadlocks.", _keep),
            solution=_ring("ring-all-gather-deadlock", "The ring, unblocked.", _signal_slot_i),
            expected=_gathered,
            requirements=(uses_semaphores(),),
            backend="simulate",
        ),
        Exercise(
            name="ring-index",
            notebook="08-collectives",
            title="Fix the ring's index",
            goal="In this ring all-gather, step i forwards chunk `(dev + i) % 4`, a chunk the "
            "device does not have yet, and overwrites a chunk its neighbour already holds "
            "(RACE_DETECTED). Fix the chunk index so that at step i each device forwards "
            "the chunk it received at step i - 1.",
            hint="At step 0 a device forwards its own chunk (dev); at step 1 the one that "
            "came from its left neighbour (dev - 1); at step i the one that started at "
            "dev - i. Keep the index non-negative: add the ring size before the `%`.",
            start=_ring(ring, "A ring with the wrong chunk.", _chunk_from("(dev + i) % 4")),
            solution=_ring(ring, "The ring all-gather.", _chunk_from("(dev + 4 - i) % 4")),
            expected=_gathered,
            requirements=(uses_semaphores(),),
            backend="simulate",
        ),
    ]


EXERCISES: dict[str, Exercise] = {e.name: e for e in _exercises()}
