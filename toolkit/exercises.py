"""Workshop exercises: scenarios to repair or build, judged by the real toolkit.

Each exercise is data: a starting scenario, a goal, a hint, one solution, and what
the outputs must be (worked out with numpy from the inputs). ``check_exercise``
judges *any* scenario the way JAX would: it must load, pass the static check, meet
the exercise's requirements (e.g. "two blocks"), run (JAX's CPU interpreter, or the
simulator for cross-device traffic no CPU interpreter runs), and give the expected
outputs. Nothing compares JSON text, so every correct answer passes.

    >>> from mpmd_lab import exercises
    >>> s = exercises.start("dup-ref")
    >>> exercises.check_exercise("dup-ref", s).right
    False
"""

from __future__ import annotations

import copy
import html
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mpmd_lab.callsupport import host_array
from mpmd_lab.ops import Let, MulticastRef, MultimemStore
from mpmd_lab.scenario import Scenario, ScenarioError, load_scenario

Arrays = dict[str, np.ndarray]

#: Run errors that are limits of a CPU interpreter, not mistakes in the kernel:
#: the simulator judges those calls instead.
INTERPRETER_LIMITS = frozenset(
    {
        "GPU_INTERP_UNSUPPORTED_TRANSFORM",
        "GPU_INTERP_MULTICAST",
        "GPU_INTERP_NOT_A_REF",
        "HLO_INTERP_NO_DISCHARGE",
        "UNBOUND_AXIS",
    }
)


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


@dataclass(frozen=True, repr=False)
class Verdict:
    """The judgement of an answer: right or wrong, why, and a hint when wrong."""

    right: bool
    message: str
    hint: str = ""
    details: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.right

    def __str__(self) -> str:
        head = ("RIGHT: " if self.right else "WRONG: ") + self.message
        extra = [f"  {d}" for d in self.details]
        if self.hint and not self.right:
            extra.append(f"  hint: {self.hint}")
        return "\n".join([head, *extra])

    __repr__ = __str__

    def _repr_html_(self) -> str:
        colour, mark = ("#1b7f3b", "✔ right") if self.right else ("#b00020", "✘ not yet")
        parts = [
            f'<div style="border-left:4px solid {colour};padding:4px 10px">',
            f'<b style="color:{colour}">{mark}</b>: {html.escape(self.message)}',
        ]
        parts += [f"<br><code>{html.escape(d)}</code>" for d in self.details]
        if self.hint and not self.right:
            parts.append(f"<br><i>Hint:</i> {html.escape(self.hint)}")
        return "".join(parts) + "</div>"


# ---------------------------------------------------------------- scenario builders


def _scenario(
    name: str,
    description: str,
    *,
    buffers: dict[str, dict[str, Any]],
    args: list[dict[str, Any]],
    outputs: dict[str, dict[str, Any]],
    body: list[dict[str, Any]],
    grid: dict[str, int] | None = None,
    device_mesh: dict[str, int] | None = None,
    entry: str = "pl.kernel",
    scratch: dict[str, dict[str, Any]] | None = None,
    captures: dict[str, str] | None = None,
    interpret: str = "gpu",
    detect_races: bool = False,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schema": "mpmd-lab/scenario@1",
        "name": name,
        "description": description,
        "buffers": buffers,
        "call": {
            "entry": entry,
            "args": args,
            "outputs": outputs,
            "programs": [
                {
                    "mesh": {"grid": grid or {"b": 1}, "cluster": {}, "threads": None},
                    "body": body,
                }
            ],
        },
        "run": {"interpret": interpret, "detect_races": detect_races},
    }
    if device_mesh:
        data["device_mesh"] = device_mesh
    if scratch:
        data["call"]["scratch"] = scratch
    if captures:
        data["call"]["captures"] = [{"name": n, "buffer": b} for n, b in captures.items()]
    return data


def _buf(shape: list[int], dtype: str = "float32", init: Any = "iota", **kw: Any) -> dict:
    return {"shape": shape, "dtype": dtype, "init": init, **kw}


def _out(shape: list[int], dtype: str = "float32") -> dict[str, Any]:
    return {"shape": shape, "dtype": dtype}


def _arg(buffer: str, param: str, *transforms: dict[str, Any]) -> dict[str, Any]:
    return {"buffer": buffer, "param": param, "transforms": list(transforms)}


def _let(name: str, ref: str, *transforms: dict[str, Any]) -> dict[str, Any]:
    return {"let": name, "ref": ref, "transforms": list(transforms)}


def _copy(src: str, dst: str) -> dict[str, Any]:
    return {"op": "copy", "src": src, "dst": dst}


