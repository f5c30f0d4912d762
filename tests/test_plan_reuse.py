"""A fix's candidate compiled reusing the original's plan (``compile(candidate,
like=plan)``: its unchanged records kept) is the plan compiled afresh, and checks to the
same diagnostics, for every fix proposed in the gallery, tests/scenarios and
tests/fix_corpus; and the records it keeps are the original's own objects."""

from __future__ import annotations

from typing import Any

import pytest
from mpmd_lab import gallery
from mpmd_lab.diagnostics import Edit
from mpmd_lab.fields import format_path
from mpmd_lab.fixes import proposed
from mpmd_lab.plan import Plan, compile
from mpmd_lab.recheck import edited
from mpmd_lab.scenario import Scenario
from mpmd_lab.validate.analysis import analyze_rules

from bench.golden import _binding, plan_lines
from tests.test_fix_candidates import _scenarios


def _shown(r: Plan) -> list[str]:
    """What the golden dump prints of a plan, and what it leaves out: the problems, each
    statement's loads, expressions, calls and whether it is typed, each binding's root."""
    lines = plan_lines(r)
    lines += [f"problem {p.code} {format_path(p.path)} {p.message}" for p in r.problems]
    for b in [*r.params.values(), *r.captures.values()]:
        lines.append(f"root {b.name} {b.root!r}")
    for p in r.programs:
        for st in p.stmts:
            if st.defines is not None:  # (the whole chain of views under it)
                lines.append(f"  chain {st.index} {_chain(st.defines)}")
            loads = {name: _binding(b) for name, b in st.loads.items()}
            lines.append(
                f"  more {st.index} loads={loads} exprs={st.exprs!r} calls={sorted(st.calls)} "
                f"typed={st.typed} root={None if st.defines is None else st.defines.root!r}"
            )
    return lines


def _chain(b: Any) -> list[str]:
    """A binding and every source view under it, down to the kernel's parameter."""
    out = []
    while b is not None:
        out.append(f"{b.name}@{format_path(b.path)}")
        b = b.parent
    return out


def _candidates() -> list[tuple[str, Any, Any, list[Edit]]]:
    """``(name, scenario, its analysis, edits)`` of every proposed fix that edits to a
    scenario."""
    out = []
    for name, s in _scenarios():
        found = analyze_rules(s)
        for d in found.diagnostics:
            for fix in proposed(s, d)[0]:
                out.append((f"{name}: {d.code}: {fix.description}", s, found, fix.edits))
    return out


def test_a_reusing_compile_is_the_fresh_one_for_every_proposed_fix() -> None:
    checked = kept = total = 0
    for label, s, found, edits in _candidates():
        try:
            new = edited(s, edits)
        except Exception:  # (a fix whose scenario does not validate: never compiled)
            continue
        checked += 1
        reused = compile(new, like=found.plan)
        assert reused.s is new
        fresh = compile(new)
        assert _shown(reused) == _shown(fresh), label
        got = analyze_rules(new, like=found.plan).diagnostics
        assert got == analyze_rules(new).diagnostics, label
        old = {id(st) for p in found.plan.programs for st in p.stmts}
        kept += sum(id(st) in old for p in reused.programs for st in p.stmts)
        total += sum(len(p.stmts) for p in reused.programs)
    assert checked > 250
    # the reuse happens: over a third of the candidates' statements keep their records
    # (311 candidates, 736 of 1,896 statements when written)
    assert kept > total // 3


