"""What the rules keep between checks by content (a scenario loaded again, a fix's
candidate) answers as a fresh computation does, and a changed scenario never gets a
stale answer."""

from __future__ import annotations

import pydantic
import pytest
from mpmd_lab import gallery, plan
from mpmd_lab.ops import views
from mpmd_lab.ops.base import content
from mpmd_lab.plan import compile
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import context
from mpmd_lab.validate.analysis import analyze_rules

from tests.test_fix_candidates import _scenarios
from tests.test_plan_reuse import _shown


def _fresh(name: str) -> list:
    """The rules' diagnostics of a gallery scenario with nothing kept from before."""
    context._plain.cache_clear()
    return list(analyze_rules(gallery.load(name)).diagnostics)


@pytest.mark.parametrize("name", gallery.names())
def test_a_shared_diagnostic_is_the_fresh_one(name: str) -> None:
    fresh = _fresh(name)
    again = list(analyze_rules(gallery.load(name)).diagnostics)
    assert again == fresh
    # (a report with no fix is made once per content: the same object again)
    for a, b in zip(again, list(analyze_rules(gallery.load(name)).diagnostics), strict=True):
        assert a is b or a.fixes or a.witness is not None


def test_a_shared_diagnostic_is_frozen() -> None:
    d = list(analyze_rules(gallery.load("transpose-view")).diagnostics)[0]
    with pytest.raises(pydantic.ValidationError):
        d.message = "edited"  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError):
        d.path = "elsewhere"  # type: ignore[misc]


def test_an_edit_gets_its_own_diagnostic() -> None:
    """The same rule on an edited scenario (a statement added before, so another path)
    reports what a fresh check of the edit does, not the original's diagnostic."""
    analyze_rules(gallery.load("transpose-view"))  # (the original's kept)
    data = gallery.load("transpose-view").model_dump(mode="json")
    data["call"]["programs"][0]["body"].insert(0, {"let": "y", "ref": "x_ref", "transforms": []})
    got = list(analyze_rules(load_scenario(data)).diagnostics)
    original = list(analyze_rules(gallery.load("transpose-view")).diagnostics)
    context._plain.cache_clear()
    fresh = list(analyze_rules(load_scenario(data)).diagnostics)
    assert got == fresh
    assert [d.code for d in got] == [d.code for d in original]
    assert got[0].path != original[0].path
    assert got[0] is not original[0]


# ---------------------------------------------------------------- a let's steps (plan)


def _steps_cleared() -> None:
    """Nothing kept of a let's steps, expressions or an ``at``'s entries."""
    plan._STEPS.clear()
    plan._EXPRS.clear()
    views._RESOLVED.clear()


def test_kept_view_steps_make_the_fresh_plan() -> None:
    """Every scenario of the gallery, tests/scenarios and fix_corpus compiled again (its
    views' steps found by content) is the plan compiled with nothing kept, and the
    steps found are the kept ones."""
    shared = 0
    for name, s in _scenarios():
        first = compile(s)
        again = compile(load_scenario(s.to_dict()))
        _steps_cleared()
        fresh = compile(load_scenario(s.to_dict()))
        assert _shown(again) == _shown(fresh), name
        assert _shown(first) == _shown(fresh), name
        shared += sum(
            a.steps is b.steps and bool(a.steps)
            for pa, pb in zip(first.programs, again.programs, strict=True)
            for a, b in zip(pa.stmts, pb.stmts, strict=True)
        )
    assert shared > 100


@pytest.mark.parametrize(
    ("name", "path", "value"),
    [
        ("transpose-view", ["call", "programs", 0, "body", 0, "transforms", 0, "perm"], [0, 1]),
        (
            "two-block-race",
            ["call", "programs", 0, "body", 0, "transforms", 0, "index"],
            [{"block": "b", "size": 64}],
        ),  # fmt: skip
        (
            "two-block-race",
            ["call", "programs", 0, "body", 1, "transforms", 0, "index"],
            [[0, 512]],
        ),  # fmt: skip
        (
            "cluster-exchange",
            ["call", "programs", 0, "body", 2, "transforms", 0, "block"],
            {"c": 0},
        ),  # fmt: skip
        ("transpose-view", ["call", "outputs", "out", "shape"], [64, 16]),
    ],
)
def test_an_edited_view_gets_its_own_steps(name: str, path: list, value: object) -> None:
    """A view edited after the original was compiled (its transform, or the type of what
    it views) is typed again: its plan and diagnostics are a fresh compile's."""
    original = compile(gallery.load(name))
    data = gallery.load(name).to_dict()
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    got = analyze_rules(load_scenario(data))
    _steps_cleared()
    context._plain.cache_clear()
    fresh = analyze_rules(load_scenario(data))
    assert _shown(got.plan) == _shown(fresh.plan)
    assert got.diagnostics == fresh.diagnostics
    assert _shown(got.plan) != _shown(original)


def test_content_tells_apart_what_differs() -> None:
    assert content([1, 0]) == content([1, 0])
    assert content([1, 0]) != content([0, 1])
    assert content([True]) != content([1])
    assert content([1.0]) != content([1])
    assert content({"a": 1, "b": 2}) != content({"b": 2, "a": 1})
    assert content([None]) != content(["None"])
    a = gallery.load("two-block-race").call.programs[0].body[0].transforms
    b = gallery.load("two-block-race").call.programs[0].body[0].transforms
    c = gallery.load("two-block-race").call.programs[0].body[1].transforms
    assert a is not b and content(a) == content(b)
    assert hash(content(a)) == hash(content(b))
    assert content(a) != content(c)


def test_an_at_shares_the_entries_of_an_equal_index() -> None:
    """Equal indexes resolve to the same (immutable) entries; another index to its own,
    equal to a fresh resolution."""
    at = [gallery.load("two-block-race").call.programs[0].body[k].transforms[0] for k in (0, 0, 1)]
    assert at[0] is not at[1] and at[0]._entries is at[1]._entries
    assert at[2]._entries != at[0]._entries
    for t in at:
        assert t._entries == tuple(views.resolve_entry(e) for e in t.index)


def test_a_transforms_own_interpreter_limit_is_its_classs() -> None:
    """The default interpreter limit, kept per class, names each instance's op, and a
    view the interpreters run has none."""
    from mpmd_lab.ops.base import InterpLimit

    for name, k in (("reshape-view", 0), ("bitcast-view", 0), ("transpose-view", 0)):
        t = gallery.load(name).call.programs[0].body[k].transforms[0]
        got = t.interpret_limit("gpu")
        if t.kind == "transpose":
            assert got is None
            continue
        assert isinstance(got, InterpLimit) and t.kind in got.message
        assert got is gallery.load(name).call.programs[0].body[k].transforms[0].interpret_limit(
            "gpu"
        )
        assert got.jax_message == f"Unsupported transform: {type(t).GPU_INTERP_REPR}"
