"""What the rules keep between checks by content (a diagnostic: a scenario loaded again,
a fix's candidate) answers as a fresh computation does, and a changed scenario never
gets a stale answer; what they keep per class (a transform's interpreter limit) is each
instance's."""

from __future__ import annotations

import pydantic
import pytest
from mpmd_lab import gallery
from mpmd_lab.plan import compile
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import context
from mpmd_lab.validate.analysis import analyze_rules

from tests.test_fix_candidates import _scenarios
from tests.test_plan_reuse import _shown


def _fresh(name: str) -> list:
    """The rules' diagnostics of a gallery scenario with nothing kept from before."""
    context.clear_cache()
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
    context.clear_cache()
    fresh = list(analyze_rules(load_scenario(data)).diagnostics)
    assert got == fresh
    assert [d.code for d in got] == [d.code for d in original]
    assert got[0].path != original[0].path
    assert got[0] is not original[0]


# ---------------------------------------------------------------- edits


def test_every_scenario_checked_again_is_checked_as_fresh() -> None:
    """Every scenario of the gallery, tests/scenarios and fix_corpus checked again (its
    diagnostics found by content) has the plan and the diagnostics of a check with
    nothing kept."""
    for name, s in _scenarios():
        first = analyze_rules(s)
        second = analyze_rules(load_scenario(s.to_dict()))
        context.clear_cache()
        fresh = analyze_rules(load_scenario(s.to_dict()))
        assert _shown(second.plan) == _shown(fresh.plan) == _shown(first.plan), name
        assert second.diagnostics == fresh.diagnostics == first.diagnostics, name


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
        ("bitcast-view", ["call", "programs", 0, "body", 0, "transforms", 0, "dtype"], "int16"),
        ("bitcast-view", ["buffers", "x", "dtype"], "int32"),
    ],
)
def test_an_edited_view_is_checked_as_fresh(name: str, path: list, value: object) -> None:
    """A view edited after the original was checked (its transform, or the type of what
    it views): its plan and diagnostics are a fresh check's."""
    original = compile(gallery.load(name))
    data = gallery.load(name).to_dict()
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    got = analyze_rules(load_scenario(data))
    context.clear_cache()
    fresh = analyze_rules(load_scenario(data))
    assert _shown(got.plan) == _shown(fresh.plan)
    assert got.diagnostics == fresh.diagnostics
    assert _shown(got.plan) != _shown(original)


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


def test_a_root_edit_is_checked_as_fresh() -> None:
    """A view of the same stack over another root (the output's shape): its lowering's
    answers are the fresh check's (a transpose of a [64, 1] output keeps a unit-stride
    minor dim: no GPU_VERIFICATION, where the original's [64, 32] has one)."""
    original = analyze_rules(gallery.load("transpose-view")).diagnostics
    data = gallery.load("transpose-view").to_dict()
    data["buffers"]["x"]["shape"] = [1, 64]
    data["call"]["outputs"]["out"]["shape"] = [64, 1]
    got = analyze_rules(load_scenario(data))
    context.clear_cache()
    assert got.diagnostics == analyze_rules(load_scenario(data)).diagnostics
    assert [d.code for d in original] == ["GPU_VERIFICATION"]
    assert "GPU_VERIFICATION" not in [d.code for d in got.diagnostics]
