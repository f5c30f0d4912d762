"""The collectives puzzle track, as data: for each puzzle a starting scenario with a hole
(a missing statement, a wrong device, a missing wait, ...), its goal, progressive hints,
the facilitator's key and the outputs it must give (numpy, from the inputs). The grader
is :mod:`mpmd_lab.puzzles`.

Every puzzle runs on 4 devices (``dev``); shards are 256 float32 (64 x 64 float16 for
the matmul). Most start from a gallery scenario, edited: the key and the starting point
are the same kernel but for the hole.
"""

from __future__ import annotations

import copy
import html
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpmd_lab import scenario_json as J
from mpmd_lab.exercise_data import Arrays, Requirement, uses_semaphores, walk_statements
from mpmd_lab.ops import RemoteRef
from mpmd_lab.scenario import Scenario

D, S = 4, 256
#: the ring's neighbours, as a kernel author writes them (non-negative before the ``%``)
RIGHT = "(dev + 1) % axis_size(dev)"
LEFT = "(dev + axis_size(dev) - 1) % axis_size(dev)"

Body = list[dict[str, Any]]


@dataclass(frozen=True)
class Puzzle:
    """One puzzle: its starting point, goal, hints (each says more), key and expected
    outputs (global arrays: device d's part is the d-th slice of dim 0)."""

    name: str
    level: int
    topic: str
    title: str
    goal: str
    hints: tuple[str, ...]
    start: dict[str, Any]
    key: dict[str, Any]
    expected: Callable[[Arrays], Arrays]
    #: what the starting point shows when graded: a diagnostic code, or wrong values
    symptom: str
    #: what the key fixes, in a line (the facilitator's key, docs/PUZZLES.md)
    fix: str
    requirements: tuple[Requirement, ...] = ()

    def describe(self, title: bool = True) -> str:
        """The puzzle as Markdown: title, goal, what else is asked (hints come on demand)."""
        head = [f"### {self.level}. {self.title} (`{self.name}`, {self.topic})", ""]
        lines = (head if title else []) + [self.goal]
        if self.requirements:
            lines += ["", "Also:"] + [f"- {r.description}" for r in self.requirements]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """Title and goal as HTML (a notebook shows a puzzle so; the board too)."""
        goal = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(self.goal, quote=False))
        parts = [f"<h4>{self.level}. {html.escape(self.title)} <small>({self.topic})</small></h4>"]
        parts.append(f"<p>{goal}</p>")
        if self.requirements:
            parts.append(
                "<p>Also: "
                + "; ".join(html.escape(r.description) for r in self.requirements)
                + ".</p>"
            )
        return "".join(parts)


# ---------------------------------------------------------------- building blocks


def _from_gallery(name: str, puzzle: str, description: str, edit: Callable[[Body], None]) -> dict:
    """Gallery scenario ``name``, renamed, with ``edit`` applied to its program's body."""
    from mpmd_lab import gallery

    data = copy.deepcopy(gallery.load(name).to_dict())
    data["name"], data["description"] = f"puzzle-{puzzle}", description
    edit(data["call"]["programs"][0]["body"])
    return data


def _keep(body: Body) -> None:
    del body[:0]


def _remote(name: str, ref: str, device: Any) -> dict[str, Any]:
    return J.let(name, ref, {"op": "remote_ref", "device": device})


def _signal(sem: str, device: str) -> dict[str, Any]:
    return {"op": "semaphore_signal", "sem": sem, "device": device}


def _wait(sem: str) -> dict[str, Any]:
    return {"op": "semaphore_wait", "sem": sem}


def _when(cond: str, *body: dict[str, Any]) -> dict[str, Any]:
    return {"op": "when", "cond": cond, "body": list(body)}


