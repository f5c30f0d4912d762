"""``fixes.offer``'s candidates (``fixes._Trials``): each distinct content is checked
once, a fix that changes nothing is not checked, and what a candidate's check says is
what a fresh check of the fixed scenario says."""

from __future__ import annotations

from mpmd_lab import fixes, gallery, recheck, validate
from mpmd_lab.diagnostics import Diagnostic, Edit, Fix
from mpmd_lab.scenario import Scenario, load_scenario


def _fresh_check(s: Scenario) -> tuple[Diagnostic, ...]:
    """The rules' diagnostics of ``s`` checked afresh (from its JSON text, no cache)."""
    fixes.clear_cache()
    return tuple(validate.analyze(load_scenario(s.to_json()), fixes=False).diagnostics)


def test_a_fix_proposed_twice_is_checked_once_and_says_what_a_fresh_check_says() -> None:
    s = gallery.load("dup-ref")
    (d,) = [d for d in validate.analyze(s, fixes=False).diagnostics if d.fix is not None]
    assert d.fix is not None
    twin = Fix(description="the same edits, said otherwise", edits=list(d.fix.edits))
    fixes.clear_cache()
    trials = fixes._Trials(s)
    checks = recheck.CHECKS
    got = trials.checked(d.fix)
    assert recheck.CHECKS == checks + 1
    assert trials.checked(twin) == got and recheck.CHECKS == checks + 1  # (by content)
    assert got == _fresh_check(fixes.apply_fix(s, d.fix))
    # no edit: the scenario's own content, not the candidate's kept check
    assert trials.checked(Fix(description="nothing", edits=[])) is None


def test_a_fix_that_changes_nothing_is_neither_checked_nor_offered() -> None:
    s = gallery.load("dup-ref")
    fixes.clear_cache()
    trials = fixes._Trials(s)
    checks = recheck.CHECKS
    same = Fix(
        description="write what is there",
        edits=[
            Edit(op="replace", path="name", value=s.name),
            Edit(op="replace", path="call.programs", value=s.to_dict()["call"]["programs"]),
        ],
    )
    assert trials.checked(same) is None and recheck.CHECKS == checks
    # a value equal by ``==`` but another content (a float for an int) is not the same
    ((axis, size),) = s.to_dict()["call"]["programs"][0]["mesh"]["grid"].items()
    path = f"call.programs[0].mesh.grid.{axis}"
    floated = Fix(
        description="a float size", edits=[Edit(op="replace", path=path, value=1.0 * size)]
    )
    trials.checked(floated)  # (checked: whatever it says, it is not the same content)
    assert recheck.CHECKS == checks + 1


def test_an_edited_scenario_is_checked_not_found_as_the_original() -> None:
    """A candidate keyed by its own content: a fix of a scenario whose original was
    kept as a candidate before gets its own check, not the original's."""
    s = gallery.load("two-block-race")
    fixes.clear_cache()
    recheck.candidate(s.to_dict())  # the original kept by content
    diags = validate.analyze(s, fixes=False).diagnostics
    offered = fixes.offer(s, list(diags))
    fix = next(f for d in offered for f in d.fixes)
    after = fixes._Trials(s).checked(fix)
    assert after is not None and after != tuple(diags)
    assert after == _fresh_check(fixes.apply_fix(s, fix))


def test_one_form_is_shared_within_an_offer_and_only_for_its_scenario() -> None:
    """``recheck.form_of``: while ``one_form(s)`` holds, every call for ``s`` gets the one
    form (made once, equal to a fresh ``to_dict``); another scenario, even an edit of
    ``s`` or a copy of the same content, gets its own fresh form; outside, each call is
    fresh."""
    s = gallery.load("two-block-race")
    assert recheck.form_of(s) is not recheck.form_of(s)
    edited = fixes.apply_fix(
        s, Fix(description="rename", edits=[Edit(op="replace", path="name", value="x")])
    )
    same = load_scenario(s.to_json())
    with recheck.one_form(s):
        form = recheck.form_of(s)
        assert recheck.form_of(s) is form and form == s.to_dict()
        assert recheck.form_of(edited) == edited.to_dict() != form
        assert recheck.form_of(same) is not form
        assert fixes._Trials(s).data is form
    assert recheck.form_of(s) is not form


def test_the_repairs_and_the_trials_leave_the_shared_form_as_it_was(monkeypatch) -> None:
    """What sharing one form needs: nothing an offer runs (the rules' fixes, the repairs,
    the candidates' edits) changes the form it reads, over the gallery and every
    scenario of a code."""
    from pathlib import Path

    from mpmd_lab.scenario import ScenarioError

    shared: list[recheck.one_form] = []
    enter = recheck.one_form.__enter__

    def kept(self: recheck.one_form) -> None:
        shared.append(self)
        enter(self)

    monkeypatch.setattr(recheck.one_form, "__enter__", kept)
    paths = [gallery.path_of(n) for n in gallery.names()]
    paths += sorted((Path(__file__).parent / "scenarios" / "codes").glob("*.json"))
    read = 0
    for p in paths:
        try:
            s = load_scenario(p.read_text())
        except ScenarioError:
            continue
        fixes.clear_cache()
        shared.clear()
        fixes.offer(s, list(validate.analyze(s, fixes=False).diagnostics))
        for form in shared:
            if form.data is not None:
                assert form.scenario is s and form.data == s.to_dict(), p.name
                read += 1
    assert read > 50


def test_applying_a_fix_in_place_leaves_its_values_as_they_were() -> None:
    """A fix's values may share parts of the offer's form (and so with another fix's
    values): applied in place one edit after another (``Session.edit``), no edit of a
    proposed fix writes into what an earlier edit of it put there (the shared part)."""
    import copy
    from pathlib import Path

    from mpmd_lab.diagnostics import apply_edit
    from mpmd_lab.scenario import ScenarioError

    paths = [gallery.path_of(n) for n in gallery.names()]
    paths += sorted((Path(__file__).parent / "scenarios" / "codes").glob("*.json"))
    seen = 0
    for p in paths:
        try:
            s = load_scenario(p.read_text())
        except ScenarioError:
            continue
        for d in validate.analyze(s, fixes=False).diagnostics:
            with recheck.one_form(s):
                options, _ = fixes.proposed(s, d)
            for fix in options:
                values = copy.deepcopy([e.value for e in fix.edits])
                data = s.to_dict()
                for e in fix.edits:
                    apply_edit(data, e)
                assert [e.value for e in fix.edits] == values, (p.name, fix.description)
                seen += 1
    assert seen > 100
