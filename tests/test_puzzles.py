"""The collectives puzzle track: every key graded right, every starting point graded wrong
with the feedback it was written for, other correct answers pass, each grade is quick,
and real JAX accepts the keys (and the starts whose hole only a GPU would show)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from mpmd_lab import deep, puzzles
from mpmd_lab.puzzles import grade

NAMES = puzzles.names()
#: what JAX itself checks, at build, trace and GPU lowering
JAX_STAGES = ("schema", "build", "trace", "gpu-lower")


def _body(data: dict) -> list:
    return data["call"]["programs"][0]["body"]


def _key_edited(name: str, edit) -> dict:
    data = puzzles.key(name).to_dict()
    edit(data)
    return data


def test_a_track_of_at_least_twelve_from_ring_shift_to_collective_matmul():
    assert len(NAMES) >= 12
    levels = [puzzles.get(n).level for n in NAMES]
    assert levels == sorted(set(levels))
    topics = [puzzles.get(n).topic for n in NAMES]
    assert topics[0] == "ring shift" and topics[-1] == "collective matmul"
    for topic in ("handshake", "all-gather", "reduce-scatter", "double buffering"):
        assert topic in topics
    for name in NAMES:
        p = puzzles.get(name)
        assert p.goal and p.title and p.fix and p.symptom and len(p.hints) >= 3
        assert p.title in p.describe()


@pytest.mark.parametrize("name", NAMES)
def test_the_key_is_right(name):
    verdict = grade(name, puzzles.key(name))
    assert verdict.right, str(verdict)
    assert "no race or deadlock in any schedule" in verdict.message


@pytest.mark.parametrize("name", NAMES)
def test_the_starting_point_is_wrong_with_its_intended_feedback(name):
    p = puzzles.get(name)
    verdict = grade(name, puzzles.start(name))
    assert not verdict.right, str(verdict)
    assert verdict.hint == p.hints[0] and "hint:" in str(verdict)
    if p.symptom.startswith("values wrong"):
        # no static problem: the simulator's values say which device and elements differ
        assert "values are wrong on device 0, device 1, device 2, device 3" in verdict.message
        assert all(
            line.startswith(f"device {d}: `out` wrong at ")
            for d, line in enumerate(verdict.details)
        ), verdict.details
        if "never written" in p.symptom:
            assert all("never written (NaN)" in line for line in verdict.details)
    else:
        assert p.symptom in verdict.message, str(verdict)
        assert verdict.details and p.symptom in verdict.details[0]
        # the details say where: a device, and elements or the semaphore's state
        assert "device " in verdict.details[0] or "dev=" in verdict.details[0]


def test_feedback_names_devices_and_elements_in_their_own_coordinates():
    verdict = grade("matmul-rows", puzzles.start("matmul-rows"))
    # step 0 is right; the loop's products land two row blocks off on every device
    assert (
        "device 0: `out` wrong at 16384 of 32768 elements, rows [64:128], [192:256]"
        in (verdict.details[0])
    )
    # a ring one device off: each device holds what its right neighbour should get
    verdict = grade("shift-right", puzzles.start("shift-right"))
    assert verdict.details[0].endswith("; it holds what device 1 should get")
    assert verdict.details[3].endswith("; it holds what device 0 should get")
    verdict = grade("shift-add-wait", puzzles.start("shift-add-wait"))
    assert "race on recv[0:256] (output) on device 0" in verdict.details[0]


def test_values_alone_do_not_grade_a_race():
    """The shift-add without its wait gives the right numbers in the simulator's default
    schedule; another schedule reads `recv` too early, and the grade says so."""
    from mpmd_lab import simulator

    start = puzzles.start("shift-add-wait")
    sim = simulator.simulate(start, check=False)
    want = puzzles.get("shift-add-wait").expected(puzzles.inputs_of(start))
    assert np.array_equal(sim.outputs["out"], want["out"])
    assert "RACE_DETECTED" in grade("shift-add-wait", start).message


@pytest.mark.parametrize("name", NAMES)
def test_each_grade_takes_under_two_seconds(name):
    grade(name, puzzles.start(name))  # imports and first-call set-up out of the way
    for scenario in (puzzles.start(name), puzzles.key(name)):
        t0 = time.perf_counter()
        grade(name, scenario)
        assert time.perf_counter() - t0 < 2.0


@pytest.mark.parametrize("name", NAMES)
def test_real_jax_accepts_the_key_and_the_start(name):
    """JAX traces and lowers (for the GPU, on this CPU) every key; the starts too: their
    holes are ones only a GPU run shows (the grade says "JAX accepts it"), or wrong values."""
    for scenario in (puzzles.key(name), puzzles.start(name)):
        rejected = [d for d in deep.deep_check(scenario) if d.is_error and d.stage in JAX_STAGES]
        assert rejected == [], [d.one_line() for d in rejected]


def test_other_correct_answers_pass():
    # three steps right round a ring of four is one step left
    def offset_three(d):
        _body(d)[0]["transforms"][0]["device"] = {"dev": {"offset": 3}}

    assert grade("shift-left", _key_edited("shift-left", offset_three)).right

    # Python's % keeps dev - 1 non-negative too
    def floor_mod(d):
        _body(d)[0]["transforms"][0]["device"] = {"dev": "(dev - 1) % axis_size(dev)"}

    assert grade("shift-left", _key_edited("shift-left", floor_mod)).right

    # the deadlocked ring repaired with sems.at[i] is the gallery's ring
    def slot_i(d):
        _body(d)[3]["body"][3]["transforms"] = [{"op": "at", "index": ["i"]}]

    answer = puzzles.start("gather-deadlock").to_dict()
    slot_i(answer)
    assert grade("gather-deadlock", answer).right


def test_wrong_answers_fail_for_the_right_reason():
    # a ring with its semaphores taken out is not what was asked (and races)
    def no_sync(d):
        loop = _body(d)[3]["body"]
        loop[:] = [st for st in loop if not st.get("op", "").startswith("semaphore")]

    verdict = grade("gather-deadlock", _key_edited("gather-deadlock", no_sync))
    assert not verdict.right and "RACE" in verdict.message

    # a local copy gives nothing remote: the shift's values are wrong on every device
    def local(d):
        _body(d)[:] = [{"op": "copy", "src": "x_ref", "dst": "out"}]

    verdict = grade("shift-right", _key_edited("shift-right", local))
    assert not verdict.right
    assert "not what was asked" in verdict.message and "remote_ref" in verdict.message

    # a semaphore left raised fails although no race or deadlock follows
    def extra_signal(d):
        _body(d).append(dict(_body(d)[2]))

    verdict = grade("shift-add-wait", _key_edited("shift-add-wait", extra_signal))
    assert not verdict.right and "SEMAPHORE_IMBALANCE" in verdict.message

    # the expected values follow the inputs: changing them is no answer
    def zeros(d):
        d["buffers"]["x"]["init"] = "zeros"

    verdict = grade("shift-right", _key_edited("shift-right", zeros))
    assert not verdict.right and "keep the inputs as given: buffer `x`" in verdict.message

    def two_devices(d):
        d["device_mesh"] = {"dev": 2}

    verdict = grade("shift-right", _key_edited("shift-right", two_devices))
    assert not verdict.right and "keep the device mesh as given" in verdict.message

    # not a scenario: each problem named by its field
    verdict = grade("shift-right", {"name": "x"})
    assert not verdict.right and any(d.startswith("call") for d in verdict.details)


def test_differences_split_a_global_output_by_device():
    want = np.arange(16, dtype=np.float32)
    got = want.copy()
    got[9:11] = np.nan
    got[14] = 0.0
    lines = puzzles.differences("out", got, want, devices=4)
    assert lines == [
        "device 2: `out` wrong at 2 of 4 elements, [1:3] (first at 1: got nan, expected 9.0)"
        "; 2 never written (NaN)",
        "device 3: `out` wrong at 1 of 4 elements, [2:3] (first at 2: got 0.0, expected 14.0)",
    ]
    assert puzzles.differences("out", want, want, devices=4) == []


def test_hints_go_from_a_question_to_the_answer():
    p = puzzles.get("gather-deadlock")
    assert puzzles.hint("gather-deadlock") == p.hints[0]
    assert puzzles.hint("gather-deadlock", 99) == p.hints[-1]
    assert "sems.at[i]" in p.hints[-1] and "sems.at[i]" not in p.hints[0]


def test_unknown_puzzle_names_the_known_ones():
    with pytest.raises(KeyError, match="shift-right"):
        grade("no-such-puzzle", puzzles.start("shift-right"))


def test_the_board_shows_the_puzzle_and_grades_what_is_on_screen():
    """The widget only views and calls: Check shows the library's verdict on the Lab's
    scenario, Hint one more hint, the picker another puzzle, Start over the start."""
    from mpmd_lab.widgets.puzzle import PuzzleBoard
    from mpmd_lab.widgets.testing import find, text_of

    board = PuzzleBoard("gather-deadlock", background=False, graph=True)
    assert "Signal the slot that is waited on" in board.goal.value
    assert board.lab.graph in list(board.lab.children)  # the puzzle's graph is on the board
    find(board, "mpl-puzzle-check").click()
    assert board.last is not None and not board.last.right
    assert "DEADLOCK_SEMAPHORE" in board.verdict.value and "not yet" in board.verdict.value

    hint = find(board, "mpl-puzzle-hint")
    for shown in (1, 2, 3):
        hint.click()
        assert puzzles.hint("gather-deadlock", shown - 1) in text_of(board)
    assert hint.disabled and "no hints left" in board.hints.value

    board.lab.state.replace(puzzles.key("gather-deadlock"), "the learner's edits")
    assert board.check().right and "right" in board.verdict.value

    find(board, "mpl-puzzle-reset").click()
    assert board.lab.state.scenario == puzzles.start("gather-deadlock")
    assert board.verdict.value == ""

    find(board, "mpl-puzzle-picker").value = "double-buffer"
    assert board.name == "double-buffer" and "Give the slot back" in board.goal.value
    assert board.lab.state.scenario == puzzles.start("double-buffer")
    assert not hint.disabled and "3 hint(s) left" in board.hints.value
    assert "RACE_DETECTED" in board.check().message


def test_the_facilitators_key_in_the_docs_is_the_librarys():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "PUZZLES.md").read_text()
    assert puzzles.facilitator_key() in doc


def test_an_answer_too_long_to_check_every_schedule_is_not_graded_right():
    """A verdict is a promise: an all-gather that also copies its shard 8,000 times runs
    past the static check's bound, so the grade says it could not judge every schedule,
    rather than "right" (the values would be)."""

    def busy(d):
        copies = [{"op": "copy", "src": "x_ref", "dst": "mine"}]
        loop = {"op": "loop", "var": "k", "start": 0, "stop": 8000, "body": copies}
        _body(d).insert(2, loop)

    verdict = grade("gather-own-shard", _key_edited("gather-own-shard", busy))
    assert not verdict.right
    assert verdict.message.startswith("not graded: the check could not run every schedule")
    assert "SYNC_NOT_CHECKED" in verdict.details[0]