def test_an_unchanged_statement_keeps_its_record_and_a_changed_one_does_not() -> None:
    s = gallery.load("ring-all-gather-no-wait")
    plan = compile(s)
    loop = s.call.programs[0].body[3]
    # a statement added inside the loop: the loop and its later statements move
    path = f"call.programs[0].body[3].body[{len(loop.body)}]"
    value = loop.body[-1].model_dump(mode="json")
    new = edited(s, [Edit(op="add", path=path, value=value)])
    got = compile(new, like=plan)
    before, after = plan.programs[0].stmts, got.programs[0].stmts
    assert got.params is plan.params  # (the call's own parts: all the same objects)
    # the statements before the loop: the very records
    assert all(a is b for a, b in zip(before[:3], after[:3], strict=True))
    # the loop is a new object: a new record, and so are the statements inside it (their
    # scope is the new loop's), though they share its index expressions
    assert after[3] is not before[3] and after[3].node is new.call.programs[0].body[3]
    inner = [st for st in after if st.scope and st.scope[0] is after[3]]
    assert len(inner) == len(loop.body) + 1
    assert all(st is not before[st.index] for st in inner[:-1])
    assert all(st.exprs is before[st.index].exprs for st in inner[:-1])
    # a let's steps too, where its source's type is the same
    lets = [st for st in inner[:-1] if st.defines is not None and st.steps]
    assert lets and all(st.steps is before[st.index].steps for st in lets)
    assert _shown(got) == _shown(compile(new))


def test_a_plan_like_another_scenario_is_still_its_own() -> None:
    """``like`` is a hint: a plan of an unrelated scenario reuses nothing wrong."""
    a, b = gallery.load("ring-all-gather"), gallery.load("two-block-race")
    assert _shown(compile(b, like=compile(a))) == _shown(compile(b))
    assert _shown(compile(a, like=compile(b))) == _shown(compile(a))


def test_a_candidate_starts_with_the_originals_fold_answers() -> None:
    """The rules' folds over views (``Plan.folds``, ``first_step``) answer of a binding
    alone: a candidate's plan starts with the original's answers, so the bindings they
    share are not folded again, and its check is the fresh one's."""
    s = gallery.load("two-block-race")
    found = analyze_rules(s)
    views = found.plan.folds["lower.view"]
    assert views  # (the original's check folded its views)
    body = s.call.programs[0].body
    value = body[2].model_dump(mode="json")
    new = edited(s, [Edit(op="replace", path="call.programs[0].body[2]", value=value)])
    plan = compile(new, like=found.plan)
    carried = plan.folds["lower.view"]
    assert carried == views and carried is not views  # (a copy: the original's unchanged)
    lets = [st.defines for st in plan.programs[0].stmts if st.defines is not None]
    shared = [b for b in lets if id(b) in views]  # (the views of the kept statements)
    assert shared and all(carried[id(b)][0] is b for b in shared)
    got = analyze_rules(new, plan=plan).diagnostics
    assert got == analyze_rules(new).diagnostics
    assert found.plan.folds["lower.view"] is views and len(views) <= len(carried)


def _moves(s: Any) -> list[list[Edit]]:
    """Edits that keep most statement objects but change where they are or what they
    see: each top statement of the first program removed, or copied in front of itself
    (the later ones move; a name defined twice), a loop's last statement moved out of it
    or the next one into it (the later ones keep their index at another path), the
    grid's axes renamed (the same statements under other bound names), the first
    argument dropped (other bindings), the device mesh's axes renamed or grown."""
    p = "call.programs[0]"
    if not s.call.programs:
        return []
    body = s.call.programs[0].body
    out = []
    for k, st in enumerate(body):
        out.append([Edit(op="remove", path=f"{p}.body[{k}]")])
        out.append([Edit(op="add", path=f"{p}.body[{k}]", value=st.model_dump(mode="json"))])
        if st.BODY and st.body and k + 1 < len(body):
            # a loop's last statement moved out after it, or the next one moved in: the
            # statements after it keep their index, at another path
            last = st.body[-1].model_dump(mode="json")
            end = f"{p}.body[{k}].body[{len(st.body) - 1}]"
            after = f"{p}.body[{k + 1}]"
            out.append([Edit(op="remove", path=end), Edit(op="add", path=after, value=last)])
            nxt = body[k + 1].model_dump(mode="json")
            into = f"{p}.body[{k}].body[{len(st.body)}]"
            out.append([Edit(op="add", path=into, value=nxt), Edit(op="remove", path=after)])
    grid = s.call.programs[0].mesh.grid
    renamed = {f"{name}_": n for name, n in grid.items()}
    out.append([Edit(op="replace", path=f"{p}.mesh.grid", value=renamed)])
    if s.device_mesh:  # (the same statements, their device expressions' axes unbound)
        mesh = {f"{name}_": n for name, n in s.device_mesh.items()}
        out.append([Edit(op="replace", path="device_mesh", value=mesh)])
        # (the same axes, twice the devices: the global shapes without shard_map)
        mesh = {name: 2 * n for name, n in s.device_mesh.items()}
        out.append([Edit(op="replace", path="device_mesh", value=mesh)])
    if s.call.args:
        out.append([Edit(op="remove", path="call.args[0]")])
    return out


