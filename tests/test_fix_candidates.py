"""A candidate fix's scenario made by ``recheck.edited`` (the original's unchanged parts
kept, only the edited paths validated anew) is the scenario its JSON form validates to,
for every fix proposed in the gallery, tests/scenarios and tests/fix_corpus, and is
refused where that JSON form is refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mpmd_lab import gallery
from mpmd_lab.diagnostics import Edit, apply_edit
from mpmd_lab.fixes import proposed
from mpmd_lab.recheck import content_key, edited, with_edits
from mpmd_lab.scenario import Scenario, load_scenario
from mpmd_lab.validate.analysis import analyze_rules

TESTS = Path(__file__).parent


def _scenarios() -> Iterator[tuple[str, Scenario]]:
    for name in gallery.names():
        yield name, gallery.load(name)
    paths = sorted((TESTS / "scenarios").rglob("*.json"))
    paths += sorted((TESTS / "fix_corpus").glob("*.json"))
    for p in paths:
        try:
            yield p.name, load_scenario(p.read_text())
        except Exception:  # (a file that tests the loader's refusals)
            continue


def _validated(s: Scenario, edits: list[Edit]) -> Scenario | None:
    """The reference: ``s``'s JSON form with ``edits`` applied, validated whole."""
    data = s.to_dict()
    for e in edits:
        apply_edit(data, e)
    try:
        return Scenario.model_validate(data)
    except Exception:
        return None


def _same(s: Scenario, edits: list[Edit]) -> None:
    """``edited`` and ``with_edits`` agree with the reference, and change neither the
    scenario nor the edits."""
    before = (s.to_dict(), [e.model_dump() for e in edits])
    data = s.to_dict()
    for e in edits:
        apply_edit(data, e)
    base = s.to_dict()
    assert content_key(with_edits(base, edits)) == content_key(data)
    assert base == before[0]
    _same_scenario(s, edits)
    assert (s.to_dict(), [e.model_dump() for e in edits]) == before


def _same_scenario(s: Scenario, edits: list[Edit]) -> None:
    want = _validated(s, edits)
    if want is None:
        with pytest.raises(Exception):  # noqa: B017 - whatever the whole validation raises
            edited(s, edits)
        return
    got = edited(s, edits)
    assert got == want
    assert json.dumps(got.to_dict()) == json.dumps(want.to_dict())


def test_every_proposed_fix_edits_to_the_scenario_its_json_validates_to() -> None:
    fixes = scenarios = 0
    for name, s in _scenarios():
        scenarios += 1
        for d in analyze_rules(s).diagnostics:
            for fix in proposed(s, d)[0]:
                fixes += 1
                try:
                    _same(s, fix.edits)
                except AssertionError as e:
                    raise AssertionError(f"{name}: {d.code}: {fix.description}") from e
    assert scenarios > 250 and fixes > 250


def test_unchanged_parts_are_the_originals() -> None:
    """What the per-op caches hit on: a fix of one statement keeps every other
    statement, the other programs, the buffers and the run options as they were."""
    s = gallery.load("two-block-race")
    body = s.call.programs[0].body
    path = "call.programs[0].body[1]"
    new = edited(s, [Edit(op="replace", path=path, value=body[1].model_dump(mode="json"))])
    assert new == s and new is not s
    assert new.call.programs[0].body[1] is not body[1]
    kept = zip(new.call.programs[0].body, body, strict=True)
    assert all(a is b for k, (a, b) in enumerate(kept) if k != 1)
    assert all(new.buffers[k] is b for k, b in s.buffers.items()) and new.run is s.run
    assert new.call.args == s.call.args and all(
        a is b for a, b in zip(new.call.args, s.call.args, strict=True)
    )
    assert s.call.programs[0].body is body  # (the original is not changed)


def _hostile(s: Scenario) -> Iterator[list[Edit]]:
    """Edits whose result the validation refuses, at every level: a statement, a
    field of one, a nested value, a buffer, the scenario's own cross-field rules."""
    p = "call.programs[0]"
    yield [Edit(op="replace", path=f"{p}.body[0]", value={"op": "no_such_op"})]
    yield [Edit(op="add", path=f"{p}.body[0]", value={"let": "1x", "ref": "a"})]
    yield [Edit(op="replace", path=f"{p}.mesh.grid", value={"b": 0})]
    yield [Edit(op="add", path=f"{p}.mesh.extra", value=1)]
    name = next(iter(s.buffers))
    yield [Edit(op="replace", path=f"buffers.{name}.shape[0]", value=-3)]
    yield [Edit(op="replace", path=f"buffers.{name}.dtype", value="float99")]
    yield [Edit(op="replace", path=f"buffers.{name}.init", value=[[1.0]] * 3)]
    # (a spec without a device mesh: the scenario's own rule; with one, not a spec)
    spec = [None] if s.device_mesh is None else "dim 0"
    yield [Edit(op="replace", path="call.args[0].spec", value=spec)]
    yield [Edit(op="replace", path="name", value="not a name")]
    yield [Edit(op="add", path="call.args[0]", value={"buffer": name, "param": "p q"})]
    # a valid edit, then one that breaks what it made
    stmt: dict[str, Any] = {"op": "when", "cond": "b == 0", "body": []}
    yield [
        Edit(op="add", path=f"{p}.body[0]", value=stmt),
        Edit(op="add", path=f"{p}.body[0].body[0]", value={"op": "copy", "src": 3}),
    ]


@pytest.mark.parametrize("name", ["two-block-race", "ring-all-gather-deadlock", "dup-ref"])
def test_refused_where_the_json_form_is_refused(name: str) -> None:
    s = gallery.load(name)
    for edits in _hostile(s):
        assert _validated(s, edits) is None, edits
        _same(s, edits)


def test_edits_in_order_over_what_an_earlier_edit_made() -> None:
    """A later edit inside what an earlier one added changes the scenario, never the
    earlier edit's value (nor the original)."""
    s = gallery.load("two-block-race")
    before = s.to_dict()
    inner = s.call.programs[0].body[-1].model_dump(mode="json")
    stmt = {"op": "when", "cond": "b == 0", "body": [inner]}
    first = Edit(op="add", path="call.programs[0].body[0]", value=stmt)
    then = Edit(op="replace", path="call.programs[0].body[0].cond", value="b == 1")
    _same(s, [first, then])
    assert first.value["cond"] == "b == 0"
    assert s.to_dict() == before
