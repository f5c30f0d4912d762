"""The scenario model: loading, round trips, and what is not a scenario."""

from __future__ import annotations

import json

import pytest
from mpmd_lab import gallery
from mpmd_lab.scenario import Scenario, ScenarioError, load_scenario, save_scenario


@pytest.mark.parametrize("name", gallery.names())
def test_gallery_round_trips_losslessly(name, tmp_path):
    s = gallery.load(name)
    out = save_scenario(s, tmp_path / "s.json")
    again = load_scenario(out)
    assert again == s
    assert load_scenario(json.loads(out.read_text())) == s
    assert load_scenario(out.read_text()) == s


def test_gallery_names_load_by_name():
    assert load_scenario("ring-shift").device_mesh == {"dev": 4}


def test_unknown_fields_and_bad_values_are_all_listed():
    data = json.loads(gallery.path_of("ring-shift").read_text())
    data["colour"] = "red"
    data["buffers"]["x"]["shape"] = [0]
    data["buffers"]["x"]["dtype"] = "float33"
    data["call"]["programs"][0]["body"][0]["transforms"][0]["device"] = (
        "left +"  # not an expression
    )
    with pytest.raises(ScenarioError) as info:
        load_scenario(data)
    paths = {p for p, _ in info.value.problems}
    assert "colour" in paths
    assert "buffers.x.shape[0]" in paths
    assert "buffers.x.dtype" in paths
    assert any(p.startswith("call.programs[0].body[0].transforms[0].device") for p in paths)


@pytest.mark.parametrize(
    "text",
    ["", "{", "[1, 2]", '{"name": "x"}', '"just a string"', "{" * 100_000],
)
def test_not_a_scenario_is_a_scenario_error(text):
    with pytest.raises(ScenarioError):
        load_scenario(text if text else "{}")


@pytest.mark.parametrize("bad", ["class", "naïve", "a-b", "1x", "match"])
def test_names_must_be_ascii_identifiers_and_not_keywords(bad):
    data = json.loads(gallery.path_of("dup-ref").read_text())
    data["call"]["args"][0]["param"] = bad
    with pytest.raises(ScenarioError) as info:
        load_scenario(data)
    assert [p for p, _ in info.value.problems] == ["call.args[0].param"]


def test_jax_rejects_are_still_scenarios():
    """Things JAX rejects must load: users write them to learn the rules."""
    data = json.loads(gallery.path_of("two-block-copy").read_text())
    data["call"]["programs"][0]["mesh"]["cluster"] = {"a": 1, "b": 1, "c": 1, "d": 1}
    data["call"]["programs"][0]["mesh"]["threads"] = {"name": None, "count": 17}
    assert isinstance(load_scenario(data), Scenario)


def test_huge_sizes_are_rejected():
    data = json.loads(gallery.path_of("ring-shift").read_text())
    data["buffers"]["x"]["shape"] = [2**20, 2**20]
    with pytest.raises(ScenarioError) as info:
        load_scenario(data)
    assert info.value.problems[0][0] == "buffers.x"


def test_a_views_label_shows_its_transforms():
    """A ``let``'s label is the view as written, not a bare alias (notebook 07 printed
    ``o_peer = o_ref`` for a remote_ref view)."""
    from mpmd_lab import load

    body = load("ring-all-gather").call.programs[0].body
    labels = [st.label() for st in body if getattr(st, "let", None)]
    assert labels == [
        "mine = out.at[ds(dev * 256,256)]",
        "right_out = out.remote_ref((dev + 1) % axis_size(dev))",
    ]
