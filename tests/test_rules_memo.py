"""What the rules keep between checks by content (a scenario loaded again, a fix's
candidate) answers as a fresh computation does, and a changed scenario never gets a
stale answer."""

from __future__ import annotations

import pydantic
import pytest
from mpmd_lab import gallery, plan
from mpmd_lab.ops.base import content
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


# ---------------------------------------------------------------- a let's steps (plan)


def _steps_cleared() -> None:
    """Nothing kept across checks: a let's steps, expressions, stack tokens, the folds'
    shared answers, an ``at``'s entries, the diagnostics."""
    plan.clear_cache()
    context.clear_cache()


def test_kept_view_steps_make_the_fresh_plan() -> None:
    """Every scenario of the gallery, tests/scenarios and fix_corpus checked again (its
    views' steps found by content, its folds' answers by stack) has the plan and the
    diagnostics of a check with nothing kept, and the steps found are the kept ones."""
    shared = 0
    for name, s in _scenarios():
        first = analyze_rules(s).plan
        second = analyze_rules(load_scenario(s.to_dict()))
        again = second.plan
        _steps_cleared()
        fresh = analyze_rules(load_scenario(s.to_dict()))
        assert _shown(again) == _shown(fresh.plan), name
        assert _shown(first) == _shown(fresh.plan), name
        assert second.diagnostics == fresh.diagnostics, name
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
        ("bitcast-view", ["call", "programs", 0, "body", 0, "transforms", 0, "dtype"], "int16"),
        ("bitcast-view", ["buffers", "x", "dtype"], "int32"),
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


def test_stack_tokens_name_equal_stacks_only() -> None:
    """Bindings of equal stacks share a token across loads; another stack (an edited
    transform, another place) has another; a number once given is never given to a new
    stack, even after the table is emptied."""

    def tokens(s: object) -> dict[str, int | None]:
        r = compile(s)  # type: ignore[arg-type]
        out = {name: b.token for name, b in r.params.items()}
        for p in r.programs:
            for st in p.stmts:
                if st.defines is not None:
                    out[st.defines.name] = st.defines.token
        return out

    a, b = tokens(gallery.load("cluster-exchange")), tokens(gallery.load("cluster-exchange"))
    assert a == b
    assert a["out"] == a["smem"] == 0  # (no step)
    assert len({a["mine"], a["partner"], a["dst"]}) == 3  # (the same at, other places)
    data = gallery.load("cluster-exchange").to_dict()
    data["call"]["programs"][0]["body"][2]["transforms"][0]["block"] = {"c": 0}
    c = tokens(load_scenario(data))
    assert c["partner"] != a["partner"] and c["mine"] == a["mine"]
    plan._TOKENS.clear()
    d = tokens(gallery.load("cluster-exchange"))
    assert set(d.values()) - {0} and not (set(d.values()) - {0}) & (set(a.values()) - {0})


def test_a_root_edit_is_folded_again() -> None:
    """A view of the same stack over another root (the output's shape) folds again: its
    lowering's answers are the fresh check's (a transpose of a [64, 1] output keeps a
    unit-stride minor dim: no GPU_VERIFICATION, where the original's [64, 32] has one)."""
    original = analyze_rules(gallery.load("transpose-view")).diagnostics
    data = gallery.load("transpose-view").to_dict()
    data["buffers"]["x"]["shape"] = [1, 64]
    data["call"]["outputs"]["out"]["shape"] = [64, 1]
    got = analyze_rules(load_scenario(data))
    _steps_cleared()
    assert got.diagnostics == analyze_rules(load_scenario(data)).diagnostics
    assert [d.code for d in original] == ["GPU_VERIFICATION"]
    assert "GPU_VERIFICATION" not in [d.code for d in got.diagnostics]
