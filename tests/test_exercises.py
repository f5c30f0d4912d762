"""The workshop exercises: each checker accepts its solution (and other correct answers)
and rejects the unsolved starting point, judged by the static check and real runs."""

from __future__ import annotations

import pytest
from mpmd_lab import exercises
from mpmd_lab.exercises import check_exercise

pytestmark = pytest.mark.slow  # real JAX in child processes, or many runs: `make test` only

NAMES = exercises.names()
#: Grouped by device count, so the warm JAX workers (one per device count) are reused.
BY_DEVICES = sorted(NAMES, key=lambda n: exercises.start(n).num_devices)


def test_at_least_eight_exercises_each_taught_by_a_notebook():
    assert len(NAMES) >= 8
    for name in NAMES:
        ex = exercises.get(name)
        assert ex.goal and ex.hint and ex.title
        assert ex.notebook[:2] in {"01", "02", "03", "04", "05", "08"}


@pytest.mark.parametrize("kind", ["solution", "start"])
@pytest.mark.parametrize("name", BY_DEVICES)
def test_solution_is_right_and_starting_point_wrong_with_a_hint(name, kind):
    verdict = check_exercise(name, getattr(exercises, kind)(name))
    if kind == "solution":
        assert verdict.right, str(verdict)
        assert bool(verdict) and "right" in verdict._repr_html_()
    else:
        assert not verdict.right, str(verdict)
        assert verdict.hint == exercises.get(name).hint
        assert "hint" in str(verdict) and "not yet" in verdict._repr_html_()


def _edit(name: str, edit) -> dict:
    data = exercises.solution(name).to_dict()
    edit(data)
    return data


def _body(data: dict) -> list:
    return data["call"]["programs"][0]["body"]


def test_other_correct_answers_pass():
    # three steps right round a ring of four is one step left
    def left_by_three(d):
        _body(d)[0]["transforms"][0]["device"] = {"dev": {"offset": 3}}

    assert check_exercise("ring-left", _edit("ring-left", left_by_three)).right

    def minus_one(d):
        _body(d)[0]["transforms"][0]["shape"] = [-1]

    assert check_exercise("reshape", _edit("reshape", minus_one)).right

    # all-gather through multimem_store instead of SMEM + TMA
    def multimem(d):
        d["call"]["entry"] = "pl.kernel"
        d["call"]["scratch"] = {}
        d["call"]["programs"][0]["body"] = [
            {"let": "slot", "ref": "out", "transforms": [_body(d)[1]["transforms"][0]]},
            {"op": "multimem_store", "src": "x_ref", "dst": "slot", "axes": ["dev"]},
        ]

    verdict = check_exercise("peer-then-multicast", _edit("peer-then-multicast", multimem))
    assert verdict.right, str(verdict)


def test_wrong_answers_fail_for_the_right_reason():
    # keeping two blocks is part of the exercise
    def one_block(d):
        d["call"]["programs"][0]["mesh"]["grid"] = {"b": 1}
        _body(d)[0]["transforms"] = []
        _body(d)[1]["transforms"] = []

    verdict = check_exercise("race", _edit("race", one_block))
    assert not verdict.right and "2 blocks" in verdict.message

    # a local copy gives the same numbers on one device but is no multicast
    def local_copy(d):
        d["call"]["programs"][0]["body"] = [{"op": "copy", "src": "x_ref", "dst": "out"}]

    verdict = check_exercise("ring-left", _edit("ring-left", local_copy))
    assert not verdict.right and "differs" in verdict.message

    # not a scenario at all: every problem named by its field
    verdict = check_exercise("dup-ref", {"name": "x"})
    assert not verdict.right and any("call" in d for d in verdict.details)


def test_unknown_exercise_names_the_known_ones():
    with pytest.raises(KeyError, match="dup-ref"):
        check_exercise("no-such-exercise", exercises.start("dup-ref"))


@pytest.mark.parametrize("name", ["ring-wait", "ring-deadlock", "ring-index"])
def test_the_collectives_exercises_name_what_a_gpu_would_do(name):
    """The broken rings are accepted by JAX: the verdict says it goes wrong on a GPU (a
    race, a hang), not that JAX rejects it; a ring rewritten without its semaphores is
    not what was asked."""
    verdict = check_exercise(name, exercises.start(name))
    code = "DEADLOCK_SEMAPHORE" if name == "ring-deadlock" else "RACE_DETECTED"
    assert "on a GPU it goes wrong" in verdict.message and code in verdict.message

    def no_sync(d):
        loop = _body(d)[3]["body"]
        loop[:] = [st for st in loop if not st.get("op", "").startswith("semaphore")]

    verdict = check_exercise(name, _edit(name, no_sync))
    assert not verdict.right