def _add(dst: str, lhs: str, rhs: str) -> dict[str, Any]:
    return {"op": "add", "dst": dst, "lhs": lhs, "rhs": rhs}


def _at(*index: Any) -> dict[str, Any]:
    return {"op": "at", "index": list(index)}


def _peer(offset: int, axis: str = "dev") -> dict[str, Any]:
    return {"op": "remote_ref", "device": {axis: {"offset": offset}}}


def _multicast(axes: str | list[str] = "dev") -> dict[str, Any]:
    return {"op": "multicast_ref", "axes": axes}


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
    acc = {"acc": _buf([256], as_ref=True)}
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
            start=_scenario(
                "ex-dup-ref",
                "acc passed twice: two kernel parameters alias one Ref.",
                buffers=acc,
                args=[_arg("acc", "a_ref"), _arg("acc", "b_ref")],
                outputs={"out": _out([256])},
                body=[_add("out", "a_ref", "b_ref")],
            ),
            solution=_scenario(
                "ex-dup-ref",
                "acc passed once; the body reads the one parameter twice.",
                buffers=acc,
                args=[_arg("acc", "a_ref")],
                outputs={"out": _out([256])},
                body=[_add("out", "a_ref", "a_ref")],
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
            start=_scenario(
                "ex-dup-view",
                "Two disjoint views of one Ref passed as two arguments.",
                buffers=acc,
                args=[
                    _arg("acc", "lo", _at([0, 128])),
                    _arg("acc", "hi", _at([128, 256])),
                ],
                outputs={"out": _out([128])},
                body=[_add("out", "lo", "hi")],
            ),
            solution=_scenario(
                "ex-dup-view",
                "acc passed once; the halves are views made inside the kernel.",
                buffers=acc,
                args=[_arg("acc", "a_ref")],
                outputs={"out": _out([128])},
                body=[
                    _let("lo", "a_ref", _at([0, 128])),
                    _let("hi", "a_ref", _at([128, 256])),
                    _add("out", "lo", "hi"),
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
            start=_scenario(
                "ex-closed-ref",
                "acc captured by the kernel and also passed in.",
                buffers=acc,
                args=[_arg("acc", "a_ref")],
                captures={"c": "acc"},
                outputs={"out": _out([256])},
                body=[_add("out", "a_ref", "c")],
            ),
            solution=_scenario(
                "ex-closed-ref",
                "acc passed once, no capture.",
                buffers=acc,
                args=[_arg("acc", "a_ref")],
                outputs={"out": _out([256])},
                body=[_add("out", "a_ref", "a_ref")],
            ),
            expected=lambda i: {"out": i["acc"] + i["acc"]},
        )
    )

    # --- 04: peers and multicast --------------------------------------------------------
    ring = {"x": _buf([256])}
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
            start=_scenario(
                "ex-ring-left",
                "A ring shift to the right.",
                device_mesh={"dev": 4},
                buffers=ring,
                args=[_arg("x", "x_ref")],
                outputs={"out": _out([256])},
                body=[_let("p", "out", _peer(1)), _copy("x_ref", "p")],
            ),
            solution=_scenario(
                "ex-ring-left",
                "A ring shift to the left.",
                device_mesh={"dev": 4},
                buffers=ring,
                args=[_arg("x", "x_ref")],
                outputs={"out": _out([256])},
                body=[_let("p", "out", _peer(-1)), _copy("x_ref", "p")],
            ),
            expected=lambda i: {"out": np.roll(_by_device(i["x"], 4), -1, axis=0).ravel()},
            backend="simulate",
        )
    )
    pair = {"x": _buf([128])}
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
            start=_scenario(
                "ex-multicast-then-peer",
                "A peer view built on a multicast view.",
                device_mesh={"dev": 2},
                buffers=pair,
                args=[_arg("x", "x_ref")],
                outputs={"out": _out([128])},
                body=[_let("nb", "out", _multicast(), _peer(1)), _copy("x_ref", "nb")],
            ),
            solution=_scenario(
                "ex-multicast-then-peer",
                "A plain peer view.",
                device_mesh={"dev": 2},
                buffers=pair,
                args=[_arg("x", "x_ref")],
                outputs={"out": _out([128])},
                body=[_let("nb", "out", _peer(1)), _copy("x_ref", "nb")],
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
            start=_scenario(
                "ex-peer-then-multicast",
                "A multicast view built on a peer view.",
                device_mesh={"dev": 2},
                buffers=pair,
                args=[_arg("x", "x_ref")],
                outputs={"out": _out([256])},
                body=[
                    _let("slot", "out", _at(mine), _peer(1), _multicast()),
                    _copy("x_ref", "slot"),
                ],
            ),
            solution=_scenario(
                "ex-peer-then-multicast",
                "x staged in SMEM and TMA-stored through a multicast view of its slot.",
                device_mesh={"dev": 2},
                entry="plgpu.kernel",
                buffers=pair,
                args=[_arg("x", "x_ref")],
                outputs={"out": _out([256])},
                scratch={"smem": {"shape": [128], "dtype": "float32", "memory_space": "SMEM"}},
                body=[
                    _copy("x_ref", "smem"),
                    _let("slot", "out", _at(mine), _multicast()),
                    {"op": "tma_store", "src": "smem", "dst": "slot"},
                ],
            ),
            expected=lambda i: {"out": np.concatenate([i["x"], i["x"]])},
            requirements=(_writes_through_multicast(),),
            backend="simulate",
        )
    )

    # --- 01: meshes (blocks of the kernel mesh) -----------------------------------------
    x256 = {"x": _buf([256])}
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
            start=_scenario(
                "ex-race",
                "Two blocks both write out[0:128].",
                grid={"b": 2},
                buffers=x256,
                args=[_arg("x", "x_ref")],
                outputs={"out": _out([256])},
                body=[
                    _let("src", "x_ref", _at(half)),
                    _let("dst", "out", _at([0, 128])),
                    _copy("src", "dst"),
                ],
                detect_races=True,
            ),
            solution=_scenario(
                "ex-race",
                "Each block writes its own half.",
                grid={"b": 2},
                buffers=x256,
                args=[_arg("x", "x_ref")],
                outputs={"out": _out([256])},
                body=[
                    _let("src", "x_ref", _at(half)),
                    _let("dst", "out", _at(half)),
                    _copy("src", "dst"),
                ],
                detect_races=True,
            ),
            expected=lambda i: {"out": i["x"]},
            requirements=(_grid_blocks(2),),
        )
    )
    grid2 = {"x": _buf([128])}
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
            start=_scenario(
                "ex-ring-2d",
                "A shift along x.",
                device_mesh={"x": 2, "y": 2},
                buffers=grid2,
                args=[_arg("x", "x_ref")],
                outputs={"out": _out([128])},
                body=[_let("p", "out", _peer(1, "x")), _copy("x_ref", "p")],
            ),
            solution=_scenario(
                "ex-ring-2d",
                "A shift along y.",
                device_mesh={"x": 2, "y": 2},
                buffers=grid2,
                args=[_arg("x", "x_ref")],
                outputs={"out": _out([128])},
                body=[_let("p", "out", _peer(1, "y")), _copy("x_ref", "p")],
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
            start=_scenario(
                "ex-program-id",
                "Halves chosen by pl.program_id.",
                grid={"b": 2},
                buffers=x256,
                args=[_arg("x", "x_ref")],
                outputs={"out": _out([256])},
                body=[
                    _let("src", "x_ref", _at(pid)),
                    _let("dst", "out", _at(pid)),
                    _copy("src", "dst"),
                ],
            ),
            solution=_scenario(
                "ex-program-id",
                "Halves chosen by the grid axis index.",
                grid={"b": 2},
                buffers=x256,
                args=[_arg("x", "x_ref")],
                outputs={"out": _out([256])},
                body=[
                    _let("src", "x_ref", _at(half)),
                    _let("dst", "out", _at(half)),
                    _copy("src", "dst"),
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
            start=_scenario(
                "ex-reshape",
                "A reshape view of the wrong size.",
                buffers={"x": _buf([16, 16])},
                args=[_arg("x", "x_ref")],
                outputs={"out": _out([256])},
                body=[
                    _let("flat", "x_ref", {"op": "reshape", "shape": [128]}),
                    _copy("flat", "out"),
                ],
                interpret="hlo",
            ),
            solution=_scenario(
                "ex-reshape",
                "A reshape view of 256 elements.",
                buffers={"x": _buf([16, 16])},
                args=[_arg("x", "x_ref")],
                outputs={"out": _out([256])},
                body=[
                    _let("flat", "x_ref", {"op": "reshape", "shape": [256]}),
                    _copy("flat", "out"),
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
            start=_scenario(
                "ex-oob-slice",
                "A pl.ds view past the end.",
                buffers=x256,
                args=[_arg("x", "x_ref")],
                outputs={"out": _out([128])},
                body=[_let("hi", "x_ref", _at({"ds": [192, 128]})), _copy("hi", "out")],
            ),
            solution=_scenario(
                "ex-oob-slice",
                "The second half, in bounds.",
                buffers=x256,
                args=[_arg("x", "x_ref")],
                outputs={"out": _out([128])},
                body=[_let("hi", "x_ref", _at({"ds": [128, 128]})), _copy("hi", "out")],
            ),
            expected=lambda i: {"out": i["x"][128:]},
        )
    )
    return ex


EXERCISES: dict[str, Exercise] = {e.name: e for e in _exercises()}


def names() -> list[str]:
    """Every exercise's name, in curriculum order (by the notebook that teaches it)."""
    return sorted(EXERCISES, key=lambda n: EXERCISES[n].notebook[:2])


def get(name: str) -> Exercise:
    """The exercise called ``name``."""
    try:
        return EXERCISES[name]
    except KeyError:
        raise KeyError(f"no exercise {name!r}; try one of: {', '.join(EXERCISES)}") from None


def start(name: str) -> Scenario:
    """A fresh copy of the exercise's starting scenario (edit it freely)."""
    return load_scenario(copy.deepcopy(get(name).start))


def solution(name: str) -> Scenario:
    """A fresh copy of one correct answer (others pass too)."""
    return load_scenario(copy.deepcopy(get(name).solution))


def outline(scenario: Any) -> str:
    """A scenario in a few lines, with the field paths a learner edits.

    ``call.programs[0].body[1]: copy x_ref -> p`` and the like: enough to see the
    whole call at once and to know where to change it.
    """
    from mpmd_lab.graph import transform_label

    s = load_scenario(scenario)
    c = s.call
    lines = [f"{s.name}: {s.description}"]
    if s.device_mesh:
        lines.append(f"device_mesh: {dict(s.device_mesh)}  ({s.num_devices} devices)")
    for name, b in s.buffers.items():
        kind = "Ref" if b.as_ref else "array"
        lines.append(f"buffers.{name}: {b.dtype}{list(b.shape)} {kind}, init={b.init!r}")
    lines.append(f"call.entry: {c.entry}")
    for i, a in enumerate(c.args):
        src = getattr(a, "buffer", None) or f"tuple{list(getattr(a, 'tuple', []))}"
        views = "".join("." + transform_label(t) for t in a.transforms)
        lines.append(f"call.args[{i}]: {a.param} <- {src}{views}")
    for cap in c.captures:
        lines.append(f"call.captures: {cap.name} <- {cap.buffer} (closed over)")
    for name, o in c.outputs.items():
        lines.append(f"call.outputs.{name}: {o.dtype}{list(o.shape)}")
    for name, sc in c.scratch.items():
        lines.append(f"call.scratch.{name}: {sc.dtype}{list(sc.shape)} {sc.memory_space}")
    for pi, p in enumerate(c.programs):
        mesh = {"grid": dict(p.mesh.grid), "cluster": dict(p.mesh.cluster)}
        lines.append(f"call.programs[{pi}].mesh: {mesh}")
        for si, st in enumerate(p.body):
            where = f"call.programs[{pi}].body[{si}]"
            if isinstance(st, Let):
                views = "".join("." + transform_label(t) for t in st.transforms)
                lines.append(f"{where}: let {st.let} = {st.ref}{views}")
            else:
                fields = {k: v for k, v in st.model_dump().items() if k != "op"}
                args = ", ".join(f"{k}={v}" for k, v in fields.items())
                lines.append(f"{where}: {st.op}({args})")
    return "\n".join(lines)


# ---------------------------------------------------------------- judging


def inputs_of(scenario: Scenario) -> Arrays:
    """Every buffer's global host value, as the real call receives it."""
    return {
        name: host_array(b.init, b.shape, b.dtype, b.seed, scenario.num_devices)
        for name, b in scenario.buffers.items()
    }


def _execute(scenario: Scenario, backend: str) -> tuple[Arrays | None, str, str]:
    """(outputs or None, who ran it, the error) of the call: JAX's CPU interpreter, or
    the simulator where no CPU interpreter can run it (cross-device traffic)."""
    if backend == "interpret":
        status, outputs, err = _interpret(scenario)
        if status == "ok":
            return outputs, "JAX's CPU interpreter", ""
        if err.get("code") not in INTERPRETER_LIMITS:
            return None, "JAX's CPU interpreter", _error_line(err)
    rejected = _deep_error(scenario)
    if rejected:
        return None, "JAX (trace and GPU lowering)", rejected
    from mpmd_lab.simulator import simulate

    result = simulate(scenario)
    if not result.ok:
        return None, "the simulator", _error_line(result.error or {})
    if result.races:
        return None, "the simulator", f"RACE: {result.races[0].describe()}"
    return dict(result.outputs), "the simulator", ""


def _deep_error(scenario: Scenario) -> str:
    """JAX's own verdict before running (trace, lower for the GPU): "" or the error."""
    try:
        from mpmd_lab.deep import deep_check
    except ImportError:  # the deep check lands later: its engine, the probe, is here
        from mpmd_lab import probe

        r = probe.probe(scenario)
        return "" if r.ok else _error_line(r.error() or {})
    errors = [d for d in deep_check(scenario) if d.is_error]
    if not errors:
        return ""
    d = errors[0]
    return _error_line({"code": d.code, "message": d.jax.message if d.jax else d.message})


def _interpret(scenario: Scenario) -> tuple[str, Arrays, dict[str, Any]]:
    """The real call on JAX's CPU interpreter (after lowering it for the GPU)."""
    try:
        from mpmd_lab import runtime
    except ImportError:  # the runtime lands later: its engine, the probe, is here
        from mpmd_lab import probe

        r = probe.probe(scenario, ("build", "trace", "gpu-lower", "interpret"))
        return ("ok" if r.ok else "error"), dict(r.outputs or {}), r.error() or {}
    result = runtime.run(scenario, backend="interpret")
    return result.status, dict(result.outputs or {}), result.to_json().get("error") or {}


def _error_line(err: dict[str, Any]) -> str:
    """``CODE: the line of JAX's message that says what went wrong``."""
    code = err.get("code") or err.get("type") or "error"
    lines = [ln.strip() for ln in str(err.get("message") or "").splitlines() if ln.strip()]
    named = [ln for ln in lines if re.match(r"^[A-Za-z_.]*(Error|Exception)\b", ln)]
    line = (named[-1] if named else lines[0]) if lines else ""
    return f"{code}: {line[:240]}"


def _compare(name: str, got: np.ndarray, want: np.ndarray) -> str | None:
    """None when ``got`` is ``want``, else what differs, in a sentence."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"`{name}` has shape {list(got.shape)}, expected {list(want.shape)}"
    if got.dtype != want.dtype:
        return f"`{name}` has dtype {got.dtype}, expected {want.dtype}"
    if want.dtype.kind == "f":
        bad = ~np.isclose(got, want, rtol=1e-6, atol=0.0)
    else:
        bad = got != want
    if not bad.any():
        return None
    n, first = int(bad.sum()), tuple(int(i) for i in np.argwhere(bad)[0])
    where = first[0] if len(first) == 1 else first
    msg = f"`{name}` differs at {n} of {want.size} elements (first at {where}: got "
    msg += f"{got[first].item()!r}, expected {want[first].item()!r})"
    if got.dtype.kind == "f" and np.isnan(got[bad]).any():
        msg += f"; {int(np.isnan(got).sum())} were never written (NaN)"
    return msg


def check_exercise(name: str, scenario: Any) -> Verdict:
    """Judge an answer to exercise ``name``: a Scenario, a dict, JSON text or a path."""
    ex = get(name)
    try:
        s = load_scenario(scenario)
    except ScenarioError as e:
        problems = [f"{p or '<top>'}: {m}" for p, m in e.problems]
        return Verdict(False, "this is not a scenario yet", ex.hint, problems)

    from mpmd_lab import validate
    from mpmd_lab.diagnostics import ordered

    errors = [d for d in ordered(validate.check(s)) if d.is_error]
    if errors:
        first = errors[0]
        details = [d.one_line() for d in errors[:3]]
        return Verdict(
            False, f"JAX would reject this call ({first.code}: {first.message})", ex.hint, details
        )
    for req in ex.requirements:
        if not req.holds(s):
            return Verdict(False, f"not what was asked: {req.description}", ex.hint)

    want = ex.expected(inputs_of(s))
    missing = [k for k in want if k not in s.call.outputs]
    if missing:
        return Verdict(False, f"the call must return an output named `{missing[0]}`", ex.hint)
    got, source, error = _execute(s, ex.backend)
    if got is None:
        return Verdict(False, f"the call failed when {source} ran it: {error}", ex.hint)
    for out_name, value in want.items():
        diff = _compare(out_name, got[out_name], value)
        if diff:
            return Verdict(False, f"JAX accepts it, but {diff} ({source})", ex.hint)
    outs = ", ".join(f"`{k}`" for k in want)
    return Verdict(True, f"JAX accepts the call and {outs} is as expected ({source} ran it)")
