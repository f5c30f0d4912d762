"""What the rules keep between checks by content (a scenario loaded again, a fix's
candidate) answers as a fresh computation does, and a changed scenario never gets a
stale answer."""

from __future__ import annotations

import pydantic
import pytest
from mpmd_lab import gallery
from mpmd_lab.scenario import load_scenario
from mpmd_lab.validate import context
from mpmd_lab.validate.analysis import analyze_rules


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