@pytest.mark.slow  # ~13 s: every hostile edit over three corpora (make test runs it)
def test_statements_that_move_or_see_other_names_are_resolved_again() -> None:
    """Hostile edits (``_moves``) over the gallery, tests/scenarios and tests/fix_corpus:
    the reusing compile and check are
    still the fresh ones (a kept statement at another place, or seeing other bindings or
    bound names, is resolved again)."""
    tried = 0
    for name, s in _scenarios():
        found = analyze_rules(s)
        for edits in _moves(s):
            try:
                new = edited(s, edits)
            except Exception:  # (an edit the validation refuses)
                continue
            tried += 1
            label = f"{name}: {[(e.op, e.path) for e in edits]}"
            reused = compile(new, like=found.plan)
            assert _shown(reused) == _shown(compile(new)), label
            got = analyze_rules(new, like=found.plan).diagnostics
            assert got == analyze_rules(new).diagnostics, label
    assert tried > 1000


def _scenario(body: list[dict[str, Any]]) -> Scenario:
    """two-block-race's call with a second argument passing the same buffer (``y_ref``:
    its ref's type is ``x_ref``'s) and ``body`` as its program."""
    data = gallery.load("two-block-race").to_dict()
    data["call"]["args"].append({"buffer": "x", "param": "y_ref", "transforms": []})
    data["call"]["programs"][0]["body"] = body
    return Scenario.model_validate(data)


def test_a_kept_statement_that_names_nothing_or_another_source_is_resolved_again() -> None:
    """A statement with a name that resolves to nothing keeps its problem in a candidate
    where it is unchanged; a let whose source is now another binding of the same type
    (``y_ref`` for ``x_ref``) is a view of that one, not of the original's source."""
    at = [{"op": "at", "index": [[0, 64]]}]
    base = _scenario(
        [
            {"let": "a", "ref": "x_ref", "transforms": []},
            {"let": "b", "ref": "a", "transforms": at},
            {"op": "copy", "src": "b", "dst": "nope"},
        ]
    )
    found = analyze_rules(base)
    assert [p.code for p in found.plan.problems] == ["XREF_UNKNOWN_NAME"]
    value = {"let": "a", "ref": "y_ref", "transforms": []}
    new = edited(base, [Edit(op="replace", path="call.programs[0].body[0]", value=value)])
    got = compile(new, like=found.plan)
    assert [p.code for p in got.problems] == ["XREF_UNKNOWN_NAME"]
    # every statement kept, seeing the same bindings (a buffer no one names added): the
    # copy's problem is still found
    z = {"shape": [4], "dtype": "float32"}
    kept = edited(base, [Edit(op="add", path="buffers.z", value=z)])
    again = compile(kept, like=found.plan)
    assert again.programs[0].stmts[1] is found.plan.programs[0].stmts[1]
    assert [p.code for p in again.problems] == ["XREF_UNKNOWN_NAME"]
    assert _shown(again) == _shown(compile(kept))
    b = got.programs[0].stmts[1].defines
    assert b is not None and _chain(b)[-1].startswith("y_ref@")
    assert _shown(got) == _shown(compile(new))
    assert analyze_rules(new, like=found.plan).diagnostics == analyze_rules(new).diagnostics


def test_an_output_renamed_is_another_parameter() -> None:
    """The call's parts are the original's only with their names: the same output object
    under another name (a copy made without validation) is compiled again."""
    s = gallery.load("two-block-race")
    plan = compile(s)
    (out,) = s.call.outputs.values()
    call = s.call.model_copy(update={"outputs": {"renamed": out}})
    new = s.model_copy(update={"call": call})
    got = compile(new, like=plan)
    assert "renamed" in got.params and "out" not in got.params
    assert _shown(got) == _shown(compile(new))