def _shards(a: np.ndarray) -> np.ndarray:
    """A global array as (device, shard...)."""
    return a.reshape(D, a.shape[0] // D, *a.shape[1:])


def _rolled(x: np.ndarray, k: int) -> np.ndarray:
    """Device d gets device (d - k)'s shard."""
    return np.roll(_shards(x), k, axis=0).reshape(x.shape)


def _has_ops(*ops: str, what: str) -> Requirement:
    def holds(s: Scenario) -> bool:
        return set(ops) <= {
            getattr(st, "op", None) for st in walk_statements(s.call.programs[0].body)
        }

    return Requirement(what, holds)


def _pushes_remotely() -> Requirement:
    def holds(s: Scenario) -> bool:
        for st in walk_statements(s.call.programs[0].body):
            for t in getattr(st, "transforms", []) or []:
                if isinstance(t, RemoteRef):
                    return True
        return False

    return Requirement("the data still travels between devices (a remote_ref view)", holds)


# ---------------------------------------------------------------- scenarios built here


def _shift(device: Any, description: str) -> dict[str, Any]:
    """Each device copies its x into ``out`` on ``device``."""
    return J.scenario(
        "puzzle-shift",
        description,
        buffers={"x": J.buffer([S])},
        args=[J.arg("x", "x_ref")],
        outputs={"out": J.output([S])},
        body=[_remote("p", "out", device), J.copy("x_ref", "p")],
        device_mesh={"dev": D},
    )


def _shift_add(description: str, drop: str = "") -> dict[str, Any]:
    """out_d = x_{d-1} + x_d: x lands in the right neighbour's ``recv``, a semaphore says
    it has landed, then each device adds. ``drop``: the op left out (the hole)."""
    body = [
        _remote("right_recv", "recv", RIGHT),
        J.copy("x_ref", "right_recv"),
        _signal("landed", RIGHT),
        _wait("landed"),
        J.add("out", "recv", "x_ref"),
    ]
    data = J.scenario(
        "puzzle-shift-add",
        description,
        buffers={"x": J.buffer([S])},
        args=[J.arg("x", "x_ref")],
        outputs={"out": J.output([S]), "recv": J.output([S])},
        body=[st for st in body if st.get("op") != drop],
        device_mesh={"dev": D},
        entry="plgpu.kernel",
        scratch={"landed": {"kind": "semaphore"}},
    )
    return data


def _double_buffer(description: str, credit: bool) -> dict[str, Any]:
    """The ring all-gather through a landing buffer of two slots, reused every other
    step: a chunk lands in slot i % 2 of ``recv`` (``full[i % 2]`` says so), is put in
    place and forwarded from there. Slot 0 is written again at step 2, so the receiver
    hands it back (``free``) once it has forwarded it, and the sender waits for that
    credit before writing (``credit``: the wait is there)."""
    cur, nxt = "(i - 1) % 2", "i % 2"
    chunk = "(dev + axis_size(dev) - i) % axis_size(dev) * 256"
    send = [
        J.let("to_right", "right_recv", J.at(nxt)),
        J.copy("got", "to_right"),
        J.let("filled", "full", J.at(nxt)),
        _signal("filled", RIGHT),
    ]
    if credit:
        send = [_when("i >= 2", _wait("free")), *send]
    body = [
        J.let("mine", "out", J.at({"ds": ["dev * 256", S]})),
        J.copy("x_ref", "mine"),
        _remote("right_recv", "recv", RIGHT),
        J.let("slot0", "right_recv", J.at(0)),
        J.copy("x_ref", "slot0"),
        J.let("full0", "full", J.at(0)),
        _signal("full0", RIGHT),
        {
            "op": "loop",
            "var": "i",
            "start": 1,
            "stop": "axis_size(dev)",
            "via": "fori_loop",
            "body": [
                J.let("arrived", "full", J.at(cur)),
                _wait("arrived"),
                J.let("got", "recv", J.at(cur)),
                J.let("place", "out", J.at({"ds": [chunk, S]})),
                J.copy("got", "place"),
                _when("i < axis_size(dev) - 1", *send),
                _when("i < axis_size(dev) - 2", _signal("free", LEFT)),
            ],
        },
    ]
    return J.scenario(
        "puzzle-double-buffer",
        description,
        buffers={"x": J.buffer([S])},
        args=[J.arg("x", "x_ref")],
        outputs={"out": J.output([D * S]), "recv": J.output([2, S])},
        body=body,
        device_mesh={"dev": D},
        entry="plgpu.kernel",
        scratch={"full": {"kind": "semaphore", "shape": [2]}, "free": {"kind": "semaphore"}},
    )


# ---------------------------------------------------------------- expected outputs


def _shifted_right(i: Arrays) -> Arrays:
    return {"out": _rolled(i["x"], 1)}


def _shifted_left(i: Arrays) -> Arrays:
    return {"out": _rolled(i["x"], -1)}


def _shift_added(i: Arrays) -> Arrays:
    return {"out": _rolled(i["x"], 1) + i["x"]}


def _gathered(i: Arrays) -> Arrays:
    return {"out": np.tile(i["x"], D)}


def _reduced(i: Arrays) -> Arrays:
    """out_d = sum over devices j of x_j[d*S:(d+1)*S]."""
    return {"out": _shards(i["x"]).sum(axis=0)}


def _matmul(i: Arrays) -> Arrays:
    """out_d = concat_j(lhs_j) @ rhs_d, in float32."""
    lhs = i["lhs"].astype(np.float32)
    rhs = _shards(i["rhs"].astype(np.float32))
    return {"out": np.concatenate([lhs @ r for r in rhs])}


# ---------------------------------------------------------------- edits of gallery kernels


def _set(path: tuple[Any, ...], value: Any) -> Callable[[Body], None]:
    """Set ``body[path...] = value`` (a path of list indices and dict keys)."""

    def edit(body: Body) -> None:
        node: Any = body
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = value

    return edit


def _drop(*path: int) -> Callable[[Body], None]:
    """Delete the statement at ``body[path[0]].body[path[1]]...``."""

    def edit(body: Body) -> None:
        node = body
        for step in path[:-1]:
            node = node[step]["body"]
        del node[path[-1]]

    return edit


def _chunk(expr: str) -> Callable[[Body], None]:
    def edit(body: Body) -> None:
        for let in body[3]["body"][:2]:
            let["transforms"][0]["index"][0]["ds"][0] = expr

    return edit


# ---------------------------------------------------------------- the track

_RING = "the ring keeps its loop, its signals and its waits"


def _puzzles() -> list[Puzzle]:
    ring_sync = (uses_semaphores(),)
    gather_goal = (
        "The ring all-gather: `x [256] -> out [1024]`, every device's `out` is `concat(x_0, "
        "x_1, x_2, x_3)`. Each device puts its own shard in place, then in 3 steps forwards "
        "to its right neighbour the chunk it received last, signalling `sems[i]` on the "
        "neighbour and waiting on its own `sems[i]`. "
    )
    p: list[Puzzle] = []
    p.append(
        Puzzle(
            name="shift-right",
            level=1,
            topic="ring shift",
            title="Send to the right",
            goal="Each device must write its `x` into `out` on its right-hand neighbour, so "
            "that device d's `out` holds device d-1's `x` (device 0 gets device 3's). The "
            "remote view points at the wrong device.",
            hints=(
                "Look at the `remote_ref` view `p`: which device does `dev + 0` name?",
                "The offset is added to this device's index along `dev`, and wraps round the "
                "ring: `dev + k` is device (d + k) mod 4 (the scenario writes it "
                '`{"offset": k}`).',
                "The right-hand neighbour is offset 1.",
            ),
            start=_shift({"dev": {"offset": 0}}, "A ring shift that never leaves home."),
            key=_shift({"dev": {"offset": 1}}, "Each device writes x into out on its right."),
            expected=_shifted_right,
            symptom="values wrong on every device",
            fix="`p = out.remote_ref(dev + 1)`: the offset 0 becomes 1",
            requirements=(_pushes_remotely(),),
        )
    )
    p.append(
        Puzzle(
            name="shift-left",
            level=2,
            topic="ring shift",
            title="Wrap round the ring",
            goal="Now send to the left: device d writes its `x` into `out` on device d-1, so "
            "device d's `out` holds device d+1's `x`. The device index is written as an "
            "expression, `dev - 1`, and device 0 has no device -1.",
            hints=(
                "The check names the device that goes out of the mesh: which one, and why?",
                "A device index must stay in 0 .. 3: wrap it with `% axis_size(dev)`.",
                "Keep it non-negative before the `%`, as kernels do: "
                "`(dev + axis_size(dev) - 1) % axis_size(dev)`.",
            ),
            start=_shift({"dev": "dev - 1"}, "A shift to the left that falls off the ring."),
            key=_shift({"dev": LEFT}, "Each device writes x into out on its left."),
            expected=_shifted_left,
            symptom="REMOTE_DEVICE_OOB",
            fix="the device `dev - 1` becomes `(dev + axis_size(dev) - 1) % axis_size(dev)`",
            requirements=(_pushes_remotely(),),
        )
    )
    p.append(
        Puzzle(
            name="pull-handshake",
            level=3,
            topic="handshake",
            title="Balance the handshake",
            goal="Device d *reads* its right neighbour's `x` straight from that device's "
            "memory, so `out_d = x_{d+1}`. A semaphore handshake guards the read: `ready` "
            "tells the left neighbour it may read, `done` tells the right neighbour the "
            "read is over, so that no device exits (and frees its `x`) while its reader "
            "still reads. One of the four semaphore statements is missing: the kernel ends "
            "with a semaphore still raised on every device.",
            hints=(
                "Count them: two signals, but how many waits?",
                "`done` is signalled on the right neighbour after the read, but nobody "
                "takes that signal: nothing keeps the neighbour from exiting early, and "
                "the next call starts with `done` at 1.",
                "Add `semaphore_wait(done)` as the last statement.",
            ),
            start=_from_gallery(
                "exchange-shards", "pull-handshake", "A pull nobody waits out.", _drop(5)
            ),
            key=_from_gallery("exchange-shards", "pull-handshake", "A guarded pull.", _keep),
            expected=_shifted_left,
            symptom="SEMAPHORE_IMBALANCE",
            fix="`semaphore_wait(done)` as the last statement (body[5])",
            requirements=(_uses_semaphores_no_loop(),),
        )
    )
    p.append(
        Puzzle(
            name="shift-add-signal",
            level=4,
            topic="handshake",
            title="Say that it has landed",
            goal="`out_d = x_{d-1} + x_d`: each device copies its `x` into `recv` on its right "
            "neighbour, then adds what landed in its own `recv` to its `x`. Every device "
            "waits on `landed` before reading `recv`, and on a GPU this kernel hangs.",
            hints=(
                "The check reports a deadlock: every device waits, who should wake it?",
                "Only a `semaphore_signal` on another device raises that device's "
                "semaphore. The writer knows when its copy is done.",
                "After the copy into `right_recv`, signal `landed` on the right neighbour: "
                "`semaphore_signal(landed, device=(dev + 1) % axis_size(dev))`.",
            ),
            start=_shift_add("A landing nobody announces.", drop="semaphore_signal"),
            key=_shift_add("Shift right and add, with a handshake."),
            expected=_shift_added,
            symptom="DEADLOCK_SEMAPHORE",
            fix="`semaphore_signal(landed, right)` after the copy into `right_recv` (body[2])",
            requirements=(_uses_semaphores_no_loop(),),
        )
    )
    p.append(
        Puzzle(
            name="shift-add-wait",
            level=5,
            topic="handshake",
            title="Wait before you read",
            goal="The same shift-and-add, now with its signal but without its wait: a device "
            "may add its `recv` before the left neighbour's copy has landed in it. JAX "
            "accepts this kernel; on a GPU its result depends on timing.",
            hints=(
                "The check reports a race on `recv`: between which two statements?",
                "A signal orders the writes *before* it; only a wait orders the reads *after* it.",
                "Add `semaphore_wait(landed)` before the `add`.",
            ),
            start=_shift_add("A read that may come too early.", drop="semaphore_wait"),
            key=_shift_add("Shift right and add, with a handshake."),
            expected=_shift_added,
            symptom="RACE_DETECTED",
            fix="`semaphore_wait(landed)` before `add(out, recv, x_ref)` (body[3])",
            requirements=(_uses_semaphores_no_loop(),),
        )
    )
    p.append(
        Puzzle(
            name="gather-own-shard",
            level=6,
            topic="all-gather",
            title="Start from your own shard",
            goal=gather_goal + "A statement is missing: step 0 forwards chunk d of `out`, "
            "but nothing ever put `x` there.",
            hints=(
                "Which elements of `out` are wrong, on which device? Are they ever written?",
                "`mine` is the view of `out` where this device's own shard belongs; it is "
                "declared but nothing is copied into it.",
                "Add `copy(src=x_ref, dst=mine)` right after `mine`.",
            ),
            start=_from_gallery("ring-all-gather", "gather-own-shard", "No own shard.", _drop(1)),
            key=_from_gallery("ring-all-gather", "gather-own-shard", "The all-gather.", _keep),
            expected=_gathered,
            symptom="values wrong on every device (never written)",
            fix="`copy(x_ref -> mine)` as body[1]",
            requirements=ring_sync,
        )
    )
    p.append(
        Puzzle(
            name="gather-signal-target",
            level=7,
            topic="all-gather",
            title="Signal the device you wrote to",
            goal=gather_goal + "Here each step signals the *left* neighbour, while the data "
            "goes right: every semaphore is raised once per step, yet nothing the wait "
            "learns says the chunk has landed.",
            hints=(
                "A race: the waiting device reads a chunk whose writer it did not hear from.",
                "The signal must come from the device that wrote the chunk, to the device "
                "that will read it.",
                "Signal `sent` on `(dev + 1) % axis_size(dev)`, the device `right_out` points at.",
            ),
            start=_from_gallery(
                "ring-all-gather",
                "gather-signal-target",
                "Signals going the wrong way round.",
                _set((3, "body", 4, "device"), LEFT),
            ),
            key=_from_gallery("ring-all-gather", "gather-signal-target", "The ring.", _keep),
            expected=_gathered,
            symptom="RACE_DETECTED",
            fix="the signal's device `left` becomes `(dev + 1) % axis_size(dev)` (loop body[4])",
            requirements=ring_sync,
        )
    )
    p.append(
        Puzzle(
            name="gather-deadlock",
            level=8,
            topic="all-gather",
            title="Signal the slot that is waited on",
            goal=gather_goal + "Here every step signals `sems[0]`, but waits on `sems[i]`: "
            "at step 1 every device waits for a signal that never comes.",
            hints=(
                "Which semaphore does each step wait on, and which one does it signal?",
                "One slot per step: the signal and the wait of step i must name the same slot.",
                "Make `sent` the view `sems.at[i]`, like `arrived`.",
            ),
            start=_from_gallery(
                "ring-all-gather-deadlock", "gather-deadlock", "A ring that hangs.", _keep
            ),
            key=_from_gallery("ring-all-gather", "gather-deadlock", "The ring.", _keep),
            expected=_gathered,
            symptom="DEADLOCK_SEMAPHORE",
            fix="`sent = sems.at[i]` (was `sems.at[0]`, loop body[3])",
            requirements=ring_sync,
        )
    )
    p.append(
        Puzzle(
            name="gather-chunk-index",
            level=9,
            topic="all-gather",
            title="Forward what you received",
            goal=gather_goal + "Here step i forwards chunk `(dev + i) % 4`, one the device "
            "does not hold yet, over a chunk its neighbour already has.",
            hints=(
                "At step 0 a device forwards its own chunk; at step 1?",
                "At step 1 it forwards what came from the left at step 0: chunk dev - 1. At "
                "step i: chunk dev - i.",
                "Use `(dev + axis_size(dev) - i) % axis_size(dev) * 256` in both `chunk` and "
                "`to_right`.",
            ),
            start=_from_gallery(
                "ring-all-gather",
                "gather-chunk-index",
                "The ring forwarding the wrong chunk.",
                _chunk("(dev + i) % axis_size(dev) * 256"),
            ),
            key=_from_gallery("ring-all-gather", "gather-chunk-index", "The ring.", _keep),
            expected=_gathered,
            symptom="RACE_DETECTED",
            fix="chunk index `(dev + i) % D` becomes `(dev + D - i) % D` in loop body[0] and [1]",
            requirements=ring_sync,
        )
    )
    p.append(
        Puzzle(
            name="gather-trip-count",
            level=10,
            topic="all-gather",
            title="Count the steps",
            goal=gather_goal + "Here the loop runs 4 steps instead of 3.",
            hints=(
                "The check names an index out of bounds: which ref, which index?",
                "With 4 devices, 3 chunks come from elsewhere: how many steps does the ring need?",
                "The loop stops at `axis_size(dev) - 1`.",
            ),
            start=_from_gallery(
                "ring-all-gather",
                "gather-trip-count",
                "One step too many.",
                _set((3, "stop"), "axis_size(dev)"),
            ),
            key=_from_gallery("ring-all-gather", "gather-trip-count", "The ring.", _keep),
            expected=_gathered,
            symptom="OOB_INDEX",
            fix="the loop's stop `axis_size(dev)` becomes `axis_size(dev) - 1`",
            requirements=ring_sync,
        )
    )
    p.append(
        Puzzle(
            name="scatter-first-chunk",
            level=11,
            topic="reduce-scatter",
            title="Start the right partial sum",
            goal="The ring reduce-scatter: `x [1024] -> out [256]`, `out_d` is the sum over "
            "devices j of `x_j[d*256:(d+1)*256]`. Partial sums travel right through `recv`; "
            "after 3 steps the partial of chunk d has visited every other device and d adds "
            "its own piece. Here the first partial is the wrong chunk.",
            hints=(
                "Which devices get wrong sums? Compare got and expected: what chunk did they sum?",
                "The partial that reaches device d last must be chunk d: it starts 3 steps "
                "earlier, at device d + 1, so device d starts chunk d - 1.",
                "`first` is `x_ref.at[ds((dev - 1) % axis_size(dev) * 256, 256)]`.",
            ),
            start=_from_gallery(
                "ring-reduce-scatter",
                "scatter-first-chunk",
                "A reduce-scatter that starts with its own chunk.",
                _set((1, "transforms", 0, "index", 0, "ds", 0), "dev * 256"),
            ),
            key=_from_gallery("ring-reduce-scatter", "scatter-first-chunk", "The ring.", _keep),
            expected=_reduced,
            symptom="values wrong on every device",
            fix="`first` starts at `(dev - 1) % axis_size(dev) * 256` (was `dev * 256`)",
            requirements=(_has_ops("add", "semaphore_wait", "loop", what=_RING),),
        )
    )
    p.append(
        Puzzle(
            name="scatter-wait",
            level=12,
            topic="reduce-scatter",
            title="Wait for the partial",
            goal="The same ring reduce-scatter, but a step of the loop adds to the partial in "
            "`recv[s - 1]` without waiting for it to land.",
            hints=(
                "The race is on `recv`: who writes it, who reads it?",
                "Each step signals `sems[s]` on the right neighbour: the neighbour must take "
                "that signal before its next step reads the slot.",
                "Add `semaphore_wait(sem)` after the loop's signal.",
            ),
            start=_from_gallery(
                "ring-reduce-scatter", "scatter-wait", "A step without its wait.", _drop(7, 6)
            ),
            key=_from_gallery("ring-reduce-scatter", "scatter-wait", "The ring.", _keep),
            expected=_reduced,
            symptom="RACE_DETECTED",
            fix="`semaphore_wait(sem)` as the loop's last statement (body[7].body[6])",
            requirements=(_has_ops("add", "semaphore_wait", "loop", what=_RING),),
        )
    )
    p.append(
        Puzzle(
            name="double-buffer",
            level=13,
            topic="double buffering",
            title="Give the slot back",
            goal="An all-gather through a landing buffer of only two slots: the chunk of step "
            "i lands in `recv[i % 2]` (`full[i % 2]` says it has), is put in place and "
            "forwarded from there. Slot 0 is used again at step 2: the left neighbour may "
            "overwrite it while this device still forwards from it. The receiver already "
            "signals `free` on its left neighbour once it is done with the slot; nobody "
            "waits for it.",
            hints=(
                "The race is between a write into `recv` and a read of the same slot: at "
                "which steps?",
                "Double buffering needs a credit going back: the sender may reuse a slot "
                "only once the receiver handed it back.",
                "Before writing the slot at step i >= 2, wait on `free`: add "
                "`when(i >= 2): semaphore_wait(free)` at the start of the send.",
            ),
            start=_double_buffer("Two slots, no credit.", credit=False),
            key=_double_buffer("Two slots, handed back with a credit.", credit=True),
            expected=_gathered,
            symptom="RACE_DETECTED",
            fix="`when(i >= 2): semaphore_wait(free)` before writing `to_right`",
            requirements=(_has_ops("semaphore_wait", "loop", "when", what=_RING),),
        )
    )
    p.append(
        Puzzle(
            name="matmul-rows",
            level=14,
            topic="collective matmul",
            title="Put each block in its rows",
            goal="The collective matmul: `lhs [64, 64]` and `rhs [64, 128]` per device, "
            "`out_d = concat_j(lhs_j) @ rhs_d` (`[256, 128]`, float32). The lhs blocks "
            "travel left round the ring; at step i device d holds `lhs_{(d+i) mod 4}`. Here "
            "the loop writes each product into the wrong rows.",
            hints=(
                "Which rows are wrong, on which devices? Step 0 is right.",
                "The block held at step i came from device d + i: its product belongs in "
                "rows of that block.",
                "`block` is `out.at[ds((dev + i) % axis_size(dev) * 64, 64)]` in the loop.",
            ),
            start=_from_gallery(
                "collective-matmul",
                "matmul-rows",
                "A collective matmul writing the wrong rows.",
                _set(
                    (15, "body", 3, "transforms", 0, "index", 0, "ds", 0),
                    "(dev + axis_size(dev) - i) % axis_size(dev) * 64",
                ),
            ),
            key=_from_gallery("collective-matmul", "matmul-rows", "The collective matmul.", _keep),
            expected=_matmul,
            symptom="values wrong on every device (half the rows)",
            fix="the loop's `block` rows `(dev - i) % D * 64` become `(dev + i) % D * 64`",
            requirements=(_has_ops("dot", "semaphore_wait", "loop", what=_RING),),
        )
    )
    p.append(
        Puzzle(
            name="matmul-wait",
            level=15,
            topic="collective matmul",
            title="Wait for the next block",
            goal="The same collective matmul, but after sending its block left a step no "
            "longer waits for the next block to arrive from the right: it loads `recv[i]` "
            "into SMEM while the right neighbour may still be storing it.",
            hints=(
                "The race is on `recv`: the TMA store of one device, the TMA load of another.",
                "The sender signals `received` on its left neighbour once its store has "
                "completed (`wait_smem_to_gmem`); the receiver must take that signal.",
                "Add `semaphore_wait(received)` after the signal inside the `when`.",
            ),
            start=_from_gallery(
                "collective-matmul", "matmul-wait", "A step without its wait.", _drop(15, 5, 5)
            ),
            key=_from_gallery("collective-matmul", "matmul-wait", "The collective matmul.", _keep),
            expected=_matmul,
            symptom="RACE_DETECTED",
            fix="`semaphore_wait(received)` as the `when`'s last statement",
            requirements=(_has_ops("dot", "semaphore_wait", "loop", what=_RING),),
        )
    )
    return p


def _uses_semaphores_no_loop() -> Requirement:
    return _has_ops(
        "semaphore_signal",
        "semaphore_wait",
        what="the handshake keeps a signal and a wait (no loop needed)",
    )


PUZZLES: dict[str, Puzzle] = {q.name: q for q in _puzzles()}
